package replay

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// gateState is what the approval events recorded so far in a run say about
// one approval: what the gate returned to the broker when it looked.
type gateState struct {
	decision *journal.ApprovalDecision // the standing approval.decision or approval.refused
	refused  bool
	claimed  string // the effect that claimed it, "" if none
}

// gates follows the approval events of one run, in order.
type gates map[string]*gateState

func (gs gates) event(ev journal.Event) {
	switch ev.Type {
	case journal.TypeApprovalDecision, journal.TypeApprovalRefused:
		var d journal.ApprovalDecision
		if json.Unmarshal(ev.Data, &d) != nil || d.Approval == "" {
			return
		}
		st := gs.get(d.Approval)
		st.decision, st.refused = &d, ev.Type == journal.TypeApprovalRefused || !d.Approved
	case journal.TypeApprovalClaim:
		var c journal.ApprovalClaim
		if json.Unmarshal(ev.Data, &c) == nil && c.Approval != "" {
			gs.get(c.Approval).claimed = ev.Effect
		}
	case journal.TypeApprovalReopened:
		var o journal.ApprovalReopened
		if json.Unmarshal(ev.Data, &o) == nil && o.Approval != "" {
			st := gs.get(o.Approval)
			st.decision, st.refused = nil, false // back with a person
		}
	}
}

func (gs gates) get(id string) *gateState {
	st := gs[id]
	if st == nil {
		st = &gateState{}
		gs[id] = st
	}
	return st
}

// gate replays the broker's approval gate (broker.gateApproval) for a
// decision recorded under approval id for the action digest, from the
// approval events recorded before it: approved (and not reopened) decides
// again with the approval as the grant; refused, or already claimed by
// another effect, refuses as the gate did; otherwise (waiting for a
// person) the policy's hold stands. Nothing is asked of an approval store.
func (gs gates) gate(pol *policy.Policy, in policy.Input, d policy.Decision, id, digest string) policy.Decision {
	st := gs[id]
	if st == nil || st.decision == nil || (st.decision.ActionDigest != "" && st.decision.ActionDigest != digest) {
		return d
	}
	switch {
	case st.claimed != "":
		return refuseWith(d, id, "This approved action has already started; it runs at most once.")
	case st.refused:
		who := ""
		if st.decision.Approver != "" {
			who = " by " + st.decision.Approver
		}
		return refuseWith(d, id, "A person refused this exact action"+who+"; the first decision stands. A different action asks again.")
	}
	in.Approval = &policy.ApprovalGrant{ID: id, Approver: st.decision.Approver, Roles: st.decision.Roles, Assurance: st.decision.Assurance}
	return pol.Decide(in)
}

// refuseWith is broker.refuseWith: d as an enforced refusal for rule.
func refuseWith(d policy.Decision, rule, detail string) policy.Decision {
	d.Verdict, d.Refusal, d.Rule, d.Enforced = policy.VerdictRefuse, policy.RefuseApprovalMissing, rule, true
	d.Reasons = append(d.Reasons, policy.Reason{Refusal: policy.RefuseApprovalMissing, Rule: rule, Detail: detail, Enforced: true})
	return d
}
