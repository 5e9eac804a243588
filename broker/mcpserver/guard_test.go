package mcpserver_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/broker/mcpserver"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// holderRegs is the register in force as a Guard reads it; watch false
// hides its changes, so only the check before each request ends a session.
type holderRegs struct {
	h     *identity.Holder
	watch bool
}

func (r holderRegs) AgentRegistration(name string) identity.Registration {
	return r.h.AgentRegistration(name)
}

func (r holderRegs) IdentitiesChanged() <-chan struct{} {
	if !r.watch {
		return nil
	}
	return r.h.Changed()
}

// guardedWorld is a strict Gatehouse with the output sink, named agent
// carol, a run opened for it, and the streamable HTTP handler serving
// carol's sessions on that run under a Guard, as serve --mcp-http does
// (without its bearer check: the session is carol's).
type guardedWorld struct {
	env   *sinktest.Env
	carol *client.Client
	run   string
	guard *mcpserver.Guard
	url   string
}

// startGuarded starts it; watch shows the Guard the register's changes,
// jsonReplies answers POSTs with JSON rather than event streams.
func startGuarded(t *testing.T, watch, jsonReplies bool) *guardedWorld {
	env, _ := outputWorld(t)
	w := &guardedWorld{env: env, carol: env.NamedAgent(t, "carol", "")}
	w.run = env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada", Agent: "carol"})
	w.guard = mcpserver.NewGuard(holderRegs{h: env.Identities, watch: watch}, nil)
	t.Cleanup(w.guard.Close)
	who, err := w.guard.Current("carol")
	if err != nil {
		t.Fatal(err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s, err := mcpserver.New(mcpserver.Config{Run: w.run, Agent: w.carol, Guard: w.guard, Identity: who})
		if err != nil {
			t.Error(err)
			return nil
		}
		return s.MCP()
	}, &mcp.StreamableHTTPOptions{JSONResponse: jsonReplies})
	srv := httptest.NewServer(w.guard.Handler(h))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

// reregister removes carol and registers a new agent as carol, in force
// at once (the same seed: what is tested is the register, not NATS).
func (w *guardedWorld) reregister(t *testing.T) {
	reg := *w.env.Identities.Load()
	reg.Agents, reg.Removed = slices.Clone(reg.Agents), slices.Clone(reg.Removed)
	if err := reg.RemoveAgent("carol"); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddAgent(identity.Agent{Name: "carol", Added: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	w.env.Identities.Store(&reg)
}

// A session's next request after its agent was removed and registered
// again is refused with NOT_RUN_AGENT and why, and the session is closed:
// nothing more is served on it.
func TestGuardEndsTheSessionOfAReplacedAgent(t *testing.T) {
	w := startGuarded(t, false, false)
	ctx := sinktest.Ctx(t)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: w.url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("carol's session: %v", err)
	}
	w.reregister(t)
	_, err = cs.ListTools(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "NOT_RUN_AGENT") || !strings.Contains(err.Error(), "registered again") {
		t.Fatalf("the replaced carol's session: %v", err)
	}
	if why, ended := w.guard.Ended(cs.ID()); !ended || !strings.Contains(why, "new session") {
		t.Fatalf("the guard does not know the session ended: %q %v", why, ended)
	}
	// Closed on the server: the SDK no longer knows the session. The
	// request goes out on a fresh transport, so nothing of the client's
	// state stands in for the server's answer.
	req, _ := http.NewRequestWithContext(ctx, "POST", w.url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	for {
		resp, err := http.DefaultClient.Do(req.Clone(ctx))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			break
		}
		// Close runs once the refusal is out: until then a request may
		// still find the session, and is refused the same way.
		if !strings.Contains(string(b), "NOT_RUN_AGENT") {
			t.Fatalf("a request on the ended session: %d %s", resp.StatusCode, b)
		}
		if ctx.Err() != nil {
			t.Fatal("the session was never closed")
		}
	}
}

// A session that sends nothing (its event stream open) ends when the
// register changes so that its registration is no longer in force: the
// stream is closed by the server.
func TestGuardEndsAnIdleSession(t *testing.T) {
	w := startGuarded(t, true, true)
	ctx := sinktest.Ctx(t)
	post := func(body, sid string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "POST", w.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "")
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q", resp.StatusCode, sid)
	}
	if r := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid); r.StatusCode/100 != 2 {
		t.Fatalf("initialized: %d", r.StatusCode)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", w.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %v %v", err, stream)
	}
	defer stream.Body.Close()
	w.reregister(t)
	// Read until the server ends the stream (the test's deadline bounds it).
	if _, err := io.Copy(io.Discard, stream.Body); err != nil && ctx.Err() != nil {
		t.Fatalf("the idle session's stream was not closed: %v", err)
	}
	if _, ended := w.guard.Ended(sid); !ended {
		t.Fatal("the guard does not know the idle session ended")
	}
	if r := post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, sid); r.StatusCode != http.StatusNotFound {
		t.Fatalf("a request on the ended idle session: %d", r.StatusCode)
	}
}

// A run opened for an earlier registration of the name is not the new
// one's (OwnsRun), and a removed name has no registration to open a
// session for (Current); both with NOT_RUN_AGENT.
func TestGuardBindsSessionsToTheRegistration(t *testing.T) {
	w := startGuarded(t, false, true)
	run, err := w.env.Broker.LookupRun(sinktest.Ctx(t), w.run)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.guard.OwnsRun("carol", run); err != nil {
		t.Fatalf("carol's own run: %v", err)
	}
	w.reregister(t)
	if err := w.guard.OwnsRun("carol", run); err == nil || !strings.Contains(err.Error(), "open new work") {
		t.Fatalf("the new carol on the old carol's run: %v", err)
	}
	if c, _ := broker.CodeOf(w.guard.OwnsRun("carol", run)); c != broker.CodeNotRunAgent {
		t.Fatalf("code %s", c)
	}
	fresh, err := w.env.Broker.LookupRun(sinktest.Ctx(t), w.env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada", Agent: "carol"}))
	if err != nil || w.guard.OwnsRun("carol", fresh) != nil {
		t.Fatalf("the new carol's fresh run: %v %v", err, w.guard.OwnsRun("carol", fresh))
	}
	reg := *w.env.Identities.Load()
	reg.Agents, reg.Removed = slices.Clone(reg.Agents), slices.Clone(reg.Removed)
	if err := reg.RemoveAgent("carol"); err != nil {
		t.Fatal(err)
	}
	w.env.Identities.Store(&reg)
	if _, err := w.guard.Current("carol"); err == nil {
		t.Fatal("a session opens for a removed agent")
	}
}
