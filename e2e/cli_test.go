package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The CLI as the README shows it: help, usage errors, exit statuses,
// --json, keys, and what verify says, every one through the built binary.

// ghEnv is gh with extra environment variables.
func ghEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(cleanEnv(), env...)
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("gatehouse %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// want fails the test unless r exited with code and its stdout and stderr
// hold every string of in.
func want(t *testing.T, r result, code int, in ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range in {
		if !strings.Contains(r.stdout+r.stderr, s) {
			t.Fatalf("no %q in\nstdout:\n%s\nstderr:\n%s", s, r.stdout, r.stderr)
		}
	}
}

// dataKeys are the fields whose values are data, not the CLI's own
// fields: their keys are what the data holds (error codes, a sink's
// detail, a JSON Schema, an agent's result).
var dataKeys = map[string]bool{"errors": true, "detail": true, "schema": true, "examples": true, "result": true,
	"params": false, "labels": true}

var snake = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// snakeJSON fails unless out is one JSON value on one line whose field
// names are snake_case throughout (values of dataKeys aside).
func snakeJSON(t *testing.T, what, out string) {
	t.Helper()
	out = strings.TrimSuffix(out, "\n")
	if strings.Contains(out, "\n") {
		t.Fatalf("%s --json: not one line:\n%s", what, out)
	}
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%s --json: %v\n%s", what, err, out)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if !snake.MatchString(k) {
					t.Errorf("%s --json: field %s.%s is not snake_case", what, path, k)
				}
				if !dataKeys[k] {
					walk(path+"."+k, e)
				}
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		}
	}
	walk("", v)
}

// cliJSON decodes the CLI's snake_case JSON into a Go type whose fields
// carry no json tags (approval.Request): encoding/json matches names
// regardless of case, so action_digest, written actiondigest, meets
// ActionDigest.
func cliJSON(out string, v any) error {
	var raw any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		return err
	}
	var strip func(v any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			m := make(map[string]any, len(x))
			for k, e := range x {
				m[strings.ReplaceAll(k, "_", "")] = strip(e)
			}
			return m
		case []any:
			for i := range x {
				x[i] = strip(x[i])
			}
		}
		return v
	}
	b, err := json.Marshal(strip(raw))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// TestHelpOnceOnStdout: every command's --help prints its help once, on
