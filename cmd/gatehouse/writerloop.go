package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
)

// writerLoop runs the journal writer until ctx ends, surviving what it
// can: when the journal cannot be written (a full disk: journal.ErrFailed,
// or the folder cannot be opened) it says so in the writer health bucket,
// so brokers in strict mode refuse effects, closes the writer, and tries
// again with backoff; reopening repairs any partial line the failed write
// left. When NATS stops delivering it tries again without touching the
// health. Only a second writer holding the folder (journal.ErrLocked)
// ends it with an error.
//
// The health goes back to ok only once a reopened writer has written
// something, so brokers do not flap between refusing and accepting while
// the disk is still full.
//
// Every Writer it opens gets a journal.Committer too, so a broker in the
// same process records through it (Committer, broker.Committed): its
// decisions are fsynced in the journal, in group commits, before their
// effects, with no JetStream in between. While no Writer is open
// Committer returns nil and such a broker refuses in strict mode. A
// Writer a direct commit failed ends its round like a failed Consume.
//
// Checkpoints (when a signing key is set) live inside the loop: every
// Writer it opens gets a Checkpointer, detached before the Writer closes,
// and run owns the goroutine that signs on the schedule, so a retry or a
// restart keeps checkpointing. Both `gatehouse writer` and serve's
// embedded writer are one of these (newWriterLoop).
type writerLoop struct {
	js          jetstream.JetStream
	open        func() (*journal.Writer, error)
	log         *slog.Logger
	health      jetstream.KeyValue // nil: not reported
	checkpoints *liveCheckpoints   // nil: no checkpoints (no signing key)

	written   atomic.Uint64 // by writers closed so far
	current   atomic.Pointer[journal.Writer]
	committer atomic.Pointer[journal.Committer] // current's
	first     *journal.Writer                   // opened by start, taken by run's first round
	failing   atomic.Pointer[string]            // nil when the writer can write
}

// Committer is the open Writer's Committer, nil while none is open.
func (l *writerLoop) Committer() *journal.Committer { return l.committer.Load() }

// serveWriter makes w the current Writer, with a Committer of its own.
func (l *writerLoop) serveWriter(w *journal.Writer) {
	l.current.Store(w)
	l.committer.Store(journal.NewCommitter(w, journal.CommitterOptions{}))
}

// retireWriter stops taking direct commits for the current Writer (those
// handed over are written first) and forgets it; the caller closes it.
func (l *writerLoop) retireWriter() {
	if c := l.committer.Swap(nil); c != nil {
		c.Close()
	}
	l.current.Store(nil)
}

// Written is the events written by every incarnation of the writer.
func (l *writerLoop) Written() uint64 {
	n := l.written.Load()
	if w := l.current.Load(); w != nil {
		n += w.Written()
	}
	return n
}

// Ready is nil when the writer is open and can write.
func (l *writerLoop) Ready() error {
	if r := l.failing.Load(); r != nil {
		return fmt.Errorf("journal cannot be written: %s", *r)
	}
	if l.current.Load() == nil {
		return errors.New("journal writer is not open")
	}
	return nil
}

func (l *writerLoop) report(ctx context.Context, h broker.WriterHealth) {
	if l.health == nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := broker.PutWriterHealth(pctx, l.health, h); err != nil {
		l.log.Warn("could not report the writer's health", "state", h.State, "err", err)
	}
}

// newWriterLoop is the journal writer of `gatehouse writer` and of serve:
// it writes dir, reports its health in the writer health bucket, and signs
// events and checkpoints with key (nil: neither) as f says (origin,
// interval, witnesses).
func newWriterLoop(ctx context.Context, js jetstream.JetStream, dir string, replicas int, f *integrityFlags, key *journal.SigningKey, log *slog.Logger) (*writerLoop, error) {
	health, err := broker.OpenWriterHealth(ctx, js, replicas)
	if err != nil {
		return nil, err
	}
	l := &writerLoop{js: js, log: log, health: health, open: func() (*journal.Writer, error) {
		return journal.Open(dir, journal.WriterOptions{Logger: log, Signer: key})
	}}
	if key != nil {
		l.checkpoints = newLiveCheckpoints(f, key, log)
		log.Info("checkpoints: signed every interval when the head log grew, and on POST /checkpoint",
			"interval", f.interval, "log_key", l.checkpoints.VerifierKey(), "witnesses", len(f.witnesses))
	}
	return l, nil
}

