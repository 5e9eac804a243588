package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
)

// TestRedteamMCPSessionKeepsItsRun: a streamable HTTP session is bound to
// the run it opened on, and every request on it is checked against that
// run, not another one the request names. bob opens a session on run A;
// the application closes A; bob goes on with the session, naming his
// other, open run B in the address (which passes every check of B): the
// request is refused (400 BAD_REQUEST, naming the session's run), the
// session answers as before on A's address (refused there because A is
// closed), and a session opened on B works.
func TestRedteamMCPSessionKeepsItsRun(t *testing.T) {
	data := t.TempDir()
	flags, _ := mcpFiles(t, data, "")
	s := serve(t, data, append(flags, "--mcp-http", "127.0.0.1:0")...)
	open := func() string {
		return strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--agent", "bob").stdout)
	}
	a, b := open(), open()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tok := agentToken(t, data, "bob")
	sid := openMCP(ctx, t, s.ep.MCP, a, tok)
	if code, _, body := mcpRaw(ctx, t, "POST", s.ep.MCP+"?run="+a, tok, sid, mcpToolsList); code != http.StatusOK || !strings.Contains(body, "output_deliver") {
		t.Fatalf("tools/list on the session's own run: %d %s", code, body)
	}
	if r := gh(t, "work", "close", a, "--data-dir", data); r.code != 0 {
		t.Fatalf("close: %s %s", r.stdout, r.stderr)
	}
	code, _, body := mcpRaw(ctx, t, "POST", s.ep.MCP+"?run="+b, tok, sid, mcpToolsList)
	if code != http.StatusBadRequest || errorCode(body) != broker.CodeBadRequest || !strings.Contains(body, a) {
		t.Errorf("the session of run %s used under run %s: %d %s", a, b, code, body)
	}
	if code, _, body := mcpRaw(ctx, t, "POST", s.ep.MCP+"?run="+a, tok, sid, mcpToolsList); code != http.StatusForbidden || errorCode(body) != broker.CodeRunClosed {
		t.Errorf("the session on its closed run: %d %s", code, body)
	}
	sid2 := openMCP(ctx, t, s.ep.MCP, b, tok)
	if code, _, body := mcpRaw(ctx, t, "POST", s.ep.MCP+"?run="+b, tok, sid2, mcpToolsList); code != http.StatusOK || !strings.Contains(body, "output_deliver") {
		t.Errorf("a session opened on run %s: %d %s", b, code, body)
	}
}
