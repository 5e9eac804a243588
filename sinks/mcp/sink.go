// Package mcp is the mcp sink: tool calls to upstream Model Context
// Protocol servers, each decided by Gatehouse before it is forwarded.
//
// # Servers
//
// The catalogue (serve --mcp-servers, YAML) lists the servers: stdio ones,
// whose command Gatehouse starts in the sandbox (the tier the sandbox
// proved; no network when it is confined, so a server that must reach the
// network is run by the operator and catalogued by URL), and streamable
// HTTP ones by URL. A session (and a stdio server's process) serves one
// person only: it is keyed by server, tenant and person, opened on the
// first call, ended after five idle minutes, at the process's lifetime, or
// on a failure. The person's credential (the provider sink's credential
// store, the server's name standing as the provider) is looked up only
// after the decision, and reaches the server only as the catalogue says:
// an HTTP header (auth bearer or header), or an environment variable of
// that person's own process (auth env).
//
// # Calls
//
// An agent proposes {"server", "tool", "arguments"} (action call) on
// gatehouse.v1.effect.mcp; Gatehouse's MCP server offers each pinned
// upstream tool as a tool of its own that proposes exactly that. Describe
// builds the effect: Sink mcp, Action call, Tool and Target
// "<server>/<tool>" (agent cards' allowed_tools, blocked_tools and
// require_approval_for, and effects: target globs, match it), Provider
// the server (the mandate's system), Class from the catalogue's tools
// entry or the pinned annotations (read-only: read; destructiveHint
// false: write; else destructive), also as Declared so rules' effect:
// matches hold, Confined for a stdio server in a
// confined sandbox, Values the arguments' top-level strings and numbers
// (for scope limits), Size and Digest of the arguments. Approvals bind the
// exact arguments (the broker's action digest covers every param).
// Grounding: the provider sink's grounding rules and record store apply,
// the call standing as a POST of the arguments as a JSON body to
// "/tools/<tool>" on provider "<server>"; a rule
// {match: {provider: bank, path: /tools/transfer}, require: [{field:
// request.json.iban, equals: supplier.iban}]} grounds an argument in a
// record read through Gatehouse earlier in the same work. fresh: reread
// rules refuse here (there is nothing to reread through).
//
// Perform forwards the call on the person's session and returns the
// upstream CallToolResult as the reply, with the person's credential
// replaced by "[credential]" wherever the server echoed it (in the result
// and in error texts, plain, escaped or base64); the outcome is ok, or failed with
// error tool-error when the result says isError; the journal keeps the
// sizes and digests of the arguments and the result, never them.
//
// # Pinning
//
// A server's tool list is pinned (Pins, DATA_DIR/mcp/pins/<server>.json):
// for each tool its name, title, description, schemas and annotations,
// and a SHA-256 digest over their RFC 8785 canonical JSON. The first
// listing Gatehouse gets of a server without a pin (at start, or the first
// session's) becomes its pin. Every later listing (each session lists at
// start and again when the server says its list changed) is compared with
// the pin: a tool whose digest differs, or that was never pinned, is
// refused (tool-changed, enforced in every mode) until an operator looks at
// the change ('gatehouse mcp upstream show SERVER', which reads the listing
// Gatehouse kept in <server>.listed.json) and accepts it ('gatehouse mcp
// upstream accept SERVER [--tool T]'). Describe checks the latest listing
// of the server; Perform checks the session's own listing again before
// forwarding, so a server that shows one person a changed tool is caught
// on that person's call. Agents see only pinned descriptions and schemas,
// and tools/list leaves out a tool the latest listing changed or dropped
// (every call of it is refused until the change is accepted).
package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// ActionCall is the sink's one action.
const ActionCall = "call"

// MaxResultBytes bounds an upstream result: the agent's reply carries it
// whole, and a reply must fit in one NATS message (1 MiB), with the
// decision and outcome around it. A larger result fails the call with
// result-too-large (the server did run it).
const MaxResultBytes = 960 << 10

// maxLineBytes bounds one message read from a stdio server: past it the
// session ends.
const maxLineBytes = 4 << 20

