package broker

import (
	"context"
	"sync"
	"time"
)

// closeWaitsForDecisions bounds how long a run's close waits for the
// decisions brokers are making for it.
const closeWaitsForDecisions = 20 * time.Second

// closedMarkLife is how long a run stays marked closed in deciding after
// a close fence: long past the run store's own news of the close.
const closedMarkLife = time.Hour

// closedMarkPrune is how often old marks are dropped.
const closedMarkPrune = time.Minute

// deciding counts, per run, the effects this broker has taken up and not
// yet recorded the decision (and attempt) of. A run's close waits for
// them, so that its run.close follows every decision made while the run
// was open: the application may close work while an agent's request is
// being decided, and a decision recorded after the close would read as
// an effect of closed work. Another broker's close reaches it through
// the Fence (fence.go), which marks the run closed here first: an effect
// taken up after the mark is refused, whatever this broker's copy of the
// run says. Its zero value is ready to use; safe for concurrent use.
type deciding struct {
	mu     sync.Mutex
	n      map[string]int
	idle   map[string]chan struct{} // closed when the run's count drops to 0
	closed map[string]time.Time     // runs being closed or closed (markClosed), and when
	pruned time.Time                // when closed was last rid of old marks
}

// enter counts one decision under way for run; the function it returns
// ends it, and may be called more than once. closed reports that the run
// is being closed (markClosed): the caller must refuse, and the effect is
// not counted.
func (d *deciding) enter(run string) (leave func(), closed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, closed = d.closed[run]; closed {
		// Refused, so not counted: requests naming a closing run, however
		// many, never hold its close.
		return func() {}, true
	}
	return d.count(run), false
}

// hold counts, like enter, a record for run still on its way (a decision
// in doubt being sent again), even once the run is marked closed: the
// decision was made before the mark, and the close must wait for it.
// Called only while an enter for run is held, so a close already waiting
// waits for this too.
func (d *deciding) hold(run string) (release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count(run)
}

// count adds one to run's count, under d.mu, and returns what takes it
// away again (once, however often it is called).
func (d *deciding) count(run string) func() {
	if d.n == nil {
		d.n, d.idle = map[string]int{}, map[string]chan struct{}{}
	}
	if d.n[run] == 0 {
		d.idle[run] = make(chan struct{})
	}
	d.n[run]++
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

// markClosed marks run closed: every enter from now on says so. Marks
// older than closedMarkLife are dropped (looked for once a minute).
func (d *deciding) markClosed(run string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed == nil {
		d.closed = map[string]time.Time{}
	}
	if now.Sub(d.pruned) > closedMarkPrune { // amortised: not a walk per close
		for r, at := range d.closed {
			if now.Sub(at) > closedMarkLife {
				delete(d.closed, r)
			}
		}
		d.pruned = now
	}
	d.closed[run] = now
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
