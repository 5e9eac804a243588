package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/embedded"
)

// mcpRaw is one streamable HTTP request to serve's MCP endpoint with a
// bearer token and, if sid is set, a session: the status, the session id
// the reply names and the body.
func mcpRaw(ctx context.Context, t *testing.T, method, endpoint, token, sid, body string) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, rd)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

const (
	mcpInit        = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	mcpInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	mcpToolsList   = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
)

// openMCP opens a session on run with token and returns its id.
func openMCP(ctx context.Context, t *testing.T, endpoint, run, token string) string {
	t.Helper()
	code, sid, body := mcpRaw(ctx, t, "POST", endpoint+"?run="+run, token, "", mcpInit)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize on %s: %d %s", run, code, body)
	}
	if code, _, body := mcpRaw(ctx, t, "POST", endpoint+"?run="+run, token, sid, mcpInitialized); code/100 != 2 {
		t.Fatalf("initialized: %d %s", code, body)
	}
	return sid
}

// errorCode is the Gatehouse code of a JSON error body.
func errorCode(body string) broker.Code {
	var e struct{ Error broker.ErrorBody }
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error.Code
}

// TestRedteamMCPSessionEndsWithItsAgent: an MCP session over serve's
// streamable HTTP speaks for the registration of the agent it opened with.
// carol opens one on her run and keeps its event stream open; carol is
// removed: the stream is closed by the server. An agent is registered as
// carol again and given a token: it cannot use the old session (404,
// NOT_RUN_AGENT, saying why), nor open one on the old carol's run (403,
// NOT_RUN_AGENT), and works on a run opened for it. The SDK alone would
// have let the new carol's token on the old session: its check is the
// token's agent name, which is the same.
func TestRedteamMCPSessionEndsWithItsAgent(t *testing.T) {
	data, s, a, first := mcpCarol(t)
	open := func() string { return openCarol(t, data) }
	oldRun := open()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ep := s.ep.MCP
	sid := openMCP(ctx, t, ep, oldRun, first)
	if code, _, body := mcpRaw(ctx, t, "POST", ep+"?run="+oldRun, first, sid, mcpToolsList); code != http.StatusOK || !strings.Contains(body, "output_deliver") {
		t.Fatalf("carol's tools: %d %s", code, body)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", ep+"?run="+oldRun, nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+first)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("carol's event stream: %v %+v", err, stream)
	}
	defer stream.Body.Close()

	if r := gh(t, "agents", "remove", "carol", "--data-dir", data); r.code != 0 {
		t.Fatalf("agents remove: %+v", r)
	}
	// The server ends the stream (the test's deadline bounds the read).
	if _, err := io.Copy(io.Discard, stream.Body); ctx.Err() != nil {
		t.Fatalf("the removed carol's session stream is still open: %v", err)
	}
	if code, _, _ := mcpRaw(ctx, t, "POST", ep+"?run="+oldRun, first, sid, mcpToolsList); code != http.StatusUnauthorized {
		t.Fatalf("the removed carol's token on its session: %d", code)
	}

	if r := gh(t, "agents", "add", "carol", "--data-dir", data); r.code != 0 {
		t.Fatalf("agents add again: %+v", r)
	}
	a.waitAgent(t, "carol")
	second := strings.TrimSpace(gh(t, "mcp", "token", "carol", "--data-dir", data).stdout)
	if second == first || second == "" {
		t.Fatal("the new carol got no token of its own")
	}
	code, _, body := mcpRaw(ctx, t, "POST", ep+"?run="+oldRun, second, sid, mcpToolsList)
	if code != http.StatusNotFound || errorCode(body) != broker.CodeNotRunAgent || !strings.Contains(body, "removed") {
		t.Fatalf("the new carol on the old carol's session: %d %s", code, body)
	}
	code, _, body = mcpRaw(ctx, t, "POST", ep+"?run="+oldRun, second, "", mcpInit)
	if code != http.StatusForbidden || errorCode(body) != broker.CodeNotRunAgent || !strings.Contains(body, "open new work") {
		t.Fatalf("the new carol opening a session on the old carol's run: %d %s", code, body)
	}
	fresh := open()
	nsid := openMCP(ctx, t, ep, fresh, second)
	if code, _, body := mcpRaw(ctx, t, "POST", ep+"?run="+fresh, second, nsid, mcpToolsList); code != http.StatusOK || !strings.Contains(body, "output_deliver") {
		t.Fatalf("the new carol's own session: %d %s", code, body)
	}
}

