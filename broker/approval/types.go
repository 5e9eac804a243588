// Package approval holds effects that need a person's approval, binds each
// approval to the exact action it was given for, and makes sure an approved
// action starts at most once.
//
// The life of a request: pending -> approved|refused; approved -> claimed
// (the action is starting) -> settled (its outcome is recorded). A claim
// that is never settled (the broker died) becomes outcome_unknown, which a
// person reconciles. An approval whose rule tightened before the action ran
// is reopened: a person is asked again.
package approval

import (
	"errors"
	"time"
)

// State is where a request is in its life.
type State string

// The states of a request.
const (
	StatePending        State = "pending"
	StateApproved       State = "approved"
	StateRefused        State = "refused"
	StateClaimed        State = "claimed"         // the approved action is starting
	StateSettled        State = "settled"         // it ran; its outcome is recorded
	StateOutcomeUnknown State = "outcome_unknown" // claimed, never settled (broker died)
	StateReconciled     State = "reconciled"      // a person said what happened
	StateReopened       State = "reopened"        // policy tightened after approval; asks again
)

// Known reports whether s is one of the states above.
func (s State) Known() bool {
	switch s {
	case StatePending, StateApproved, StateRefused, StateClaimed, StateSettled, StateOutcomeUnknown, StateReconciled, StateReopened:
		return true
	}
	return false
}

// Argument is one argument of the exact action, as shown to a person.
type Argument struct{ Name, Value string }

// Check is a grounding preview line: one change the action would make, what
// strict policy would decide about it, the rule, and the records it was
// grounded on.
type Check struct {
	Change, Outcome, Rule string
	Records               []string
}

// Decision is a person's (or the deployment backend's) answer to a request.
type Decision struct {
	Approved      bool
	Approver      string
	Roles         []string
	Assurance     string // e.g. "password", "mfa", "signed-assertion"
	Authenticated string // how: "dashboard-session" or "signed-assertion"
	Reason        string
	Time          time.Time
}

// Reconciliation is a person's finding about an action whose outcome is
// unknown.
type Reconciliation struct {
	Happened bool // the person's finding: did the action take effect?
	By       string
	// Roles and Assurance are the reconciling person's: checked against
	// the rule as an approval's are (Service.Reconcile).
	Roles     []string `json:",omitempty"`
	Assurance string   `json:",omitempty"`
	Reason    string
	Time      time.Time
}

// Request is one held action waiting for, or carrying, a decision.
type Request struct {
	ID, Run, Effect, Tenant, Person, Agent string
	Sink, Action                           string
	ActionDigest                           string // sha256 over the exact action: every argument
	Arguments                              []Argument
	Checks                                 []Check
	Rule                                   string   // the approvals: rule or agent card that asked
	Roles                                  []string // roles that may approve
	Assurance                              string   // the least assurance accepted
	Destructive                            bool
	Requested                              time.Time
	Updated                                time.Time
	State                                  State
	Decision                               *Decision
	Reconciled                             *Reconciliation
	// Claim is the start of the approved action, Settled its finish.
	Claim   *Claim      `json:",omitempty"`
	Settled *Settlement `json:",omitempty"`
	// Previous holds decisions set aside when the request was reopened.
	Previous []Decision `json:",omitempty"`
	// Step counts the changes applied; it names their journal events.
	Step int `json:",omitempty"`
	// Intent is a change whose journal event is being recorded; the
	// request does not show it until it is durable (see Intent).
	Intent *Intent `json:",omitempty"`
}

// Filter selects requests for List. Empty fields match everything.
type Filter struct {
	States []State
	Tenant string
	Limit  int
}

// Sentinel errors. Edges turn them into stable codes.
var (
	// ErrNotFound: no request with that id.
	ErrNotFound = errors.New("approval: not found")
	// ErrAlreadyDecided: the first decision stands.
	ErrAlreadyDecided = errors.New("approval: already decided")
	// ErrNotAllowed: the approver is the requester, lacks a required role,
	// or has less assurance than the rule's least.
	ErrNotAllowed = errors.New("approval: approver not allowed")
)
