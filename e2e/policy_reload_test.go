package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
)

// TestPolicyReload changes serve's policy file under it: SIGHUP puts the
// new rules in force; a file that cannot be read refuses everything with
// policy-unreadable and the status page says so; the status page's
// "Reload policy" button (operator, CSRF) puts the fixed file back.
func TestPolicyReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gatehouse serve")
	}
	data := t.TempDir()
	pol := filepath.Join(data, "rules.yaml")
	must(t, os.WriteFile(pol, []byte("effects:\n  - name: nothing\n    decision: deny\n    match: {sink: output, target: \"never*\"}\n"), 0o600))
	if r := ghIn(t, dashPassword+"\n", "users", "add", "olga", "--role", "operator", "--data-dir", data, "--password-stdin"); r.code != 0 {
		t.Fatalf("users add: %+v", r)
	}
	s := serve(t, data, "--mode", "strict", "--policy", pol)
	defer s.stop(t)
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
	if !broker.ValidRunID(run) {
		t.Fatalf("work open printed %q", run)
	}
	propose := func() (broker.EffectReply, int) {
		r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--status", "leak-1", "--result", "1", "--json")
		var reply broker.EffectReply
		if err := json.Unmarshal([]byte(r.stdout), &reply); err != nil || reply.Decision == nil {
			t.Fatalf("effect: %v %q %q", err, r.stdout, r.stderr)
		}
		return reply, r.code
	}
	// until proposes until the decision is what want accepts: the reload
	// is asynchronous to the signal.
	until := func(what string, want func(broker.EffectReply, int) bool) broker.EffectReply {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			reply, code := propose()
			if want(reply, code) {
				return reply
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: last decision %+v (exit %d)", what, reply.Decision, code)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if reply, code := propose(); code != 0 || reply.Decision.Refusal != "" {
		t.Fatalf("before the change: exit %d %+v", code, reply.Decision)
	}
	op := signIn(t, s.ep.HTTP, "olga")
	digest0 := op.status(t).PolicyDigest

	// The file now denies leaks; SIGHUP puts it in force.
	must(t, os.WriteFile(pol, []byte(rules), 0o600))
	must(t, s.cmd.Process.Signal(syscall.SIGHUP))
	until("the new rule after SIGHUP", func(r broker.EffectReply, code int) bool {
		return code == 1 && r.Decision.Rule == "no-leaks" && r.Decision.Enforced
	})
	if st := op.status(t); st.PolicyDigest == digest0 || st.PolicyDigest == "" || st.PolicyError != "" {
		t.Fatalf("status after reload: digest %q (was %q), error %q", st.PolicyDigest, digest0, st.PolicyError)
	}

	// A broken file: fail closed, and say so in red.
	must(t, os.WriteFile(pol, []byte("effects:\n  - name: x\n    decision: deny\n    match: {colour: red}\n"), 0o600))
	must(t, s.cmd.Process.Signal(syscall.SIGHUP))
	until("policy-unreadable after a broken file", func(r broker.EffectReply, code int) bool {
		return code == 1 && r.Decision.Refusal == "policy-unreadable" && r.Decision.Enforced
	})
	page := op.get(t, "/status")
	if !strings.Contains(page, `class="alert"`) || !strings.Contains(page, "Policy could not be read") || !strings.Contains(page, "colour") {
		t.Fatalf("the status page does not say the policy is broken:\n%s", page)
	}

	// Fixed, and reloaded from the dashboard.
	must(t, os.WriteFile(pol, []byte(rules), 0o600))
	tok := csrfField.FindStringSubmatch(page)
	if tok == nil || !strings.Contains(page, `data-testid="reload-policy"`) {
		t.Fatalf("no reload button on the operator's status page:\n%s", page)
	}
	code, after := op.post(t, "/status/reload-policy", url.Values{"_csrf": {tok[1]}})
	if code != http.StatusOK || strings.Contains(after, "Policy could not be read") {
		t.Fatalf("reload from the dashboard: %d\n%s", code, after)
	}
	if reply, code := propose(); code != 1 || reply.Decision.Rule != "no-leaks" {
		t.Fatalf("after the dashboard reload: exit %d %+v", code, reply.Decision)
	}
}

// session is a signed-in HTTP client of the dashboard.
type session struct {
	base string
	hc   *http.Client
}

// signIn signs name in with dashPassword, as the login form does.
func signIn(t *testing.T, base, name string) *session {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	s := &session{base: base, hc: &http.Client{Jar: jar}}
	m := csrfField.FindStringSubmatch(s.get(t, "/login"))
	if m == nil {
		t.Fatal("no CSRF token on /login")
	}
	code, body := s.post(t, "/login", url.Values{"_csrf": {m[1]}, "name": {name}, "password": {dashPassword}})
	if code != http.StatusOK || strings.Contains(body, "Wrong name") {
		t.Fatalf("sign in %s: %d\n%s", name, code, body)
	}
	return s
}

func (s *session) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := s.hc.Get(s.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", path, resp.Status, b)
	}
	return string(b)
}

