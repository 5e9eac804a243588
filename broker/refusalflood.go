package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// Refusal floods: an identity that knows a run id can send refused
// requests on it as fast as it likes, and each refusal of the caller
// (refuseCaller: run-of-another-agent, origin-not-established,
// tool-not-established) is a record in that run's journal. So their
// recording is rate-limited per kind: the caller, the run, the refusal
// and the sink (not the action, which the caller may vary freely). Each
// kind has a token bucket of floodBurst records, refilled one per
// floodRefill. A refusal within the budget is recorded as ever; one past
// it is answered exactly the same (the reply, the code, the log line) but
// not recorded by itself: it is counted
// (gatehouse_refusals_suppressed_total) and the count goes into one
// summarising record whose second reason, RefuseRepeatedRefusals, says
// how many were not recorded one by one. That is the next refusal of the
// kind within budget (a policy.decision of its own refusal, standing for
// itself and the count), or, if none comes within floodRefill of the first
// suppressed, a policy.decision of refusal RefuseRepeatedRefusals that
// stands for the count alone. So every refusal is in the journal either
// by itself or in a count. The first refusal of a kind is always recorded: a
// new kind starts with a full bucket.
//
// Policy refusals of a run's own agent are not limited: they are
// decisions about the run's own work, with their request captured, and
// an agent flooding its own run is visible there; caller refusals are the
// case where an outsider writes into someone else's journal.

// RefuseRepeatedRefusals is the reason a summarising record carries.
const RefuseRepeatedRefusals policy.Refusal = "repeated-refusals"

const (
	floodBurst  = 10
	floodRefill = 5 * time.Second
	// floodKeys bounds the kinds kept; past it idle ones are dropped
	// (an idle kind has a full bucket and nothing pending, so dropping it
	// changes nothing).
	floodKeys = 4096
)

type floodKey struct {
	caller  string
	run     string
	refusal policy.Refusal
	sink    policy.Sink
}

type floodBucket struct {
	tokens     float64
	last       time.Time
	suppressed int  // refusals answered and not recorded since the last record
	pending    bool // a summary is scheduled
	// The summary's decision to repeat and its timer, while pending.
	dd    journal.Decision
	timer *time.Timer
}

// refusalFlood is the broker's per-kind budget. The zero value is ready.
type refusalFlood struct {
	mu   sync.Mutex
	keys map[floodKey]*floodBucket
}

// take spends a token of k at now. record says whether this refusal is
// recorded; summarised is then how many refusals before it were not
// (its record carries that count). When record is false, schedule is true
// for the first refusal suppressed since the last record: the caller
// schedules the summary.
func (f *refusalFlood) take(k floodKey, now time.Time) (record bool, summarised int, schedule bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[floodKey]*floodBucket{}
	}
	b := f.keys[k]
	if b == nil {
		if len(f.keys) >= floodKeys {
			f.dropIdle(now)
		}
		b = &floodBucket{tokens: floodBurst, last: now}
		f.keys[k] = b
	}
	b.refill(now)
	if b.tokens >= 1 {
		b.tokens--
		n := b.suppressed
		b.suppressed = 0
		return true, n, false
	}
	b.suppressed++
	schedule = !b.pending
	b.pending = true
	return false, 0, schedule
}

// summary takes the count pending for k's summarising record and the
// decision it repeats, and stops its timer: whoever takes it writes it.
func (f *refusalFlood) summary(k floodKey) (int, journal.Decision) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.keys[k]
	if b == nil || b.timer == nil {
		// Nothing pending, or its summary not scheduled yet (the
		// refusal that made it pending is still being answered): its
		// timer will take it.
		return 0, journal.Decision{}
	}
	n, dd := b.suppressed, b.dd
	if b.timer != nil {
		b.timer.Stop()
	}
	b.suppressed, b.pending, b.dd, b.timer = 0, false, journal.Decision{}, nil
	return n, dd
}

// giveBack returns n refusals to k's count when the record that was to
// carry them could not be written, so a later record carries them.
func (f *refusalFlood) giveBack(k floodKey, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.keys[k]; b != nil {
		b.suppressed += n
	}
}

// pendingOf lists the kinds with a summary pending, of run (every run
// when run is "").
func (f *refusalFlood) pendingOf(run string) []floodKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ks []floodKey
	for k, b := range f.keys {
		if b.pending && (run == "" || k.run == run) {
			ks = append(ks, k)
		}
	}
	return ks
}

func (b *floodBucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(floodBurst, b.tokens+float64(d)/float64(floodRefill))
		b.last = now
	}
}

func (f *refusalFlood) dropIdle(now time.Time) {
	for k, b := range f.keys {
		b.refill(now)
		if b.tokens >= floodBurst && b.suppressed == 0 && !b.pending {
			delete(f.keys, k)
		}
	}
}

// summaryReason is the reason a record summarising n refusals carries.
func summaryReason(n int, refusal policy.Refusal) policy.Reason {
	return policy.Reason{Refusal: RefuseRepeatedRefusals, Rule: journal.RuleIdentity, Enforced: true,
		Detail: fmt.Sprintf("%d more refusals %s from this caller on this sink were answered and not recorded one by one", n, refusal)}
}

// summarise schedules k's summarising record floodRefill after its first
// suppressed refusal, unless a record within budget carries the count
// first, or the run closes, or the broker flushes (flushSummaries), which
// write it at once. dd is the decision of that refusal, to repeat.
func (b *Broker) summarise(k floodKey, dd journal.Decision) {
	b.floods.schedule(k, dd, floodRefill, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.writeSummary(ctx, k, true)
	})
}

// schedule keeps dd as the decision k's summary repeats and runs write
// after wait, unless summary takes the count first.
func (f *refusalFlood) schedule(k floodKey, dd journal.Decision, wait time.Duration, write func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	bk := f.keys[k]
	if bk == nil || !bk.pending || bk.timer != nil {
		return
	}
	bk.dd = dd
	bk.timer = time.AfterFunc(wait, write)
}

// flushSummaries writes the summaries pending for run (every run when run
// is ""): before a run closes (nothing enters a closed run's journal, so
// a count left pending would be lost) and when the broker flushes at
// shutdown.
func (b *Broker) flushSummaries(ctx context.Context, run string) {
	for _, k := range b.floods.pendingOf(run) {
		b.writeSummary(ctx, k, run == "")
	}
}

// writeSummary writes k's summarising record if a count is pending.
// checkRun: look the run up first (a timer's summary, or a flush of every
// run); a run being closed has not been closed yet.
func (b *Broker) writeSummary(ctx context.Context, k floodKey, checkRun bool) {
	n, dd := b.floods.summary(k)
	if n == 0 {
		return
	}
	if checkRun {
		if run, err := b.runs.Get(ctx, k.run); err != nil || run.Closed {
			b.log.Warn("repeated refusals not summarised: the run is closed or unreadable", "run", k.run, "refusal", k.refusal, "count", n, "err", err)
			return
		}
	}
	// The record stands for the n refusals only: its refusal says so,
	// its first reason is theirs, its second their count.
	dd.Refusal = RefuseRepeatedRefusals
	dd.Reasons = append(dd.Reasons[:1:1], summaryReason(n, k.refusal))
	effectID := newID("e_", b.now())
	if err := b.step(ctx, k.run, journal.TypeDecision, effectID, dd); err != nil {
		b.log.Error("repeated refusals not summarised", "run", k.run, "refusal", k.refusal, "count", n, "err", err)
	}
}
