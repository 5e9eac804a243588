package code_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/code"
	"github.com/gatehouse/gatehouse/sinks/code/contract"
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

// BenchmarkContractRead measures reading a program's contract: the parser
// in the sandbox plus the analysis, for a program not read before (cold:
// each iteration a different source), against starting python3 on an
// empty program in the same sandbox (the start the reading adds to a code
// effect), alternating in one run; and a program read before (the cache).
// The program is the corpus's class-based ERP client.
func BenchmarkContractRead(b *testing.B) {
	sb := detected(b)
	r := code.NewReader(sb, code.ReaderConfig{})
	src, err := os.ReadFile("contract/testdata/corpus/v22_class_client.py")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := sandbox.Spec{Argv: []string{"/usr/bin/python3", "-I", "-S", "-c", "pass"}}
	cold := make([]time.Duration, 0, b.N)
	empty := make([]time.Duration, 0, b.N)
	cached := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		prog := append(append([]byte{}, src...), fmt.Sprintf("\n# %d\n", i)...)
		t0 := time.Now()
		c := r.Read(ctx, "/usr/bin/python3", prog, contract.Options{})
		cold = append(cold, time.Since(t0))
		if !c.Verified {
			b.Fatalf("contract: %+v", c)
		}
		t0 = time.Now()
		if res, err := sb.Run(ctx, start); err != nil || res.ExitCode != 0 {
			b.Fatalf("python3: %v %+v", err, res)
		}
		empty = append(empty, time.Since(t0))
		t0 = time.Now()
		r.Read(ctx, "/usr/bin/python3", prog, contract.Options{})
		cached = append(cached, time.Since(t0))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	b.ReportMetric(float64(p50(cold).Microseconds())/1000, "read-p50-ms")
	b.ReportMetric(float64(p50(empty).Microseconds())/1000, "python-start-p50-ms")
	b.ReportMetric(float64(p50(cached).Nanoseconds())/1000, "cached-p50-us")
}
