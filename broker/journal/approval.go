package journal

import "github.com/gatehouse/gatehouse/policy"

// Approval events: a held effect's request, a person's decision, and the
// one start (claim) and finish (settle) of the approved action. Each is
// recorded in the chain of the run the effect belongs to. None carries the
// action's arguments: the action digest binds them.
const (
	TypeApprovalRequest    Type = "approval.request"    // an effect held for a person
	TypeApprovalDecision   Type = "approval.decision"   // a person approved (or refused: Approved false)
	TypeApprovalRefused    Type = "approval.refused"    // a person refused
	TypeApprovalClaim      Type = "approval.claim"      // the approved action is starting, exactly once
	TypeApprovalSettle     Type = "approval.settle"     // it finished; its outcome is recorded
	TypeApprovalReopened   Type = "approval.reopened"   // policy tightened after approval; asks again
	TypeApprovalReconciled Type = "approval.reconciled" // a person said what happened to an unknown outcome
	TypePolicyPreview      Type = "policy.preview"      // a held action previewed before a person is asked
)

// ApprovalRequest is the Data of approval.request.
type ApprovalRequest struct {
	Approval     string      `json:"approval"`
	ActionDigest string      `json:"action_digest"`
	Sink         policy.Sink `json:"sink"`
	Action       string      `json:"action"`
	Arguments    []string    `json:"arguments"` // names only; the digest binds the values
	Rule         string      `json:"rule"`
	Roles        []string    `json:"roles"`
	Assurance    string      `json:"assurance,omitempty"`
	Destructive  bool        `json:"destructive,omitempty"`
	Checks       int         `json:"checks,omitempty"`
}

// ApprovalDecision is the Data of approval.decision and approval.refused.
type ApprovalDecision struct {
	Approval      string   `json:"approval"`
	ActionDigest  string   `json:"action_digest"`
	Approved      bool     `json:"approved"`
	Approver      string   `json:"approver"`
	Roles         []string `json:"roles"`
	Assurance     string   `json:"assurance,omitempty"`
	Authenticated string   `json:"authenticated"` // dashboard-session, signed-assertion
	Verified      bool     `json:"verified,omitempty"`
	Reason        string   `json:"reason,omitempty"`
}

// ApprovalClaim is the Data of approval.claim.
type ApprovalClaim struct {
	Approval     string `json:"approval"`
	ActionDigest string `json:"action_digest"`
}

// ApprovalSettle is the Data of approval.settle.
type ApprovalSettle struct {
	Approval string `json:"approval"`
	Status   string `json:"status"` // the effect.outcome status
}

// ApprovalReopened is the Data of approval.reopened.
type ApprovalReopened struct {
	Approval     string   `json:"approval"`
	ActionDigest string   `json:"action_digest"`
	Rule         string   `json:"rule"`
	Roles        []string `json:"roles"`
	Assurance    string   `json:"assurance,omitempty"`
	Why          string   `json:"why"`
}

// ApprovalReconciled is the Data of approval.reconciled.
type ApprovalReconciled struct {
	Approval string `json:"approval"`
	Happened bool   `json:"happened"`
	By       string `json:"by"`
	Reason   string `json:"reason,omitempty"`
}

// PolicyPreview is the Data of policy.preview: what strict policy decides
// about a held action before anyone is asked.
type PolicyPreview struct {
	ActionDigest string          `json:"action_digest"`
	Outcome      Outcome         `json:"outcome"`
	Refusal      policy.Refusal  `json:"refusal,omitempty"`
	Rule         string          `json:"rule,omitempty"`
	Reasons      []policy.Reason `json:"reasons,omitempty"`
	Citations    []Citation      `json:"citations,omitempty"`
}

// approvalType reports whether t is one of the approval events above.
func approvalType(t Type) bool {
	switch t {
	case TypeApprovalRequest, TypeApprovalDecision, TypeApprovalRefused, TypeApprovalClaim, TypeApprovalSettle,
		TypeApprovalReopened, TypeApprovalReconciled, TypePolicyPreview:
		return true
	}
	return false
}
