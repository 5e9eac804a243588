package replay

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/broker/approvalgate"
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
// approval events recorded before it, with the same rule the broker
// applies (approvalgate.Decide): approved (and not reopened) decides again
// with the approval as the grant; refused, or already claimed by another
// effect, refuses as the gate did; otherwise (waiting for a person) the
// policy's hold stands. Nothing is asked of an approval store.
func (gs gates) gate(pol *policy.Policy, in policy.Input, d policy.Decision, id, digest string) policy.Decision {
	st := gs[id]
	if st == nil || st.decision == nil || (st.decision.ActionDigest != "" && st.decision.ActionDigest != digest) {
		return d
	}
	a := approvalgate.Approval{ID: id, Standing: approvalgate.Approved,
		Approver: st.decision.Approver, Roles: st.decision.Roles, Assurance: st.decision.Assurance}
	switch {
	case st.claimed != "":
		a.Standing = approvalgate.Used
	case st.refused:
		a.Standing = approvalgate.Refused
	}
	return approvalgate.Decide(pol, in, d, a)
}
