package code_test

import (
	"encoding/json"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/code"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// TestStoredCodeNeverOutranksItsRegistrar: code a model agent stores runs
// as model code, not registry code (storing it launders no trust); an
// entry an operator wrote naming a shipped registrar runs as registry
// code (registry is the ceiling); an entry naming no registrar's origin
// runs as model code. Each is read from the decision in the journal.
func TestStoredCodeNeverOutranksItsRegistrar(t *testing.T) {
	erp := newTestERP(t)
	g, _, _ := startContractGateway(t, policy.ModeReport, detected(t), erp, true)
	ctx := sinktest.Ctx(t)
	run := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	params, _ := json.Marshal(code.RegisterParams{Name: "say-hi", Program: "python3", Source: "print('hi')\n", Effect: policy.EffectRead})
	if _, err := g.Agent.Effect(ctx, policy.SinkCode, broker.EffectRequest{Run: run, Action: "register", Params: params}); err != nil {
		t.Fatalf("register: %v", err)
	}
	kv, err := g.JS.KeyValue(ctx, subject.IntegrationsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "say-hi")
	if err != nil {
		t.Fatal(err)
	}
	var in code.Integration
	if err := json.Unmarshal(e.Value(), &in); err != nil {
		t.Fatal(err)
	}
	if in.StoredBy.Origin != policy.OriginModel || in.StoredBy.Run != run {
		t.Fatalf("the registrar's origin is not kept with the entry: %+v", in.StoredBy)
	}
	runAs := func() policy.Origin {
		t.Helper()
		r := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
		p, _ := json.Marshal(code.Params{Integration: "say-hi"})
		if _, err := g.Agent.Effect(ctx, policy.SinkCode, broker.EffectRequest{Run: r, Action: "run", Params: p}); err != nil {
			t.Fatalf("run: %v", err)
		}
		return codeDecision(t, g.Events(t, r)).Origin
	}
	if o := runAs(); o != policy.OriginModel {
		t.Fatalf("model-stored code ran as %s", o)
	}
	for registrar, want := range map[policy.Origin]policy.Origin{
		policy.OriginShipped: policy.OriginRegistry, "": policy.OriginModel, "root": policy.OriginModel,
	} {
		in.StoredBy.Origin = registrar
		b, _ := json.Marshal(in)
		if _, err := kv.Put(ctx, "say-hi", b); err != nil {
			t.Fatal(err)
		}
		if o := runAs(); o != want {
			t.Fatalf("stored by origin %q: ran as %s, want %s", registrar, o, want)
		}
	}
}
