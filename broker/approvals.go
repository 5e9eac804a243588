package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/approvalgate"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// Approvals is the approval store the broker holds effects in and claims
// approved ones from. Implementations: *approval.Service.
type Approvals interface {
	Find(ctx context.Context, run, digest string) (*approval.Request, error)
	Request(ctx context.Context, h approval.Hold) (*approval.Request, bool, error)
	Claim(ctx context.Context, id, effect string) (*approval.Request, error)
	Settle(ctx context.Context, id, effect, status string) (*approval.Request, error)
	Reopen(ctx context.Context, id string, need policy.ApprovalNeed, why string) (*approval.Request, error)
	Preview(ctx context.Context, run, effect string, p journal.PolicyPreview) error
}

var _ Approvals = (*approval.Service)(nil)

// gate is an effect's approval: the request it is held in, or the approved
// request it runs under once claimed.
type gate struct {
	id     string
	digest string
	claim  bool // approved: claim before performing, settle after
}

// gateApproval handles, in strict mode, an effect an approvals rule or an
// agent card applies to (d.Approval set). The approval is bound to the
// exact action (sink, action, run and every param, and what the sink
// resolved beyond them: Proposal.Resolved): the same action after
// its approval is re-decided with the approval and, if policy still allows
// it, runs once (the caller claims it after recording the decision); any
// other argument is another action and asks again. An approved action the
// policy no longer accepts is reopened for a person. An action strict
// policy would refuse anyway is never put to a person: the reply carries
// POLICY_WOULD_REFUSE and a policy.preview is recorded.
func (b *Broker) gateApproval(ctx context.Context, run *Run, req *EffectRequest, prop *Proposal, pol *policy.Policy,
	d policy.Decision, in policy.Input, reply *EffectReply) (policy.Decision, *gate) {
	need := *d.Approval
	act := approval.Action{Sink: string(prop.Effect.Sink), Action: req.Action, Run: run.ID, Params: req.Params, Resolved: prop.Resolved}
	if need.Waiver {
		act.Params, act.Resolved = nil, "" // a waiver covers the action, whatever its arguments
	}
	digest, args, err := act.Digest()
	if err != nil {
		reply.Error = errorBody(fmt.Errorf("%w: %v", ErrBadRequest, err))
		return refuseWith(d, "approval", "The action's params cannot be bound to an approval; send params as a JSON object with each key written once (not twice in another case) and long numbers as strings."), nil
	}
	g := &gate{digest: digest}
	cur, err := b.approvals.Find(ctx, run.ID, digest)
	if err != nil && !errors.Is(err, approval.ErrNotFound) {
		reply.Error = errorBody(fmt.Errorf("%w: %v", ErrApprovalStore, err))
		return refuseWith(d, "approval", "The approval store could not be read, so a gated action cannot be checked; retry when it is back."), nil
	}
	if cur != nil && cur.Intent != nil && d.Verdict == policy.VerdictHold {
		// A decision, reopening or settlement is being recorded: the
		// request is between states, so nothing runs under it now.
		g.id = cur.ID
		reply.Error = errorBody(fmt.Errorf("%w: %s is changing (%s being recorded); propose it again shortly", ErrApprovalRequired, cur.ID, cur.Intent.Type))
		return d, g
	}
	if cur != nil {
		g.id = cur.ID
		a := gateApprovalOf(cur)
		d2 := approvalgate.Decide(pol, in, d, a)
		switch a.Standing {
		case approvalgate.Approved:
			if d2.Verdict == policy.VerdictAllow {
				if why, expired := b.approvalExpired(cur); expired {
					// Back with a person, recorded (approval.reopened)
					// before this decision, so replay reads it as waiting.
					if _, err := b.approvals.Reopen(ctx, cur.ID, need, why); err != nil {
						b.log.Error("reopen of an expired approval failed; the action stays held", "approval", cur.ID, "err", err)
					}
					a.Standing = approvalgate.Waiting
					reply.Error = errorBody(fmt.Errorf("%w: %s: %s; it is back with a person", ErrApprovalRequired, cur.ID, why))
					return approvalgate.Decide(pol, in, d, a), g
				}
				g.claim = true
				return d2, g
			}
			why := "the policy now refuses this action"
			needNow := need
			if d2.Verdict == policy.VerdictHold && d2.Approval != nil {
				why, needNow = "the approval rule changed and the approval no longer suffices", *d2.Approval
			}
			if _, err := b.approvals.Reopen(ctx, cur.ID, needNow, why); err != nil && !errors.Is(err, approval.ErrWrongState) {
				b.log.Error("reopen approval failed", "approval", cur.ID, "err", err)
			}
			if d2.Verdict == policy.VerdictHold {
				reply.Error = errorBody(fmt.Errorf("%w: %s: %s; it is back with a person", ErrApprovalRequired, cur.ID, why))
			}
			return d2, g
		case approvalgate.Waiting:
			reply.Error = errorBody(fmt.Errorf("%w: %s is waiting for a person", ErrApprovalRequired, cur.ID))
			return d2, g
		case approvalgate.Refused:
			return d2, g
		case approvalgate.Used:
			reply.Error = errorBody(fmt.Errorf("%w: %s is %s", ErrApprovalUsed, cur.ID, cur.State))
			return d2, g
		}
		// settled or reconciled: a new instance of the action asks again.
	}
	if d.Verdict == policy.VerdictRefuse {
		// Strict policy refuses it whatever a person says: nobody is asked.
		p := journal.PolicyPreview{ActionDigest: digest, Outcome: journal.OutcomeRefused, Refusal: d.Refusal, Rule: d.Rule, Reasons: d.Reasons, Citations: prop.Citations}
		if err := b.approvals.Preview(ctx, run.ID, prop.ID, p); err != nil {
			b.log.Error("policy.preview not recorded", "run", run.ID, "err", err)
		}
		reply.Error = errorBody(fmt.Errorf("%w: %s", ErrPolicyWouldRefuse, reasonsText(d.Reasons)))
		return d, nil
	}
	var checks []approval.Check
	if prop.Effect.Grounding != nil || len(prop.Citations) > 0 {
		c := approval.Check{Change: strings.TrimSpace(prop.Effect.Method + " " + prop.Effect.Host + prop.Effect.Path), Outcome: "allowed"}
		if prop.Effect.Grounding != nil {
			c.Rule = prop.Effect.Grounding.Rule
		}
		for _, ci := range prop.Citations {
			c.Records = append(c.Records, ci.Path+" ("+ci.Effect+")")
		}
		checks = append(checks, c)
		if err := b.approvals.Preview(ctx, run.ID, prop.ID, journal.PolicyPreview{ActionDigest: digest, Outcome: journal.OutcomeHeld,
			Rule: c.Rule, Citations: prop.Citations}); err != nil {
			b.log.Error("policy.preview not recorded", "run", run.ID, "err", err)
		}
	}
	r, _, err := b.approvals.Request(ctx, approval.Hold{
		Run: run.ID, Effect: prop.ID, Tenant: run.For.Tenant, Person: run.For.Person, Agent: run.Agent,
		Sink: string(prop.Effect.Sink), Action: req.Action, ActionDigest: digest, Arguments: args, Checks: checks, Need: need,
	})
	if err != nil && r == nil {
		reply.Error = errorBody(fmt.Errorf("%w: %v", ErrApprovalStore, err))
		return refuseWith(d, "approval", "The approval request could not be stored; retry when the store is back."), nil
	}
	g.id = r.ID
	reply.Error = errorBody(fmt.Errorf("%w: %s", ErrApprovalRequired, r.ID))
	return d, g
}

