package journal

import (
	"encoding/json"
	"time"

	"github.com/gatehouse/gatehouse/policy"
)

// Version is the journal line format version written in every event.
const Version = 1

// Type names an event kind. The names are a contract.
type Type string

const (
	TypeRunOpen  Type = "run.open"        // work opened for a person: who, within what
	TypeRunClose Type = "run.close"       // the application closed the work
	TypeDecision Type = "policy.decision" // an effect decided, before it happens
	TypeAttempt  Type = "effect.attempt"  // the effect is about to happen
	TypeOutcome  Type = "effect.outcome"  // what happened
)

// Event is one JSON line of a run file. The broker fills every field but
// Seq, Prev and Hash, which the journal writer assigns as it appends.
//
// Hash is the lowercase hex SHA-256 of the RFC 8785 canonical JSON of the
// event without its "hash" member. Prev is the Hash of the event before it
// in the same run, "" for the first.
type Event struct {
	V      int             `json:"v"`
	ID     string          `json:"id"` // unique, assigned by the broker; the dedupe key
	Run    string          `json:"run"`
	Seq    uint64          `json:"seq"` // 1-based position in the run
	Type   Type            `json:"type"`
	Time   time.Time       `json:"time"`
	Effect string          `json:"effect,omitempty"` // links decision, attempt and outcome of one effect
	Data   json.RawMessage `json:"data"`
	Prev   string          `json:"prev"`
	Hash   string          `json:"hash"`
}

// RunOpen is the Data of a run.open event: whom the work is for, from the
// application's record. The mandate is recorded in full (it is not a
// secret) beside its digest.
type RunOpen struct {
	ActingFor     policy.Principal `json:"acting_for"`
	Mandate       *policy.Mandate  `json:"mandate,omitempty"`
	MandateDigest string           `json:"mandate_digest,omitempty"`
	Scopes        []string         `json:"scopes"`
	Agent         string           `json:"agent,omitempty"`
	Parent        string           `json:"parent,omitempty"` // the run this one was delegated from
	// InputDigest is the digest of the caller's structured input, which is
	// kept out of the journal.
	InputDigest string `json:"input_digest,omitempty"`
}

// Decision is the Data of a policy.decision event. It names what was
// decided, for whom, under which policy, and why; never a body, query
// string or credential.
type Decision struct {
	ActingFor     policy.Principal `json:"acting_for"`
	MandateDigest string           `json:"mandate_digest,omitempty"`
	ScopesChecked []string         `json:"scopes_checked"`
	Agent         string           `json:"agent,omitempty"`
	PolicyDigest  string           `json:"policy_digest"`
	Mode          policy.Mode      `json:"mode"`

	Sink     policy.Sink   `json:"sink"`
	Action   string        `json:"action"`
	Origin   policy.Origin `json:"origin,omitempty"`
	Tool     string        `json:"tool,omitempty"`
	Target   string        `json:"target,omitempty"`
	Confined bool          `json:"confined,omitempty"`

	Provider string             `json:"provider,omitempty"`
	Method   string             `json:"method,omitempty"`
	Host     string             `json:"host,omitempty"`
	Path     string             `json:"path,omitempty"`
	PageHost string             `json:"page_host,omitempty"` // browser: the host of the page the request leaves from
	Atom     string             `json:"atom,omitempty"`
	Declared policy.EffectClass `json:"declared,omitempty"`
	Verified bool               `json:"verified,omitempty"`

	// Size and Digest describe the effect's content (sha256:hex), never
	// the content itself.
	Size   int64  `json:"size"`
	Digest string `json:"digest,omitempty"`

	// RequestDigest is the digest (sha256:hex) of the request as proposed
	// (the agent's params and the effect the sink described), whose content
	// is kept beside the journal in the content store (broker/content);
	// "" when capture is off. Only the digest is ever in the chain.
	RequestDigest string `json:"request_digest,omitempty"`

	// Citations name the records a grounding rule relied on: the journal
	// event that recorded each provider response, and its digest.
	Citations []Citation `json:"citations,omitempty"`

	// Contract is, for a code effect, the program's operation contract as
	// read before it ran (see ProgramContract); nil when none was read.
	Contract *ProgramContract `json:"contract,omitempty"`

	Outcome  Outcome         `json:"outcome"` // allowed, refused or held
	Refusal  policy.Refusal  `json:"refusal,omitempty"`
	Rule     string          `json:"rule,omitempty"`
	Enforced bool            `json:"enforced"`
	Allowed  string          `json:"allowed_by,omitempty"`
	Reasons  []policy.Reason `json:"reasons,omitempty"`

	// Approval names the approval this effect runs under, and ActionDigest
	// the exact action it was given for; verify checks an
	// approval.decision of that id and digest precedes it.
	Approval     string `json:"approval,omitempty"`
	ActionDigest string `json:"action_digest,omitempty"`
}

// RuleIdentity is the Rule of a decision that refused the caller before
// any policy was asked (broker.Caller): the request named a fact Gatehouse
// establishes (origin, tool) otherwise, or came from an identity the run
// was not opened for. Such a decision has no request content to replay.
const RuleIdentity = "identity"

// Citation is one record a grounded decision relied on.
type Citation struct {
	Run    string `json:"run"`    // the run whose journal holds the response
	Effect string `json:"effect"` // the effect whose effect.outcome recorded the response
	Digest string `json:"digest"` // the outcome's digest: sha256 of the body as received
	Path   string `json:"path"`   // provider and path the record was read from
}

// Outcome is a decision's outcome as recorded.
type Outcome string

const (
	OutcomeAllowed Outcome = "allowed"
	OutcomeRefused Outcome = "refused"
	OutcomeHeld    Outcome = "held"
)

// Attempt is the Data of an effect.attempt event, written just before the
// effect happens.
type Attempt struct {
	Sink   policy.Sink `json:"sink"`
	Action string      `json:"action"`
}

// Result is the Data of an effect.outcome event.
type Result struct {
	Status string `json:"status"`          // ok, failed
	Error  string `json:"error,omitempty"` // an error type, never a message carrying content
	Size   int64  `json:"size"`
	Digest string `json:"digest,omitempty"`
	// Fields a sink adds (status code, recipient); never content.
	Detail map[string]string `json:"detail,omitempty"`
}

// RunClose is the Data of a run.close event.
type RunClose struct {
	Status string `json:"status,omitempty"`
}
