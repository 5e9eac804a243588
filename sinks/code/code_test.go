package code_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/code"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

func TestMain(m *testing.M) {
	sandbox.MaybeHelper()
	os.Exit(m.Run())
}

// detected is the sandbox of this machine's best tier, detected once.
var detected = func() func(t testing.TB) *sandbox.Sandbox {
	var sb *sandbox.Sandbox
	return func(t testing.TB) *sandbox.Sandbox {
		if sb == nil {
			var rep *sandbox.Report
			sb, rep = sandbox.Detect(context.Background(), sandbox.Config{Helper: []string{os.Args[0], sandbox.HelperArg}})
			t.Logf("sandbox tier here: %s (confined %v)", rep.Chosen, rep.Confined)
		}
		return sb
	}
}()

func unconfined(t testing.TB) *sandbox.Sandbox {
	sb, rep := sandbox.Detect(context.Background(), sandbox.Config{Tiers: []sandbox.Tier{sandbox.TierUnconfined}})
	if rep.Confined || sb.Confined() {
		t.Fatal("forcing unconfined gave a confined sandbox")
	}
	return sb
}

func sinks(sb func(testing.TB) *sandbox.Sandbox) sinktest.SinkFactory {
	return func(t testing.TB, _ *sinktest.Env) []broker.Sink {
		return []broker.Sink{code.New(sb(t), code.Config{})}
	}
}

func request(run string, origin policy.Origin, source string) broker.EffectRequest {
	p, _ := json.Marshal(code.Params{Program: "python3", Source: source})
	return broker.EffectRequest{Run: run, Action: "run", Origin: origin, Params: p}
}

func reply(t testing.TB, r *broker.EffectReply) code.Reply {
	t.Helper()
	var out code.Reply
	if err := json.Unmarshal(r.Result, &out); err != nil {
		t.Fatalf("reply %s: %v", r.Result, err)
	}
	return out
}

func TestConformance(t *testing.T) {
	sinktest.Conformance(t, sinktest.Case{
		Sink: policy.SinkCode,
		Request: func(run string) broker.EffectRequest {
			// Shipped code: it runs in strict mode whatever the tier.
			return request(run, policy.OriginShipped, "secret = 's3cr3t-source'\nprint('ran:' + str(6*7))")
		},
		Deny:   "{sink: code}",
		Secret: "s3cr3t-source",
		Sinks:  sinks(detected),
		Happened: func(t testing.TB, _ *sinktest.Env, _ string, r *broker.EffectReply) bool {
			// The output can only come from the program having run.
			return r.Result != nil && strings.Contains(reply(t, r).Stdout, "ran:42")
		},
	})
}

// TestStrictRefusesModelCodeWhenUnconfined forces the unconfined tier:
// model-written code is refused before it runs, shipped code still runs,
// and an allow rule lifts the refusal with its name on record.
func TestStrictRefusesModelCodeWhenUnconfined(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", sinks(unconfined))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	r, err := env.Agent.Effect(sinktest.Ctx(t), policy.SinkCode, request(run, policy.OriginModel, "print('escaped')"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Decision.Refusal != policy.RefuseUnconfinedExecution || r.Decision.Outcome != journal.OutcomeRefused || r.Result != nil {
		t.Fatalf("model code unconfined: %+v", r.Decision)
	}
	r, err = env.Effect(t, policy.SinkCode, request(run, policy.OriginShipped, "print('shipped')"))
	if err != nil || r.Decision.Outcome != journal.OutcomeAllowed || !strings.Contains(reply(t, r).Stdout, "shipped") {
		t.Fatalf("shipped code unconfined: %v %+v", err, r.Decision)
	}
	env.Verify(t)

	lifted := sinktest.Start(t, policy.ModeStrict, "effects:\n  - name: ci-without-bubblewrap\n    decision: allow\n    match: {sink: code}\n", sinks(unconfined))
	run = lifted.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	r, err = lifted.Agent.Effect(sinktest.Ctx(t), policy.SinkCode, request(run, policy.OriginModel, "print('allowed')"))
	if err != nil || r.Decision.Outcome != journal.OutcomeAllowed || r.Decision.AllowedBy != "ci-without-bubblewrap" {
		t.Fatalf("allow rule: %v %+v", err, r.Decision)
	}
	evs := lifted.Events(t, run)
	var dec journal.Decision
	if err := json.Unmarshal(evs[1].Data, &dec); err != nil {
		t.Fatal(err)
	}
	if dec.Allowed != "ci-without-bubblewrap" || dec.Confined {
		t.Fatalf("the allow rule is not on record: %+v", dec)
	}
	lifted.Verify(t)
}

