package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
)

// mcpFiles writes the rules (a deny rule, an approvals rule, bob's card)
// and the backend's key pair for approving; it returns serve's flags and
// the private key file.
func mcpFiles(t *testing.T, dir string, extra string) ([]string, string) {
	t.Helper()
	write := inDir(t, dir)
	pub, key := backendKey(t, write)
	return []string{"--mode", "strict", "--agents", "bob", "--approval-key", pub,
		"--policy", write("rules.yaml", `
effects:
  - {name: no-leaks, decision: deny, match: {sink: output, target: "leak*"}}
approvals:
  - name: releases
    match: {sink: output, target: "release*"}
    roles: [reviewer]
agents:
  - name: bob
    allowed_tools: ["output.*", "memory.*", "artifact.*"`+extra+`]
    blocked_tools: ["memory.delete", "*/delete_note"]
`)}, key
}

// mcpSession is an MCP client session from the official SDK, with the
// progress notifications it received.
type mcpSession struct {
	*mcp.ClientSession
	mu       sync.Mutex
	progress []string
}

func newMCPClient(s *mcpSession) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			s.mu.Lock()
			s.progress = append(s.progress, r.Params.Message)
			s.mu.Unlock()
		},
	})
}

func (s *mcpSession) progressed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.progress)
}

// stdioSession launches `gatehouse mcp` as an agent's MCP client does.
func stdioSession(t *testing.T, ctx context.Context, data, run string) *mcpSession {
	t.Helper()
	s := &mcpSession{}
	cmd := exec.Command(bin, "mcp", "--run", run, "--agent", "bob", "--data-dir", data)
	cmd.Env = cleanEnv()
	cmd.Stderr = os.Stderr
	cs, err := newMCPClient(s).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	s.ClientSession = cs
	return s
}