func (s *session) post(t *testing.T, path string, form url.Values) (int, string) {
	t.Helper()
	resp, err := s.hc.PostForm(s.base+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// status reads /api/status, which needs an operator.
func (s *session) status(t *testing.T) struct{ PolicyDigest, PolicyError string } {
	t.Helper()
	var st struct{ PolicyDigest, PolicyError string }
	if err := json.Unmarshal([]byte(s.get(t, "/api/status")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestGroundingReload changes serve's grounding rules file under it:
// SIGHUP puts the new rules in force for provider calls (and keeps their
// source, so replay reproduces decisions made under them); a file that
// cannot be read refuses every provider call, as at start; the
// dashboard's "Reload policy" puts the fixed file back.
func TestGroundingReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gatehouse serve")
	}
	e := &erp{}
	srv := httptest.NewServer(e)
	defer srv.Close()
	data := t.TempDir()
	if r := ghIn(t, dashPassword+"\n", "users", "add", "olga", "--role", "operator", "--data-dir", data, "--password-stdin"); r.code != 0 {
		t.Fatalf("users add: %+v", r)
	}
	files := erpFiles(t, data, srv.URL, "tok-ada")
	groundingFile := filepath.Join(data, "grounding.yaml")
	original, err := os.ReadFile(groundingFile)
	must(t, err)
	s := serve(t, data, append([]string{"--mode", "strict", "--journal-capture", "full"}, files...)...)
	open := func() string {
		run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--agent", erpRunner).stdout)
		if !broker.ValidRunID(run) {
			t.Fatalf("work open printed %q", run)
		}
		return run
	}
	read := func(run string) {
		for _, path := range []string{"/invoices/INV-7", "/suppliers/S-1"} {
			if r, code := callProvider(t, run, `{"provider":"erp","method":"GET","path":"`+path+`","atom":"erp.read"}`, "--data-dir", data); code != 0 || r.Outcome.Status != "ok" {
				t.Fatalf("GET %s: exit %d %+v %+v", path, code, r.Decision, r.Outcome)
			}
		}
	}
	honest := payment("GB82WEST12345698765432")
	// until pays until the decision is what want accepts: the reload is
	// asynchronous to the signal.
	until := func(what, run string, want func(broker.EffectReply, int) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			reply, code := callProvider(t, run, honest, "--data-dir", data)
			if want(reply, code) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: last decision %+v (exit %d)", what, reply.Decision, code)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	runA := open()
	read(runA)
	if r, code := callProvider(t, runA, honest, "--data-dir", data); code != 0 || r.Outcome.Status != "ok" {
		t.Fatalf("honest payment under the original rules: exit %d %+v", code, r.Decision)
	}
	// The operator narrows payments to approved accounts; SIGHUP.
	narrowed := strings.Replace(string(original), "name: supplier-payment", "name: approved-accounts", 1) +
		"      - {field: request.json.iban, one_of: [GB33BUKB20201555555555], as: iban}\n"
	narrowed = strings.Replace(narrowed, "    other_fields: deny\n", "", 1) + "    other_fields: deny\n"
	must(t, os.WriteFile(groundingFile, []byte(narrowed), 0o600))
	must(t, s.cmd.Process.Signal(syscall.SIGHUP))
	until("the narrowed grounding rule after SIGHUP", runA, func(r broker.EffectReply, code int) bool {
		return code == 1 && r.Decision.Refusal == "ungrounded" && r.Decision.Rule == "grounding:approved-accounts"
	})

	// A broken file: every provider call is refused, as at start.
	runB := open()
	must(t, os.WriteFile(groundingFile, []byte("grounding:\n  - name: x\n    colour: red\n"), 0o600))
	must(t, s.cmd.Process.Signal(syscall.SIGHUP))
	until("grounding:unreadable after a broken file", runB, func(r broker.EffectReply, code int) bool {
		return code == 1 && r.Decision.Rule == "grounding:unreadable" && r.Decision.Enforced
	})
	if strings.Contains(s.out.String(), "tok-ada") {
		t.Fatal("the credential reached serve's log")
	}

	// The operator sees why on the status page, in red, and in /api/status.
	op := signIn(t, s.ep.HTTP, "olga")
	if page := op.get(t, "/status"); !strings.Contains(page, `data-testid="grounding-error"`) || !strings.Contains(page, "colour") {
		t.Fatalf("the status page does not show the unreadable grounding rules:\n%s", page)
	}
	var st struct{ GroundingError string }
	if err := json.Unmarshal([]byte(op.get(t, "/api/status")), &st); err != nil || !strings.Contains(st.GroundingError, "colour") {
		t.Fatalf("/api/status GroundingError %q (%v)", st.GroundingError, err)
	}

	// Fixed (the original rules), and reloaded from the dashboard.
	must(t, os.WriteFile(groundingFile, original, 0o600))
	tok := csrfField.FindStringSubmatch(op.get(t, "/status"))
	if tok == nil {
		t.Fatal("no CSRF token on the status page")
	}
	if code, _ := op.post(t, "/status/reload-policy", url.Values{"_csrf": {tok[1]}}); code != http.StatusOK {
		t.Fatalf("reload from the dashboard: %d", code)
	}
	if page := op.get(t, "/status"); strings.Contains(page, `data-testid="grounding-error"`) {
		t.Fatalf("the status page still shows the grounding rules unreadable after a good reload:\n%s", page)
	}
	read(runB)
	if r, code := callProvider(t, runB, honest, "--data-dir", data); code != 0 || r.Outcome.Status != "ok" {
		t.Fatalf("honest payment after the dashboard reload: exit %d %+v", code, r.Decision)
	}
	if got := e.paid(); len(got) != 2 {
		t.Fatalf("the ERP was paid %q, want the two payments allowed", got)
	}

	// Run A was decided under two grounding rules files; both sources are
	// kept, so replay reproduces it.
	s.stop(t)
	if rp := gh(t, "replay", "--data-dir", data, runA); rp.code != 0 || !strings.Contains(rp.stdout, "reproduced") {
		t.Fatalf("replay of the run decided across the reload: %d\n%s%s", rp.code, rp.stdout, rp.stderr)
	}
}
