package approval_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/journal"
)

// flakyJournal is a hand-written fake of the broker's journal that, like
// the journal writer, keeps the first event with an id and drops the rest.
// fail makes Record fail without recording; crash makes it record and
// then panic, as if the process died right after the journal's ack.
type flakyJournal struct {
	mu     sync.Mutex
	ids    map[string]bool
	events []*journal.Event
	fail   atomic.Bool
	crash  atomic.Bool
}

var errJournalDown = errors.New("journal down")

func (j *flakyJournal) Record(_ context.Context, e *journal.Event) error {
	if j.fail.Load() {
		return errJournalDown
	}
	j.mu.Lock()
	if j.ids == nil {
		j.ids = map[string]bool{}
	}
	if !j.ids[e.ID] {
		j.ids[e.ID] = true
		j.events = append(j.events, e)
	}
	j.mu.Unlock()
	if j.crash.Load() {
		panic("crash after the journal acknowledged")
	}
	return nil
}

func (j *flakyJournal) count(t journal.Type) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, e := range j.events {
		if e.Type == t {
			n++
		}
	}
	return n
}

// A decision the journal did not take never shows in the store.
func TestDecisionNotRecordedIsNotStored(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			j := &flakyJournal{}
			s := New(st.open(t), j, Config{})
			ctx := context.Background()
			r, _, err := s.Request(ctx, hold(t, "r1", `{"amount":"10"}`))
			if err != nil {
				t.Fatal(err)
			}
			j.fail.Store(true)
			if _, err := s.Decide(ctx, r.ID, reviewer); !errors.Is(err, errJournalDown) {
				t.Fatalf("decide with the journal down: %v", err)
			}
			got, _ := s.Get(ctx, r.ID)
			if got.State != StatePending || got.Decision != nil || got.Intent != nil {
				t.Fatalf("after a failed record: state %s decision %v intent %v", got.State, got.Decision, got.Intent)
			}
			j.fail.Store(false)
			if _, err := s.Decide(ctx, r.ID, reviewer); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Claim(ctx, r.ID, "e_1"); err != nil {
				t.Fatal(err)
			}
			// A claim that cannot be recorded is taken back: nothing started.
			j.fail.Store(true)
			if _, err := s.Settle(ctx, r.ID, "e_1", "ok"); !errors.Is(err, errJournalDown) {
				t.Fatalf("settle with the journal down: %v", err)
			}
			if got, _ := s.Get(ctx, r.ID); got.State != StateClaimed {
				t.Fatalf("settle not recorded but stored: %s", got.State)
			}
		})
	}
}

func TestClaimNotRecordedIsTakenBack(t *testing.T) {
	j := &flakyJournal{}
	s := New(kvStore(t), j, Config{})
	ctx := context.Background()
	r, _, _ := s.Request(ctx, hold(t, "r1", `{}`))
	if _, err := s.Decide(ctx, r.ID, reviewer); err != nil {
		t.Fatal(err)
	}
	j.fail.Store(true)
	if _, err := s.Claim(ctx, r.ID, "e_1"); !errors.Is(err, errJournalDown) {
		t.Fatalf("claim with the journal down: %v", err)
	}
	j.fail.Store(false)
	if got, _ := s.Get(ctx, r.ID); got.State != StateApproved {
		t.Fatalf("state %s, want approved again", got.State)
	}
	if _, err := s.Claim(ctx, r.ID, "e_2"); err != nil {
		t.Fatalf("claim once the journal is back: %v", err)
	}
}

// A process that dies between the journal's ack and the store's change
// leaves an intent; after the intent timeout the next caller finishes it,
// the journal keeps the decision once, and the first decision stands.
func TestHalfDoneDecisionIsFinished(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	store := kvStore(t)
	j := &flakyJournal{}
	dying := New(store, j, Config{Now: clock, IntentTimeout: time.Minute})
	ctx := context.Background()
	r, _, _ := dying.Request(ctx, hold(t, "r1", `{}`))
	j.crash.Store(true)
	func() {
		defer func() { _ = recover() }()
		_, _ = dying.Decide(ctx, r.ID, reviewer)
	}()
	j.crash.Store(false)

	other := New(store, j, Config{Now: clock, IntentTimeout: time.Minute})
	got, _ := other.Get(ctx, r.ID)
	if got.State != StatePending || got.Intent == nil {
		t.Fatalf("after the crash: state %s intent %v", got.State, got.Intent)
	}
	late := reviewer
	late.Approver, late.Approved = "sam", false
	if _, err := other.Decide(ctx, r.ID, late); !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("a second decision while the first is in flight: %v", err)
	}
	if _, err := other.Claim(ctx, r.ID, "e_1"); !errors.Is(err, ErrAlreadyClaimed) {
		t.Fatalf("claimed before the decision was applied: %v", err)
	}
	now.Add(int64(2 * time.Minute))
	if _, err := other.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = other.Get(ctx, r.ID)
	if got.State != StateApproved || got.Decision == nil || got.Decision.Approver != reviewer.Approver || got.Intent != nil {
		t.Fatalf("after sweep: %+v", got)
	}
	if n := j.count(journal.TypeApprovalDecision) + j.count(journal.TypeApprovalRefused); n != 1 {
		t.Fatalf("%d decisions in the journal, want 1", n)
	}
	if _, err := other.Decide(ctx, r.ID, late); !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("the first decision did not stand: %v", err)
	}
}