func toolNames(t *testing.T, ctx context.Context, s *mcpSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func replyOf(t *testing.T, r *mcp.CallToolResult) broker.EffectReply {
	t.Helper()
	var rep broker.EffectReply
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return rep
}

// dashboardApprover signs rita (a reviewer, see mcpUsers) in to serve's
// dashboard and returns what approves a request there, as her click does:
// the approvals page's form, with its CSRF token.
func dashboardApprover(t *testing.T, srv *server) func(id string) {
	rita := signIn(t, srv.ep.HTTP, "rita")
	return func(id string) {
		t.Helper()
		tok := csrfField.FindStringSubmatch(rita.get(t, "/approvals"))
		if tok == nil {
			t.Fatal("no CSRF token on /approvals")
		}
		if code, body := rita.post(t, "/approvals/"+id+"/decide", url.Values{"_csrf": {tok[1]}, "decision": {"approve"}, "reason": {"notes read"}}); code != http.StatusOK || !strings.Contains(body, "approved") {
			t.Fatalf("approve %s in the dashboard: %d\n%s", id, code, body)
		}
	}
}

// mcpUsers adds the dashboard's reviewer, rita.
func mcpUsers(t *testing.T, data string) {
	if r := ghIn(t, dashPassword+"\n", "users", "add", "rita", "--role", "reviewer", "--data-dir", data, "--password-stdin"); r.code != 0 {
		t.Fatalf("users add rita: %+v", r)
	}
}

// exerciseMCP runs the user story on one session: tools listed by policy,
// an output delivered, a deny rule refusing, an approval rule holding a
// call that, waited on, runs once a reviewer approved it in the dashboard.
func exerciseMCP(t *testing.T, ctx context.Context, s *mcpSession, data string, approve func(id string)) {
	t.Helper()
	tools := toolNames(t, ctx, s)
	for _, want := range []string{"output_deliver", "memory_put", "memory_get", "artifact_publish"} {
		if tools[want] == nil {
			t.Errorf("tools/list lacks %s; got %v", want, mapsKeys(tools))
		}
	}
	for _, hidden := range []string{"memory_delete", "code_run", "process_exec", "browser_goto"} {
		if tools[hidden] != nil {
			t.Errorf("tools/list offers %s, which bob's card does not allow", hidden)
		}
	}
	if d := tools["output_deliver"]; d != nil {
		sch, _ := json.Marshal(d.InputSchema)
		if !strings.Contains(string(sch), `"status"`) || !strings.Contains(string(sch), `"additionalProperties":false`) || d.Description == "" {
			t.Errorf("output_deliver: schema %s, description %q", sch, d.Description)
		}
	}

	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "output_deliver", Arguments: map[string]any{"status": "ok", "result": map[string]int{"rows": 3}}})
	if err != nil || res.IsError {
		t.Fatalf("deliver: %v %s", err, textOf(res))
	}
	if rep := replyOf(t, res); rep.Decision.Outcome != "allowed" || rep.Outcome == nil || rep.Outcome.Status != "ok" || !rep.Decision.Recorded {
		t.Fatalf("deliver reply: %+v", rep)
	}

	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "output_deliver", Arguments: map[string]any{"status": "leak-all", "result": "secret-payload-xyz"}})
	if err != nil || !res.IsError {
		t.Fatalf("denied deliver: %v %+v", err, res)
	}
	if txt := textOf(res); !strings.Contains(txt, "deployment-rule") || !strings.Contains(txt, "no-leaks") || !strings.Contains(txt, "What to do") {
		t.Fatalf("refusal text: %s", txt)
	}

	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "output_deliver", Arguments: map[string]any{"status": "ok", "extra": 1}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "BAD_REQUEST") {
		t.Fatalf("unknown argument: %v %s", err, textOf(res))
	}

	// Held without a progress token: the approval id comes back at once.
	args := map[string]any{"status": "release-v1", "result": "release-notes-xyz"}
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "output_deliver", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("held deliver: %v %s", err, textOf(res))
	}
	held := replyOf(t, res)
	if held.Decision.Outcome != "held" || held.Decision.Approval == "" || !strings.Contains(textOf(res), held.Decision.Approval) {
		t.Fatalf("held reply: %+v %s", held.Decision, textOf(res))
	}
	id := held.Decision.Approval

	// The same call with a progress token waits; a reviewer approves it in
	// the dashboard while it does.
	type called struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan called, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "output_deliver", Arguments: args}
		p.SetProgressToken("wait-1")
		res, err := s.CallTool(ctx, p)
		done <- called{res, err}
	}()
	for len(s.progressed()) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	approve(id)
	c := <-done
	if res = c.res; c.err != nil || res.IsError {
		t.Fatalf("waited deliver: %v %s", c.err, textOf(res))
	}
	ran := replyOf(t, res)
	if ran.Decision.Outcome != "allowed" || ran.Decision.Approval != id || ran.Outcome == nil || ran.Outcome.Status != "ok" {
		t.Fatalf("approved deliver: %+v %+v", ran.Decision, ran.Outcome)
	}
	if pr := s.progressed(); len(pr) == 0 || !strings.Contains(pr[0], id) {
		t.Fatalf("progress notifications %q", pr)
	}
	if got := approvalShow(t, data, id); got.State != approval.StateSettled {
		t.Fatalf("approval after the run: %s", got.State)
	}
}

func mapsKeys[M ~map[string]V, V any](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ghNoT runs the binary outside the test goroutine (no t.Fatal).
func ghNoT(args ...string) result {
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		r.code = -1
	}
	return r
}

