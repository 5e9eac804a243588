package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// TestServeOnAnExistingNATS points serve at a NATS server it did not start
// (--nats-url) and works through it with the CLI.
func TestServeOnAnExistingNATS(t *testing.T) {
	ns := existingNATS(t)
	data := t.TempDir()
	s := serve(t, data, "--nats-url", ns.ClientURL())
	if s.ep.NATSURL != ns.ClientURL() || strings.Contains(s.out.String(), "(embedded)") {
		t.Fatalf("serve did not use the given NATS:\n%s", s.out)
	}
	if _, err := os.Stat(filepath.Join(data, "nats")); !os.IsNotExist(err) {
		t.Fatalf("serve started an embedded NATS store anyway (%v)", err)
	}
	open := gh(t, "work", "open", "--nats-url", ns.ClientURL(), "--tenant", "acme", "--person", "ada")
	run := strings.TrimSpace(open.stdout)
	if open.code != 0 || !broker.ValidRunID(run) {
		t.Fatalf("work open: %d %q %q", open.code, open.stdout, open.stderr)
	}
	if r := gh(t, "effect", "output", "--nats-url", ns.ClientURL(), "--run", run, "--result", "1"); r.code != 0 {
		t.Fatalf("effect: %d %s %s", r.code, r.stdout, r.stderr)
	}
	s.stop(t)
	if v := gh(t, "verify", filepath.Join(data, "journal")); v.code != 0 {
		t.Fatalf("verify: %d %s", v.code, v.stdout)
	}
}

// TestBrokenPolicyRefusesEverythingAndSaysSo starts serve with a rules file
// that cannot be read: serve keeps running, every effect is refused with
// policy-unreadable (recorded, even in report mode), and the status page
// and log say what is wrong.
func TestBrokenPolicyRefusesEverythingAndSaysSo(t *testing.T) {
	data := t.TempDir()
	bad := filepath.Join(data, "rules.yaml")
	if err := os.WriteFile(bad, []byte("effects:\n  - name: x\n    decision: deny\n    match: {colour: red}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := ghIn(t, dashPassword+"\n", "users", "add", "olga", "--role", "operator", "--data-dir", data, "--password-stdin"); r.code != 0 {
		t.Fatalf("users add: %+v", r)
	}
	s := serve(t, data, "--policy", bad)
	open := gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada")
	run := strings.TrimSpace(open.stdout)
	r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--result", "1", "--json")
	var reply broker.EffectReply
	if err := json.Unmarshal([]byte(r.stdout), &reply); err != nil {
		t.Fatalf("%v: %q", err, r.stdout)
	}
	if r.code != 1 || reply.Decision.Refusal != "policy-unreadable" || !reply.Decision.Enforced || !reply.Decision.Recorded {
		t.Fatalf("effect under a broken policy: exit %d %+v", r.code, reply.Decision)
	}
	if len(reply.Decision.Reasons) == 0 || !strings.Contains(reply.Decision.Reasons[0].Detail, "rules.yaml") {
		t.Fatalf("the reason does not name the file: %+v", reply.Decision.Reasons)
	}
	page := signIn(t, s.ep.HTTP, "olga").get(t, "/status")
	if !strings.Contains(page, "Policy could not be read") || !strings.Contains(page, "colour") {
		t.Fatalf("status page does not say the policy is broken:\n%s", page)
	}
	s.stop(t)
	if !strings.Contains(s.out.String(), "policy could not be read") {
		t.Fatalf("serve did not log the broken policy:\n%s", s.out)
	}
	if v := gh(t, "verify", filepath.Join(data, "journal")); v.code != 0 {
		t.Fatalf("verify: %d %s", v.code, v.stdout)
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"verify", "--help"}, {"work", "--help"}, {"effect", "output", "--help"}, {"writer", "--help"}} {
		r := gh(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage") {
			t.Errorf("gatehouse %s: exit %d, stdout %q", strings.Join(args, " "), r.code, r.stdout)
		}
	}
	if r := gh(t, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "gatehouse ") {
		t.Errorf("version: %d %q", r.code, r.stdout)
	}
	if r := gh(t, "frobnicate"); r.code != 2 || !strings.Contains(r.stderr, "unknown command") {
		t.Errorf("unknown command: %d %q", r.code, r.stderr)
	}
	if r := gh(t, "serve", "--mode", "lenient"); r.code != 2 || !strings.Contains(r.stderr, "mode") {
		t.Errorf("bad mode: %d %q", r.code, r.stderr)
	}
}