// approvalExpired says whether approved request r has stood unused past
// the broker's ApprovalLife, and why in words for the reviewer and the
// agent. An approval given days ago for an action the agent proposes now
// is no longer a person's answer about the world as it is.
func (b *Broker) approvalExpired(r *approval.Request) (string, bool) {
	if b.approvalLife <= 0 || r.Decision == nil {
		return "", false
	}
	given := r.Decision.Time
	if given.IsZero() {
		given = r.Updated
	}
	if b.now().Sub(given) <= b.approvalLife {
		return "", false
	}
	return fmt.Sprintf("the approval expired: given %s, approvals stand for %s", given.UTC().Format(time.RFC3339), b.approvalLife), true
}

// refuseWith turns d into an enforced refusal for rule with detail.
func refuseWith(d policy.Decision, rule, detail string) policy.Decision {
	return approvalgate.Refuse(d, rule, detail)
}

// gateApprovalOf is what the approval gate's rule (package approvalgate,
// which replay applies too) needs of the store's request r.
func gateApprovalOf(r *approval.Request) approvalgate.Approval {
	a := approvalgate.Approval{ID: r.ID, Standing: approvalgate.Closed}
	switch r.State {
	case approval.StatePending, approval.StateReopened:
		a.Standing = approvalgate.Waiting
	case approval.StateApproved:
		a.Standing = approvalgate.Approved
		if r.Decision == nil || !r.Decision.Approved {
			// A malformed entry approves nothing: it stays held.
			a.Standing = approvalgate.Closed
		}
	case approval.StateRefused:
		a.Standing = approvalgate.Refused
	case approval.StateClaimed, approval.StateOutcomeUnknown:
		a.Standing = approvalgate.Used
	}
	if r.Decision != nil {
		a.Approver, a.Roles, a.Assurance = r.Decision.Approver, r.Decision.Roles, r.Decision.Assurance
	}
	return a
}

func reasonsText(rs []policy.Reason) string {
	var parts []string
	for _, r := range rs {
		if r.Enforced && r.Refusal != policy.RefuseApprovalMissing {
			parts = append(parts, string(r.Refusal)+" ("+r.Rule+"): "+r.Detail)
		}
	}
	return strings.Join(parts, "; ")
}

// claimApproval claims g's approval for effect; the effect runs only when
// it returns nil.
func (b *Broker) claimApproval(ctx context.Context, g *gate, effect string) error {
	if _, err := b.approvals.Claim(ctx, g.id, effect); err != nil {
		if errors.Is(err, approval.ErrAlreadyClaimed) {
			return fmt.Errorf("%w: %v", ErrApprovalUsed, err)
		}
		return fmt.Errorf("%w: %v", ErrApprovalStore, err)
	}
	return nil
}

func (b *Broker) settleApproval(ctx context.Context, g *gate, effect, status string) {
	if _, err := b.approvals.Settle(ctx, g.id, effect, status); err != nil {
		b.log.Error("approval not settled; it will become outcome_unknown", "approval", g.id, "effect", effect, "err", err)
	}
}

type approvalCtxKey struct{}

// ContextWithApproval returns ctx carrying the id of the approval the
// effect runs under. The broker sets it on the context Perform gets, once
// the approval is claimed.
func ContextWithApproval(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, approvalCtxKey{}, id)
}

// ApprovalFrom returns the id of the approval the effect being performed
// runs under, "" for none. It is the approved action's operation id: the
// same for every attempt a sink makes of that action (a provider's
// retries carry it as their idempotency key), and no other action has it.
func ApprovalFrom(ctx context.Context) string {
	id, _ := ctx.Value(approvalCtxKey{}).(string)
	return id
}