// TestMCPSessionOutlivesARotation: a rotation keeps the agent's
// registration (the same identity, a new seed and token), so an MCP
// session of carol opened before it goes on with the new token: its
// calls go through serve's connection as carol made with the new seed.
// The session used to keep the connection it opened with, which the
// rotation's reload of the NATS users closed: every later call of the
// session failed.
func TestMCPSessionOutlivesARotation(t *testing.T) {
	data, s, a, first := mcpCarol(t)
	run := openCarol(t, data)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ep := s.ep.MCP
	sid := openMCP(ctx, t, ep, run, first)
	if code, _, body := mcpRaw(ctx, t, "POST", ep+"?run="+run, first, sid, mcpToolsList); code != http.StatusOK || !strings.Contains(body, "output_deliver") {
		t.Fatalf("carol's tools: %d %s", code, body)
	}
	seedPath := embedded.AgentCredsPath(filepath.Join(data, "nats"), "carol")
	oldSeed, err := os.ReadFile(seedPath)
	must(t, err)
	if r := gh(t, "agents", "rotate", "carol", "--data-dir", data); r.code != 0 {
		t.Fatalf("agents rotate: %+v", r)
	}
	a.waitAgent(t, "carol") // the NATS server has the new seed
	if newSeed, err := os.ReadFile(seedPath); err != nil || string(newSeed) == string(oldSeed) {
		t.Fatalf("the rotation kept the seed: %v", err)
	}
	tok, err := os.ReadFile(filepath.Join(data, "mcp", "tokens", "carol.token"))
	must(t, err)
	second := strings.TrimSpace(string(tok))
	if second == first {
		t.Fatal("the rotation kept the MCP token")
	}
	if code, _, _ := mcpRaw(ctx, t, "POST", ep+"?run="+run, first, sid, mcpToolsList); code != http.StatusUnauthorized {
		t.Fatalf("the token from before the rotation: %d", code)
	}
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"output_deliver","arguments":{"status":"ok","result":"after the rotation"}}}`
	for _, req := range []string{mcpToolsList, call} {
		code, _, body := mcpRaw(ctx, t, "POST", ep+"?run="+run, second, sid, req)
		if code != http.StatusOK || strings.Contains(body, `"isError":true`) || strings.Contains(body, `"error"`) {
			t.Fatalf("carol's session after the rotation, %s: %d %s", req, code, body)
		}
	}
}

// mcpCarol registers agent carol with an MCP token (first) in a fresh
// data dir and serves it in strict mode with --mcp-http, carol's card
// allowing output.
func mcpCarol(t *testing.T) (data string, s *server, a *identityAttack, first string) {
	t.Helper()
	data = t.TempDir()
	if r := gh(t, "agents", "add", "carol", "--data-dir", data); r.code != 0 {
		t.Fatalf("agents add: %+v", r)
	}
	first = strings.TrimSpace(gh(t, "mcp", "token", "carol", "--data-dir", data).stdout)
	pol := filepath.Join(data, "cards.yaml")
	must(t, os.WriteFile(pol, []byte("agents:\n  - name: carol\n"), 0o600))
	s = serve(t, data, "--mode", "strict", "--policy", pol, "--mcp-http", "127.0.0.1:0")
	return data, s, &identityAttack{t: t, s: s, nats: filepath.Join(data, "nats")}, first
}

// openCarol opens work for carol with the CLI and returns the run.
func openCarol(t *testing.T, data string) string {
	t.Helper()
	r := gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--agent", "carol")
	if r.code != 0 {
		t.Fatalf("work open: %+v", r)
	}
	return strings.TrimSpace(r.stdout)
}