// Params are the call's params.
type Params struct {
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Grounding is where the sink finds grounding rules and records: the
// provider sink's, so MCP calls are grounded by the same rules in the same
// shared store. *provider.Sink implements it.
type Grounding interface {
	GroundingRules() *grounding.Rules
	GroundingRecords() grounding.Records
	// SpendRecords marks the records a grounded call's amounts were
	// bounded by as spent (grounding.Spend), before the call is made; an
	// error (a record another call spent first, a store that cannot mark
	// it) means the call must not be made.
	SpendRecords(ctx context.Context, workflow string, spends []grounding.Spend) error
}

// Config configures the sink.
type Config struct {
	Catalogue *Catalogue
	Pins      *Pins
	// Sandbox starts stdio servers; nil: stdio servers are unavailable.
	Sandbox *sandbox.Sandbox
	// Credentials finds each person's credential; nil: nobody has one.
	Credentials provider.CredentialStore
	// Grounding, when set, grounds arguments; nil checks nothing.
	Grounding Grounding
	// HTTP is the transport to HTTP servers (default http.DefaultTransport).
	HTTP http.RoundTripper
	// IdleTimeout ends sessions unused this long (default 5 minutes).
	IdleTimeout time.Duration
	Logger      *slog.Logger
	Now         func() time.Time
}

// Sink forwards tool calls to upstream MCP servers. Safe for concurrent
// use; Close ends every session and process.
type Sink struct {
	cat   *Catalogue
	pins  *Pins
	sb    *sandbox.Sandbox
	creds provider.CredentialStore
	grd   Grounding
	http  http.RoundTripper
	idle  time.Duration
	log   *slog.Logger
	now   func() time.Time

	mu       sync.Mutex
	sessions map[sessionKey]*session
	// latest holds each server's latest listing ([]PinnedTool).
	latest sync.Map

	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
}

var (
	_ broker.Sink            = (*Sink)(nil)
	_ broker.ActionDescriber = (*Sink)(nil)
)

// New returns the sink and lists every server once (within a few seconds
// each), pinning the servers that have no pin yet; a server that cannot
// be listed now is listed by its first session.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	if cfg.Catalogue == nil || cfg.Pins == nil {
		return nil, fmt.Errorf("mcp sink: a catalogue and a pin store are required")
	}
	k := &Sink{cat: cfg.Catalogue, pins: cfg.Pins, sb: cfg.Sandbox, creds: cfg.Credentials, grd: cfg.Grounding,
		http: cfg.HTTP, idle: cfg.IdleTimeout, log: cfg.Logger, now: cfg.Now, sessions: map[sessionKey]*session{}}
	if k.http == nil {
		k.http = http.DefaultTransport
	}
	if k.idle <= 0 {
		k.idle = 5 * time.Minute
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	if k.now == nil {
		k.now = time.Now
	}
	if err := k.checkReaches(); err != nil { // grounding.go
		return nil, err
	}
	jctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	k.wg.Go(func() { k.janitor(jctx) })
	for i := range k.cat.Servers {
		srv := &k.cat.Servers[i]
		lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
		s, err := k.connect(lctx, srv, provider.Credential{})
		lcancel()
		if err != nil {
			k.log.Warn("mcp server not listed at start; its first session lists it", "server", srv.Name, "err", err)
			continue
		}
		if listed, err := s.tools(); err == nil {
			k.observe(srv.Name, listed)
		}
		s.stop()
	}
	return k, nil
}

// Name implements broker.Sink.
func (k *Sink) Name() policy.Sink { return policy.SinkMCP }

// Close ends every session and stdio process and waits for them.
func (k *Sink) Close() error {
	if !k.closed.CompareAndSwap(false, true) {
		return nil
	}
	k.cancel()
	k.mu.Lock()
	all := make([]*session, 0, len(k.sessions))
	for key, s := range k.sessions {
		all = append(all, s)
		delete(k.sessions, key)
	}
	k.mu.Unlock()
	for _, s := range all {
		s.stop()
	}
	k.wg.Wait()
	return nil
}

// observe compares a server's listing with its pin: the first listing of
// a server without a pin becomes the pin; a listing that differs is kept
// for an operator to review.
func (k *Sink) observe(server string, listed []PinnedTool) {
	k.latest.Store(server, listed)
	pin, err := k.pins.Load(server)
	if err != nil {
		k.log.Error("mcp pin could not be read; the server's tools are refused", "server", server, "err", err)
		return
	}
	if pin == nil {
		if _, err := k.pins.Save(server, "first listing", listed, k.now()); err != nil {
			k.log.Error("mcp pin could not be written", "server", server, "err", err)
			return
		}
		k.log.Info("mcp server's tool list pinned on its first listing", "server", server, "tools", len(listed))
		return
	}
	if changes := Diff(pin, listed); len(changes) > 0 {
		if err := k.pins.SaveListed(server, listed, k.now()); err != nil {
			k.log.Error("mcp listing could not be kept for review", "server", server, "err", err)
		}
		for _, c := range changes {
			k.log.Warn("mcp tool differs from its pin; refused until an operator accepts it", "server", server, "tool", c.Tool, "change", c.Kind, "fields", c.Fields)
		}
	}
}

