package workspace_test

import (
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
	"github.com/gatehouse/gatehouse/sinks/workspace"
)

const pathRules = `effects: [{name: no-ci, decision: deny, match: {sink: workspace, target: "ci/**"}},
  {name: ws, decision: allow, match: {sink: workspace}}]
`

// TestExportMeetsEveryPathsRule: bound to the broker, the sink describes
// an export by the first path strict policy refuses, so a rule naming a
// path refuses a batch touching it (recorded with that path) and nothing
// of the batch is written; a batch of allowed paths is "export" as before.
// Unbound, every export is "export".
func TestExportMeetsEveryPathsRule(t *testing.T) {
	var ws *workspace.Sink
	env := sinktest.Start(t, policy.ModeStrict, pathRules, func(t testing.TB, env *sinktest.Env) []broker.Sink {
		s := factory(workspace.Config{})(t, env)
		ws = s[0].(*workspace.Sink)
		return s
	})
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	batch := map[string][]byte{"a.txt": []byte("a"), "ci/deploy.sh": []byte("evil"), "ci/x.sh": []byte("x")}

	// Unbound: decided as "export", which no rule names.
	if r, err := env.Agent.Effect(ctx, policy.SinkWorkspace, export(run, batch)); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("unbound export: %+v %v", r, err)
	}
	ws.Bind(env.Broker)
	run = env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	r, err := env.Agent.Effect(ctx, policy.SinkWorkspace, export(run, batch))
	if err != nil || r.Decision.Outcome != journal.OutcomeRefused || r.Decision.Rule != "no-ci" {
		t.Fatalf("bound export past no-ci: %+v %v", r, err)
	}
	for p := range batch {
		if _, ok := onHost(t, env, "acme", run, p); ok {
			t.Errorf("%s of a refused export was written", p)
		}
	}
	ok := map[string][]byte{"a.txt": []byte("a"), "src/b.txt": []byte("b")}
	if r, err := env.Agent.Effect(ctx, policy.SinkWorkspace, export(run, ok)); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("allowed export: %+v %v", r, err)
	}
	ds, _ := outcomes(t, env, run)
	if len(ds) != 2 || ds[0].Target != "ci/deploy.sh" || ds[0].Outcome != journal.OutcomeRefused || ds[1].Target != workspace.TargetExport {
		t.Fatalf("decisions %+v", ds)
	}
	env.Verify(t)
}
