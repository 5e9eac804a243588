package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/web"
)

// liveCheckpoints are the checkpoints of a journal writer that the
// writer loop closes and reopens (a full disk, a NATS hiccup): the loop
// attaches every Writer it opens and detaches it before closing it, and
// the checkpoint endpoints (web.CheckpointSource) always talk to the
// Checkpointer of the writer open now. While none is open, Latest serves
// the last checkpoint signed and signing answers
// web.ErrCheckpointsUnavailable.
//
// The schedule (run) is checkpointFollower's; the writer loop owns its
// goroutine. Safe for concurrent use.
type liveCheckpoints struct {
	follow   *checkpointFollower
	verifier string
	last     atomic.Pointer[[]byte] // the latest of a detached Checkpointer
}

var _ web.CheckpointSource = (*liveCheckpoints)(nil)

func newLiveCheckpoints(f *integrityFlags, key *journal.SigningKey, log *slog.Logger) *liveCheckpoints {
	return &liveCheckpoints{follow: &checkpointFollower{f: f, key: key, log: log},
		verifier: journal.NewLogSigner(f.origin, key).VerifierKey()}
}

// attach gives w a Checkpointer (see checkpointFollower.attach).
func (c *liveCheckpoints) attach(w *journal.Writer) { c.follow.attach(w) }

// detach lets go of the current Checkpointer before its Writer closes.
func (c *liveCheckpoints) detach() {
	if cp := c.follow.cur.Swap(nil); cp != nil {
		if b := cp.Latest(); b != nil {
			c.last.Store(&b)
		}
	}
}

// run signs on the schedule until ctx ends.
func (c *liveCheckpoints) run(ctx context.Context) { c.follow.run(ctx) }

func (c *liveCheckpoints) current() (*journal.Checkpointer, error) {
	if cp := c.follow.cur.Load(); cp != nil {
		return cp, nil
	}
	return nil, fmt.Errorf("%w: the journal writer is not open (it is retrying)", web.ErrCheckpointsUnavailable)
}

// Latest is the latest checkpoint signed, by this writer or the one
// before it; nil before the first.
func (c *liveCheckpoints) Latest() []byte {
	if cp := c.follow.cur.Load(); cp != nil {
		if b := cp.Latest(); b != nil {
			return b
		}
	}
	if b := c.last.Load(); b != nil {
		return *b
	}
	return nil
}

func (c *liveCheckpoints) ConsistencyProof(old, n int64) (tlog.TreeProof, error) {
	cp, err := c.current()
	if err != nil {
		return nil, err
	}
	return cp.ConsistencyProof(old, n)
}

func (c *liveCheckpoints) Checkpoint(ctx context.Context) ([]byte, error) {
	cp, err := c.current()
	if err != nil {
		return nil, err
	}
	return cp.Checkpoint(ctx)
}

func (c *liveCheckpoints) Refresh(ctx context.Context) ([]byte, error) {
	cp, err := c.current()
	if err != nil {
		return nil, err
	}
	return cp.Refresh(ctx)
}

// VerifierKey is the log's note verifier key; it does not depend on the
// writer being open.
func (c *liveCheckpoints) VerifierKey() string { return c.verifier }