// latestOf is server's latest listing, nil when it was never listed.
func (k *Sink) latestOf(server string) []PinnedTool {
	if l, ok := k.latest.Load(server); ok {
		return l.([]PinnedTool)
	}
	return nil
}

// unpinned says why tool of server cannot be called as pinned, "" when it
// can, judged on the listing given.
func unpinned(pin *Pin, listed []PinnedTool, tool string) string {
	p, ok := pin.Tool(tool)
	if !ok {
		return "it was never pinned (a new tool)"
	}
	for _, l := range listed {
		if l.Name == tool {
			if l.Digest != p.Digest {
				return "the server now describes it differently (" + strings.Join(changedFields(p, &l), ", ") + " changed)"
			}
			return ""
		}
	}
	if listed == nil {
		return ""
	}
	return "the server no longer lists it"
}

// Actions implements broker.ActionDescriber: the generic call (unlisted),
// and one tool per pinned upstream tool, with the pinned description and
// input schema, except the tools the server's latest listing changed or
// no longer lists (refused until an operator accepts the change, so no
// policy could allow them).
func (k *Sink) Actions() []broker.Action {
	acts := []broker.Action{{
		Sink: policy.SinkMCP, Name: ActionCall, Title: "Call a tool of an upstream MCP server",
		Description: "Call one tool of an MCP server the deployment connected, with the credential of the person this work " +
			"is for (added by Gatehouse after the decision). The reply is the server's tool result. Decided on the tool's " +
			"name <server>/<tool>, the server as the mandate's system, the tool's effect class, approvals bound to the exact " +
			"arguments and grounding of the arguments; a tool whose description or schema changed since it was pinned is refused.",
		Params: Params{},
		Fields: map[string]string{
			"server":    "the server's name in the deployment's catalogue",
			"tool":      "the tool's name on that server",
			"arguments": "the tool's arguments, a JSON object its input schema accepts",
		},
		Mutates: true, Class: "", System: "", Unlisted: true,
		Examples: []json.RawMessage{json.RawMessage(`{"server": "files", "tool": "read", "arguments": {"path": "a.txt"}}`)},
	}}
	for i := range k.cat.Servers {
		srv := &k.cat.Servers[i]
		pin, err := k.pins.Load(srv.Name)
		if err != nil || pin == nil {
			continue
		}
		listed := k.latestOf(srv.Name)
		for _, t := range pin.Tools {
			if unpinned(pin, listed, t.Name) != "" {
				continue // changed or gone since it was pinned: refused, so not offered
			}
			class := classOf(srv, &t)
			bind, _ := json.Marshal(map[string]string{"server": srv.Name, "tool": t.Name})
			desc := t.Description
			if desc == "" {
				desc = "Tool " + t.Name + " of the MCP server " + srv.Name + "."
			}
			acts = append(acts, broker.Action{
				Sink: policy.SinkMCP, Name: ActionCall, Tool: srv.Name + "/" + t.Name, Title: t.Title,
				Description: desc + " (MCP server " + srv.Name + ", through Gatehouse.)",
				InputSchema: t.InputSchema, Bind: bind, ArgumentsField: "arguments",
				Mutates: class != policy.EffectRead, Class: class, System: srv.Name,
			})
		}
	}
	return acts
}

// classOf is the effect class a tool is decided under.
func classOf(srv *Server, t *PinnedTool) policy.EffectClass {
	if tp, ok := srv.Tools[t.Name]; ok && tp.Effect != "" {
		return tp.Effect
	}
	var a sdk.ToolAnnotations
	if len(t.Annotations) > 0 && json.Unmarshal(t.Annotations, &a) == nil {
		switch {
		case a.ReadOnlyHint:
			return policy.EffectRead
		case a.DestructiveHint != nil && !*a.DestructiveHint:
			return policy.EffectWrite
		}
	}
	return policy.EffectDestructive
}

// state is a described call, handed to Perform.
type state struct {
	srv  *Server
	tool string
	args json.RawMessage
	// workflow and spends: a grounded call spends the records its amounts
	// were bounded by when it is made.
	workflow string
	spends   []grounding.Spend
}

