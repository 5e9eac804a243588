package code_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// BenchmarkDecisionOverhead runs `python3` on an empty program in the
// sandbox directly, and the same program as a code effect through
// Gatehouse (agent request over NATS, decided in strict mode, decision,
// attempt and outcome recorded, journal writer running), alternating the
// two in one run. It reports both medians and the overhead of deciding and
// recording as a percentage of the sandboxed run.
func BenchmarkDecisionOverhead(b *testing.B) {
	sb := detected(b)
	env := sinktest.Start(b, policy.ModeStrict, "", sinks(detected))
	run := env.Open(b, broker.OpenWork{Tenant: "acme", Person: "ada"})
	params, _ := json.Marshal(map[string]string{"program": "python3", "source": "pass"})
	req := broker.EffectRequest{Run: run, Action: "run", Origin: policy.OriginModel, Params: params}
	spec := sandbox.Spec{Argv: []string{"/usr/bin/python3", "main.py"}, Files: map[string][]byte{"main.py": []byte("pass")},
		Env: []string{"PATH=/usr/bin:/bin", "HOME=/work", "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"}}
	ctx := context.Background()
	direct := make([]time.Duration, 0, b.N)
	gated := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := sb.Run(ctx, spec)
		direct = append(direct, time.Since(t0))
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("direct: %v %+v", err, res)
		}
		t0 = time.Now()
		r, err := env.Agent.Effect(ctx, policy.SinkCode, req)
		gated = append(gated, time.Since(t0))
		if err != nil || r.Decision.Outcome != journal.OutcomeAllowed || r.Outcome.Status != "ok" {
			b.Fatalf("through gatehouse: %v %+v", err, r)
		}
	}
	b.StopTimer()
	slices.Sort(direct)
	slices.Sort(gated)
	d, g := direct[len(direct)/2], gated[len(gated)/2]
	b.ReportMetric(float64(d.Microseconds()), "direct-p50-us")
	b.ReportMetric(float64(g.Microseconds()), "gatehouse-p50-us")
	b.ReportMetric(100*float64(g-d)/float64(d), "overhead-%")
}
