package broker_test

import (
	"encoding/json"
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