// DecodeParams decodes and checks a call's params: they must read one way
// only (see unambiguous), the server must be in the catalogue, the tool a
// name of at most 128 bytes, the arguments a JSON object (absent is {}).
// Errors wrap broker.ErrBadRequest.
func (k *Sink) DecodeParams(raw json.RawMessage) (*Server, *Params, error) {
	if err := unambiguous(raw); err != nil {
		return nil, nil, err
	}
	var p Params
	if err := broker.DecodeParams(raw, &p); err != nil {
		return nil, nil, err
	}
	srv, ok := k.cat.Server(p.Server)
	if !ok {
		return nil, nil, fmt.Errorf("%w: server %q is not in the MCP servers catalogue", broker.ErrBadRequest, clip(p.Server))
	}
	if p.Tool == "" || len(p.Tool) > 128 || strings.ContainsAny(p.Tool, "/\x00") {
		return nil, nil, fmt.Errorf("%w: tool must be 1 to 128 bytes without '/'", broker.ErrBadRequest)
	}
	a := strings.TrimSpace(string(p.Arguments))
	switch {
	case a == "" || a == "null":
		p.Arguments = json.RawMessage("{}")
	case a[0] != '{':
		return nil, nil, fmt.Errorf("%w: arguments must be a JSON object", broker.ErrBadRequest)
	}
	return srv, &p, nil
}

func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// Describe implements broker.Sink.
func (k *Sink) Describe(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	if req.Action != ActionCall {
		return nil, fmt.Errorf("%w: the mcp sink's only action is %q", broker.ErrBadRequest, ActionCall)
	}
	srv, p, err := k.DecodeParams(req.Params)
	if err != nil {
		return nil, err
	}
	name := srv.Name + "/" + p.Tool
	e := policy.Effect{Sink: policy.SinkMCP, Action: ActionCall, Origin: req.Origin, Tool: name, Target: name,
		Provider: srv.Name, Confined: srv.Stdio() && k.sb != nil && k.sb.Confined(), Values: values(p.Arguments)}
	pin, err := k.pins.Load(srv.Name)
	switch {
	case err != nil:
		e.Unpinned = "its pin could not be read"
	case pin == nil:
		e.Unpinned = "the server's tool list was never pinned (it could not be listed yet)"
	default:
		e.Unpinned = unpinned(pin, k.latestOf(srv.Name), p.Tool)
		if t, ok := pin.Tool(p.Tool); ok {
			e.Class = classOf(srv, t)
		}
	}
	if e.Class == "" {
		e.Class = policy.EffectDestructive
	}
	// The class is declared by the catalogue or the pinned annotations,
	// never by the agent: rules' effect: matches (which read Declared)
	// then hold for MCP tools too.
	e.Declared = e.Class
	// The server names its tools; a deny rule, scope or approval on a
	// target holds for every case the server spells the tool in.
	e.PathFold = true
	sum := sha256.Sum256(p.Arguments)
	prop := &broker.Proposal{Effect: e, Size: int64(len(p.Arguments)), Digest: "sha256:" + hex.EncodeToString(sum[:]),
		State: &state{srv: srv, tool: p.Tool, args: p.Arguments}}
	k.ground(ctx, run, srv, p, prop)
	return prop, nil
}

// values are the arguments' top-level strings and numbers, as written.
func values(args json.RawMessage) map[string]string {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		s := strings.TrimSpace(string(v))
		switch {
		case s == "":
		case s[0] == '"':
			var str string
			if json.Unmarshal(v, &str) == nil {
				out[k] = str
			}
		case s[0] == '-' || s[0] >= '0' && s[0] <= '9':
			out[k] = s
		}
	}
	return out
}

// ground checks the arguments against the grounding rule that matches
// "<server>" POST /tools/<tool>, if any.
func (k *Sink) ground(ctx context.Context, run *broker.Run, srv *Server, p *Params, prop *broker.Proposal) {
	if k.grd == nil {
		return
	}
	rules := k.grd.GroundingRules()
	wf := run.ID
	if run.Root != "" {
		wf = run.Root
	}
	var caller map[string]any
	if len(run.Input) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(run.Input)))
		dec.UseNumber()
		if dec.Decode(&caller) != nil {
			caller = nil
		}
	}
	res := rules.Check(ctx, grounding.Input{
		Workflow: wf, Agent: run.Agent, Caller: caller, Now: k.now(), Records: k.grd.GroundingRecords(),
		Call: grounding.Call{Provider: srv.Name, Method: "POST", Path: "/tools/" + p.Tool, Body: p.Arguments, ContentType: "application/json"},
	})
	if !res.Applied {
		return
	}
	prop.Effect.Grounding = &policy.Grounding{Rule: res.Rule, Failures: res.Failures}
	for _, ci := range res.Citations {
		prop.Citations = append(prop.Citations, journal.Citation{Run: ci.Run, Effect: ci.Effect, Digest: ci.Digest, Path: ci.Path})
	}
	if st, ok := prop.State.(*state); ok && len(res.Failures) == 0 {
		st.workflow, st.spends = wf, res.Spends
	}
}

