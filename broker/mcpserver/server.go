// Package mcpserver serves Gatehouse to an agent as a Model Context
// Protocol server: every action a sink describes (broker.ActionDescriber),
// and every tool of the upstream MCP servers Gatehouse fronts (sink mcp),
// is an MCP tool whose input schema is generated from the action's params
// type. Both transports use it: `gatehouse mcp` on stdio, and the
// streamable HTTP transport `gatehouse serve --mcp-http` serves.
//
// # A call is an agent's effect request
//
// A tools/call becomes exactly the effect request the agent would send on
// NATS (gatehouse.v1.effect.<sink>, through the agent's own connection, so
// its credential and identity apply as to any agent request): the tool's
// sink and action, the run this server is bound to, and the call's
// arguments as params (or, for a tool with fixed params such as an
// upstream MCP tool, the arguments inside them). The server adds nothing
// the agent could not send itself: no origin, no tool name, nothing about
// whom the work is for. The result:
//
//   - allowed, performed: the sink's result as text (JSON), and the whole
//     reply (run, effect, decision, outcome, result) as structured content;
//     for an upstream MCP tool, the upstream server's own result (content,
//     structured content, isError), with the decision in _meta "gatehouse";
//   - refused: a tool error (isError) whose text names the refusal, the
//     rule, whether it was enforced, each reason's detail (which says what
//     to do) and the error code, so the model can change course;
//   - held for a person's approval: the approval id and what to do. When the
//     client's request carries a progress token (so it can be told the call
//     is alive) and Config.ApprovalWait is positive, the call waits instead:
//     it sends a progress notification every time it asks the broker
//     (gatehouse.v1.agent.<id>.tools.wait, at most 20 s an ask), and once a person has
//     decided it proposes the same action again, which runs once if it was
//     approved; the result is then that second reply. A wait that runs out
//     returns the held result;
//   - a request Gatehouse could not take (a bad argument, no broker, a run
//     that is closed): a tool error with the code and the message.
//
// # What tools/list shows
//
// The broker's list for the run (gatehouse.v1.agent.<id>.tools.list): only what the
// run's policy could allow, whatever the arguments (agent cards'
// allowed_tools and blocked_tools, the mandate's systems, effect classes
// and expiry). It is read again on every tools/list, so a policy reload or
// a newly accepted upstream tool shows without a restart (clients are told
// with notifications/tools/list_changed when the set changes).
//
// # Sessions end with their agent's registration
//
// A streamable HTTP session is authenticated once, and may outlive the
// registration of the agent it spoke for (removed, or removed and added
// again: another identity of the name). A Guard (guard.go) ends such a
// session: its next request is refused with NOT_RUN_AGENT and why, an
// idle one is closed when the register changes, and later requests on it
// are answered 404 with why. The stdio transport has no Guard: there the
// agent's own process, with its own credential, is the session.
//
// Tool names are the card names (Effect.Tool) made safe for every MCP
// client: "output.deliver" is output_deliver, the upstream tool
// "bank/transfer" is bank__transfer; characters outside letters, digits, '_'
// and '-' become '_', and a name longer than 64 or taken twice gets a short
// hash of the card name.
package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

// Agent is what the server proposes through: the agent's own connection to
// Gatehouse. *client.Client implements it.
type Agent interface {
	Tools(ctx context.Context, run string) ([]broker.ToolInfo, error)
	Effect(ctx context.Context, sink policy.Sink, req broker.EffectRequest) (*broker.EffectReply, error)
	WaitApproval(ctx context.Context, run, id string, d time.Duration) (*broker.WaitReply, error)
}

