package broker_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// Once its application has closed a run, nothing more enters its journal,
// whoever asks: a refusal of the caller (another agent's effect, a claimed
// origin) is still answered, but not recorded, since an event after
// run.close is what verify reports as tampering. Otherwise any agent that
// learned a closed run's id could make the journal fail verification.
func TestClosedRunTakesNoCallerRefusals(t *testing.T) {
	w := start(t, policy.ModeStrict, "agents:\n  - name: alice\n  - name: bob\n")
	ctx := ctxT(t)
	alice, bob := w.NamedAgent(t, "alice", ""), w.NamedAgent(t, "bob", "")
	run := w.Open(t, broker.OpenWork{Tenant: "globex", Person: "gus", Agent: "alice"})
	if r, err := alice.Output(ctx, run, "ok", 1); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("alice: %+v %v", r, err)
	}
	if err := w.App.CloseWork(ctx, run, "done"); err != nil {
		t.Fatal(err)
	}
	if r, err := bob.Output(ctx, run, "ok", 1); errCode(err) != broker.CodeNotRunAgent || r.Decision.Refusal != broker.RefuseRunOfAnotherAgent || r.Decision.Recorded {
		t.Fatalf("bob on alice's closed run: %+v %v", r, err)
	}
	if _, err := alice.Effect(ctx, policy.SinkOutput, broker.EffectRequest{Run: run, Action: "deliver", Origin: policy.OriginShipped,
		Params: json.RawMessage(`{"status":"ok"}`)}); errCode(err) != broker.CodeOriginNotEstablished && errCode(err) != broker.CodeRunClosed {
		t.Fatalf("alice claiming an origin on her closed run: %v", err)
	}
	evs := w.Events(t, run)
	if got := evs[len(evs)-1].Type; got != journal.TypeRunClose || len(evs) != 5 {
		t.Fatalf("the closed run's journal: %v", sinktest.Types(evs))
	}
	w.Verify(t)
}

// A flood of another agent's refusals on a run that closes at once: the
// count of those not recorded one by one is written before run.close,
// not lost with a timer that would find the run closed. Every refusal is
// in the journal by itself or in a count, and the journal verifies.
func TestRefusalCountWrittenBeforeTheRunCloses(t *testing.T) {
	w := start(t, policy.ModeStrict, "agents:\n  - name: alice\n  - name: bob\n")
	ctx := ctxT(t)
	bob := w.NamedAgent(t, "bob", "")
	run := w.Open(t, broker.OpenWork{Tenant: "globex", Person: "gus", Agent: "alice"})
	const sent = 25
	for i := 0; i < sent; i++ {
		if _, err := bob.Output(ctx, run, "ok", i); errCode(err) != broker.CodeNotRunAgent {
			t.Fatalf("bob on alice's run: %v", err)
		}
	}
	if err := w.App.CloseWork(ctx, run, "done"); err != nil {
		t.Fatal(err)
	}
	evs := w.Events(t, run)
	if got := evs[len(evs)-1].Type; got != journal.TypeRunClose {
		t.Fatalf("the run's journal does not end with its close: %v", sinktest.Types(evs))
	}
	alone, counted := 0, 0
	for _, ev := range evs {
		if ev.Type != journal.TypeDecision {
			continue
		}
		var d journal.Decision
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Refusal == broker.RefuseRepeatedRefusals {
			var n int
			if _, err := fmt.Sscanf(d.Reasons[len(d.Reasons)-1].Detail, "%d more", &n); err != nil {
				t.Fatalf("summary %+v: %v", d.Reasons, err)
			}
			counted += n
			continue
		}
		alone++
	}
	if alone+counted != sent || counted == 0 {
		t.Fatalf("%d refusals recorded alone and %d counted, want %d in all", alone, counted, sent)
	}
	w.Verify(t)
}
