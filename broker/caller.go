package broker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// Caller is who asks the broker for something, as Gatehouse established
// it, never as a request said: an agent or application identity read from
// the subject the NATS server let its credential publish on (the Service
// does this), or Gatehouse itself, a sink proposing in process. The zero
// Caller is no one and is refused.
type Caller struct {
	class    subject.Class
	id       string
	internal bool
	origin   policy.Origin
}

// AgentCaller is agent identity id (a name or subject.Shared). Only the
// NATS edge (Service) and tests make one: anything in process could claim
// any identity, so nothing an agent sends ever becomes one.
func AgentCaller(id string) Caller { return Caller{class: subject.ClassAgent, id: id} }

// AppCaller is application identity id (a name or subject.Shared).
func AppCaller(id string) Caller { return Caller{class: subject.ClassApp, id: id} }

// Internal is Gatehouse proposing an effect itself, in process: a sink
// acting within the run its own decided effect belongs to (the code sink's
// gateway for sandboxed code, the provider sink's grounding rereads, the
// browser's sends and screenshots). origin is the origin that sink
// established ("" leaves it to the sink's Describe, as the browser's sends
// do). Run binding is the sink's: it proposes only in the run it was given.
func Internal(origin policy.Origin) Caller { return Caller{internal: true, origin: origin} }

// Class is the caller's identity class; "" for Internal.
func (c Caller) Class() subject.Class { return c.class }

// ID is the caller's identity token; "" for Internal.
func (c Caller) ID() string { return c.id }

// IsInternal reports whether Gatehouse itself is the caller.
func (c Caller) IsInternal() bool { return c.internal }

func (c Caller) String() string {
	switch {
	case c.internal:
		return "gatehouse"
	case c.class == "":
		return "nobody"
	}
	return string(c.class) + " " + c.id
}

// LogValue names the caller in logs.
func (c Caller) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Identities is what the deployment declares about identities
// (*identity.Holder): the origin of a named agent's requests and the
// tenants a named application is bound to. Implementations must be safe
// for concurrent use.
type Identities interface {
	// AgentOrigin is the origin of agent id's requests (model unless
	// declared; always model for subject.Shared).
	AgentOrigin(id string) policy.Origin
	// AppTenants returns the tenants app id may open work for, and whether
	// it is bound at all.
	AppTenants(id string) (tenants []string, bound bool)
}

// agentRegistrations is implemented by an Identities that tells named
// agents' registrations apart (identity.Holder): each registration of a
// name is an incarnation, and one removed and registered again is another
// identity of the same name.
type agentRegistrations interface {
	AgentRegistration(id string) identity.Registration
}

// AgentRegistration is what the identities in force say of named agent
// id (see package broker/identity): for the shared credential, and with
// an Identities that does not tell registrations apart, Unregistered.
func (b *Broker) AgentRegistration(id string) identity.Registration {
	r, ok := b.identities.(agentRegistrations)
	if !ok || id == subject.Shared {
		return identity.Registration{State: identity.Unregistered}
	}
	return r.AgentRegistration(id)
}

// AgentIncarnation is the stamp recorded now on a run opened for, or a
// peer message sent to, agent id (identity.Registration.Stamp): only the
// registration of the name that owns the stamp may act in the run or read
// the message.
func (b *Broker) AgentIncarnation(id string) string { return b.AgentRegistration(id).Stamp }

// IdentitiesChanged returns a channel closed at the next change of the
// identities in force, or nil (never) when they do not change.
func (b *Broker) IdentitiesChanged() <-chan struct{} {
	if c, ok := b.identities.(interface{ Changed() <-chan struct{} }); ok {
		return c.Changed()
	}
	return nil
}