// CallError is a call that failed; Type goes into the journal's outcome.
type CallError struct {
	Type   string
	Detail string
}

func (e *CallError) Error() string     { return e.Detail }
func (e *CallError) ErrorType() string { return e.Type }

// Perform implements broker.Sink: the person's credential, their session,
// the session's own listing checked against the pin, then the call.
func (k *Sink) Perform(ctx context.Context, run *broker.Run, req *broker.EffectRequest, prop *broker.Proposal) (*broker.Performed, error) {
	st, ok := prop.State.(*state)
	if !ok {
		return nil, fmt.Errorf("mcp: no described call")
	}
	var cred provider.Credential
	if st.srv.Auth.Type != AuthNone {
		if k.creds == nil {
			return nil, &CallError{Type: "no-credential", Detail: fmt.Sprintf("nobody has a credential for MCP server %s", st.srv.Name)}
		}
		c, err := k.creds.Credential(ctx, run.For, st.srv.Name)
		if err != nil {
			return nil, &CallError{Type: "no-credential", Detail: fmt.Sprintf("the person this work is for has no credential for MCP server %s", st.srv.Name)}
		}
		cred = c
	}
	key := sessionKey{server: st.srv.Name, who: run.For}
	s, err := k.sessionFor(ctx, key, st.srv, cred)
	if err != nil {
		return nil, &CallError{Type: "unavailable", Detail: redactText(err.Error(), cred)}
	}
	listed, lerr := s.tools()
	pin, perr := k.pins.Load(st.srv.Name)
	if lerr != nil || perr != nil || pin == nil {
		return nil, &CallError{Type: "tool-changed", Detail: "the server's tool list could not be checked against its pin; nothing was sent"}
	}
	if why := unpinned(pin, listed, st.tool); why != "" {
		return nil, &CallError{Type: "tool-changed", Detail: fmt.Sprintf("MCP tool %s/%s: %s; nothing was sent", st.srv.Name, st.tool, why)}
	}
	if len(st.spends) > 0 {
		if err := k.grd.SpendRecords(ctx, st.workflow, st.spends); err != nil {
			return nil, &CallError{Type: "record-spent", Detail: fmt.Sprintf("a record that bounds this call's amounts could not be spent (%v); nothing was sent, read the record again", err)}
		}
	}
	if err := k.noteWrite(ctx, run, st.srv, st.tool); err != nil { // grounding.go
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, st.srv.callTimeout())
	defer cancel()
	res, err := s.cs.CallTool(cctx, &sdk.CallToolParams{Name: st.tool, Arguments: st.args})
	if err != nil {
		// Anything but the server's own JSON-RPC error (a session that
		// broke, a timeout, an answer too large) ends the session: the
		// next call connects again.
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) || errors.Is(err, sdk.ErrConnectionClosed) || cctx.Err() != nil {
			k.drop(key, s)
		}
		return nil, &CallError{Type: "upstream-error", Detail: redactText(fmt.Sprintf("MCP server %s: %v", st.srv.Name, err), cred)}
	}
	body, err := json.Marshal(res)
	if err != nil {
		return nil, &CallError{Type: "upstream-error", Detail: redactText(fmt.Sprintf("MCP server %s: result: %v", st.srv.Name, err), cred)}
	}
	// The credential never reaches the agent, even when the server
	// echoes it; size and digest are of what the agent gets.
	body = redactResult(body, cred)
	if len(body) > MaxResultBytes {
		return nil, &CallError{Type: "result-too-large", Detail: fmt.Sprintf("MCP server %s: the result is %d bytes, more than the %d a reply can carry; the server did run the call",
			st.srv.Name, len(body), MaxResultBytes)}
	}
	sum := sha256.Sum256(body)
	r := journal.Result{Status: "ok", Size: int64(len(body)), Digest: "sha256:" + hex.EncodeToString(sum[:])}
	if res.IsError {
		r.Status, r.Error = "failed", "tool-error"
	}
	return &broker.Performed{Result: r, Reply: body}, nil
}