// Config configures a server. Run and Agent are required.
type Config struct {
	// Run is the run every call is proposed for.
	Run   string
	Agent Agent
	// ApprovalWait is how long a call held for approval waits for a person
	// when the client sent a progress token; 0 or less never waits.
	ApprovalWait time.Duration
	// CallTimeout bounds one effect request (default 60 s).
	CallTimeout time.Duration
	// Guard, when set, ends the session once Identity, the agent
	// registration it was authenticated to, is no longer in force (see
	// Guard); nil: the transport authenticates nothing (stdio, where the
	// agent's process is the agent).
	Guard    *Guard
	Identity Identity
	// SessionID, when set, makes the id of the session this server
	// serves over streamable HTTP (the SDK's random one otherwise).
	SessionID func() string
	// Name is the implementation name announced (default "gatehouse").
	Name, Version string
	Logger        *slog.Logger
}

// Instructions is what the server tells clients about its tools.
const Instructions = "Every tool here is an effect Gatehouse decides before it happens, for the person this work is for, " +
	"and records. A refused call comes back as an error naming the refusal, the rule and what to do; change the call " +
	"rather than retrying it unchanged. A call held for a person's approval names the approval; once a person approved it, " +
	"call the tool again with exactly the same arguments and it runs once."

// Server is one MCP server bound to one run. Safe for concurrent use.
type Server struct {
	cfg Config
	srv *mcp.Server
	log *slog.Logger

	mu     sync.Mutex
	tools  map[string]broker.ToolInfo // by MCP name
	synced atomic.Bool
}

// New returns a server for cfg. It lists nothing until the first
// tools/list (or Sync).
func New(cfg Config) (*Server, error) {
	if cfg.Agent == nil || !broker.ValidRunID(cfg.Run) {
		return nil, fmt.Errorf("mcpserver: a run id and an agent connection are required")
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 60 * time.Second
	}
	if cfg.Name == "" {
		cfg.Name = "gatehouse"
	}
	if cfg.Version == "" {
		cfg.Version = broker.Version
	}
	s := &Server{cfg: cfg, log: cfg.Logger, tools: map[string]broker.ToolInfo{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: cfg.Name, Title: "Gatehouse", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: Instructions, Logger: cfg.Logger, GetSessionID: cfg.SessionID,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	s.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			// A client may call a tool it learnt of before (a tool name
			// it kept) without listing first: the first call lists too.
			if method == "tools/list" || method == "tools/call" && !s.synced.Load() {
				if err := s.Sync(ctx); err != nil {
					return nil, err
				}
			}
			return next(ctx, method, req)
		}
	})
	if cfg.Guard != nil {
		// Added last, so outermost: checked before anything else runs.
		s.srv.AddReceivingMiddleware(cfg.Guard.middleware(cfg.Identity))
	}
	return s, nil
}

// MCP returns the SDK server, to run on a transport.
func (s *Server) MCP() *mcp.Server { return s.srv }

// Sync reads the run's tools from the broker and makes the server's tools
// exactly those.
func (s *Server) Sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	infos, err := s.cfg.Agent.Tools(ctx, s.cfg.Run)
	if err != nil {
		return fmt.Errorf("gatehouse could not list the tools of run %s: %w", s.cfg.Run, err)
	}
	named := Names(infos)
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []string
	for name := range s.tools {
		if _, ok := named[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
	for name, ti := range named {
		if old, ok := s.tools[name]; ok && sameTool(old, ti) {
			continue
		}
		t := &mcp.Tool{Name: name, Title: ti.Title, Description: ti.Description, InputSchema: ti.InputSchema,
			Annotations: annotations(ti)}
		s.srv.AddTool(t, s.handler(name))
	}
	s.tools = named
	s.synced.Store(true)
	return nil
}

func sameTool(a, b broker.ToolInfo) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func annotations(ti broker.ToolInfo) *mcp.ToolAnnotations {
	destructive := ti.Class == policy.EffectDestructive || (ti.Class == "" && ti.Mutates)
	open := ti.Sink == policy.SinkProvider || ti.Sink == policy.SinkBrowser || ti.Sink == policy.SinkMCP
	return &mcp.ToolAnnotations{Title: ti.Title, ReadOnlyHint: !ti.Mutates, DestructiveHint: &destructive, OpenWorldHint: &open}
}

// Names gives each tool its MCP name (see the package doc).
func Names(infos []broker.ToolInfo) map[string]broker.ToolInfo {
	out := make(map[string]broker.ToolInfo, len(infos))
	for _, ti := range infos {
		name := safeName(ti.Tool)
		if _, taken := out[name]; taken || len(name) > 64 || name == "" {
			sum := sha256.Sum256([]byte(ti.Tool))
			h := hex.EncodeToString(sum[:4])
			if len(name) > 55 {
				name = name[:55]
			}
			name += "_" + h
		}
		out[name] = ti
	}
	return out
}

func safeName(tool string) string {
	tool = strings.ReplaceAll(tool, "/", "__")
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, tool)
}