// staleIncarnation returns, for an agent proposing in (or asking about)
// run, why it is not the registration run was opened for, or "": the
// name was removed and not registered again, or the registration in force
// does not own the run's stamp (Run.Incarnation, recorded at open).
// Stamps are names, never times: no machine's clock takes part (see
// package broker/identity). A name the register never knew (credentials
// kept elsewhere) owns what was stamped "": the NATS server alone says who
// holds it.
//
// Gatehouse itself (from.internal: sandboxed code's gateway calls, a
// browser session's requests, all made for the run by what its agent
// started) acts in a run only while the registration it was opened for
// is in force: once that agent is removed, or removed and registered
// again, what it set going acts no more (orphanedRun).
func (b *Broker) staleIncarnation(from Caller, run *Run) string {
	if from.internal {
		return b.orphanedRun(run)
	}
	if from.class != subject.ClassAgent || from.id == subject.Shared {
		return ""
	}
	g := b.AgentRegistration(from.id)
	switch {
	case g.Owns(run.Incarnation):
		return ""
	case g.State == identity.Removed:
		return fmt.Sprintf("Agent %s was removed and is not registered again; its credential acts on nothing. Register the agent (gatehouse agents add %s) and have the application open new work for it.", from.id, from.id)
	case g.State == identity.Unregistered:
		return fmt.Sprintf("The run was opened for an earlier agent named %s (registration %s), which the identity register no longer lists; register the agent (gatehouse agents add %s) and have the application open new work for it.", from.id, run.Incarnation, from.id)
	}
	return fmt.Sprintf("The run was opened for an earlier agent named %s (registration %s); the agent registered as %s now (registration %s) is another identity, the name having been removed and registered again, and may act only on runs opened for it. Have the application open new work for it.", from.id, stampOrNone(run.Incarnation), from.id, stampOrNone(g.Incarnation))
}

// orphanedRun returns, for Gatehouse acting in run on its agent's
// behalf, why it may not, or "": the registration run was opened for is
// no longer in force (Registration.Owns of the run's stamp). A run of the
// shared credential is never orphaned.
func (b *Broker) orphanedRun(run *Run) string {
	agent := RunAgent(run)
	if agent == subject.Shared || b.AgentRegistration(agent).Owns(run.Incarnation) {
		return ""
	}
	return fmt.Sprintf("The run was opened for agent %s (registration %s), which is no longer registered as it was (removed, or removed and registered again); nothing acts in the run on its behalf any more, code and browser sessions it started included. Have the application close the run and open new work.", agent, stampOrNone(run.Incarnation))
}

func stampOrNone(inc string) string {
	if inc == "" {
		return "none recorded"
	}
	return inc
}

// Refusals of the caller, made before policy is asked: Gatehouse
// established a fact and the request said otherwise, or the caller is not
// the identity the run was opened for. They are enforced in every mode
// (report mode reports what policy would refuse; these are not policy) and
// recorded as a policy.decision of rule journal.RuleIdentity against the
// run the request named.
const (
	RefuseOriginNotEstablished policy.Refusal = "origin-not-established"
	RefuseToolNotEstablished   policy.Refusal = "tool-not-established"
	RefuseRunOfAnotherAgent    policy.Refusal = "run-of-another-agent"
)

// establishedOrigin is the origin of from's effects: for an agent, what
// the deployment declares for its identity (model by default); for
// Gatehouse itself, what the proposing sink established.
func (b *Broker) establishedOrigin(from Caller) policy.Origin {
	switch {
	case from.internal:
		return from.origin
	case from.id == subject.Shared || b.identities == nil:
		return policy.OriginModel
	}
	if o := b.identities.AgentOrigin(from.id); o != "" {
		return o
	}
	return policy.OriginModel
}

// RunAgent is the agent identity a run accepts effects from: its agent,
// or subject.Shared for a run opened without one.
func RunAgent(r *Run) string {
	if r.Agent == "" {
		return subject.Shared
	}
	return r.Agent
}