// TestConfinedCodeCannotReachTheHost runs model code in the best tier here
// that tries to connect to a listener on the host's loopback.
func TestConfinedCodeCannotReachTheHost(t *testing.T) {
	sb := detected(t)
	if !sb.Confined() {
		t.Skipf("no confined tier on this machine: %+v", sb.Report())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	env := sinktest.Start(t, policy.ModeStrict, "", sinks(detected))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	port := ln.Addr().(*net.TCPAddr).Port
	src := "import socket\ntry:\n    socket.create_connection(('127.0.0.1', " + itoa(port) + "), timeout=2)\n    print('CONNECTED')\nexcept Exception as e:\n    print('blocked', type(e).__name__)\n"
	r, err := env.Agent.Effect(sinktest.Ctx(t), policy.SinkCode, request(run, policy.OriginModel, src))
	if err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("%v %+v", err, r.Decision)
	}
	out := reply(t, r)
	if strings.Contains(out.Stdout, "CONNECTED") || !strings.Contains(out.Stdout, "blocked") || !out.Confined {
		t.Fatalf("confined code reached the host: %+v", out)
	}
	time.Sleep(100 * time.Millisecond)
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the host listener accepted %d connections from the sandbox", n)
	}
	var dec journal.Decision
	_ = json.Unmarshal(env.Events(t, run)[1].Data, &dec)
	if !dec.Confined || dec.Origin != policy.OriginModel {
		t.Fatalf("recorded decision = %+v", dec)
	}
}

func TestWallTimeLimitIsRecorded(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", sinks(detected))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	p, _ := json.Marshal(code.Params{Program: "python3", Source: "import time\ntime.sleep(30)", TimeoutMS: 500})
	r, err := env.Effect(t, policy.SinkCode, broker.EffectRequest{Run: run, Action: "run", Origin: policy.OriginShipped, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	if out := reply(t, r); out.Killed != "wall-time" {
		t.Fatalf("killed = %q", out.Killed)
	}
	evs := env.Events(t, run)
	var res journal.Result
	_ = json.Unmarshal(evs[len(evs)-1].Data, &res)
	if res.Status != "failed" || res.Detail["killed"] != "wall-time" {
		t.Fatalf("outcome = %+v", res)
	}
}

func TestDescribeRefusesBadParams(t *testing.T) {
	s := code.New(unconfined(t), code.Config{MaxInput: 100})
	run := &broker.Run{ID: broker.NewRunID(time.Now())}
	for name, params := range map[string]string{
		"unknown program": `{"program":"/bin/bash","source":"x"}`,
		"unknown field":   `{"program":"python3","source":"x","cwd":"/"}`,
		"overwrite entry": `{"program":"python3","source":"x","files":{"main.py":"eA=="}}`,
		"too big":         `{"program":"python3","source":"` + strings.Repeat("x", 200) + `"}`,
		"negative time":   `{"program":"python3","source":"x","timeout_ms":-1}`,
	} {
		_, err := s.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: "run", Params: json.RawMessage(params)})
		if err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("%s: err = %v, want a bad request", name, err)
		}
	}
}

func FuzzDescribe(f *testing.F) {
	f.Add([]byte(`{"program":"python3","source":"print(1)","args":["a"],"stdin":"x","files":{"d.csv":"YQ=="},"timeout_ms":10}`))
	f.Add([]byte(`{"program":"sh","source":"echo","files":{"../x":"YQ=="}}`))
	f.Add([]byte(`{"program":"python3","files":null}`))
	s := code.New(unconfined(f), code.Config{})
	run := &broker.Run{ID: "r_00000000000000000000000000"}
	f.Fuzz(func(t *testing.T, params []byte) {
		prop, err := s.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: "run", Params: params})
		if err != nil {
			return
		}
		if prop.Effect.Sink != policy.SinkCode || !strings.HasPrefix(prop.Digest, "sha256:") || prop.Size < 0 {
			t.Fatalf("accepted params gave %+v", prop)
		}
	})
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
