package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// ErrCommitterClosed: the Committer was closed; nothing more is taken.
var ErrCommitterClosed = errors.New("journal: committer closed")

// CommitterOptions configure a Committer. The zero value is usable.
type CommitterOptions struct {
	// MaxBatch bounds the events of one group commit. Default 512.
	MaxBatch int
	// Queue bounds the callers waiting for the next group commit; past it
	// Commit waits for room. Default 4096.
	Queue int
	// Linger is how long a group holding only CommitAsync events (an
	// effect's outcome, which nobody waits for) waits for a Commit to
	// share its fsync with, such as the next decision of the same agent:
	// with one agent this halves the fsyncs. Default 1ms; negative: none.
	Linger time.Duration
}

// Committer gathers the events of concurrent callers in this process
// into group commits on one Writer: while the Writer makes one batch
// durable (one log fsync), the next callers' events queue, and the next
// Append takes all of them. It is how a broker in the writer's own
// process records without JetStream in between (serve's embedded shape):
// a decision is on disk, fsynced, before Commit returns.
//
// Events of one caller are written in order and together, in one batch.
// Callers are served in the order their events were handed over, so two
// callers recording one after the other (an outcome after its decision)
// are written in that order.
//
// Commits are pipelined: while one batch's record is being fsynced, the
// next is gathered, encoded and written to the log, and its fsync starts
// at once; batches are applied to the files and answered in order, each
// once its own fsync and every earlier batch are done (Writer.stage and
// settle). Two goroutines, started by NewCommitter and stopped by Close,
// stage and settle; each staged batch's fsync runs on a goroutine of its
// own, which the settling goroutine waits for.
//
// Safe for concurrent use.
type Committer struct {
	w       *Writer
	opts    CommitterOptions
	reqs    chan *commitReq
	settled chan stagedGroup // from the staging goroutine to the settling one

	mu     sync.RWMutex // held shared by senders, exclusively by Close
	closed bool
	wg     sync.WaitGroup
}

// commitReq is one caller's events and how to answer it.
type commitReq struct {
	events []Event
	done   func(error)
	wait   bool // a Commit: its caller waits
}

// NewCommitter starts committing to w. The Committer does not own w:
// close the Committer before w.
func NewCommitter(w *Writer, opts CommitterOptions) *Committer {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 512
	}
	if opts.Queue <= 0 {
		opts.Queue = 4096
	}
	if opts.Linger == 0 {
		opts.Linger = time.Millisecond
	}
	c := &Committer{w: w, opts: opts, reqs: make(chan *commitReq, opts.Queue), settled: make(chan stagedGroup, 1)}
	c.wg.Go(c.loop)
	c.wg.Go(c.settle)
	return c
}

// Commit hands events to the next group commit and returns once they are
// durable (nil), or with the error of the first that was not written
// (wrapping ErrInvalidEvent, ErrCorruptRun, ErrFailed, ...). When ctx ends
// first it returns ctx's error: the events may still be written.
func (c *Committer) Commit(ctx context.Context, events ...Event) error {
	res := make(chan error, 1)
	if err := c.send(ctx, events, func(err error) { res <- err }, true); err != nil {
		return err
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CommitAsync hands events to the next group commit and returns at once;
// done (which may be nil) is called with Commit's result from the
// committer's goroutine, so it must not block. It waits only when the
// queue is full, and fails (done is then not called) when the Committer
// is closed or ctx ends while it waits.
func (c *Committer) CommitAsync(ctx context.Context, done func(error), events ...Event) error {
	if done == nil {
		done = func(error) {}
	}
	return c.send(ctx, events, done, false)
}

func (c *Committer) send(ctx context.Context, events []Event, done func(error), wait bool) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrCommitterClosed
	}
	select {
	case c.reqs <- &commitReq{events: events, done: done, wait: wait}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops taking events, commits every event already handed over
// (their callers are answered), and stops the goroutine. It is safe to
// call more than once.
func (c *Committer) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.reqs)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *Committer) loop() {
	var (
		batch []Event
		group []*commitReq
	)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		r, ok := <-c.reqs
		if !ok {
			close(c.settled)
			return
		}
		batch, group = append(batch[:0], r.events...), append(group[:0], r)
		waited := r.wait
		closed := false
	fill:
		for len(batch) < c.opts.MaxBatch {
			select {
			case r, ok := <-c.reqs:
				if !ok {
					closed = true
					break fill
				}
				batch, group = append(batch, r.events...), append(group, r)
				waited = waited || r.wait
			default:
				if waited || c.opts.Linger < 0 {
					break fill
				}
				// Only events nobody waits for: give a caller who will
				// wait a moment to join, and share the fsync.
				linger.Reset(c.opts.Linger)
				select {
				case r, ok := <-c.reqs:
					linger.Stop()
					if !ok {
						closed = true
						break fill
					}
					batch, group = append(batch, r.events...), append(group, r)
					waited = waited || r.wait
				case <-linger.C:
					break fill
				}
			}
		}
		c.commit(batch, group)
		if closed {
			close(c.settled)
			return
		}
	}
}

// stagedGroup is a staged batch, the fsync of its record under way, and
// the callers it answers.
type stagedGroup struct {
	sb     *staged
	err    error      // staging failed: nothing to settle
	synced chan error // its fsync's result
	group  []*commitReq
}

// commit stages one group and hands it, its fsync started, to the
// settling goroutine.
func (c *Committer) commit(batch []Event, group []*commitReq) {
	sb, err := c.w.stage(batch)
	g := stagedGroup{sb: sb, err: err, group: slices.Clone(group)}
	if err == nil {
		g.synced = make(chan error, 1)
		go func() { g.synced <- sb.sync() }()
	}
	c.settled <- g
}

// settle settles each staged group in order and answers its callers.
func (c *Committer) settle() {
	for g := range c.settled {
		err := g.err
		var per map[int]error
		if err == nil {
			c.w.settle(g.sb, <-g.synced)
			_, err = g.sb.result()
			if es, ok := errors.AsType[EventErrors](err); ok {
				per = make(map[int]error, len(es))
				for _, e := range es {
					per[e.Index] = e
				}
				err = nil
			}
		}
		at := 0
		for _, r := range g.group {
			rerr := err
			if rerr == nil && per != nil {
				for i := range r.events {
					if e, bad := per[at+i]; bad {
						rerr = fmt.Errorf("journal: event %s of run %s not written: %w", r.events[i].ID, r.events[i].Run, e)
						break
					}
				}
			}
			at += len(r.events)
			r.done(rerr)
		}
	}
}
