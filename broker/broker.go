package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/journal/canon"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// Sink carries out one kind of effect at the one place it happens. The
// broker calls Describe, decides, records, and calls Perform only for an
// allowed effect whose decision and attempt are recorded (or, in report
// mode, could not be recorded and were logged). Implementations must be safe
// for concurrent use.
type Sink interface {
	Name() policy.Sink
	// Describe decodes the request's params and builds the effect exactly
	// as it will be carried out. Its error is returned to the agent as
	// BAD_REQUEST (wrap ErrBadRequest) and nothing is decided.
	Describe(ctx context.Context, run *Run, req *EffectRequest) (*Proposal, error)
	// Perform carries out the effect described by p.
	Perform(ctx context.Context, run *Run, req *EffectRequest, p *Proposal) (*Performed, error)
}

// Proposal is a described effect, ready to be decided.
type Proposal struct {
	Effect policy.Effect
	// Size and Digest describe the content the effect carries (never the
	// content); Digest is "sha256:<hex>".
	Size   int64
	Digest string
	// ID is the effect's id, set by the broker after Describe; decision,
	// attempt and outcome events name it.
	ID string
	// Citations are the records a grounding check relied on (provider
	// calls); they are recorded with the decision.
	Citations []journal.Citation
	// Contract is a code effect's program contract, recorded with the
	// decision.
	Contract *journal.ProgramContract
	// Resolved is "sha256:<hex>" of what the effect will carry out that
	// the sink resolved from its own state rather than from the params (a
	// stored integration's source, looked up by the name the params give),
	// "" for none. An approval is bound to it as well as to the params, so
	// what a name resolves to cannot change between approval and run.
	Resolved string
	// State is the sink's own decoded request, handed back to Perform.
	State any
}

// Performed is what a sink did.
type Performed struct {
	Result journal.Result
	// Reply is returned to the agent as EffectReply.Result.
	Reply json.RawMessage
}

// RunStore keeps run records. Implementations: *KVRuns.
type RunStore interface {
	Create(ctx context.Context, r *Run) error
	Get(ctx context.Context, id string) (*Run, error)
	Close(ctx context.Context, id string) (*Run, error)
}

// Journal records events durably; Record returns only once the event is
// stored where the journal writer will find it. Implementations: *Recorder.
type Journal interface {
	Record(ctx context.Context, e *journal.Event) error
}

// Config configures a Broker. The zero value of each field is useful.
type Config struct {
	Mode   policy.Mode      // "" is report
	Now    func() time.Time // nil is time.Now
	Logger *slog.Logger     // nil discards
	// Metrics, when set, counts decisions and times recording.
	Metrics *Metrics
	// Content, when set, keeps what each decision depended on beside the
	// journal (see ContentSink); nil captures nothing.
	Content ContentSink
	// Approvals, when set, holds effects an approvals rule or agent card
	// sends to a person (strict mode) and claims approved ones; nil: such
	// effects are held with no request to approve.
	Approvals Approvals
	// ApprovalLife bounds how long an approval stands unused: an approved
	// action proposed later than this after the decision goes back to a
	// person (reopened, "the approval expired"). 0 is for ever.
	ApprovalLife time.Duration
	// Requests, when set, decides each request with a request_id at most
	// once per run (see RequestIDs); nil ignores request ids.
	Requests *RequestIDs
	// Identities, when set, is what the deployment declares about named
	// agents and applications (their origin, their tenants); nil declares
	// nothing: every agent's origin is model, no application is bound.
	Identities Identities
}