// TestSandboxCheckAndCodeFromTheCLI runs the sandbox self-test as an
// operator would, then model code through serve in strict mode.
func TestSandboxCheckAndCodeFromTheCLI(t *testing.T) {
	check := gh(t, "sandbox", "check", "--json")
	var rep struct {
		Chosen   string
		Confined bool
		Tiers    []struct {
			Tier   string
			Probes []struct{ Name string }
		}
	}
	if err := json.Unmarshal([]byte(check.stdout), &rep); err != nil {
		t.Fatalf("sandbox check --json: %v\n%s%s", err, check.stdout, check.stderr)
	}
	if (check.code == 0) != rep.Confined || len(rep.Tiers) == 0 || len(rep.Tiers[0].Probes) == 0 {
		t.Fatalf("sandbox check: exit %d %+v", check.code, rep)
	}
	if r := gh(t, "sandbox", "check", "--tiers", "unconfined"); r.code != 1 || !strings.Contains(r.stdout, "unconfined") {
		t.Fatalf("forced unconfined: exit %d\n%s", r.code, r.stdout)
	}

	data := t.TempDir()
	s := serve(t, data, "--mode", "strict")
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
	r := gh(t, "effect", "code", "--data-dir", data, "--run", run, "--action", "run", "--origin", "model",
		"--params", `{"program":"python3","source":"print(6*7)"}`, "--json")
	var reply broker.EffectReply
	if err := json.Unmarshal([]byte(r.stdout), &reply); err != nil {
		t.Fatalf("%v: %s %s", err, r.stdout, r.stderr)
	}
	if rep.Confined {
		if r.code != 0 || !strings.Contains(string(reply.Result), `"stdout":"42\n"`) {
			t.Fatalf("confined model code: exit %d %s", r.code, r.stdout)
		}
	} else if reply.Decision.Refusal != "unconfined-execution" {
		t.Fatalf("unconfined model code in strict mode: %+v", reply.Decision)
	}
	s.stop(t)
	if v := gh(t, "verify", filepath.Join(data, "journal")); v.code != 0 {
		t.Fatalf("verify: %d %s", v.code, v.stdout)
	}
}

// TestServeOnRedis keeps memories and artifacts in a real redis-server and
// reads them back through the CLI.
func TestServeOnRedis(t *testing.T) {
	url, _, _ := sinktest.StartRedis(t)
	data := t.TempDir()
	s := serve(t, data, "--mode", "strict", "--redis-url", url, "--artifact-store", "redis")
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
	effect := func(sink, action, params string) broker.EffectReply {
		t.Helper()
		r := gh(t, "effect", sink, "--data-dir", data, "--run", run, "--action", action, "--params", params, "--json")
		var reply broker.EffectReply
		if err := json.Unmarshal([]byte(r.stdout), &reply); err != nil || r.code != 0 {
			t.Fatalf("%s %s: exit %d %v\n%s%s", sink, action, r.code, err, r.stdout, r.stderr)
		}
		return reply
	}
	effect("memory", "put", `{"key":"colour","value":"teal"}`)
	if got := effect("memory", "get", `{"key":"colour"}`); !strings.Contains(string(got.Result), "teal") {
		t.Fatalf("memory get: %s", got.Result)
	}
	effect("artifact", "publish", `{"key":"reports/q1.txt","content":"aGVsbG8="}`)
	if got := effect("artifact", "get", `{"key":"reports/q1.txt"}`); !strings.Contains(string(got.Result), "aGVsbG8=") {
		t.Fatalf("artifact get: %s", got.Result)
	}
	s.stop(t)
	if v := gh(t, "verify", filepath.Join(data, "journal")); v.code != 0 {
		t.Fatalf("verify: %d %s", v.code, v.stdout)
	}
}
