package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// ToolsRequest asks which tools an agent may be offered for a run
// (subject.ToolsListOp on the agent's own subject). It carries the run only: whom the
// work is for, its mandate and its agent come from the run's record.
type ToolsRequest struct {
	Run string `json:"run"`
}

// ToolInfo is one action offered to an agent as a tool: what MCP's
// tools/list shows, and how a call becomes an effect request.
type ToolInfo struct {
	Sink   policy.Sink `json:"sink"`
	Action string      `json:"action"`
	// Tool is the name agent cards match (Effect.Tool).
	Tool        string             `json:"tool"`
	Title       string             `json:"title,omitempty"`
	Description string             `json:"description"`
	InputSchema json.RawMessage    `json:"input_schema"`
	Mutates     bool               `json:"mutates"`
	Class       policy.EffectClass `json:"class,omitempty"`
	// Bind and ArgumentsField: see Action.
	Bind           json.RawMessage `json:"bind,omitempty"`
	ArgumentsField string          `json:"arguments_field,omitempty"`
}

// ToolsReply answers ToolsRequest.
type ToolsReply struct {
	Run   string     `json:"run,omitempty"`
	Tools []ToolInfo `json:"tools,omitempty"`
	Error *ErrorBody `json:"error,omitempty"`
}

// WaitRequest waits for a person to decide an approval request the run's
// effect is held in (subject.ToolsWaitOp on the agent's own subject). It decides
// nothing and records nothing: the agent then proposes the same action
// again, which runs once if it was approved.
type WaitRequest struct {
	Run      string `json:"run"`
	Approval string `json:"approval"`
	// TimeoutMS bounds the wait (default and most MaxApprovalWait).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// WaitReply answers WaitRequest. Decided is false when the wait ended
// before anyone decided (ask again).
type WaitReply struct {
	Run      string         `json:"run,omitempty"`
	Approval string         `json:"approval,omitempty"`
	State    approval.State `json:"state,omitempty"`
	Decided  bool           `json:"decided"`
	// Approved is set when a person approved: propose the action again.
	Approved bool `json:"approved,omitempty"`
	// Reason is the person's reason for a refusal, or why the request was
	// reopened.
	Reason string     `json:"reason,omitempty"`
	Error  *ErrorBody `json:"error,omitempty"`
}

// MaxApprovalWait bounds one WaitRequest; a client waiting longer asks
// again, so a broker's in-flight slot is never held for long.
const MaxApprovalWait = 20 * time.Second

// maxApprovalWaiters bounds, per agent identity and broker, the
// WaitRequests waiting at once (the shared agent credential is one
// identity), so one agent cannot hold the broker's in-flight slots and
// poll its approval store with unbounded waits; past it a wait is
// refused at once with ErrTooManyWaits (TOO_MANY_WAITS), counted in
// gatehouse_waits_refused_total{op="tools.wait"} and logged. Nothing is
// recorded in a journal: a wait proposes nothing, and recording its
// refusals would be the flood the bound prevents.
const maxApprovalWaiters = 4

// approvalPoll is how often a wait reads the approval store.
const approvalPoll = 250 * time.Millisecond

// DecodeToolsRequest decodes and validates a ToolsRequest.
func DecodeToolsRequest(data []byte) (*ToolsRequest, error) {
	var r ToolsRequest
	if err := decodeStrict(data, &r); err != nil {
		return nil, err
	}
	if !ValidRunID(r.Run) {
		return nil, fmt.Errorf("%w: run %q is not a run id", ErrBadRequest, clip(r.Run))
	}
	return &r, nil
}

// DecodeWaitRequest decodes and validates a WaitRequest.
func DecodeWaitRequest(data []byte) (*WaitRequest, error) {
	var r WaitRequest
	if err := decodeStrict(data, &r); err != nil {
		return nil, err
	}
	switch {
	case !ValidRunID(r.Run):
		return nil, fmt.Errorf("%w: run %q is not a run id", ErrBadRequest, clip(r.Run))
	case !approval.ValidID(r.Approval):
		return nil, fmt.Errorf("%w: %q is not an approval id", ErrBadRequest, clip(r.Approval))
	case r.TimeoutMS < 0:
		return nil, fmt.Errorf("%w: timeout_ms must not be negative", ErrBadRequest)
	}
	return &r, nil
}

// Tools returns the described actions of this broker's sinks that the
// run's policy could allow, as tools. An action is left out when nothing
// its arguments could say would let it through: the agent card blocks the
// tool or does not list it, the agent has no card, or the mandate has
// expired, does not cover the action's system, or does not hand over its
// effect class, or (an upstream MCP tool, whose target is its name) a
// deny rule matches it. Everything that depends on the arguments
// (targets, deployment rules, scopes, grounding, approvals) is decided
// when the tool is called.
//
// Only the run's own agent may ask (ErrNotRunAgent), as only it may
// propose the run's effects.
func (b *Broker) Tools(ctx context.Context, from Caller, runID string) ([]ToolInfo, error) {
	run, err := b.runOf(ctx, from, runID)
	if err != nil {
		return nil, err
	}
	sinks := make([]Sink, 0, len(b.sinks))
	for _, s := range b.sinks {
		sinks = append(sinks, s)
	}
	pol := b.policy.Load()
	now := b.now()
	origin := b.establishedOrigin(from)
	out := []ToolInfo{}
	for _, a := range DescribedActions(sinks) {
		if a.Unlisted || b.mode != policy.ModeOff && !couldAllow(pol, run, &a, now, origin) {
			continue
		}
		s, err := a.Schema()
		if err != nil {
			b.log.Error("action not offered: its schema cannot be made", "sink", a.Sink, "action", a.Name, "err", err)
			continue
		}
		// A schema someone else defined (an upstream MCP server's, as
		// pinned) is offered exactly as they wrote it: parsed only to
		// check it, since jsonschema.Schema rewrites what it reads ({}
		// becomes true).
		raw := a.InputSchema
		if raw == nil {
			if raw, err = json.Marshal(s); err != nil {
				continue
			}
		}
		out = append(out, ToolInfo{Sink: a.Sink, Action: a.Name, Tool: a.ToolName(), Title: a.Title,
			Description: a.Description, InputSchema: raw, Mutates: a.Mutates, Class: a.Class,
			Bind: a.Bind, ArgumentsField: a.ArgumentsField})
	}
	return out, nil
}

// couldAllow reports whether some arguments could make a of run allowed:
// it decides the action in strict mode with no arguments and looks only at
// the findings that do not depend on them. An upstream MCP tool's target
// is its name whatever the arguments, and every other key an effects rule
// matches (sink, action, the agent, its origin) is fixed too, except
// whether a stdio server runs confined, which only the sink knows: a deny
// rule that matches such a tool confined or not refuses every call of it.
func couldAllow(pol *policy.Policy, run *Run, a *Action, now time.Time, origin policy.Origin) bool {
	e := policy.Effect{Sink: a.Sink, Action: a.Name, Tool: a.ToolName(), Class: a.Class, Origin: origin}
	if a.Sink == policy.SinkProvider || a.Sink == policy.SinkMCP {
		e.Provider = a.System
	}
	if a.Sink == policy.SinkMCP {
		e.Target, e.PathFold = a.ToolName(), true // as the mcp sink describes it
	}
	d := pol.Decide(policy.Input{Mode: policy.ModeStrict, Authority: run.Authority(), Effect: e, Now: now})
	for _, r := range d.Reasons {
		switch r.Refusal {
		case policy.RefusePolicyUnreadable, policy.RefuseAgentUnregistered, policy.RefuseToolBlocked, policy.RefuseToolNotAllowed:
			return false
		case policy.RefuseDeploymentRule:
			if a.Sink == policy.SinkMCP {
				confined := e
				confined.Confined = true
				c := pol.Decide(policy.Input{Mode: policy.ModeStrict, Authority: run.Authority(), Effect: confined, Now: now})
				if slices.ContainsFunc(c.Reasons, func(r policy.Reason) bool { return r.Refusal == policy.RefuseDeploymentRule }) {
					return false
				}
			}
		case policy.RefuseOutsideMandate:
			switch r.Rule {
			case "mandate", "mandate.expires_at":
				return false
			case "mandate.systems":
				if a.System != "" {
					return false
				}
			case "mandate.effects":
				if a.Class != "" {
					return false
				}
			}
		}
	}
	return true
}

// runOf is the open run runID, if from may act on it: Gatehouse itself, or
// the agent identity the run was opened for.
func (b *Broker) runOf(ctx context.Context, from Caller, runID string) (*Run, error) {
	run, err := b.runs.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	if !from.internal && (from.class != subject.ClassAgent || from.id != RunAgent(run)) {
		return nil, fmt.Errorf("%w: run %s was opened for %s; %s may ask only about its own runs", ErrNotRunAgent, run.ID, describeAgent(RunAgent(run)), from)
	}
	if why := b.staleIncarnation(from, run); why != "" {
		return nil, fmt.Errorf("%w: run %s: %s", ErrNotRunAgent, run.ID, why)
	}
	if run.Closed {
		return nil, fmt.Errorf("%w: %s", ErrRunClosed, run.ID)
	}
	return run, nil
}

// WaitApproval waits until a person decides the approval request id of
// run, or d passes (at most MaxApprovalWait). ErrUnknownApproval when the
// request is not one of run's; ErrNotRunAgent when from is not the run's
// agent.
func (b *Broker) WaitApproval(ctx context.Context, from Caller, runID, id string, d time.Duration) (*WaitReply, error) {
	if _, err := b.runOf(ctx, from, runID); err != nil {
		return nil, err
	}
	api, ok := b.approvals.(ApprovalAPI)
	if !ok {
		return nil, fmt.Errorf("%w: this broker holds no approvals", ErrApprovalStore)
	}
	if d <= 0 || d > MaxApprovalWait {
		d = MaxApprovalWait
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := time.NewTicker(approvalPoll)
	defer t.Stop()
	last := &WaitReply{Run: runID, Approval: id}
	for {
		r, err := api.Get(ctx, id)
		switch {
		case errors.Is(err, approval.ErrNotFound):
			return nil, fmt.Errorf("%w: %s", ErrUnknownApproval, id)
		case err != nil && ctx.Err() == nil:
			return nil, fmt.Errorf("%w: %v", ErrApprovalStore, err)
		case err == nil && r.Run != runID:
			// Never say whether another run's request exists.
			return nil, fmt.Errorf("%w: %s", ErrUnknownApproval, id)
		case err == nil:
			last.State = r.State
			switch r.State {
			case approval.StatePending, approval.StateReopened:
			default:
				last.Decided = true
				last.Approved = r.State == approval.StateApproved
				if r.Decision != nil {
					last.Reason = r.Decision.Reason
				}
				return last, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, nil
		case <-t.C:
		}
	}
}

// ErrUnknownApproval: no approval request of that id belongs to the run.
var ErrUnknownApproval = errors.New("no such approval request for this run")

func (s *Service) addTools(add func(name, subj string, class subject.Class, h handler) error) error {
	if err := add("tools-list", subject.AgentOpEndpoint(subject.ToolsListOp), subject.ClassAgent, func(ctx context.Context, from Caller, r micro.Request) {
		q, err := DecodeToolsRequest(r.Data())
		if err != nil {
			respond(r, &ToolsReply{Error: errorBody(err)})
			return
		}
		tools, err := s.b.Tools(ctx, from, q.Run)
		if err != nil {
			respond(r, &ToolsReply{Run: q.Run, Error: errorBody(err)})
			return
		}
		respond(r, &ToolsReply{Run: q.Run, Tools: tools})
	}); err != nil {
		return err
	}
	return add("tools-wait", subject.AgentOpEndpoint(subject.ToolsWaitOp), subject.ClassAgent, func(ctx context.Context, from Caller, r micro.Request) {
		q, err := DecodeWaitRequest(r.Data())
		if err != nil {
			respond(r, &WaitReply{Error: errorBody(err)})
			return
		}
		if !s.approvalWaits.acquire(from.id) {
			s.b.metrics.observeWaitRefused(subject.ToolsWaitOp)
			s.b.log.Warn("wait refused: too many waiting", "caller", from, "run", q.Run, "bound", maxApprovalWaiters)
			respond(r, &WaitReply{Run: q.Run, Approval: q.Approval, Error: errorBody(fmt.Errorf("%w: %s already has %d tools.wait requests waiting on this broker, the most it may",
				ErrTooManyWaits, from, maxApprovalWaiters))})
			return
		}
		defer s.approvalWaits.release(from.id)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(s.waits, cancel) // the service is closing: stop waiting
		defer stop()
		rep, err := s.b.WaitApproval(wctx, from, q.Run, q.Approval, time.Duration(q.TimeoutMS)*time.Millisecond)
		if err != nil {
			respond(r, &WaitReply{Run: q.Run, Approval: q.Approval, Error: errorBody(err)})
			return
		}
		respond(r, rep)
	})
}

// LookupRun returns the run's record (ErrUnknownRun, ErrRunStore).
func (b *Broker) LookupRun(ctx context.Context, id string) (*Run, error) { return b.runs.Get(ctx, id) }
