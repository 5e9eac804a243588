package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/mcpserver"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// MCP over streamable HTTP (serve --mcp-http ADDR). Each named agent has a
// bearer token of its own, made by Gatehouse (DATA_DIR/mcp/tokens/NAME.token,
// mode 0600; 'gatehouse mcp token NAME' makes or remakes it). A session is
// authenticated to the one agent its token names, never to a name the HTTP
// client claims, and is bound to the run in its address (/mcp?run=r_...),
// which must be open and opened for that agent. Every call of the session
// is proposed over NATS on that agent's own connection (its own credential
// and inbox), exactly as the agent's own request would be. The SDK keeps a
// session to the token's agent: a request with another agent's token on
// the session is refused. A session's id starts with its run's id
// ("<run>.<random>"), and a request on a session must name that run in
// its address (400 BAD_REQUEST otherwise): the run checked is the run the
// session acts on.
//
// A session speaks for one registration of its agent (package
// broker/identity): it opens only on a run opened for that registration,
// and once the registration ends (the agent removed, or removed and added
// again: another identity of the name) the session ends too (mcpserver
// Guard): the request that finds it so is refused with NOT_RUN_AGENT and
// why, the session is closed, and a later request on it is answered 404
// with why (NOT_RUN_AGENT); a session that is idle is closed when the
// register changes.

const mcpTokenPrefix = "ghmcp_"

func mcpTokenDir(dataDir string) string { return filepath.Join(dataDir, "mcp", "tokens") }

func mcpTokenPath(dataDir, agent string) string {
	return filepath.Join(mcpTokenDir(dataDir), agent+".token")
}

// newMCPToken writes a fresh token for agent, replacing any, and returns it.
func newMCPToken(dataDir, agent string) (string, error) {
	if !subject.ValidAgent(agent) {
		return "", usageError("agent %q: a name must be 1 to %d letters, digits, '-' or '_'", agent, subject.MaxAgentLen)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := mcpTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	if err := os.MkdirAll(mcpTokenDir(dataDir), 0o700); err != nil {
		return "", err
	}
	tmp := mcpTokenPath(dataDir, agent) + ".tmp"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		return "", err
	}
	return tok, os.Rename(tmp, mcpTokenPath(dataDir, agent))
}

func cmdMCPToken(env *cliEnv, args []string) error {
	var dataDir string
	fs := newEnvFlags(env, "mcp token", mcpUsage) // help: cmdDocs["mcp"]
	fs.stringVar(&dataDir, "data-dir", ".gatehouse", "the data dir of the 'gatehouse serve' that serves --mcp-http")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("mcp token takes one agent name")
	}
	// A token speaks for a registered agent (agents add, serve --agents:
	// each has its seed in the data dir); one for a name nobody registered
	// would authenticate sessions no NATS connection stands behind.
	if subject.ValidAgent(pos[0]) && existing(embedded.AgentCredsPath(filepath.Join(dataDir, "nats"), pos[0])) == "" {
		return fmt.Errorf("agent %s: not registered in %s (register it first: gatehouse agents add %s, or serve --agents %s)", pos[0], dataDir, pos[0], pos[0])
	}
	tok, err := newMCPToken(dataDir, pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "%s\n", tok)
	fmt.Fprintf(env.stderr, "token for agent %s written to %s (the old one, if any, no longer works). Send it as 'Authorization: Bearer <token>'.\n",
		pos[0], mcpTokenPath(dataDir, pos[0]))
	return nil
}

// mcpTokens checks bearer tokens against the token files. The folder is
// read again whenever it changed (a token made, remade or removed with
// 'gatehouse mcp token' or rm), so a new token works and a removed one
// stops working on the next request, without a restart. Safe for
// concurrent use.
type mcpTokens struct {
	dir string
	log *slog.Logger

	mu   sync.Mutex
	mod  time.Time
	byID map[[32]byte]string // sha256 of a token to its agent
}

// loadMCPTokens makes a token for each of agents that has none yet and
// reads them all.
func loadMCPTokens(dataDir string, agents []string, log *slog.Logger) (*mcpTokens, error) {
	for _, a := range agents {
		if _, err := os.Stat(mcpTokenPath(dataDir, a)); errors.Is(err, os.ErrNotExist) {
			if _, err := newMCPToken(dataDir, a); err != nil {
				return nil, err
			}
		}
	}
	if err := os.MkdirAll(mcpTokenDir(dataDir), 0o700); err != nil {
		return nil, err
	}
	t := &mcpTokens{dir: mcpTokenDir(dataDir), log: log}
	if err := t.reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// reload reads the folder if it changed since the last read. A token file
// that cannot be read is skipped (and logged): it authenticates nobody.
func (t *mcpTokens) reload() error {
	fi, err := os.Stat(t.dir)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if fi.ModTime().Equal(t.mod) && t.byID != nil {
		return nil
	}
	ents, err := os.ReadDir(t.dir)
	if err != nil {
		return err
	}
	byID := map[[32]byte]string{}
	for _, e := range ents {
		agent, ok := strings.CutSuffix(e.Name(), ".token")
		if !ok || !subject.ValidAgent(agent) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(t.dir, e.Name()))
		tok := strings.TrimSpace(string(b))
		if err != nil || !strings.HasPrefix(tok, mcpTokenPrefix) || len(tok) < len(mcpTokenPrefix)+40 {
			t.log.Warn("MCP token file skipped; remake it with 'gatehouse mcp token'", "file", e.Name(), "err", err)
			continue
		}
		byID[sha256.Sum256([]byte(tok))] = agent
	}
	t.byID, t.mod = byID, fi.ModTime()
	return nil
}

