package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
)

const rules = `
effects:
  - name: no-leaks
    decision: deny
    match: {sink: output, target: "leak*"}
`

// TestServeAsAUserWould runs the binary the way the README does: serve,
// open work, propose allowed and refused effects from the CLI, look at the
// status page and metrics, stop with Ctrl-C, verify the journal, tamper
// with it and see verify catch it.
func TestServeAsAUserWould(t *testing.T) {
	data := t.TempDir()
	policyFile := filepath.Join(data, "rules.yaml")
	if err := os.WriteFile(policyFile, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	s := serve(t, data, "--mode", "strict", "--policy", policyFile)
	if !strings.Contains(s.out.String(), "Gatehouse") {
		t.Fatalf("serve printed nothing useful:\n%s", s.out)
	}

	open := gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--scope", "reports", "--json")
	if open.code != 0 {
		t.Fatalf("work open: %d %s %s", open.code, open.stdout, open.stderr)
	}
	var opened struct{ Run string }
	if err := json.Unmarshal([]byte(open.stdout), &opened); err != nil || !broker.ValidRunID(opened.Run) {
		t.Fatalf("work open printed %q", open.stdout)
	}
	run := opened.Run

	ok := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--result", `{"rows":3}`)
	if ok.code != 0 || !strings.Contains(ok.stdout, "allowed (strict mode)") {
		t.Fatalf("allowed effect: exit %d\n%s%s", ok.code, ok.stdout, ok.stderr)
	}
	refused := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--status", "leak-everything", "--result", `"x"`, "--json")
	if refused.code != 1 {
		t.Fatalf("refused effect exited %d\n%s%s", refused.code, refused.stdout, refused.stderr)
	}
	var reply broker.EffectReply
	if err := json.Unmarshal([]byte(refused.stdout), &reply); err != nil {
		t.Fatalf("--json printed %q: %v", refused.stdout, err)
	}
	if reply.Decision.Outcome != journal.OutcomeRefused || reply.Decision.Rule != "no-leaks" || !reply.Decision.Enforced || reply.Outcome != nil {
		t.Fatalf("refused reply = %+v", reply.Decision)
	}

	// The mandate holds for the person: an effect outside it is refused.
	open2 := gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "bob", "--mandate-systems", "erp")
	run2 := strings.TrimSpace(open2.stdout)
	outside := gh(t, "effect", "output", "--data-dir", data, "--run", run2, "--result", "1")
	if outside.code != 1 || !strings.Contains(outside.stdout, "outside-mandate") {
		t.Fatalf("outside mandate: exit %d\n%s", outside.code, outside.stdout)
	}

	// Bad usage is exit status 2 with a message.
	if r := gh(t, "effect", "output", "--data-dir", data); r.code != 2 || !strings.Contains(r.stderr, "--run") {
		t.Fatalf("missing --run: exit %d %q", r.code, r.stderr)
	}
	if r := gh(t, "work", "close", "--data-dir", data, run); r.code != 0 {
		t.Fatalf("work close: %d %s", r.code, r.stderr)
	}
	if r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--result", "1"); r.code != 1 || !strings.Contains(r.stderr, "RUN_CLOSED") {
		t.Fatalf("effect on closed run: %d %q", r.code, r.stderr)
	}

	// A new user opens the first-run link serve printed, creates the admin,
	// and lands on the status page, which says strict mode.
	if st := firstRun(t, s); !strings.Contains(st, `<td data-testid="mode">strict</td>`) || !strings.Contains(st, "rules.yaml") || strings.Contains(st, "could not be read") {
		t.Fatalf("the status page after setup does not show the mode and policy:\n%s", st)
	}
	// /api/status names the NATS URL and file paths: not for anonymous
	// callers once users exist (health, readiness and metrics stay open).
	resp, err := http.Get(s.ep.HTTP + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous GET /api/status: %s", resp.Status)
	}
	for _, tc := range []struct{ path, want string }{
		{"/healthz", "ok"},
		{"/readyz", "ready"},
		{"/metrics", `gatehouse_decisions_total{enforced="true",outcome="refused",rule="no-leaks",sink="output"} 1`},
		{"/metrics", "gatehouse_journal_events_written_total"},
		{"/metrics", "gatehouse_journal_pending"},
	} {
		body := get(t, s.ep.HTTP+tc.path)
		if !strings.Contains(body, tc.want) {
			t.Fatalf("GET %s: %q not in\n%s", tc.path, tc.want, body)
		}
	}

	s.stop(t)

	v := gh(t, "verify", filepath.Join(data, "journal"))
	if v.code != 0 || !strings.Contains(v.stdout, "intact") {
		t.Fatalf("verify: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	vj := gh(t, "verify", "--json", filepath.Join(data, "journal"))
	var rep journal.Report
	if err := json.Unmarshal([]byte(vj.stdout), &rep); err != nil || !rep.OK {
		t.Fatalf("verify --json: %v %s", err, vj.stdout)
	}
	// 2 runs: open, decision+attempt+outcome, decision, close; open, decision.
	if rep.Runs != 2 || rep.Events != 8 {
		t.Fatalf("verify saw %d runs and %d events, want 2 and 8", rep.Runs, rep.Events)
	}

	// Edit one byte of the refused decision: verify names the run.
	runFile := filepath.Join(data, "journal", "runs", run+".jsonl")
	b, err := os.ReadFile(runFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(runFile, []byte(strings.Replace(string(b), `"refused"`, `"allowed"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := gh(t, "verify", filepath.Join(data, "journal"))
	if bad.code != 1 || !strings.Contains(bad.stdout, run) || !strings.Contains(bad.stdout, "TAMPERING") {
		t.Fatalf("tampered verify: exit %d\n%s", bad.code, bad.stdout)
	}
	if r := gh(t, "verify", filepath.Join(data, "nope")); r.code != 2 {
		t.Fatalf("verify of a missing dir exited %d", r.code)
	}
}

var (
	setupLink = regexp.MustCompile(`http://\S+/setup\?token=[A-Za-z0-9_-]+`)
	csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)
)

// firstRun does what a new user of a fresh serve does in a browser: / asks
// them to sign in and says no user exists yet; the setup link serve printed
// makes the first admin (once) and opens the status page, whose HTML it
// returns.
func firstRun(t *testing.T, s *server) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	fetch := func(req *http.Request) (int, string) {
		t.Helper()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	getReq := func(u string) *http.Request { r, _ := http.NewRequest(http.MethodGet, u, nil); return r }

	if code, body := fetch(getReq(s.ep.HTTP + "/")); code != http.StatusOK || !strings.Contains(body, `data-testid="setup-howto"`) {
		t.Fatalf("GET / on a fresh serve: %d\n%s", code, body)
	}
	link := setupLink.FindString(s.out.String())
	if link == "" {
		t.Fatalf("serve printed no setup link:\n%s", s.out)
	}
	code, form := fetch(getReq(link))
	m := csrfField.FindStringSubmatch(form)
	if code != http.StatusOK || m == nil {
		t.Fatalf("GET the setup link: %d\n%s", code, form)
	}
	u, _ := url.Parse(link)
	post, _ := http.NewRequest(http.MethodPost, s.ep.HTTP+"/setup", strings.NewReader(url.Values{
		"_csrf": {m[1]}, "token": {u.Query().Get("token")}, "name": {"admin"}, "password": {"correct horse battery"}}.Encode()))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	code, status := fetch(post)
	if code != http.StatusOK || !strings.Contains(status, `data-testid="mode"`) {
		t.Fatalf("POST /setup: %d\n%s", code, status)
	}
	if code, _ := fetch(getReq(link)); code != http.StatusNotFound {
		t.Fatalf("the setup link still works after setup: %d", code)
	}
	return status
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}
