package e2e

import (
	"encoding/json"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/code"
)

// The red team's second pass (after issue 12's fixes): trust laundered
// through the registry, unbounded waits, streams without limits, refusal
// floods, names reused after removal and policy files anyone could
// write. Each case attacks the built binary in strict mode with agent
// credentials and checks the stores.

// runDecisions waits until run's journal file holds n events and returns
// its policy.decision events.
func runDecisions(t *testing.T, data, run string, n int) []journal.Decision {
	t.Helper()
	var out []journal.Decision
	for _, ev := range waitJournal(t, data, run, n) {
		if ev.Type == journal.TypeDecision {
			var d journal.Decision
			must(t, json.Unmarshal(ev.Data, &d))
			out = append(out, d)
		}
	}
	return out
}

// registryRules refuse model code outright, and let every other code run
// here whether or not the sandbox confines it.
const registryRules = `effects:
  - name: no-model-code
    decision: deny
    match: {sink: code, action: run, origin: model}
  - name: code-here
    decision: allow
    match: {sink: code}
`

// TestRedteamRegistryLaundering: a model agent stores its own code as an
// integration, then runs it by name, hoping to be decided as registry
// code. It runs as model code, which the deployment refuses.
func TestRedteamRegistryLaundering(t *testing.T) {
	a := startAttackWith(t, registryRules)
	bob := a.agent("bob")
	run := a.runs["bob"]
	params, _ := json.Marshal(code.RegisterParams{Name: "laundered", Program: "python3", Source: "print('as registry')\n", Effect: policy.EffectRead})
	if r, err := bob.Effect(a.ctx(), policy.SinkCode, broker.EffectRequest{Run: run, Action: "register", Params: params}); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("register: %+v %v", r, err)
	}
	kv, err := a.js.KeyValue(a.ctx(), subject.IntegrationsBucket)
	must(t, err)
	e, err := kv.Get(a.ctx(), "laundered")
	must(t, err)
	var in code.Integration
	must(t, json.Unmarshal(e.Value(), &in))
	if in.StoredBy.Origin != policy.OriginModel || in.StoredBy.Agent != "bob" {
		t.Fatalf("the registrar's origin is not kept: %+v", in.StoredBy)
	}
	p, _ := json.Marshal(code.Params{Integration: "laundered"})
	r, err := bob.Effect(a.ctx(), policy.SinkCode, broker.EffectRequest{Run: run, Action: "run", Params: p})
	if r == nil || r.Decision == nil || r.Decision.Outcome != journal.OutcomeRefused || r.Decision.Rule != "no-model-code" || r.Result != nil {
		t.Fatalf("model code stored as an integration ran: %+v %v", r, err)
	}
	ds := runDecisions(t, a.data, run, 5) // open, register decision+attempt+outcome, run decision
	last := ds[len(ds)-1]
	if last.Action != "run" || last.Origin != policy.OriginModel || last.Outcome != journal.OutcomeRefused || last.Rule != "no-model-code" {
		t.Fatalf("the run of the stored code was decided %+v", last)
	}
}
