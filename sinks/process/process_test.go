package process_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/code"
	"github.com/gatehouse/gatehouse/sinks/process"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

func TestMain(m *testing.M) {
	sandbox.MaybeHelper() // RunHost re-executes the test binary as its helper
	os.Exit(m.Run())
}

func sinks(t testing.TB, _ *sinktest.Env) []broker.Sink {
	return []broker.Sink{process.New(process.Config{})}
}

func touch(run string, origin policy.Origin, marker string) broker.EffectRequest {
	p, _ := json.Marshal(process.Params{Argv: []string{"sh", "-c", "echo s3cr3t-arg >/dev/null; touch " + marker}})
	return broker.EffectRequest{Run: run, Action: "exec", Origin: origin, Params: p}
}

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	sinktest.Conformance(t, sinktest.Case{
		Sink: policy.SinkProcess,
		Request: func(run string) broker.EffectRequest {
			return touch(run, policy.OriginShipped, filepath.Join(dir, run))
		},
		Deny:   `{sink: process, target: "/usr/bin/sh"}`,
		Secret: "s3cr3t-arg",
		Sinks:  sinks,
		Happened: func(t testing.TB, _ *sinktest.Env, run string, _ *broker.EffectReply) bool {
			_, err := os.Stat(filepath.Join(dir, run))
			return err == nil
		},
	})
}

// TestStrictRefusesCommandsTheModelChose: a host command is never confined,
// so one the model chose is refused in strict mode unless a rule names it.
func TestStrictRefusesCommandsTheModelChose(t *testing.T) {
	dir := t.TempDir()
	env := sinktest.Start(t, policy.ModeStrict, "", sinks)
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	marker := filepath.Join(dir, "model")
	r, err := env.Agent.Effect(sinktest.Ctx(t), policy.SinkProcess, touch(run, policy.OriginModel, marker))
	if err != nil {
		t.Fatal(err)
	}
	if r.Decision.Refusal != policy.RefuseUnconfinedExecution || r.Decision.Outcome != journal.OutcomeRefused {
		t.Fatalf("decision = %+v", r.Decision)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("a refused command ran")
	}

	lifted := sinktest.Start(t, policy.ModeStrict, "effects:\n  - name: shell-for-builds\n    decision: allow\n    match: {sink: process, target: \"/usr/bin/sh\"}\n", sinks)
	run = lifted.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	r, err = lifted.Agent.Effect(sinktest.Ctx(t), policy.SinkProcess, touch(run, policy.OriginModel, marker))
	if err != nil || r.Decision.AllowedBy != "shell-for-builds" {
		t.Fatalf("allow rule: %v %+v", err, r.Decision)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the allowed command did not run")
	}
	evs := lifted.Events(t, run)
	var dec journal.Decision
	_ = json.Unmarshal(evs[1].Data, &dec)
	var res journal.Result
	_ = json.Unmarshal(evs[3].Data, &res)
	if dec.Allowed != "shell-for-builds" || dec.Target != "/usr/bin/sh" || res.Detail["program"] != "/usr/bin/sh" || res.Status != "ok" {
		t.Fatalf("record: decision %+v outcome %+v", dec, res)
	}
	lifted.Verify(t)
}

func TestHostCommandLimitsKillTheTree(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", sinks)
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	// A grandchild in its own session outliving its parent must die too.
	p, _ := json.Marshal(process.Params{Argv: []string{"sh", "-c", "setsid sleep 60 & sleep 60"}, TimeoutMS: 300})
	start := time.Now()
	r, err := env.Effect(t, policy.SinkProcess, broker.EffectRequest{Run: run, Action: "exec", Origin: policy.OriginShipped, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	var out code.Reply
	_ = json.Unmarshal(r.Result, &out)
	if out.Killed != "wall-time" || time.Since(start) > 20*time.Second {
		t.Fatalf("reply = %+v after %v", out, time.Since(start))
	}
}

func TestDescribeResolvesTheProgram(t *testing.T) {
	s := process.New(process.Config{})
	run := &broker.Run{ID: broker.NewRunID(time.Now())}
	prop, err := s.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: "exec", Params: json.RawMessage(`{"argv":["sh","-c","true"]}`)})
	if err != nil || prop.Effect.Target != "/usr/bin/sh" && prop.Effect.Target != "/bin/sh" {
		t.Fatalf("%v %+v", err, prop)
	}
	for name, params := range map[string]string{
		"relative path": `{"argv":["./evil"]}`,
		"missing":       `{"argv":["no-such-program-here"]}`,
		"empty":         `{"argv":[]}`,
		"nul":           `{"argv":["sh","a\u0000b"]}`,
		"unknown field": `{"argv":["sh"],"env":["LD_PRELOAD=x"]}`,
	} {
		if _, err := s.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: "exec", Params: json.RawMessage(params)}); err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func FuzzDescribe(f *testing.F) {
	f.Add([]byte(`{"argv":["git","status"],"stdin":"","timeout_ms":100}`))
	f.Add([]byte(`{"argv":["./evil"]}`))
	s := process.New(process.Config{})
	run := &broker.Run{ID: "r_00000000000000000000000000"}
	f.Fuzz(func(t *testing.T, params []byte) {
		prop, err := s.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: "exec", Params: params})
		if err != nil {
			return
		}
		if !strings.HasPrefix(prop.Effect.Target, "/") || prop.Effect.Confined {
			t.Fatalf("accepted params gave %+v", prop.Effect)
		}
	})
}

// BenchmarkRoundTrip runs /usr/bin/true on the host as a process effect:
// request over NATS from an agent the deployment declared shipped, decided
// in strict mode, recorded, run, answered.
func BenchmarkRoundTrip(b *testing.B) {
	env := sinktest.Start(b, policy.ModeStrict, "", sinks)
	builder := env.NamedAgent(b, "builder", policy.OriginShipped)
	run := env.Open(b, broker.OpenWork{Tenant: "acme", Person: "ada", Agent: "builder"})
	req := broker.EffectRequest{Run: run, Action: "exec", Params: json.RawMessage(`{"argv":["true"]}`)}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, err := builder.Effect(sinktest.Ctx(b), policy.SinkProcess, req)
		lat = append(lat, time.Since(t0))
		if err != nil || r.Outcome == nil || r.Outcome.Status != "ok" {
			b.Fatalf("%v %+v", err, r)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
}