// verify is the bearer-token check: the token's agent, or ErrInvalidToken.
// Tokens are compared by their SHA-256, in constant time.
func (t *mcpTokens) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	if err := t.reload(); err != nil {
		t.log.Error("MCP tokens cannot be read; every session is refused", "err", err)
		return nil, auth.ErrInvalidToken
	}
	sum := sha256.Sum256([]byte(token))
	t.mu.Lock()
	defer t.mu.Unlock()
	agent := ""
	for k, a := range t.byID {
		if subtle.ConstantTimeCompare(k[:], sum[:]) == 1 {
			agent = a
		}
	}
	if agent == "" {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: agent, Expiration: time.Now().Add(time.Hour)}, nil
}

// mcpHTTP is the streamable HTTP transport serve runs on --mcp-http.
type mcpHTTP struct {
	runs  func(ctx context.Context, id string) (*broker.Run, error)
	guard *mcpserver.Guard
	dial  func(agent string) (*client.Client, error)
	wait  time.Duration
	log   *slog.Logger
	srv   *http.Server
	ln    net.Listener
	mu    sync.Mutex
	conns map[string]*client.Client // by agent
}

// startMCPHTTP listens on addr and serves MCP sessions there until close.
func startMCPHTTP(addr string, toks *mcpTokens, runs func(context.Context, string) (*broker.Run, error), regs mcpserver.Registrations,
	dial func(agent string) (*client.Client, error), wait time.Duration, log *slog.Logger) (*mcpHTTP, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	m := &mcpHTTP{runs: runs, guard: mcpserver.NewGuard(regs, log), dial: dial, wait: wait, log: log, ln: ln, conns: map[string]*client.Client{}}
	h := mcp.NewStreamableHTTPHandler(m.server, &mcp.StreamableHTTPOptions{Logger: log, SessionTimeout: 30 * time.Minute,
		MaxRequestBodyBytes: 2 * broker.MaxRequestBytes})
	mux := http.NewServeMux()
	// Origin first (DNS rebinding), then the bearer token, every 401 with
	// its challenge.
	mux.Handle("/mcp", mcpserver.CheckOrigin(mcpserver.Challenge("gatehouse", auth.RequireBearerToken(toks.verify, nil)(m.guard.Handler(m.bind(h))))))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("mcp http server stopped", "err", err)
		}
	}()
	return m, nil
}

// URL is the transport's endpoint.
func (m *mcpHTTP) URL() string { return "http://" + m.ln.Addr().String() + "/mcp" }

// close stops the server and the agents' connections.
func (m *mcpHTTP) close(ctx context.Context) {
	_ = m.srv.Shutdown(ctx)
	m.guard.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.conns {
		c.Close()
	}
	m.conns = map[string]*client.Client{}
}

type (
	ctxRunKey      struct{}
	ctxIdentityKey struct{}
)