// admit is the entry of every proposal: it establishes what Gatehouse holds
// as fact about who proposes and replaces what the request said with it,
// or refuses. In order:
//
//   - from must be an agent or Gatehouse (an application never proposes);
//   - an agent must be the identity the run was opened for (RunAgent; a
//     sub-run's is its delegate), else run-of-another-agent; and the same
//     registration of that name (Run.Incarnation is the name's incarnation
//     now: staleIncarnation), else run-of-another-agent too; Gatehouse
//     itself (code's gateway calls, a browser session's requests) only
//     while the registration the run was opened for is in force
//     (orphanedRun), else run-of-another-agent;
//   - origin: req.Origin, if the request names one, must be the
//     established origin (establishedOrigin), else origin-not-established;
//     it is then set to the established origin, which is all a sink sees;
//   - tool: req.Tool, if named, must be "<sink>.<action>", the only tool
//     name Gatehouse can vouch for (agent cards match on it), else
//     tool-not-established; it is then cleared, so the policy derives it.
//
// A refusal is recorded against the run and returned as the reply; nil
// admits req.
func (b *Broker) admit(ctx context.Context, from Caller, sinkName policy.Sink, run *Run, req *EffectRequest) *EffectReply {
	if !from.internal && from.class != subject.ClassAgent {
		return errorReply(req.Run, fmt.Errorf("%w: %s cannot propose effects", ErrNotRunAgent, from))
	}
	if !from.internal && from.id != RunAgent(run) {
		return b.refuseCaller(ctx, from, sinkName, run, req, b.establishedOrigin(from), RefuseRunOfAnotherAgent, ErrNotRunAgent,
			fmt.Sprintf("The run was opened for %s; %s proposed this effect and may act only on its own runs.", describeAgent(RunAgent(run)), from))
	}
	if why := b.staleIncarnation(from, run); why != "" {
		return b.refuseCaller(ctx, from, sinkName, run, req, b.establishedOrigin(from), RefuseRunOfAnotherAgent, ErrNotRunAgent, why)
	}
	origin := b.establishedOrigin(from)
	if req.Origin != "" && req.Origin != origin {
		return b.refuseCaller(ctx, from, sinkName, run, req, origin, RefuseOriginNotEstablished, ErrOriginNotEstablished,
			fmt.Sprintf("The request says origin %s; Gatehouse established %s for %s. Leave origin out: it is Gatehouse's fact, declared per agent identity by the deployment.", clip(string(req.Origin)), originOrUnset(origin), from))
	}
	if tool := string(sinkName) + "." + req.Action; req.Tool != "" && req.Tool != tool {
		return b.refuseCaller(ctx, from, sinkName, run, req, origin, RefuseToolNotEstablished, ErrToolNotEstablished,
			fmt.Sprintf("The request names the tool %q; Gatehouse knows this effect only as %q, which agent cards match. Leave tool out.", clip(req.Tool), tool))
	}
	req.Origin, req.Tool = origin, ""
	return nil
}

func describeAgent(id string) string {
	if id == subject.Shared {
		return "the shared agent credential (no named agent)"
	}
	return "agent " + id
}

func originOrUnset(o policy.Origin) string {
	if o == "" {
		return "none (the sink decides)"
	}
	return string(o)
}

