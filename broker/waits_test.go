package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// An agent cannot tie the broker up with waits: past its bound of waiting
// tools.wait requests another is refused at once with TOO_MANY_WAITS, and
// nothing is recorded; once its waits end it may wait again.
func TestWaitApprovalIsBoundedPerAgent(t *testing.T) {
	w := startApprovals(t, policy.ModeStrict, approveOutputs)
	run := w.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	rep, _ := w.Agent.Output(sinktest.Ctx(t), run, "ok", "notes")
	if rep == nil || rep.Decision == nil || rep.Decision.Approval == "" {
		t.Fatalf("held output: %+v", rep)
	}
	id := rep.Decision.Approval
	wd := &world{js: w.JS}
	before := len(wd.journalEvents(t, run))

	const bound = 4 // maxApprovalWaiters
	done := make(chan *broker.WaitReply, bound)
	for i := 0; i < bound; i++ {
		go func() {
			for {
				// A probe below may hold a slot for a moment: ask again.
				r, err := w.Agent.WaitApproval(context.Background(), run, id, broker.MaxApprovalWait)
				if errCode(err) != broker.CodeTooManyWaits {
					done <- r
					return
				}
			}
		}()
	}
	// Once the four hold their slots, the next is refused; until then a
	// short wait ends undecided.
	deadline := time.Now().Add(broker.MaxApprovalWait / 2)
	for {
		r, err := w.Agent.WaitApproval(sinktest.Ctx(t), run, id, 20*time.Millisecond)
		if errCode(err) == broker.CodeTooManyWaits {
			if r == nil || r.Decided || r.Run != run {
				t.Fatalf("refused wait's reply: %+v", r)
			}
			break
		}
		if err != nil || r.Decided {
			t.Fatalf("a wait beside the others: %+v %v", r, err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a fifth wait was never refused")
		}
	}
	if _, err := w.svc.Decide(sinktest.Ctx(t), id, rita); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < bound; i++ {
		if r := <-done; r == nil || !r.Decided || !r.Approved {
			t.Fatalf("a bounded wait: %+v", r)
		}
	}
	if r, err := w.Agent.WaitApproval(sinktest.Ctx(t), run, id, time.Second); err != nil || !r.Approved {
		t.Fatalf("a wait after the others ended: %+v %v", r, err)
	}
	if evs := wd.journalEvents(t, run); len(evs) != before+1 {
		t.Fatalf("waits recorded something: %d events before, %d after (one is the person's decision)", before, len(evs))
	}
}
