package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
)

// GroupJournal is a Journal that records several events of one run as one
// record: all of them durable, in order, or none acknowledged. The broker
// records an allowed effect's policy.decision and effect.attempt this way,
// one durable record before the effect instead of two in sequence.
// Implementations: *Recorder, *Committed, *JournalGate.
type GroupJournal interface {
	Journal
	RecordGroup(ctx context.Context, events ...*journal.Event) error
}

// PipelinedJournal is a Journal that takes an event without waiting for
// it to be durable: done (never nil) is called once it is, or with why
// not. The broker records an effect.outcome this way, so the reply does
// not wait for it; a crash before it is durable leaves the attempt with
// no outcome after it, as a crash during the effect does. Events handed
// over one after another are recorded in that order, after those already
// recorded. Implementations: *Recorder, *Committed, *JournalGate.
type PipelinedJournal interface {
	Journal
	RecordLater(e *journal.Event, done func(error))
}

// Recorder publishes journal events to the journal stream and returns only
// once JetStream has acknowledged them: an acknowledged event is stored
// (replicated to a quorum, on a cluster with replicas) and will reach the
// journal writer. On one NATS server JetStream does not fsync each
// message: that shape's brokers record through a Committed journal
// instead. Safe for concurrent use; Close waits for pipelined events.
//
// A publish that ends without the stream's answer (no acknowledgement in
// time, a connection lost while a stream leader is elected) may still be
// stored: nats.go keeps what it could not send and sends it once it has
// reconnected, and a stream leader that dies may leave it in the log its
// successor applies. Such a publish is sent again, under the same message
// id, until the stream acknowledges it, new or as a duplicate: stored
// once. An error from the stream settles only a first publish; once one
// is in doubt, "temporarily unavailable" from a leader being elected says
// nothing of the earlier one. So when Record returns nil the event is
// stored, and an effect the broker refused for want of a record has none
// that lands later, after its answer (and perhaps after its run's close).
// If no acknowledgement comes within the settle time the error stands as
// ErrMaybeRecorded.
type Recorder struct {
	js      jetstream.JetStream
	timeout time.Duration  // one publish's wait for its acknowledgement
	settle  time.Duration  // how long a publish in doubt is sent again
	later   sync.WaitGroup // RecordLater's acks being waited for
}

var (
	_ GroupJournal     = (*Recorder)(nil)
	_ PipelinedJournal = (*Recorder)(nil)
)

// ErrMaybeRecorded is wrapped in ErrJournal when a publish got no answer
// from the stream however often it was sent: the event may be stored.
var ErrMaybeRecorded = errors.New("the stream did not answer: the event may still be stored")

// recorderRetryWait is the pause between publishes of an event in doubt.
const recorderRetryWait = 200 * time.Millisecond

// NewRecorder returns a Recorder; timeout bounds each publish's wait for
// its acknowledgement (default 5 s), and a publish in doubt is sent again
// for three times that.
func NewRecorder(js jetstream.JetStream, timeout time.Duration) *Recorder {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Recorder{js: js, timeout: timeout, settle: 3 * timeout}
}

// Record publishes e and waits for the stream's acknowledgement. The event
// id is the message id, so a retried publish is stored once.
func (r *Recorder) Record(ctx context.Context, e *journal.Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("%w: encode %s: %v", ErrJournal, e.Type, err)
	}
	return r.publish(ctx, e, b, false)
}

// RecordGroup publishes events (all of one run) as one message, a JSON
// array the writer appends in one batch, and waits for its
// acknowledgement. The first event's id is the message id.
func (r *Recorder) RecordGroup(ctx context.Context, events ...*journal.Event) error {
	if len(events) == 1 {
		return r.Record(ctx, events[0])
	}
	if err := sameRun(events); err != nil {
		return err
	}
	b, err := json.Marshal(events)
	if err != nil {
		return fmt.Errorf("%w: encode %s: %v", ErrJournal, events[0].Type, err)
	}
	return r.publish(ctx, events[0], b, false)
}