// bind checks, for a request opening a session, that its run is open and
// was opened for the token's agent, and refuses it with 403 (or 404, 400)
// and a JSON error otherwise.
func (m *mcpHTTP) bind(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti := auth.TokenInfoFromContext(r.Context())
		if ti == nil {
			httpError(w, http.StatusUnauthorized, broker.CodeBadRequest, "a bearer token is required")
			return
		}
		id := r.URL.Query().Get("run")
		if !broker.ValidRunID(id) {
			httpError(w, http.StatusBadRequest, broker.CodeBadRequest, "name the run in the address: /mcp?run=r_...")
			return
		}
		// A session's id starts with its run's: a request on a session
		// is checked against the run the session acts on, not another
		// run the address names.
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
			if srun, _, ok := strings.Cut(sid, "."); ok && srun != id {
				httpError(w, http.StatusBadRequest, broker.CodeBadRequest,
					fmt.Sprintf("this session is bound to run %s; name that run in the address (/mcp?run=%s), or open a session on the other run", clipID(srun), clipID(srun)))
				return
			}
		}
		run, err := m.runs(r.Context(), id)
		switch {
		case errors.Is(err, broker.ErrUnknownRun):
			httpError(w, http.StatusNotFound, broker.CodeUnknownRun, "no such run; the application opens work and gives the agent its run id")
			return
		case err != nil:
			httpError(w, http.StatusServiceUnavailable, broker.CodeRunStore, err.Error())
			return
		case run.Closed:
			httpError(w, http.StatusForbidden, broker.CodeRunClosed, "the application closed this run")
			return
		case broker.RunAgent(run) != ti.UserID:
			m.log.Warn("mcp session refused: the run is not this agent's", "agent", ti.UserID, "run", id)
			httpError(w, http.StatusForbidden, broker.CodeNotRunAgent,
				fmt.Sprintf("run %s was not opened for agent %s; an agent's session is bound to a run the application opened for it", id, ti.UserID))
			return
		}
		who, err := m.guard.Current(ti.UserID)
		if err == nil {
			err = m.guard.OwnsRun(ti.UserID, run)
		}
		if err != nil {
			m.log.Warn("mcp session refused: the run is not this agent registration's", "agent", ti.UserID, "run", id, "err", err)
			code, _ := broker.CodeOf(err)
			httpError(w, http.StatusForbidden, code, err.Error())
			return
		}
		ctx := context.WithValue(context.WithValue(r.Context(), ctxRunKey{}, run.ID), ctxIdentityKey{}, who)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// sessionID is a new session id for run: "<run>.<random>", so every
// request on the session names the run it is bound to (bind).
func sessionID(run string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail
	return run + "." + base64.RawURLEncoding.EncodeToString(b)
}

// clipID is a session id's run part as it may be shown: a run id, or
// a short clip of what the client sent.
func clipID(s string) string {
	if broker.ValidRunID(s) {
		return s
	}
	if len(s) > 40 {
		s = s[:40]
	}
	return strings.ToValidUTF8(s, "?")
}

func httpError(w http.ResponseWriter, status int, code broker.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": broker.ErrorBody{Code: code, Message: msg}})
}

// server builds the MCP server of a new session: bound to the run bind
// checked, proposing on the token's agent's own connection.
func (m *mcpHTTP) server(r *http.Request) *mcp.Server {
	ti := auth.TokenInfoFromContext(r.Context())
	run, _ := r.Context().Value(ctxRunKey{}).(string)
	who, ok := r.Context().Value(ctxIdentityKey{}).(mcpserver.Identity)
	if ti == nil || run == "" || !ok {
		return nil
	}
	if _, err := m.agent(ti.UserID); err != nil {
		m.log.Error("mcp session: cannot connect as the agent", "agent", ti.UserID, "err", err)
		return nil
	}
	s, err := mcpserver.New(mcpserver.Config{Run: run, Agent: liveAgent{m: m, name: ti.UserID}, ApprovalWait: m.wait, Version: version, Logger: m.log,
		Guard: m.guard, Identity: who, SessionID: func() string { return sessionID(run) }})
	if err != nil {
		return nil
	}
	return s.MCP()
}

// liveAgent is what a session proposes through: the agent's connection
// serve holds at each call (mcpHTTP.agent), not the one the session
// opened with. A rotation keeps the registration, and so the session, but
// the NATS server drops the connections of the old seed: a session that
// kept its first connection failed every call after a rotation.
type liveAgent struct {
	m    *mcpHTTP
	name string
}

func (a liveAgent) Tools(ctx context.Context, run string) ([]broker.ToolInfo, error) {
	c, err := a.m.agent(a.name)
	if err != nil {
		return nil, err
	}
	return c.Tools(ctx, run)
}

func (a liveAgent) Effect(ctx context.Context, sink policy.Sink, req broker.EffectRequest) (*broker.EffectReply, error) {
	c, err := a.m.agent(a.name)
	if err != nil {
		return nil, err
	}
	return c.Effect(ctx, sink, req)
}

func (a liveAgent) WaitApproval(ctx context.Context, run, id string, d time.Duration) (*broker.WaitReply, error) {
	c, err := a.m.agent(a.name)
	if err != nil {
		return nil, err
	}
	return c.WaitApproval(ctx, run, id, d)
}

// agent returns the agent's own connection, dialing it on first use and
// again whenever it is not connected: once the agent's credential is
// rotated or removed the server drops the connection and its reconnects
// (with the old seed) fail, so a new dial takes the current seed, or fails.
// A connection replaced is closed.
func (m *mcpHTTP) agent(name string) (*client.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.conns[name]
	if ok && old.Conn().IsConnected() {
		return old, nil
	}
	c, err := m.dial(name)
	if err != nil {
		return nil, err
	}
	if ok {
		old.Close() // reconnecting with a seed that no longer works
	}
	m.conns[name] = c
	return c, nil
}
