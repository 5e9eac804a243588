// Package approvalgate is the pure rule of the approval gate: given what is
// recorded about the approval an action is bound to, and the policy's
// decision for the action, what the gated decision becomes and why.
//
// It is the single source of that rule and of its refusal wording: the
// broker (broker.gateApproval) applies it to the approval store's request,
// replay (broker/replay) to the approval events recorded in a run, so a
// replayed run decides as the broker did. It imports only package policy
// and asks nothing of any store.
package approvalgate

import "github.com/gatehouse/gatehouse/policy"

// Standing is where an approval stands for the gate.
type Standing int

const (
	// Waiting: pending, or reopened; a person has not (again) decided.
	// The policy's hold stands.
	Waiting Standing = iota
	// Approved: a person approved the action and it has not started. The
	// policy decides again with the approval as its grant.
	Approved
	// Refused: a person refused the action; the first decision stands.
	Refused
	// Used: the approved action has started (claimed, or its outcome is
	// unknown); it runs at most once.
	Used
	// Closed: the approved action ran and was settled or reconciled. The
	// gate leaves the decision as it is: a new instance of the action asks
	// again, under a new approval.
	Closed
)

// Approval is what the gate needs to know about one approval.
type Approval struct {
	ID       string
	Standing Standing
	// The person who decided (Approved, Refused) and, for Approved, the
	// roles and assurance they decided with.
	Approver  string
	Roles     []string
	Assurance string
}

// Decide returns the gated decision for an action the policy decided d
// from in (d.Approval set, or a refusal) under approval a:
//   - Approved: pol decides in again with a as the grant (in.Approval);
//     the result is allowed only if the policy accepts that approval.
//   - Refused: d as an enforced refusal naming a and, if known, who refused.
//   - Used: d as an enforced refusal; the action already started.
//   - Waiting, Closed: d unchanged.
//
// Decide is pure: it reads nothing but its arguments and pol.
func Decide(pol *policy.Policy, in policy.Input, d policy.Decision, a Approval) policy.Decision {
	switch a.Standing {
	case Approved:
		in.Approval = &policy.ApprovalGrant{ID: a.ID, Approver: a.Approver, Roles: a.Roles, Assurance: a.Assurance}
		return pol.Decide(in)
	case Refused:
		who := ""
		if a.Approver != "" {
			who = " by " + a.Approver
		}
		return Refuse(d, a.ID, "A person refused this exact action"+who+"; the first decision stands. A different action asks again.")
	case Used:
		return Refuse(d, a.ID, "This approved action has already started; it runs at most once.")
	}
	return d
}

// Refuse returns d as an enforced refusal (policy.RefuseApprovalMissing)
// for rule, with detail appended to its reasons.
func Refuse(d policy.Decision, rule, detail string) policy.Decision {
	d.Verdict, d.Refusal, d.Rule, d.Enforced = policy.VerdictRefuse, policy.RefuseApprovalMissing, rule, true
	d.Reasons = append(d.Reasons, policy.Reason{Refusal: policy.RefuseApprovalMissing, Rule: rule, Detail: detail, Enforced: true})
	return d
}
