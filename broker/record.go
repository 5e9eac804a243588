package broker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// What an effect records, and when (propose calls these in order):
//
//	recordDecision  the policy.decision, with the effect.attempt when the
//	                effect goes ahead at once: one durable record before
//	                the effect (GroupJournal)
//	recordAttempt   the attempt alone, after an approval was claimed
//	recordOutcome   the effect.outcome, pipelined: the reply does not wait
//	                for it (PipelinedJournal), except under an approval
//
// In mode off nothing is recorded.

// recordDecision records dd, and attempt with it when not nil, and says
// whether the effect may go on. When the record fails, strict mode
// answers a refusal (reply says why) and report mode lets it through with
// Recorded false; both log it.
func (b *Broker) recordDecision(ctx context.Context, reply *EffectReply, run, effect string, dd journal.Decision, attempt *journal.Attempt) bool {
	if b.mode == policy.ModeOff {
		return true
	}
	evs := make([]*journal.Event, 0, 2)
	ev, err := b.event(run, journal.TypeDecision, effect, dd)
	if err == nil {
		evs = append(evs, ev)
		if attempt != nil {
			ev, err = b.event(run, journal.TypeAttempt, effect, attempt)
			evs = append(evs, ev)
		}
	}
	if err == nil {
		start := time.Now()
		err = recordGroup(ctx, b.journal, evs)
		b.metrics.observeRecord(journal.TypeDecision, err, time.Since(start))
	}
	if err != nil {
		if b.mode == policy.ModeStrict {
			b.log.Error("decision not recorded; refusing", "run", run, "effect", effect, "err", err)
			if errors.Is(err, ErrMaybeRecorded) {
				b.settleInDoubt(evs, attempt != nil)
			}
			reply.Decision = &DecisionBody{Outcome: journal.OutcomeRefused, Mode: b.mode, Enforced: true,
				Rule: "journal", Reasons: []policy.Reason{{Rule: "journal", Enforced: true,
					Detail: "strict mode refuses an effect whose decision cannot be recorded"}}}
			reply.Error = errorBody(err)
			return false
		}
		b.log.Error("decision not recorded; report mode lets the effect through", "run", run, "effect", effect, "err", err)
		if errors.Is(err, ErrMaybeRecorded) {
			b.settleInDoubt(evs, false) // performed: its own outcome follows
		}
		return true
	}
	reply.Decision.Recorded = true
	return true
}

// recordAttempt records an attempt on its own and says whether the effect
// may go on: in strict mode not when it was not recorded.
func (b *Broker) recordAttempt(ctx context.Context, reply *EffectReply, run, effect string, a journal.Attempt) bool {
	if b.mode == policy.ModeOff {
		return true
	}
	ev, err := b.event(run, journal.TypeAttempt, effect, a)
	if err == nil {
		err = b.record(ctx, ev)
	}
	if err != nil {
		maybe := errors.Is(err, ErrMaybeRecorded)
		if b.mode == policy.ModeStrict {
			b.log.Error("attempt not recorded; not performing", "run", run, "effect", effect, "err", err)
			if maybe {
				b.settleInDoubt([]*journal.Event{ev}, true)
			}
			reply.Error = errorBody(err)
			return false
		}
		b.log.Error("attempt not recorded; report mode performs anyway", "run", run, "effect", effect, "err", err)
		if maybe {
			b.settleInDoubt([]*journal.Event{ev}, false)
		}
	}
	return true
}

// recordOutcome records what happened, waiting for it when wait is set.
// The effect happened either way: a failure leaves its attempt with no
// outcome after it in the journal, and the log says why.
func (b *Broker) recordOutcome(ctx context.Context, run, effect string, res journal.Result, wait bool) {
	if b.mode == policy.ModeOff {
		return
	}
	if wait {
		if err := b.step(ctx, run, journal.TypeOutcome, effect, res); err != nil {
			b.log.Error("outcome not recorded", "run", run, "effect", effect, "err", err)
		}
		return
	}
	ev, err := b.event(run, journal.TypeOutcome, effect, res)
	if err != nil {
		b.log.Error("outcome not recorded", "run", run, "effect", effect, "err", err)
		return
	}
	start := time.Now()
	b.later.add()
	recordLater(b.journal, ev, func(err error) {
		b.metrics.observeRecord(journal.TypeOutcome, err, time.Since(start))
		if err != nil {
			b.log.Error("outcome not recorded", "run", run, "effect", effect, "err", err)
		}
		b.later.done()
	})
}

// Flush waits until every event this broker recorded without waiting for
// it (the outcomes of effects already answered) is durable, or failed and
// logged, or ctx ends. Readers that must see an answered effect's outcome
// in the journal (tests, a clean shutdown) call it first.
// Counts of refusals not recorded one by one (refusalflood.go) are
// written first.
func (b *Broker) Flush(ctx context.Context) error {
	b.flushSummaries(ctx, "")
	return b.later.wait(ctx)
}

// inflight counts records under way and lets one wait for none. Its zero
// value is ready to use; safe for concurrent use.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0
}

func (f *inflight) add() {
	f.mu.Lock()
	if f.n == 0 {
		f.zero = make(chan struct{})
	}
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	if f.n--; f.n == 0 {
		close(f.zero)
	}
	f.mu.Unlock()
}

func (f *inflight) wait(ctx context.Context) error {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return nil
	}
	zero := f.zero
	f.mu.Unlock()
	select {
	case <-zero:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settleInDoubt follows a record (a decision, and an attempt with it)
// that may have been stored although the stream never acknowledged it. It
// keeps recording it (the same event ids: stored once) for as long as the
// stream dedupes them. notPerformed: strict mode refused the attempted
// effect and did not perform it; once the record is known to be stored,
// the effect's outcome is recorded as not performed, so the journal does
// not show an attempt that might have happened.
//
// Until it is settled the run's close waits for it (deciding.hold): the
// decision was made while the run was open, and a record landing after
// the application's close, whose answer the agent already had, would
// follow the run.close in the journal. Called from within propose, while
// its enter is held.
func (b *Broker) settleInDoubt(evs []*journal.Event, notPerformed bool) {
	release := b.deciding.hold(evs[0].Run)
	b.later.add()
	go func() {
		defer b.later.done()
		defer release()
		ctx, cancel := context.WithTimeout(context.Background(), journal.StreamDuplicates/2) // well inside the window
		defer cancel()
		for {
			err := recordGroup(ctx, b.journal, evs)
			if err == nil {
				break
			}
			// Even the stream's "no" is not final while an earlier publish
			// may be in flight between servers: ask until the dedupe
			// window closes.
			select {
			case <-ctx.Done():
				b.log.Error("record in doubt not settled: it may be in the journal, even after its run's close",
					"run", evs[0].Run, "effect", evs[0].Effect, "type", evs[0].Type, "performed", !notPerformed, "err", err)
				return
			case <-time.After(time.Second):
			}
		}
		if !notPerformed {
			b.log.Info("a record in doubt is stored", "run", evs[0].Run, "effect", evs[0].Effect, "type", evs[0].Type)
			return
		}
		b.recordOutcome(ctx, evs[0].Run, evs[0].Effect, journal.Result{Status: "failed", Error: "not-performed"}, true)
		b.log.Warn("a record in doubt was stored; its effect was not performed, and that is recorded", "run", evs[0].Run, "effect", evs[0].Effect, "type", evs[0].Type)
	}()
}