// stdout, with examples, exit statuses and flags, and exits 0; a mistake
// prints one line saying what is wrong and which --help to read, exit 2.
func TestHelpOnceOnStdout(t *testing.T) {
	groups := map[string]bool{"work": true, "agents": true, "apps": true, "approve": true, "policy": true, "users": true,
		"sandbox": true, "mcp upstream": true}
	for _, c := range []string{"serve", "writer", "work", "work open", "work close", "effect", "effect output", "agents",
		"agents add", "agents list", "agents nats-conf", "apps", "apps add", "approve", "approve list", "approve approve", "verify",
		"checkpoint", "witness", "keygen", "policy", "policy review", "policy check", "users", "users add", "users totp",
		"evidence", "replay", "status", "bench", "sandbox", "sandbox check", "sinks", "version", "mcp", "mcp token",
		"mcp upstream", "mcp upstream list"} {
		args := append(strings.Fields(c), "--help")
		r := gh(t, args...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("gatehouse %s --help: exit %d, stderr %q", c, r.code, r.stderr)
			continue
		}
		for _, section := range []string{"Usage", "Examples:", "Exit status:"} {
			if n := strings.Count(r.stdout, section); n != 1 {
				t.Errorf("gatehouse %s --help: %q %d times:\n%s", c, section, n, r.stdout)
			}
		}
		if !groups[c] && (!strings.Contains(r.stdout, "\nFlags:\n") || !strings.Contains(r.stdout, "\n  --")) {
			t.Errorf("gatehouse %s --help lists no flags:\n%s", c, r.stdout)
		}
	}
	if r := gh(t, "effect", "--help"); !strings.Contains(r.stdout, "  --run string") || !strings.Contains(r.stdout, "  --params string") {
		t.Errorf("effect --help has no flags:\n%s", r.stdout)
	}
	if a, b := gh(t, "help", "verify"), gh(t, "verify", "--help"); a.code != 0 || a.stdout != b.stdout {
		t.Errorf("gatehouse help verify differs from verify --help")
	}
	for _, m := range []struct {
		args []string
		msg  string
	}{
		{[]string{"checkpoint", "--bogus"}, "unknown flag --bogus"},
		{[]string{"verify", "--trusted-key"}, "flag --trusted-key needs a value"},
		{[]string{"bench", "--agents", "many"}, "--agents: value"},
		{[]string{"approve", "frobnicate"}, `unknown approve command "frobnicate"`},
	} {
		r := gh(t, m.args...)
		hint := "Run 'gatehouse " + m.args[0]
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, m.msg) || !strings.Contains(r.stderr, hint) || strings.Count(r.stderr, "\n") != 2 {
			t.Errorf("gatehouse %s: exit %d\nstdout %q\nstderr %q", strings.Join(m.args, " "), r.code, r.stdout, r.stderr)
		}
	}
	// A group given no command shows its help on stderr, exit 2.
	if r := gh(t, "work"); r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "Examples:") {
		t.Errorf("gatehouse work: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	snakeJSON(t, "version", gh(t, "version", "--json").stdout)
	// agents and apps say with --json what they did and where the
	// credential is; the file is there.
	ids := t.TempDir()
	add := gh(t, "agents", "add", "jsonbot", "--json", "--data-dir", ids)
	want(t, add, 0, `"class":"agent"`, `"name":"jsonbot"`, `"done":"added"`)
	snakeJSON(t, "agents add", add.stdout)
	var added struct{ Credential string }
	must(t, json.Unmarshal([]byte(add.stdout), &added))
	if _, err := os.Stat(added.Credential); err != nil {
		t.Fatalf("agents add --json names a credential that is not there: %v", err)
	}
	want(t, gh(t, "apps", "rotate", "nope", "--json", "--data-dir", ids), 1)
	want(t, gh(t, "agents", "remove", "jsonbot", "--json", "--data-dir", ids), 0, `"done":"removed"`)
	snakeJSON(t, "sinks", gh(t, "sinks", "--json").stdout)
	if r := gh(t, "sinks", "code"); r.code != 0 || !strings.Contains(r.stdout, "program") || !strings.Contains(r.stdout, "gatehouse effect code --run RUN --action run --params") {
		t.Errorf("sinks code: %d\n%s", r.code, r.stdout)
	}
}

// TestServeFlagsFromTheEnvironment: every serve flag reads GATEHOUSE_<NAME>,
// and every value is checked before anything starts (no sandbox self-test,
// no data dir).
func TestServeFlagsFromTheEnvironment(t *testing.T) {
	keys := t.TempDir()
	want(t, gh(t, "keygen", "--out", filepath.Join(keys, "wit.key"), "--witness-name", "w.e2e"), 0, "witness key")
	data := filepath.Join(t.TempDir(), "data")
	for _, c := range []struct {
		env  []string
		args []string
		msg  string
	}{
		{[]string{"GATEHOUSE_SANDBOX_TIERS=bogus"}, nil, `unknown sandbox tier "bogus"`},
		{[]string{"GATEHOUSE_CHECKPOINT_INTERVAL=0s"}, nil, "--checkpoint-interval must be positive"},
		{[]string{"GATEHOUSE_APPROVAL_CLAIM_TIMEOUT=soon"}, nil, "$GATEHOUSE_APPROVAL_CLAIM_TIMEOUT"},
		{[]string{"GATEHOUSE_WITNESS_KEY=" + filepath.Join(keys, "wit.key")}, nil, "--witness-key"},
		{[]string{"GATEHOUSE_PREVIOUS_KEY=" + filepath.Join(keys, "absent.pub")}, nil, "--previous-key"},
		{[]string{"GATEHOUSE_AGENTS=-bad-"}, nil, "--agents"},
		{nil, []string{"--artifact-store", "bogus"}, "--artifact-store must be objectstore, dir or redis"},
		{nil, []string{"--approval-key", filepath.Join(keys, "wit.key")}, "this is a private key"},
		{nil, []string{"--providers", filepath.Join(keys, "absent.yaml")}, "--providers: provider catalogue"},
		{[]string{"GATEHOUSE_MCP_SERVERS=" + filepath.Join(keys, "wit.pub")}, nil, "--mcp-servers: mcp servers catalogue"},
		{[]string{"GATEHOUSE_MCP_APPROVAL_WAIT=-1s"}, nil, "--mcp-approval-wait must be 0"},
		{[]string{"GATEHOUSE_STREAM_MAX_MESSAGE_KB=1"}, nil, "--stream-max-message-kb must be 2 to 65536"},
		{nil, []string{"--mcp-servers", filepath.Join(keys, "absent.yaml"), "--credentials", filepath.Join(keys, "absent.yaml")}, "--credentials: credentials file"},
	} {
		r := ghEnv(t, c.env, append([]string{"serve", "--data-dir", data, "--nats-port", "-1", "--http", "127.0.0.1:0"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.msg) || strings.Contains(r.stderr, "self-test") {
			t.Errorf("%v %v: exit %d\n%s", c.env, c.args, r.code, r.stderr)
		}
		if _, err := os.Stat(data); err == nil {
			t.Fatalf("%v %v: serve made its data dir before refusing", c.env, c.args)
		}
	}
	// The environment reaches list flags too: the agent GATEHOUSE_AGENTS
	// names gets its credential, and the witness key is taken.
	s := serveWith(t, data, func(c *exec.Cmd) {
		c.Env = append(c.Env, "GATEHOUSE_AGENTS=envbot=shipped", "GATEHOUSE_WITNESS_KEY="+filepath.Join(keys, "wit.pub"),
			"GATEHOUSE_SANDBOX_TIERS=unconfined", "GATEHOUSE_CHECKPOINT_INTERVAL=1h")
	})
	if !strings.Contains(s.out.String(), "envbot") || !strings.Contains(s.out.String(), "origin shipped") {
		t.Fatalf("GATEHOUSE_AGENTS did not reach serve:\n%s", s.out)
	}
	// A second serve on the same data dir fails at once and says where the
	// first runs; one on another data dir but the same web address says
	// the address is taken.
	want(t, gh(t, "serve", "--data-dir", data, "--nats-port", "-1", "--http", "127.0.0.1:0"), 2, "a Gatehouse already runs in", "pid")
	want(t, gh(t, "serve", "--data-dir", t.TempDir(), "--nats-port", "-1", "--http", strings.TrimPrefix(s.ep.HTTP, "http://")), 2, "--http", "is taken")
	want(t, gh(t, "serve", "--data-dir", t.TempDir(), "--nats-port", "-1", "--http", "127.0.0.1:0", "--mcp-http", strings.TrimPrefix(s.ep.HTTP, "http://")), 2, "--mcp-http", "is taken")
	want(t, gh(t, "serve", "--data-dir", t.TempDir(), "--nats-port", "-1", "--http", "127.0.0.1:0", "--mcp-http", "8090"), 2, "--mcp-http 8090", "missing port")
	// Metrics operators alert on are there from the start, at 0.
	resp, err := http.Get(s.ep.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `gatehouse_journal_errors_total{type="policy.decision"} 0`) {
		t.Errorf("/metrics has no gatehouse_journal_errors_total at start:\n%s", b)
	}
	s.stop(t)
}

// TestEffectsKeysAndApprovalsAsTheREADMEShows: one key format for the
// approvals backend and the journal, effect's exit statuses and output,
// held effects approved from the CLI, status, checkpoint and what verify
// says it checked.
func TestEffectsKeysAndApprovalsAsTheREADMEShows(t *testing.T) {
	keys := t.TempDir()
	backend, logKey := filepath.Join(keys, "backend.key"), filepath.Join(keys, "log.key")
	kg := gh(t, "keygen", "--out", backend, "--json")
	want(t, kg, 0, `"public_key_file":"`+filepath.Join(keys, "backend.pub")+`"`, "--approval-key "+filepath.Join(keys, "backend.pub"))
	snakeJSON(t, "keygen", kg.stdout)
	want(t, gh(t, "keygen", "--out", logKey, "--log-origin", "e2e.example/cli"), 0, "log key     e2e.example/cli+", "--signing-key-file "+logKey)
	if b, err := os.ReadFile(backend); err != nil || !strings.HasPrefix(string(b), "-----BEGIN PRIVATE KEY-----") {
		t.Fatalf("backend.key: %q %v", b, err)
	}
	want(t, gh(t, "keygen", "--out", backend), 2, "exists")

	data := t.TempDir()
	rules := writeFile(t, data, "rules.yaml", "approvals:\n  - name: payouts\n    match: {sink: output, target: \"payout*\"}\n    roles: [reviewer]\n    assurance: password\n")
	s := serve(t, data, "--mode", "strict", "--policy", rules, "--approval-key", filepath.Join(keys, "backend.pub"),
		"--signing-key-file", logKey, "--log-origin", "e2e.example/cli", "--checkpoint-interval", "1h")
	as := func(args ...string) []string { return append(args, "--data-dir", data) }
	want(t, gh(t, as("work", "open", "--tenant", "acme", "--person", "ada", "--mandate-expires", "tomorrow")...), 2, "neither an RFC 3339 time")
	want(t, gh(t, as("work", "open", "--tenant", "acme", "--person", "ada", "--mandate-expires", "-2h")...), 2, "not in the future")
	open := gh(t, as("work", "open", "--tenant", "acme", "--person", "ada", "--json")...)
	want(t, open, 0)
	snakeJSON(t, "work open", open.stdout)
	var opened struct{ Run string }
	must(t, json.Unmarshal([]byte(open.stdout), &opened))
	run := opened.Run

	// A program that fails: allowed and carried out, exit 1, its output shown.
	prog := `{"program": "python3", "source": "print(6*7)\nimport sys; sys.exit(3)"}`
	r := gh(t, as("effect", "code", "--run", run, "--action", "run", "--params", prog)...)
	want(t, r, 1, "allowed (strict mode)", "exit code 3", "    42", "the effect was allowed and carried out, and it failed")
	want(t, gh(t, as("effect", "code", "--run", run, "--action", "run", "--params", `{"program": "sh", "source": "echo ok"}`)...), 0, "exit code 0", "    ok")
	js := gh(t, as("effect", "code", "--run", run, "--action", "run", "--params", prog, "--json")...)
	want(t, js, 1, `"exit_code":3`)
	snakeJSON(t, "effect", js.stdout)
	// A mistyped sink, a sink needing its action.
	want(t, gh(t, as("effect", "ouptut", "--run", run, "--action", "deliver")...), 2, "UNKNOWN_SINK", "this broker serves", "output", "sinks/REFERENCE.md")
	want(t, gh(t, as("effect", "ouptut", "--run", run, "--result", "1")...), 2, "UNKNOWN_SINK", "this broker serves", "output", "sinks/REFERENCE.md")
	want(t, gh(t, as("effect", "memory", "--run", run)...), 2, "--action is required for sink memory: one of delete, get, put")
	want(t, gh(t, as("effect", "memory", "--run", run, "--action", "put", "--params", `{"key": 1}`)...), 2, "BAD_REQUEST", "sinks/REFERENCE.md")
	want(t, gh(t, as("effect", "memory", "--run", run, "--action", "put", "--params", `["key", 1]`)...), 2, "--params must be a JSON object", "gatehouse sinks memory")

	// Held: exit 3 and the approval id; the backend approves from the CLI
	// with the key keygen wrote; the same effect then runs.
	want(t, gh(t, as("approve", "list")...), 0, "no approval requests")
	if r := gh(t, as("approve", "list", "--json")...); r.code != 0 || r.stdout != `{"requests":[]}`+"\n" {
		t.Fatalf("approve list --json on an empty queue: %d %q", r.code, r.stdout)
	}
	if r := gh(t, as("mcp", "upstream", "list", "--json")...); r.code != 0 || r.stdout != "[]\n" {
		t.Fatalf("mcp upstream list --json with none pinned: %d %q", r.code, r.stdout)
	}
	want(t, gh(t, as("mcp", "upstream", "list")...), 0, "no upstream MCP server pinned")
	want(t, gh(t, as("approve", "list", "--state", "pendng")...), 2, `--state "pendng" is not a state`)
	want(t, gh(t, as("approve", "approve", "ap_x", "--key", backend, "--approver", "rita", "--assurance", "sso")...), 2, `--assurance "sso"`)
	held := gh(t, as("effect", "output", "--run", run, "--status", "payout-1", "--result", "1")...)
	want(t, held, 3, "held for approval ap_")
	id := regexp.MustCompile(`held for approval (ap_[^:\s]+)`).FindStringSubmatch(held.stdout)[1]
	list := gh(t, as("approve", "list", "--json")...)
	want(t, list, 0, `"id":"`+id+`"`, `"action_digest":"sha256:`)
	snakeJSON(t, "approve list", list.stdout)
	want(t, gh(t, as("approve", "approve", id, "--key", filepath.Join(keys, "backend.pub"), "--approver", "rita", "--role", "reviewer")...), 2, "this is a public key")
	want(t, gh(t, as("approve", "approve", id, "--key", backend, "--approver", "rita", "--role", "reviewer", "--assurance", "password")...), 0, "approved")
	want(t, gh(t, as("effect", "output", "--run", run, "--status", "payout-1", "--result", "1")...), 0, "allowed (strict mode)")
	want(t, gh(t, as("approve", "list", "--state", "pending")...), 0, "no approval requests in state pending")

	// Status: the broker's mode and policy, the embedded server's figures.
	st := gh(t, as("status")...)
	want(t, st, 0, "mode strict, policy "+rules)
	if regexp.MustCompile(`connections -`).MatchString(st.stdout) {
		t.Errorf("status shows no figures for the embedded server:\n%s", st.stdout)
	}
	snakeJSON(t, "status", gh(t, as("status", "--json")...).stdout)

	// Verify with the journal's public key: every event signed.
	jdir := filepath.Join(data, "journal")
	want(t, gh(t, "verify", jdir, "--trusted-key", filepath.Join(keys, "log.pub"), "--require-signatures"), 0, "intact", "checked: signatures:", "events signed")
	// While serve writes the journal, checkpoint sends the operator to it.
	busy := gh(t, "checkpoint", "--data-dir", data, "--signing-key-file", logKey, "--log-origin", "e2e.example/cli")
	want(t, busy, 1, "curl -X POST "+s.ep.HTTP+"/checkpoint")
	// ... and what it says works: no dashboard user yet, so no sign-in.
	resp, err := http.Post(s.ep.HTTP+"/checkpoint", "text/plain", nil)
	must(t, err)
	signed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(signed), "e2e.example/cli\n") {
		t.Fatalf("the POST checkpoint told to make: %d %s", resp.StatusCode, signed)
	}
	want(t, gh(t, as("work", "close", run)...), 0)
	s.stop(t)

	cp := gh(t, "checkpoint", "--data-dir", data, "--signing-key-file", logKey, "--log-origin", "e2e.example/cli", "--json")
	want(t, cp, 0, `"origin":"e2e.example/cli"`, `"signed_by":["e2e.example/cli"]`)
	snakeJSON(t, "checkpoint", cp.stdout)
	v := gh(t, "verify", jdir, "--checkpoint", filepath.Join(jdir, "checkpoints", "latest"), "--log-key", filepath.Join(keys, "log.pub"), "--json")
	want(t, v, 0, "against checkpoint e2e.example/cli")
	snakeJSON(t, "verify", v.stdout)
	// The log key from a .pub that has none: said so.
	want(t, gh(t, "verify", jdir, "--checkpoint", filepath.Join(jdir, "checkpoints", "latest"), "--log-key", filepath.Join(keys, "backend.pub")), 2, "holds no verifier key")
}

// TestReportModeReviewReplayBenchAndBadInput: a report-mode serve whose
// policy file breaks under it (replay still reproduces the decisions made
// meanwhile), a host command the policy review says how to fix, bench
// closing its runs, and verify on what a hostile folder may hold.
func TestReportModeReviewReplayBenchAndBadInput(t *testing.T) {
	data := t.TempDir()
	pol := writeFile(t, data, "rules.yaml", rules)
	s := serve(t, data, "--policy", pol, "--stream-max-message-kb", "4")
	as := func(args ...string) []string { return append(args, "--data-dir", data) }
	run := strings.TrimSpace(gh(t, as("work", "open", "--tenant", "acme", "--person", "ada")...).stdout)
	want(t, gh(t, as("effect", "output", "--run", run, "--result", "1")...), 0, "allowed (report mode)")
	// An output larger than the stream takes is bad input: exit 2.
	want(t, gh(t, as("effect", "output", "--run", run, "--result", `"`+strings.Repeat("x", 8<<10)+`"`)...), 2, "TOO_LARGE")
	// No signing key: POST /checkpoint says why there are no checkpoints,
	// and so does the checkpoint command that would send people there.
	resp, err := http.Post(s.ep.HTTP+"/checkpoint", "text/plain", nil)
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "signs no checkpoints") || !strings.Contains(string(body), "--signing-key-file") {
		t.Fatalf("POST /checkpoint without a signing key: %d %s", resp.StatusCode, body)
	}
	keys := t.TempDir()
	want(t, gh(t, "keygen", "--out", filepath.Join(keys, "log.key"), "--log-origin", "e2e.example/report"), 0)
	want(t, gh(t, "checkpoint", "--data-dir", data, "--signing-key-file", filepath.Join(keys, "log.key"), "--log-origin", "e2e.example/report"), 1,
		"writes this journal without a signing key", "restart it with --signing-key-file")
	want(t, gh(t, as("effect", "process", "--run", run, "--params", `{"argv": ["/usr/bin/true"]}`)...), 0, "unconfined-execution", "exit code 0")
	b := gh(t, as("bench", "--agents", "2", "--requests", "3", "--tenant", "benchclose", "--json")...)
	want(t, b, 0)
	snakeJSON(t, "bench", b.stdout)

	// The policy file breaks; after SIGHUP every effect is refused and
	// status says why.
	must(t, os.WriteFile(pol, []byte("rules: [\n"), 0o600))
	must(t, s.cmd.Process.Signal(syscall.SIGHUP))
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := gh(t, as("status")...)
		if st.code == 1 && strings.Contains(st.stdout, "cannot read its policy") && strings.Contains(st.stdout, "policy UNREADABLE") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status does not say the policy is unreadable:\n%s", st.stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	want(t, gh(t, as("effect", "output", "--run", run, "--result", "2")...), 1, "policy-unreadable")
	want(t, gh(t, as("work", "close", run)...), 0)
	s.stop(t)

	jdir := filepath.Join(data, "journal")
	rp := gh(t, "replay", "--data-dir", data, "--json")
	want(t, rp, 0, `"status":"reproduced"`)
	snakeJSON(t, "replay", rp.stdout)
	rv := gh(t, "policy", "review", jdir)
	want(t, rv, 1, "unconfined-execution", "--origin shipped")
	if strings.Contains(rv.stdout, "bubblewrap") {
		t.Errorf("the review of a host command suggests bubblewrap:\n%s", rv.stdout)
	}
	snakeJSON(t, "policy review", gh(t, "policy", "review", jdir, "--json").stdout)
	if r := gh(t, "policy", "review", filepath.Join(data, "nope")); r.code != 2 || !strings.HasPrefix(r.stderr, "gatehouse: policy review: ") || !strings.Contains(r.stderr, "is not a journal directory") {
		t.Errorf("policy review of no journal: %d %q", r.code, r.stderr)
	}
	// bench closed every run it opened.
	ents, err := os.ReadDir(filepath.Join(jdir, "runs"))
	must(t, err)
	benchRuns := 0
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(jdir, "runs", e.Name()))
		must(t, err)
		if strings.Contains(string(b), `"tenant":"benchclose"`) {
			benchRuns++
			if !strings.Contains(string(b), `"type":"run.close"`) {
				t.Errorf("bench left run %s open", e.Name())
			}
		}
	}
	if benchRuns != 2 {
		t.Fatalf("bench opened %d runs, want 2", benchRuns)
	}

	// A hostile folder: verify answers at once, whatever it holds.
	want(t, gh(t, "checkpoint", "--journal-dir", jdir, "--signing-key-file", filepath.Join(keys, "log.key"), "--log-origin", "e2e.example/report"), 0)
	logPub := filepath.Join(keys, "log.pub")
	export := filepath.Join(t.TempDir(), "ev")
	want(t, gh(t, "evidence", "--data-dir", data, "acme/", "--export", export), 0)
	runFile := filepath.Join("runs", run+".jsonl")
	hostile := func(file string, change func(path string)) string {
		dir := filepath.Join(t.TempDir(), "journal")
		must(t, os.CopyFS(dir, os.DirFS(jdir)))
		change(filepath.Join(dir, file))
		return dir
	}
	fifo := func(p string) { must(t, os.Remove(p)); must(t, syscall.Mkfifo(p, 0o600)) }
	devZero := func(p string) { must(t, os.Remove(p)); must(t, os.Symlink("/dev/zero", p)) }
	dir := hostile("head.jsonl", fifo)
	want(t, gh(t, "verify", dir, "--checkpoint", filepath.Join(dir, "checkpoints", "latest"), "--log-key", logPub), 1, "named pipe")
	want(t, gh(t, "verify", dir), 1, "head-log-missing", "not checked: the head log's chain")
	dir = hostile("head.jsonl", devZero)
	want(t, gh(t, "verify", dir, "--checkpoint", filepath.Join(dir, "checkpoints", "latest"), "--log-key", logPub), 1, "not a regular file")
	ev := filepath.Join(t.TempDir(), "ev")
	must(t, os.CopyFS(ev, os.DirFS(export)))
	devZero(filepath.Join(ev, runFile))
	want(t, gh(t, "verify", "--export", ev), 1, "TAMPERING FOUND")
	dir = hostile(runFile, func(p string) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		_, err = f.Write(bytes.Repeat([]byte("x"), 5<<20))
		must(t, err)
		must(t, f.Close())
	})
	want(t, gh(t, "verify", dir), 1, "malformed-line", "more than a journal line may hold")
	dir = hostile(runFile, func(p string) {
		b, err := os.ReadFile(p)
		must(t, err)
		lines := strings.SplitAfter(string(b), "\n")
		lines[1] = "not an event\n"
		must(t, os.WriteFile(p, []byte(strings.Join(lines, "")), 0o600))
	})
	if r := gh(t, "verify", dir); r.code != 1 || !strings.Contains(r.stdout, "malformed-line") || strings.Contains(r.stdout, "missing") {
		t.Errorf("a malformed line: exit %d\n%s", r.code, r.stdout)
	}

	// SIGTERM ends a verify waiting on a witness that never answers, at
	// once, with exit status 130.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	cmd := exec.Command(bin, "verify", jdir, "--log-key", logPub, "--witness", "http://"+ln.Addr().String())
	cmd.Env = cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("verify never asked the witness:\n%s", out.String())
	}
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(out.String(), "interrupted") {
		t.Fatalf("verify after SIGTERM: %v\n%s", err, out.String())
	}
}

// TestSandboxCheckAll: sandbox check stops at the first tier that proves
// confined, and says so; --all tests every tier.
func TestSandboxCheckAll(t *testing.T) {
	if r := gh(t, "sandbox", "check", "--help"); !strings.Contains(r.stdout, "until one proves confined") {
		t.Fatalf("sandbox check --help:\n%s", r.stdout)
	}
	r := gh(t, "sandbox", "check", "--all", "--json")
	var rep struct {
		Chosen string
		Tiers  []struct {
			Tier     string
			Confined bool
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("sandbox check --all --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	snakeJSON(t, "sandbox check", r.stdout)
	if len(rep.Tiers) < 3 {
		t.Fatalf("--all tested %d tiers: %+v", len(rep.Tiers), rep.Tiers)
	}
	if r := gh(t, "sandbox", "check", "--all"); !strings.Contains(r.stdout, "(chosen: the code sink runs here)") {
		t.Fatalf("sandbox check --all:\n%s", r.stdout)
	}
}
