package process_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// host is the Sandbox commands run through: the default uid range, which
// this machine (the tests run as root) can switch to.
var host = sync.OnceValue(func() *sandbox.Sandbox {
	sb, _ := sandbox.Detect(context.Background(), sandbox.Config{Tiers: []sandbox.Tier{sandbox.TierUnconfined}})
	return sb
})

func sinks(t testing.TB, _ *sinktest.Env) []broker.Sink {
	return []broker.Sink{process.New(host(), process.Config{})}
}

// openDir is a folder every uid may write, for markers a command leaves
// (the command runs as a sandbox uid, not as the test's root).
func openDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gatehouse-process-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o777)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func touch(run string, origin policy.Origin, marker string) broker.EffectRequest {
	p, _ := json.Marshal(process.Params{Argv: []string{"sh", "-c", "echo s3cr3t-arg >/dev/null; touch " + marker}})
	return broker.EffectRequest{Run: run, Action: "exec", Origin: origin, Params: p}
}

func TestConformance(t *testing.T) {
	dir := openDir(t)
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
	dir := openDir(t)
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
	s := process.New(host(), process.Config{})
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
	s := process.New(host(), process.Config{})
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

// TestCommandsRunAsASandboxUID: an allowed command runs as a uid of the
// sandbox range, never root, in a working folder of its own; it cannot
// read a 0600 file of the broker's; the journal's outcome names the uid.
func TestCommandsRunAsASandboxUID(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "broker.nk")
	if err := os.WriteFile(secret, []byte("SUASECRETSEED"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(secret), 0o755)
	env := sinktest.Start(t, policy.ModeStrict, "", sinks)
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	p, _ := json.Marshal(process.Params{Argv: []string{"sh", "-c", "id -u; id -G; stat -c %u .; cat " + secret}})
	r, err := env.Effect(t, policy.SinkProcess, broker.EffectRequest{Run: run, Action: "exec", Origin: policy.OriginShipped, Params: p})
	if err != nil || r.Outcome == nil {
		t.Fatalf("%v %+v", err, r)
	}
	var out code.Reply
	_ = json.Unmarshal(r.Result, &out)
	lines := strings.Fields(out.Stdout)
	uid, _ := strconv.Atoi(lines[0])
	if len(lines) != 3 || uid < sandbox.DefaultFirstUID || uid >= sandbox.DefaultFirstUID+sandbox.DefaultUIDCount || lines[1] != lines[0] || lines[2] != lines[0] {
		t.Fatalf("the command ran as %q (stderr %q)", out.Stdout, out.Stderr)
	}
	if strings.Contains(out.Stdout, "SUASECRETSEED") || !strings.Contains(out.Stderr, "Permission denied") {
		t.Fatalf("the command read the broker's file: %+v", out)
	}
	evs := env.Events(t, run)
	var res journal.Result
	_ = json.Unmarshal(evs[3].Data, &res)
	if res.Detail["uid"] != lines[0] || res.Detail["separate_uid"] != "true" {
		t.Fatalf("outcome detail %+v", res.Detail)
	}
}

// TestNotRoot runs this test binary as an unprivileged uid, which cannot
// switch uids: strict mode answers every command UNAVAILABLE before
// deciding anything (nothing is recorded, nothing runs); report mode runs
// it as the broker's own uid and the journal says so.
func TestNotRoot(t *testing.T) {
	if os.Getenv("GATEHOUSE_PROCESS_TEST_NOT_ROOT") != "" {
		notRootChild(t)
		return
	}
	dir := openDir(t)
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "process.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil || os.WriteFile(exe, b, 0o755) != nil {
		t.Fatal(err)
	}
	const uid = 64900 // an unprivileged uid no other test of this package runs as
	cmd := exec.Command(exe, "-test.run", "^TestNotRoot$", "-test.v")
	cmd.Env = []string{"GATEHOUSE_PROCESS_TEST_NOT_ROOT=1", "PATH=/usr/bin:/bin", "TMPDIR=" + dir}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	os.Chown(dir, uid, uid)
	out, err := cmd.CombinedOutput()
	t.Logf("as uid %d:\n%s", uid, out)
	if err != nil {
		t.Fatal(err)
	}
}

func notRootChild(t *testing.T) {
	sb, rep := sandbox.Detect(context.Background(), sandbox.Config{Tiers: []sandbox.Tier{sandbox.TierUnconfined},
		WorkRoot: filepath.Join(os.TempDir(), "ws")})
	if sb.SeparateUID() || rep.Host.Err == "" {
		t.Fatalf("as uid %d the sandbox says it can switch uids: %+v", os.Getuid(), rep.Host)
	}
	const allow = "effects:\n  - name: host-shell\n    decision: allow\n    match: {sink: process}\n"
	marker := filepath.Join(os.TempDir(), "ran")
	req := func(run string) broker.EffectRequest { return touch(run, policy.OriginModel, marker) }

	strict := sinktest.Start(t, policy.ModeStrict, allow, func(testing.TB, *sinktest.Env) []broker.Sink {
		return []broker.Sink{process.New(sb, process.Config{})}
	})
	run := strict.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	r, err := strict.Agent.Effect(sinktest.Ctx(t), policy.SinkProcess, req(run))
	if err == nil && r.Error == nil || r != nil && r.Decision != nil {
		t.Fatalf("strict mode as uid %d: %v %+v", os.Getuid(), err, r)
	}
	msg := fmt.Sprint(err)
	if r != nil && r.Error != nil {
		msg = string(r.Error.Code) + " " + r.Error.Message
	}
	if !strings.Contains(msg, string(broker.CodeUnavailable)) || !strings.Contains(msg, "serve as root") {
		t.Fatalf("strict mode refusal: %s", msg)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran in strict mode")
	}
	if types := sinktest.Types(strict.Events(t, run)); len(types) != 1 {
		t.Fatalf("journal after the refusal: %v", types)
	}

	report := sinktest.Start(t, policy.ModeReport, "", func(testing.TB, *sinktest.Env) []broker.Sink {
		return []broker.Sink{process.New(sb, process.Config{AllowSameUID: true})}
	})
	run = report.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	r, err = report.Agent.Effect(sinktest.Ctx(t), policy.SinkProcess, req(run))
	if err != nil || r.Outcome == nil || r.Outcome.Status != "ok" {
		t.Fatalf("report mode: %v %+v", err, r)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the command did not run in report mode")
	}
	evs := report.Events(t, run)
	var res journal.Result
	_ = json.Unmarshal(evs[len(evs)-1].Data, &res)
	if res.Detail["separate_uid"] != "false" || res.Detail["uid"] != strconv.Itoa(os.Getuid()) {
		t.Fatalf("report-mode outcome %+v", res.Detail)
	}
}