// ErrArguments: the call's arguments are not a JSON object, or too large.
var ErrArguments = errors.New("tool arguments must be a JSON object")

// Params turns a call's arguments into the effect's params for ti: the
// arguments themselves, or ti.Bind with the arguments in its
// ArgumentsField. Arguments must be a JSON object of at most
// broker.MaxRequestBytes (absent is {}).
func Params(ti broker.ToolInfo, args json.RawMessage) (json.RawMessage, error) {
	if len(args) > broker.MaxRequestBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrArguments, len(args), broker.MaxRequestBytes)
	}
	trimmed := strings.TrimSpace(string(args))
	if trimmed == "" || trimmed == "null" {
		args = json.RawMessage("{}")
	} else if trimmed[0] != '{' || !json.Valid(args) {
		return nil, ErrArguments
	}
	if ti.Bind == nil {
		return args, nil
	}
	var bind map[string]json.RawMessage
	if err := json.Unmarshal(ti.Bind, &bind); err != nil {
		return nil, fmt.Errorf("tool %s: bad bound params: %w", ti.Tool, err)
	}
	bind[ti.ArgumentsField] = args
	return json.Marshal(bind)
}

func (s *Server) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.mu.Lock()
		ti, ok := s.tools[name]
		s.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("unknown tool %q", name)
		}
		params, err := Params(ti, req.Params.Arguments)
		if err != nil {
			return errorResult("BAD_REQUEST", err.Error(), nil), nil
		}
		er := broker.EffectRequest{Run: s.cfg.Run, Action: ti.Action, Params: params}
		reply, err := s.propose(ctx, ti.Sink, er)
		if held(reply) && s.cfg.ApprovalWait > 0 && req.Params.GetProgressToken() != nil {
			reply, err = s.waitAndPropose(ctx, req, ti.Sink, er, reply)
		}
		if ti.Sink == policy.SinkMCP {
			if res := upstreamResult(reply); res != nil {
				return res, nil
			}
		}
		return Result(reply, err), nil
	}
}