// refuseCaller records a refusal of the caller as a policy.decision of
// rule journal.RuleIdentity in run's journal and returns the reply: the
// refused decision, and err as its error code. Like every decision it is
// recorded before the reply (in mode off nothing is recorded, nor in a
// closed run, whose journal ends at run.close), within the budget of its
// kind (refusalflood.go): past it, counted in a summarising record.
func (b *Broker) refuseCaller(ctx context.Context, from Caller, sinkName policy.Sink, run *Run, req *EffectRequest, origin policy.Origin,
	refusal policy.Refusal, sentinel error, detail string) *EffectReply {
	now := b.now()
	effectID := newID("e_", now)
	reason := policy.Reason{Refusal: refusal, Rule: journal.RuleIdentity, Detail: detail, Enforced: true}
	d := &DecisionBody{Outcome: journal.OutcomeRefused, Refusal: refusal, Rule: journal.RuleIdentity, Enforced: true,
		Mode: b.mode, Reasons: []policy.Reason{reason}}
	reply := &EffectReply{Run: run.ID, Effect: effectID, Decision: d,
		Error: errorBody(fmt.Errorf("%w: %s", sentinel, detail))}
	b.metrics.observeDecision(sinkName, d)
	b.log.Warn("caller refused", "run", run.ID, "sink", sinkName, "action", clip(req.Action), "refusal", refusal, "detail", detail)
	dd := journal.Decision{
		ActingFor: run.For, MandateDigest: run.MandateDigest, ScopesChecked: []string{}, Agent: run.Agent,
		PolicyDigest: b.policy.Load().Digest(), Mode: b.mode, Sink: sinkName, Action: req.Action, Origin: origin,
		Outcome: journal.OutcomeRefused, Refusal: refusal, Rule: journal.RuleIdentity, Enforced: true,
		Reasons: []policy.Reason{reason},
	}
	if run.Closed {
		// Nothing enters a closed run's journal: an event after run.close
		// is what verify reports as tampering, and anyone who learned the
		// run's id could otherwise make the journal fail verification.
		// The refusal is answered and logged.
		return reply
	}
	if b.mode == policy.ModeOff {
		return reply
	}
	// Repeated refusals of a kind are recorded within a budget, the rest
	// counted in a summarising record (refusalflood.go).
	k := floodKey{caller: from.String(), run: run.ID, refusal: refusal, sink: sinkName}
	record, summarised, schedule := b.floods.take(k, b.now())
	if !record {
		b.metrics.observeRefusalsSuppressed(refusal, 1)
		if schedule {
			b.summarise(k, dd)
		}
		return reply
	}
	if summarised > 0 {
		dd.Reasons = append(dd.Reasons, summaryReason(summarised, refusal))
	}
	if err := b.step(ctx, run.ID, journal.TypeDecision, effectID, dd); err != nil {
		b.log.Error("caller refusal not recorded", "run", run.ID, "effect", effectID, "err", err)
		if summarised > 0 {
			b.floods.giveBack(k, summarised) // a later record carries them
		}
	} else {
		d.Recorded = b.mode != policy.ModeOff
	}
	return reply
}

// admitOpen checks that application from may open w: an application
// identity, and one bound to tenants only for them. It returns nil or an
// error wrapping ErrTenantNotAllowed or ErrNotRunApp.
func (b *Broker) admitOpen(from Caller, w *OpenWork) error {
	if from.internal {
		return nil
	}
	if from.class != subject.ClassApp {
		return fmt.Errorf("%w: %s cannot open work", ErrNotRunApp, from)
	}
	if b.identities == nil {
		return nil
	}
	if tenants, bound := b.identities.AppTenants(from.id); bound && !slices.Contains(tenants, w.Tenant) {
		return fmt.Errorf("%w: application %s may open work only for %v, not %q", ErrTenantNotAllowed, from.id, tenants, clip(w.Tenant))
	}
	return nil
}

// admitApprovals checks that application from may use the approval
// endpoints, which span tenants: not one bound to tenants.
func (b *Broker) admitApprovals(from Caller) error {
	if from.class != subject.ClassApp {
		return fmt.Errorf("%w: %s cannot use approvals", ErrNotRunApp, from)
	}
	if b.identities == nil {
		return nil
	}
	if tenants, bound := b.identities.AppTenants(from.id); bound {
		return fmt.Errorf("%w: application %s is bound to tenants %v, and approvals span every tenant; use an application credential that is not bound", ErrTenantNotAllowed, from.id, tenants)
	}
	return nil
}

// InternalApp is the App of work Gatehouse opens itself (Internal).
const InternalApp = subject.Gatehouse

// RunApp is the application identity that opened r's work:
// subject.Shared for records written before runs named their application.
func RunApp(r *Run) string {
	if r.App == "" {
		return subject.Shared
	}
	return r.App
}

// admitClose checks that from may close run: the application that opened
// its work (a sub-run's, the first run's), or Gatehouse itself.
func admitClose(from Caller, run *Run) error {
	if from.internal {
		return nil
	}
	if from.class != subject.ClassApp || from.id != RunApp(run) {
		return fmt.Errorf("%w: run %s was opened by another application; %s may close only the runs it opened", ErrNotRunApp, run.ID, from)
	}
	return nil
}