// Broker is the gate: it turns a proposal into a decision, records it, hands
// allowed effects to their sink and answers. It holds no per-run state of
// its own, so many brokers can share a queue group. Safe for concurrent use.
type Broker struct {
	mode    policy.Mode
	now     func() time.Time
	log     *slog.Logger
	metrics *Metrics
	content ContentSink
	runs    RunStore
	journal Journal
	sinks   map[policy.Sink]Sink
	policy  atomic.Pointer[policy.Policy]
	// decisions under way, per run: a run's close waits for them
	deciding deciding
	// effect replies that carried an error code (a bad request, an unknown
	// run, a failed effect; a policy refusal is a decision, not an error),
	// for `gatehouse status`: NATS micro counts only errors given through
	// its own Error, which this broker's asynchronous answers do not use
	effectErrors atomic.Int64

	approvals    Approvals
	approvalLife time.Duration
	requests     *RequestIDs
	identities   Identities
	later        inflight              // outcomes being recorded after their reply (record.go)
	fence        atomic.Pointer[Fence] // the other brokers' decisions, for a close (fence.go)
	floods       refusalFlood          // budgets of caller refusals' records (refusalflood.go)
}

// New returns a broker deciding under p. Sinks are looked up by Name.
func New(cfg Config, runs RunStore, j Journal, p *policy.Policy, sinks ...Sink) (*Broker, error) {
	mode := cfg.Mode
	if mode == "" {
		mode = policy.ModeReport
	}
	if _, err := policy.ParseMode(string(mode)); err != nil {
		return nil, err
	}
	b := &Broker{
		mode: mode, now: cfg.Now, log: cfg.Logger, metrics: cfg.Metrics, content: cfg.Content,
		runs: runs, journal: j, sinks: map[policy.Sink]Sink{}, approvals: cfg.Approvals, approvalLife: cfg.ApprovalLife,
		requests: cfg.Requests, identities: cfg.Identities,
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	for _, s := range sinks {
		if _, dup := b.sinks[s.Name()]; dup {
			return nil, fmt.Errorf("sink %q registered twice", s.Name())
		}
		b.sinks[s.Name()] = s
	}
	b.SetPolicy(p)
	return b, nil
}

// SetPolicy replaces the policy for effects decided from now on. A nil
// policy refuses everything.
func (b *Broker) SetPolicy(p *policy.Policy) { b.policy.Store(p) }

// Policy returns the policy in force.
func (b *Broker) Policy() *policy.Policy { return b.policy.Load() }

// Mode returns the broker's mode.
func (b *Broker) Mode() policy.Mode { return b.mode }

// Sinks returns the names of the sinks this broker serves.
func (b *Broker) Sinks() []policy.Sink {
	out := make([]policy.Sink, 0, len(b.sinks))
	for n := range b.sinks {
		out = append(out, n)
	}
	return out
}

// sinkList names the sinks b serves, sorted, for a message.
func (b *Broker) sinkList() string {
	names := make([]string, 0, len(b.sinks))
	for n := range b.sinks {
		names = append(names, string(n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Open opens work for a person, as application from (or Gatehouse itself,
// Internal), and returns the run, bound to from and to w.Agent. run.open is
// recorded before the run exists: work that cannot be recorded does not
// open. Errors: ErrNotRunApp (from is not an application),
// ErrTenantNotAllowed (from is bound to other tenants), ErrBadRequest (an
// agent that is not a name), ErrJournal, ErrRunStore.
func (b *Broker) Open(ctx context.Context, from Caller, w *OpenWork) (*Run, error) {
	if err := b.admitOpen(from, w); err != nil {
		return nil, err
	}
	if w.Agent != "" && !subject.ValidName(w.Agent) {
		return nil, fmt.Errorf("%w: agent %q must be an agent identity's name: 1 to %d letters, digits, '-' or '_', starting with a letter or digit", ErrBadRequest, clip(w.Agent), subject.MaxAgentLen)
	}
	app := from.id
	if from.internal {
		app = InternalApp
	}
	now := b.now().UTC()
	r := &Run{
		ID: NewRunID(now), For: policy.Principal{Tenant: w.Tenant, Person: w.Person},
		Mandate: w.Mandate, Scopes: w.Scopes, Agent: w.Agent, App: app, Input: w.Input, Opened: now,
	}
	if r.Agent != "" {
		r.Incarnation = b.AgentIncarnation(r.Agent) // caller.go: the registration the run is bound to
	}
	if r.Scopes == nil {
		r.Scopes = []string{}
	}
	if r.Mandate != nil {
		r.MandateDigest = r.Mandate.Digest()
	}
	if b.mode != policy.ModeOff {
		ev, err := b.event(r.ID, journal.TypeRunOpen, "", journal.RunOpen{
			ActingFor: r.For, Mandate: r.Mandate, MandateDigest: r.MandateDigest, Scopes: r.Scopes, Agent: r.Agent,
			InputDigest: digestOf(r.Input),
		})
		if err != nil {
			return nil, err
		}
		if err := b.journal.Record(ctx, ev); err != nil {
			return nil, err
		}
	}
	if err := b.runs.Create(ctx, r); err != nil {
		return nil, err
	}
	b.log.Info("work opened", "run", r.ID, "tenant", r.For.Tenant, "person", r.For.Person, "agent", r.Agent, "app", r.App)
	return r, nil
}

// RunCloser is implemented by sinks that hold state per run (the browser's
// context); CloseRun tells them when the application closes the run.
type RunCloser interface {
	CloseRun(run string)
}

// CloseRun closes a run for from, which must be the application that
// opened its work (ErrNotRunApp) or Gatehouse itself; later effects for it
// are refused with ErrRunClosed.
func (b *Broker) CloseRun(ctx context.Context, from Caller, c *CloseWork) error {
	run, err := b.runs.Get(ctx, c.Run)
	if err != nil {
		return err
	}
	if err := admitClose(from, run); err != nil {
		return err
	}
	// Sinks let go of an open run's state before it closes, so what
	// letting go sends (a browser page's unload beacons) is decided and
	// recorded under the run; and again after, for anything an effect
	// opened meanwhile.
	if !run.Closed {
		b.closeSinks(c.Run)
		b.flushSummaries(ctx, c.Run) // counts of refusals not recorded one by one
	}
	if _, err := b.runs.Close(ctx, c.Run); err != nil {
		return err
	}
	b.closeSinks(c.Run)
	if b.mode == policy.ModeOff {
		return nil
	}
	b.quiesce(ctx, c.Run)
	ev, err := b.event(c.Run, journal.TypeRunClose, "", journal.RunClose{Status: c.Status})
	if err != nil {
		return err
	}
	return b.journal.Record(ctx, ev)
}

func (b *Broker) closeSinks(run string) {
	for _, s := range b.sinks {
		if rc, ok := s.(RunCloser); ok {
			rc.CloseRun(run)
		}
	}
}

// Propose decides one effect of sink, proposed by from, for the run the
// request names, records the decision, carries the effect out when
// allowed, and returns the reply. It never returns a nil reply; errors are
// in EffectReply.Error.
//
// Before anything is decided, admit establishes the caller's facts: from
// must be the run's agent (or Gatehouse itself), and the origin and tool
// are Gatehouse's, not the request's (see admit and the package doc).
//
// The promise: in report and strict mode no effect is performed before its
// policy.decision and effect.attempt are acknowledged by the journal, except
// in report mode when the journal fails, which is logged and answered with
// Recorded false. In strict mode a decision that cannot be recorded refuses.
func (b *Broker) Propose(ctx context.Context, from Caller, sinkName policy.Sink, data []byte) *EffectReply {
	start := time.Now()
	var slot requestSlot
	reply := b.propose(ctx, from, sinkName, data, &slot)
	slot.claim.settle(reply)
	if reply.Error != nil {
		b.effectErrors.Add(1)
	}
	label := sinkName
	if _, ok := b.sinks[sinkName]; !ok {
		label = "unknown" // never a label from an agent's subject
	}
	b.metrics.observeEffect(label, reply, time.Since(start))
	return reply
}

func (b *Broker) propose(ctx context.Context, from Caller, sinkName policy.Sink, data []byte, slot *requestSlot) *EffectReply {
	sink, ok := b.sinks[sinkName]
	if !ok {
		return errorReply("", fmt.Errorf("%w: %q; this broker serves %s", ErrUnknownSink, clip(string(sinkName)), b.sinkList()))
	}
	req, err := DecodeEffectRequest(data)
	if err != nil {
		b.log.Warn("effect request refused", "sink", sinkName, "caller", from, "err", err)
		return errorReply("", err)
	}
	// Counted before the run is read: a close that has not marked the run
	// closed yet waits for this decision to be recorded.
	leave, fenced := b.deciding.enter(req.Run)
	defer leave()
	run, err := b.runs.Get(ctx, req.Run)
	if err != nil {
		return errorReply(req.Run, err)
	}
	if rep := b.admit(ctx, from, sinkName, run, req); rep != nil {
		return rep
	}
	if run.Closed || fenced { // fenced: another broker is closing it (fence.go)
		return errorReply(req.Run, fmt.Errorf("%w: %s", ErrRunClosed, run.ID))
	}
	if err := b.checkLineage(ctx, run); err != nil {
		return errorReply(req.Run, err)
	}
	if rep := b.claimRequest(ctx, slot, run.ID, sinkName, req); rep != nil {
		return rep // decided before (or being decided) under its request_id
	}
	prop, err := sink.Describe(ctx, run, req)
	if err != nil {
		return errorReply(req.Run, err)
	}
	now := b.now()
	effectID := newID("e_", now)
	prop.ID = effectID
	reply := &EffectReply{Run: run.ID, Effect: effectID}
	pol := b.policy.Load()

	var d policy.Decision
	var g *gate
	if b.mode == policy.ModeOff {
		d = policy.Decision{Verdict: policy.VerdictAllow, Mode: policy.ModeOff}
	} else {
		in := policy.Input{Mode: b.mode, Authority: run.Authority(), Effect: prop.Effect, Now: now}
		d = pol.Decide(in)
		if b.approvals != nil && b.mode == policy.ModeStrict && d.Approval != nil {
			d, g = b.gateApproval(ctx, run, req, prop, pol, d, in, reply)
		}
	}
	reply.Decision = decisionBody(d)
	if g != nil {
		reply.Decision.Approval = g.id
	}
	b.metrics.observeDecision(sinkName, reply.Decision)

	dd := decisionData(run, pol, prop, d)
	if g != nil {
		dd.Approval, dd.ActionDigest = g.id, g.digest
	}
	dd.RequestDigest = b.capture(ctx, run, req, prop, pol, now)
	if err := slot.recording(ctx); err != nil {
		reply.Decision, reply.Error = nil, errorBody(err)
		return reply
	}
	claim := g != nil && g.claim
	// An allowed effect not waiting on an approval claim: its decision and
	// attempt are one record. Otherwise the decision alone comes first.
	var attempt *journal.Attempt
	if d.Verdict == policy.VerdictAllow && !claim {
		attempt = &journal.Attempt{Sink: sinkName, Action: req.Action}
	}
	if !b.recordDecision(ctx, reply, run.ID, effectID, dd, attempt) {
		return reply
	}
	if d.Verdict != policy.VerdictAllow {
		return reply
	}
	if claim {
		// At most once: only the broker that claims the approval performs.
		if err := b.claimApproval(ctx, g, effectID); err != nil {
			reply.Error = errorBody(err)
			return reply
		}
		ctx = ContextWithApproval(ctx, g.id)
		if !b.recordAttempt(ctx, reply, run.ID, effectID, journal.Attempt{Sink: sinkName, Action: req.Action}) {
			return reply
		}
	}

	leave() // decided and recorded: the run may close while the effect runs
	done, perr := sink.Perform(ctx, run, req, prop)
	if perr != nil {
		done = &Performed{Result: journal.Result{Status: "failed", Error: errorType(perr)}}
		if errors.Is(perr, ErrQuotaExceeded) {
			// Decided, attempted, and refused by the store for the
			// tenant's budget: nothing stored, and the code says so.
			reply.Error = errorBody(perr)
		} else {
			reply.Error = errorBody(fmt.Errorf("%w: %v", ErrEffectFailed, perr))
		}
		b.log.Warn("effect failed", "run", run.ID, "effect", effectID, "sink", sinkName, "err", perr)
	}
	reply.Outcome = &done.Result
	reply.Result = done.Reply

	// The outcome is pipelined (the reply does not wait for it), except
	// under an approval, whose settle must follow it.
	b.recordOutcome(ctx, run.ID, effectID, done.Result, claim)
	if claim {
		b.settleApproval(ctx, g, effectID, done.Result.Status)
	}
	return reply
}

// step records one event of an effect and waits for the journal's
// acknowledgement; in mode off it records nothing and returns nil.
func (b *Broker) step(ctx context.Context, run string, typ journal.Type, effect string, data any) error {
	if b.mode == policy.ModeOff {
		return nil
	}
	ev, err := b.event(run, typ, effect, data)
	if err != nil {
		return err
	}
	return b.record(ctx, ev)
}

func (b *Broker) record(ctx context.Context, ev *journal.Event) error {
	start := time.Now()
	err := b.journal.Record(ctx, ev)
	b.metrics.observeRecord(ev.Type, err, time.Since(start))
	return err
}

func (b *Broker) event(run string, typ journal.Type, effect string, data any) (*journal.Event, error) {
	raw, err := canon.Marshal(data) // canonical already: the writer hashes it as it is
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", typ, err)
	}
	now := b.now().UTC()
	return &journal.Event{V: journal.Version, ID: newID("ev_", now), Run: run, Type: typ, Time: now, Effect: effect, Data: raw}, nil
}

func decisionData(run *Run, pol *policy.Policy, p *Proposal, d policy.Decision) journal.Decision {
	e := p.Effect
	return journal.Decision{
		ActingFor: run.For, MandateDigest: run.MandateDigest, ScopesChecked: nonNil(d.ScopesChecked), Agent: run.Agent,
		PolicyDigest: pol.Digest(), Mode: d.Mode,
		Sink: e.Sink, Action: e.Action, Origin: e.Origin, Tool: e.Tool, Target: e.Target, Confined: e.Confined,
		Provider: e.Provider, Method: e.Method, Host: e.Host, Path: e.Path, PageHost: e.PageHost, Atom: e.Atom, Declared: e.Declared, Verified: d.Verified,
		Size: p.Size, Digest: p.Digest, Citations: p.Citations, Contract: p.Contract,
		Outcome: outcomeOf(d.Verdict), Refusal: d.Refusal, Rule: d.Rule, Enforced: d.Enforced, Allowed: d.Allowed, Reasons: d.Reasons,
	}
}

func decisionBody(d policy.Decision) *DecisionBody {
	return &DecisionBody{Outcome: outcomeOf(d.Verdict), Refusal: d.Refusal, Rule: d.Rule, Enforced: d.Enforced,
		Mode: d.Mode, AllowedBy: d.Allowed, Reasons: d.Reasons}
}

func outcomeOf(v policy.Verdict) journal.Outcome {
	switch v {
	case policy.VerdictAllow:
		return journal.OutcomeAllowed
	case policy.VerdictHold:
		return journal.OutcomeHeld
	default:
		return journal.OutcomeRefused
	}
}

// digestOf is "sha256:<hex>" of b, "" for none.
func digestOf(b []byte) string {
	if b == nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func errorReply(run string, err error) *EffectReply {
	return &EffectReply{Run: run, Error: errorBody(err)}
}

func errorBody(err error) *ErrorBody { return NewErrorBody(err) }

// errorType names the kind of a sink's failure for the journal without
// carrying its message, which may hold content.
func errorType(err error) string {
	var t interface{ ErrorType() string }
	if errors.As(err, &t) {
		return t.ErrorType()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}
