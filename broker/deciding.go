package broker

import (
	"context"
	"sync"
	"time"
)

// closeWaitsForDecisions bounds how long a run's close waits for the
// decisions this broker is making for it.
const closeWaitsForDecisions = 20 * time.Second

// deciding counts, per run, the effects this broker has taken up and not
// yet recorded the decision (and attempt) of. A run's close waits for
// them, so that its run.close follows every decision made while the run
// was open: the application may close work while an agent's request is
// being decided, and a decision recorded after the close would read as
// an effect of closed work. Only this broker's own decisions are seen;
// another broker's can still land after the close (noted in the README).
// Its zero value is ready to use; safe for concurrent use.
type deciding struct {
	mu   sync.Mutex
	n    map[string]int
	idle map[string]chan struct{} // closed when the run's count drops to 0
}

// enter counts one decision under way for run; the function it returns
// ends it, and may be called more than once.
func (d *deciding) enter(run string) (leave func()) {
	d.mu.Lock()
	if d.n == nil {
		d.n, d.idle = map[string]int{}, map[string]chan struct{}{}
	}
	if d.n[run] == 0 {
		d.idle[run] = make(chan struct{})
	}
	d.n[run]++
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			if d.n[run]--; d.n[run] == 0 {
				close(d.idle[run])
				delete(d.n, run)
				delete(d.idle, run)
			}
			d.mu.Unlock()
		})
	}
}

// wait returns once no decision is under way for run, or ctx ends.
func (d *deciding) wait(ctx context.Context, run string) error {
	d.mu.Lock()
	idle, busy := d.idle[run]
	d.mu.Unlock()
	if !busy {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