// publish sends b until the stream answers (see Recorder) or settle
// passes or ctx ends. inDoubt: an earlier publish of b (RecordLater's) got
// no answer, so no error is final.
func (r *Recorder) publish(ctx context.Context, e *journal.Event, b []byte, inDoubt bool) error {
	deadline := time.Now().Add(r.settle)
	for {
		pctx, cancel := context.WithTimeout(ctx, r.timeout)
		_, err := r.js.Publish(pctx, subject.Journal(e.Run), b, jetstream.WithMsgID(e.ID), jetstream.WithExpectStream(subject.JournalStream))
		cancel()
		if err == nil {
			return nil
		}
		// The stream's own error (wrong stream, limits) or no stream
		// listening, to a first publish: b was not stored. Once a publish
		// is in doubt, neither is final: an earlier one may still be on
		// its way (held by nats.go until it reconnects, or in the log of a
		// stream leader being replaced) while a new leader answers "not
		// available" to this one, and land after the broker refused.
		// Only an acknowledgement (of b, or of it as a duplicate) is.
		var apiErr *jetstream.APIError
		definite := errors.As(err, &apiErr) || errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)
		if definite && !inDoubt {
			return fmt.Errorf("%w: publish %s for run %s: %v", ErrJournal, e.Type, e.Run, err)
		}
		inDoubt = inDoubt || !definite
		if time.Now().Add(recorderRetryWait).After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%w: %w: publish %s for run %s: %v", ErrJournal, ErrMaybeRecorded, e.Type, e.Run, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(recorderRetryWait):
		}
	}
}

// RecordLater publishes e without waiting; done gets the outcome of its
// acknowledgement. Published on the same connection after what was
// recorded before, it is stored after it. When its acknowledgement does
// not come, e is published again as Record does, and may then be stored
// after events handed over later (an outcome after another effect's, or
// after its run's close, which verify accepts for an effect attempted
// before the close).
func (r *Recorder) RecordLater(e *journal.Event, done func(error)) {
	b, err := json.Marshal(e)
	if err != nil {
		done(fmt.Errorf("%w: encode %s: %v", ErrJournal, e.Type, err))
		return
	}
	f, err := r.js.PublishAsync(subject.Journal(e.Run), b, jetstream.WithMsgID(e.ID), jetstream.WithExpectStream(subject.JournalStream))
	if err != nil {
		r.later.Go(func() { done(r.publish(context.Background(), e, b, false)) }) // nothing was sent
		return
	}
	r.later.Go(func() {
		t := time.NewTimer(r.timeout)
		defer t.Stop()
		select {
		case <-f.Ok():
			done(nil)
		case err := <-f.Err():
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) {
				done(fmt.Errorf("%w: publish %s for run %s: %v", ErrJournal, e.Type, e.Run, err))
				return
			}
			done(r.publish(context.Background(), e, b, true))
		case <-t.C:
			done(r.publish(context.Background(), e, b, true))
		}
	})
}

// Close waits until every RecordLater was acknowledged or given up.
func (r *Recorder) Close() { r.later.Wait() }

// sameRun checks a group names one run.
func sameRun(events []*journal.Event) error {
	for _, e := range events[1:] {
		if e.Run != events[0].Run {
			return fmt.Errorf("%w: a group of events spans runs %s and %s", ErrJournal, events[0].Run, e.Run)
		}
	}
	return nil
}

// Committed records through a journal.Committer in this process: Record
// returns once the event is fsynced in the journal (the writer's log), in
// a group commit shared with every other effect being recorded at the
// moment. It is the durable record of the single-node shape, where
// JetStream's acknowledgement is not an fsync. Commit returns
// ErrJournal when no writer is open (the loop reopening it after a full
// disk), so strict mode refuses.
//
// The Committer comes from a function, because the writer's loop
// replaces the Writer (and its Committer) when it reopens the journal.
// Safe for concurrent use.
type Committed struct {
	current func() *journal.Committer
}

var (
	_ GroupJournal     = (*Committed)(nil)
	_ PipelinedJournal = (*Committed)(nil)
)

// NewCommitted records through whatever Committer current returns (nil:
// none open now).
func NewCommitted(current func() *journal.Committer) *Committed {
	return &Committed{current: current}
}

// errNoWriter is wrapped in ErrJournal when no writer is open.
var errNoWriter = errors.New("the journal writer is not open (reopening after a failure)")