// checkJournal stops serve and checks the run's journal: every decision
// the story made is there, and verify passes.
func checkJournal(t *testing.T, s *server, data, run string) {
	t.Helper()
	s.stop(t)
	j := readRun(t, data, run)
	for _, want := range []string{`"refusal":"deployment-rule"`, `"rule":"no-leaks"`, `"outcome":"held"`, `"type":"approval.decision"`, `"type":"approval.settle"`} {
		if !strings.Contains(j, want) {
			t.Errorf("journal of %s lacks %s", run, want)
		}
	}
	if strings.Contains(j, "secret-payload-xyz") || strings.Contains(j, "release-notes-xyz") {
		t.Errorf("journal holds content")
	}
	if r := gh(t, "verify", filepath.Join(data, "journal")); r.code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestMCPStdio: an MCP client from the official SDK launches `gatehouse
// mcp` with bob's own credential, lists the tools bob's card allows,
// delivers an output, is refused by a deny rule, is held by an approval
// rule and gets the outcome once a reviewer approved; verify passes.
func TestMCPStdio(t *testing.T) {
	data := t.TempDir()
	flags, _ := mcpFiles(t, data, "")
	mcpUsers(t, data)
	s := serve(t, data, flags...)
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--agent", "bob").stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess := stdioSession(t, ctx, data, run)
	exerciseMCP(t, ctx, sess, data, dashboardApprover(t, s))
	_ = sess.Close()
	checkJournal(t, s, data, run)
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func agentToken(t *testing.T, data, agent string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "mcp", "tokens", agent+".token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func httpSession(ctx context.Context, endpoint, token string) (*mcpSession, error) {
	s := &mcpSession{}
	tr := &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}}
	cs, err := newMCPClient(s).Connect(ctx, tr, nil)
	if err != nil {
		return nil, err
	}
	s.ClientSession = cs
	return s, nil
}

// TestMCPStreamableHTTP: the same story over serve's streamable HTTP
// transport, the session authenticated by bob's token; alice's token, no
// token, and a run not opened for bob open no session.
func TestMCPStreamableHTTP(t *testing.T) {
	data := t.TempDir()
	flags, key := mcpFiles(t, data, "")
	flags = append(flags, "--agents", "alice", "--mcp-http", "127.0.0.1:0")
	s := serve(t, data, flags...)
	// Here the reviewer approves through the signed approvals API (the
	// backend's key), as an application's own review screen would.
	approve := func(id string) {
		if r := gh(t, "approve", "approve", id, "--data-dir", data, "--key", key, "--approver", "rita", "--role", "reviewer", "--reason", "notes read"); r.code != 0 {
			t.Fatalf("approve: exit %d %s %s", r.code, r.stdout, r.stderr)
		}
	}
	if s.ep.MCP == "" {
		t.Fatalf("endpoints.json names no MCP endpoint:\n%s", s.out)
	}
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--agent", "bob").stdout)
	other := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for name, c := range map[string]struct{ run, token string }{
		"alice's token on bob's run": {run, agentToken(t, data, "alice")},
		"no token":                   {run, ""},
		"a forged token":             {run, "ghmcp_" + strings.Repeat("A", 43)},
		"a run opened for no agent":  {other, agentToken(t, data, "bob")},
	} {
		if sess, err := httpSession(ctx, s.ep.MCP+"?run="+c.run, c.token); err == nil {
			_ = sess.Close()
			t.Errorf("%s: a session opened", name)
		}
	}
	req, _ := http.NewRequest("POST", s.ep.MCP+"?run="+run, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	req.Header.Set("Authorization", "Bearer "+agentToken(t, data, "alice"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("alice on bob's run: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}

	sess, err := httpSession(ctx, s.ep.MCP+"?run="+run, agentToken(t, data, "bob"))
	if err != nil {
		t.Fatal(err)
	}
	exerciseMCP(t, ctx, sess, data, approve)
	_ = sess.Close()

	// A remade token works at once, and the old one no longer does.
	old := agentToken(t, data, "bob")
	r := gh(t, "mcp", "token", "bob", "--data-dir", data)
	if r.code != 0 || strings.TrimSpace(r.stdout) == old {
		t.Fatalf("mcp token: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if sess, err := httpSession(ctx, s.ep.MCP+"?run="+run, old); err == nil {
		_ = sess.Close()
		t.Fatal("the old token still opens a session")
	}
	sess, err = httpSession(ctx, s.ep.MCP+"?run="+run, strings.TrimSpace(r.stdout))
	if err != nil {
		t.Fatalf("the new token: %v", err)
	}
	if len(toolNames(t, ctx, sess)) == 0 {
		t.Fatal("no tools with the new token")
	}
	_ = sess.Close()
	checkJournal(t, s, data, run)
}