// start opens the first Writer now, so that another writer holding the
// folder (journal.ErrLocked) fails the caller at start rather than later;
// any other failure is logged and left to run, which retries.
func (l *writerLoop) start() error {
	w, err := l.open()
	if errors.Is(err, journal.ErrLocked) {
		return err
	}
	if err != nil {
		l.log.Warn("journal cannot be opened yet; the writer keeps trying", "err", err)
		return nil
	}
	l.first = w
	l.serveWriter(w) // direct commits are taken from now on, before run starts
	return nil
}

func (l *writerLoop) run(ctx context.Context) error {
	defer func() { // opened by start and never used: ctx ended first
		if l.first != nil {
			l.retireWriter()
			_ = l.first.Close()
			l.first = nil
		}
	}()
	if l.checkpoints != nil {
		cctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); l.checkpoints.run(cctx) }()
		defer func() { stop(); <-done }()
	}
	backoff := 200 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		w, err := l.first, error(nil)
		if l.first != nil {
			l.first = nil
		} else if w, err = l.open(); err == nil {
			l.serveWriter(w)
		}
		if errors.Is(err, journal.ErrLocked) {
			return err
		}
		if err == nil {
			if l.checkpoints != nil {
				l.checkpoints.attach(w)
			}
			if first {
				l.report(ctx, broker.WriterHealth{State: broker.WriterOK, Since: time.Now().UTC()})
				first = false
			}
			stopWatch := l.watchRecovery(ctx, w)
			err = l.consume(ctx, w)
			stopWatch()
			if l.checkpoints != nil {
				l.checkpoints.detach()
			}
			l.retireWriter()
			if w.Written() > 0 {
				backoff = 200 * time.Millisecond // it worked for a while: start the backoff over
			}
			l.written.Add(w.Written())
			cerr := w.Close()
			if err == nil && ctx.Err() != nil {
				return cerr
			}
			if err == nil {
				err = cerr
			}
		} else {
			err = fmt.Errorf("%w: open: %w", journal.ErrFailed, err)
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, journal.ErrFailed) {
			reason := err.Error()
			if l.failing.Swap(&reason) == nil {
				l.log.Error("journal cannot be written; strict-mode brokers refuse effects until it can, events wait in the stream", "err", err)
				l.report(ctx, broker.WriterHealth{State: broker.WriterFailing, Reason: reason, Since: time.Now().UTC()})
			}
		} else {
			l.log.Warn("journal writer stopped; starting again", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	return nil
}

// consume runs the JetStream consumer into w until ctx ends or w fails
// (a direct commit can fail it while the stream is quiet): then it
// returns an error wrapping journal.ErrFailed.
func (l *writerLoop) consume(ctx context.Context, w *journal.Writer) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.Failed():
			cancel()
		case <-cctx.Done():
		}
	}()
	err := journal.Consume(cctx, l.js, w, journal.ConsumeOptions{Logger: l.log})
	select {
	case <-w.Failed():
		if ctx.Err() == nil {
			_, ferr := w.Append(nil) // says why, wrapping ErrFailed
			return ferr
		}
	default:
	}
	return err
}

// watchRecovery clears a reported failure once w has written something.
func (l *writerLoop) watchRecovery(ctx context.Context, w *journal.Writer) (stop func()) {
	if l.failing.Load() == nil {
		return func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			if w.Written() > 0 {
				l.failing.Store(nil)
				l.log.Info("journal is being written again")
				l.report(ctx, broker.WriterHealth{State: broker.WriterOK, Since: time.Now().UTC()})
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}