func (c *Committed) committer() (*journal.Committer, error) {
	if cm := c.current(); cm != nil {
		return cm, nil
	}
	return nil, fmt.Errorf("%w: %w", ErrJournal, errNoWriter)
}

// Record commits e and returns once it is durable.
func (c *Committed) Record(ctx context.Context, e *journal.Event) error {
	return c.RecordGroup(ctx, e)
}

// RecordGroup commits events together, in one Append, and returns once
// they are durable.
func (c *Committed) RecordGroup(ctx context.Context, events ...*journal.Event) error {
	cm, err := c.committer()
	if err != nil {
		return err
	}
	evs := make([]journal.Event, len(events))
	for i, e := range events {
		evs[i] = *e
	}
	if err := cm.Commit(ctx, evs...); err != nil {
		return fmt.Errorf("%w: %s for run %s: %w", ErrJournal, events[0].Type, events[0].Run, err)
	}
	return nil
}

// RecordLater hands e to the next group commit; done is called from the
// committer's goroutine.
func (c *Committed) RecordLater(e *journal.Event, done func(error)) {
	cm, err := c.committer()
	if err != nil {
		done(err)
		return
	}
	wrap := func(err error) error {
		if err != nil {
			err = fmt.Errorf("%w: %s for run %s: %w", ErrJournal, e.Type, e.Run, err)
		}
		return err
	}
	if err := cm.CommitAsync(context.Background(), func(err error) { done(wrap(err)) }, *e); err != nil {
		done(wrap(err))
	}
}

// recordGroup records events through j as one record when j can, else one
// after the other (each acknowledged before the next).
func recordGroup(ctx context.Context, j Journal, events []*journal.Event) error {
	if g, ok := j.(GroupJournal); ok {
		return g.RecordGroup(ctx, events...)
	}
	for _, e := range events {
		if err := j.Record(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// recordLater records e through j without waiting when j can, else waits
// (within a minute) and calls done itself.
func recordLater(j Journal, e *journal.Event, done func(error)) {
	if p, ok := j.(PipelinedJournal); ok {
		p.RecordLater(e, done)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done(j.Record(ctx, e))
}

// Fallback records through Primary and, for a run whose record Primary
// failed, through Secondary from then on: report mode's way to keep the
// record of an effect that goes ahead anyway when the writer in this
// process cannot write (Primary a Committed, Secondary a Recorder: the
// events wait in the stream for the writer). A run stays on Secondary for
// the life of the process, so its events are never written out of order;
// up to maxFallbackRuns runs are remembered, past which the set starts
// over. Strict mode must not use it: a decision is then only acknowledged
// by the stream. Safe for concurrent use.
type Fallback struct {
	Primary, Secondary GroupJournal
	Logger             *slog.Logger

	mu   sync.Mutex
	runs map[string]bool
}

const maxFallbackRuns = 100_000

var (
	_ GroupJournal     = (*Fallback)(nil)
	_ PipelinedJournal = (*Fallback)(nil)
)

func (f *Fallback) onSecondary(run string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[run]
}

func (f *Fallback) fallBack(run string, err error) {
	f.mu.Lock()
	if f.runs == nil || len(f.runs) >= maxFallbackRuns {
		f.runs = map[string]bool{}
	}
	f.runs[run] = true
	f.mu.Unlock()
	if f.Logger != nil {
		f.Logger.Warn("journal: recording this run through the stream (the writer cannot take it now)", "run", run, "err", err)
	}
}

func (f *Fallback) Record(ctx context.Context, e *journal.Event) error {
	return f.RecordGroup(ctx, e)
}

func (f *Fallback) RecordGroup(ctx context.Context, events ...*journal.Event) error {
	run := events[0].Run
	if !f.onSecondary(run) {
		err := f.Primary.RecordGroup(ctx, events...)
		if err == nil || ctx.Err() != nil {
			return err
		}
		f.fallBack(run, err)
	}
	return f.Secondary.RecordGroup(ctx, events...)
}

func (f *Fallback) RecordLater(e *journal.Event, done func(error)) {
	if f.onSecondary(e.Run) {
		recordLater(f.Secondary, e, done)
		return
	}
	recordLater(f.Primary, e, func(err error) {
		if err == nil {
			done(nil)
			return
		}
		f.fallBack(e.Run, err)
		recordLater(f.Secondary, e, done)
	})
}