// upstreamResult is, for an allowed upstream MCP tool call, the upstream
// server's own result, passed through (its _meta too), with Gatehouse's
// decision in _meta["gatehouse"]; nil for anything else.
func upstreamResult(r *broker.EffectReply) *mcp.CallToolResult {
	if r == nil || r.Decision == nil || r.Decision.Outcome != "allowed" || len(r.Result) == 0 {
		return nil
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		return nil
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	// The server's own _meta stays; "gatehouse" is Gatehouse's, whatever
	// the server put there.
	res.Meta["gatehouse"] = map[string]any{"run": r.Run, "effect": r.Effect, "decision": r.Decision, "outcome": r.Outcome}
	return &res
}

func (s *Server) propose(ctx context.Context, sink policy.Sink, er broker.EffectRequest) (*broker.EffectReply, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	return s.cfg.Agent.Effect(ctx, sink, er)
}

func held(r *broker.EffectReply) bool {
	return r != nil && r.Decision != nil && r.Decision.Outcome == "held" && r.Decision.Approval != ""
}

// waitAndPropose waits for a person to decide the approval reply is held
// in, telling the client it is alive, then proposes er again.
func (s *Server) waitAndPropose(ctx context.Context, req *mcp.CallToolRequest, sink policy.Sink, er broker.EffectRequest,
	reply *broker.EffectReply) (*broker.EffectReply, error) {
	id := reply.Decision.Approval
	token := req.Params.GetProgressToken()
	deadline := time.Now().Add(s.cfg.ApprovalWait)
	for n := 1; ; n++ {
		left := time.Until(deadline)
		if left <= 0 {
			return reply, reply.Error
		}
		msg := fmt.Sprintf("held for a person's approval (%s); waiting for a reviewer", id)
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: msg}); err != nil {
			s.log.Debug("progress notification not sent", "err", err)
		}
		ask := min(left, broker.MaxApprovalWait)
		wctx, cancel := context.WithTimeout(ctx, ask+10*time.Second)
		w, err := s.cfg.Agent.WaitApproval(wctx, s.cfg.Run, id, ask)
		cancel()
		switch {
		case ctx.Err() != nil:
			return reply, reply.Error // the client gave up
		case err != nil:
			return reply, err
		case w.Decided:
			return s.propose(ctx, sink, er)
		}
	}
}

// Result turns a broker reply (and the error Effect returned with it) into
// the tool result a model reads.
func Result(r *broker.EffectReply, err error) *mcp.CallToolResult {
	if r == nil {
		code, msg := codeOf(err)
		return errorResult(code, msg, nil)
	}
	d := r.Decision
	switch {
	case d == nil:
		code, msg := codeOf(err)
		return errorResult(code, msg, r)
	case d.Outcome == "held":
		text := fmt.Sprintf("HELD for a person's approval (approval %s, rule %s): nothing happened yet. A reviewer must approve this "+
			"exact call; once they have, call the tool again with exactly the same arguments and it runs once. Any other "+
			"arguments ask again.", d.Approval, d.Rule)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: r}
	case d.Outcome != "allowed":
		return refusedResult(r)
	case r.Error != nil:
		return errorResult(string(r.Error.Code), r.Error.Message, r)
	}
	text := string(r.Result)
	if text == "" {
		text = "done"
		if o := r.Outcome; o != nil {
			text = fmt.Sprintf("done: outcome %s, %d bytes, %s", o.Status, o.Size, o.Digest)
		}
	}
	if d.Refusal != "" && !d.Enforced {
		text += fmt.Sprintf("\n(note: strict mode would refuse this: %s, rule %s)", d.Refusal, d.Rule)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: r}
}

func refusedResult(r *broker.EffectReply) *mcp.CallToolResult {
	d := r.Decision
	var b strings.Builder
	fmt.Fprintf(&b, "REFUSED by Gatehouse (%s mode): %s, rule %s", d.Mode, d.Refusal, d.Rule)
	if d.Enforced {
		b.WriteString(", enforced")
	}
	b.WriteString(". Nothing happened.")
	for _, rs := range d.Reasons {
		if rs.Enforced {
			fmt.Fprintf(&b, "\n- %s (rule %s): %s", rs.Refusal, rs.Rule, rs.Detail)
		}
	}
	if r.Error != nil {
		fmt.Fprintf(&b, "\ncode %s: %s", r.Error.Code, r.Error.Message)
	}
	b.WriteString("\nWhat to do: follow the reasons above; the same call will be refused again.")
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}, StructuredContent: r}
}

func errorResult(code, msg string, r *broker.EffectReply) *mcp.CallToolResult {
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "ERROR " + code + ": " + msg}}}
	if r != nil {
		res.StructuredContent = r
	}
	return res
}

func codeOf(err error) (string, string) {
	var eb *broker.ErrorBody
	if errors.As(err, &eb) {
		return string(eb.Code), eb.Message
	}
	if err == nil {
		return string(broker.CodeInternal), "no reply"
	}
	return string(broker.CodeInternal), err.Error()
}
