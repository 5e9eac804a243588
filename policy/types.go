package policy

import (
	"time"
)

// Mode says what happens to an effect the policy does not allow.
type Mode string

const (
	// ModeOff decides nothing and records nothing: every effect goes through.
	ModeOff Mode = "off"
	// ModeReport enforces only what the person may do (their mandate and
	// scopes); every other refusal is recorded as one strict mode would make.
	ModeReport Mode = "report"
	// ModeStrict enforces every refusal.
	ModeStrict Mode = "strict"
)

// Sink names the one place an effect happens.
type Sink string

const (
	SinkCode      Sink = "code"
	SinkProcess   Sink = "process"
	SinkArtifact  Sink = "artifact"
	SinkWorkspace Sink = "workspace"
	SinkMemory    Sink = "memory"
	SinkPeer      Sink = "peer"
	SinkOutput    Sink = "output"
	SinkProvider  Sink = "provider"
	SinkBrowser   Sink = "browser"
	// SinkMCP is a tool call forwarded to an upstream MCP server; its
	// Provider is the server's name (the mandate's system), Target and Tool
	// "<server>/<tool>".
	SinkMCP Sink = "mcp"
)

// Origin says where the code proposing an effect came from.
type Origin string

const (
	OriginShipped  Origin = "shipped"  // an integration shipped with the deployment, reviewed
	OriginRuntime  Origin = "runtime"  // the runtime's own transports
	OriginRegistry Origin = "registry" // a stored integration
	OriginModel    Origin = "model"    // code the model wrote or repaired
	OriginDirect   Origin = "direct"   // an application calling Gatehouse itself
)

// EffectClass is what an integration declares it does, and what a mandate
// hands over: read, write, destructive or notify.
type EffectClass string

const (
	EffectRead        EffectClass = "read"
	EffectWrite       EffectClass = "write"
	EffectDestructive EffectClass = "destructive"
	EffectNotify      EffectClass = "notify"
)

// Refusal is the stable name of a reason to refuse an effect. The names are
// a contract: journals, dashboards and clients match on them.
type Refusal string

const (
	// What the person the work is for may do: enforced in report and strict.
	RefuseOutsideMandate Refusal = "outside-mandate"
	RefuseScopeMissing   Refusal = "scope-missing"
	RefuseOverScopeLimit Refusal = "over-scope-limit"

	// Built-in rules: enforced in strict, recorded in report.
	RefuseMutationWithoutAtom  Refusal = "mutation-without-atom"
	RefuseBeyondDeclaredEffect Refusal = "beyond-declared-effect"
	RefuseOutsideContract      Refusal = "outside-contract"
	RefuseUnverifiedModelCode  Refusal = "unverified-model-code"
	RefuseUnconfinedExecution  Refusal = "unconfined-execution"
	RefuseBrowserSendOffSite   Refusal = "browser-send-off-site"
	RefuseApprovalMissing      Refusal = "approval-missing"
	RefuseUngrounded           Refusal = "ungrounded"
	RefuseDeploymentRule       Refusal = "deployment-rule"
	RefuseAgentUnregistered    Refusal = "agent-unregistered"
	RefuseToolNotAllowed       Refusal = "tool-not-allowed"
	RefuseToolBlocked          Refusal = "tool-blocked"
	RefuseDelegationNotAllowed Refusal = "delegation-not-allowed"
	// RefuseToolChanged: an upstream MCP tool whose name, description or
	// schemas differ from what was pinned when it was catalogued (or that
	// was never pinned). Enforced in report mode too.
	RefuseToolChanged Refusal = "tool-changed"

	// A provider call whose path or body could be read as another
	// resource or another value by some server (a ';' parameter, an
	// encoded '/', a dot segment, a key sent twice, ...): enforced in
	// report and strict, since no rule's match can be trusted on it.
	RefuseAmbiguousRequest Refusal = "ambiguous-request"

	// The policy itself could not be used: enforced in report and strict.
	RefusePolicyUnreadable Refusal = "policy-unreadable"
)

// Verdict is what happens to the effect. Its zero value refuses.
type Verdict uint8

const (
	VerdictRefuse Verdict = iota // the effect does not happen
	VerdictAllow                 // the effect happens
	VerdictHold                  // the effect waits for a person's approval
)

// Principal is the person an effect is for. It comes only from the
// application that opened the work, never from an agent.
type Principal struct {
	Tenant string `json:"tenant"`
	Person string `json:"person"`
}

// Mandate is what a person handed over for one piece of work. Empty lists
// restrict nothing on that axis; a zero ExpiresAt never expires.
type Mandate struct {
	Systems   []string      `json:"systems,omitempty"`
	Effects   []EffectClass `json:"effects,omitempty"`
	Scopes    []string      `json:"scopes,omitempty"`
	ExpiresAt time.Time     `json:"expires_at,omitzero"`
}

// Authority is whom an effect is for and within what: all of it from the
// application's record of the run.
type Authority struct {
	For     Principal
	Mandate *Mandate // nil: no mandate registered, nothing narrowed
	// MandateUnreadable is set when a mandate was given but could not be
	// read; every effect is then refused outside-mandate.
	MandateUnreadable bool
	Scopes            []string // scopes the person holds
	Agent             string   // the agent the work is for, "" for none
}

// Operation is one method and URL template an integration's code can send.
type Operation struct {
	Method   string `json:"method"`
	Template string `json:"template"` // "/invoices/{id}"
}

// Contract is what an integration's own code can send. A nil *Contract
// means it could not be read.
type Contract struct {
	Operations []Operation `json:"operations"`
}

// Effect describes one proposed effect as it is about to happen. It is built
// by the broker from what is actually about to be sent, never from an
// agent's description of it.
type Effect struct {
	Sink   Sink
	Action string // deliver, run, publish, send, delegate, call, navigate, ...
	Origin Origin
	// Tool is the name agent cards match; "" means "<sink>.<action>".
	Tool   string
	Target string // what the effect touches: a key, a path, a host/path
	// Confined reports whether the effect runs in a confined child.
	Confined bool
	// Recipient is the agent a peer message or delegation goes to.
	Recipient string

	// Provider calls.
	Provider string
	Method   string
	Host     string
	Path     string      // the URL path without the query
	Atom     string      // the integration, "" for none
	Declared EffectClass // the integration's declared effect
	// Contract is the operations the integration declares (templates as
	// sent); a mutating call naming an integration must be one of them,
	// whatever its origin. nil: the integration declares none.
	Contract *Contract
	// FromProgram is set when a sandboxed program made the call through
	// the code sink's gateway; ProgramContract is then what that
	// program's own code can send, read from it by the code sink before it
	// ran (nil: it could not be read). A mutating call must also be one of
	// those operations. Neither ever comes from an agent's params.
	FromProgram     bool
	ProgramContract *Contract
	// PathFold is set when the provider routes paths without regard to
	// case (the catalogue's path_case: insensitive): path and target
	// globs then match ignoring ASCII case, so a deny rule, a scope or an
	// approval on a path no operation declares holds for every case of it
	// too (paths of declared operations are sent in one spelling anyway).
	PathFold bool
	// Ambiguous, when set, says why the request the sink was asked to
	// send has no one canonical form (a provider call's path or body
	// that servers could read in different ways); Decide refuses it
	// (ambiguous-request) in report and strict mode, and the sink never
	// sends it.
	Ambiguous string

	// Class is the effect class used for the mandate; "" derives it
	// (from Declared, else from Method, else from the sink).
	Class EffectClass

	// PageHost is, for browser effects, the host of the page the request
	// comes from; browser-send-off-site compares Host against it.
	PageHost string

	// Grounding is what a grounding rule found about the values this
	// provider call sends, checked by the broker against the records it
	// read before Decide; nil when no rule applies.
	Grounding *Grounding

	// Unpinned is, for an MCP tool call, why the upstream tool does not
	// match its pin (changed, or never pinned); "" when it does.
	Unpinned string

	// Values are the request's named values that scope limits are checked
	// against (amount, count), as decimal strings.
	Values map[string]string
}

// Grounding is the outcome of a grounding rule for one call: the rule and
// every requirement that failed (empty when the call is grounded). Decide
// refuses a call with failures as ungrounded (enforced in strict mode).
type Grounding struct {
	Rule     string
	Failures []string
}

// Reason is one finding about an effect.
type Reason struct {
	Refusal  Refusal `json:"refusal"`
	Rule     string  `json:"rule"`     // the deployment rule, or the refusal name for a built-in
	Detail   string  `json:"detail"`   // for a person: what failed and what to do
	Enforced bool    `json:"enforced"` // false: recorded only ("strict would refuse")
}

// Decision is what Decide returns. The zero Decision refuses.
type Decision struct {
	Verdict Verdict
	Mode    Mode
	// Refusal and Rule name the finding that decided the verdict, or for an
	// allowed effect in report mode the first one strict mode would enforce.
	Refusal  Refusal
	Rule     string
	Enforced bool
	// Reasons holds every finding, in the order they were made.
	Reasons []Reason
	// Allowed names the allow rule that lifted a built-in refusal, if any;
	// it is recorded with every effect it lets through.
	Allowed string
	// ScopesChecked lists, without repeats and in the order met, the scopes
	// the effect required (from the rules file's scopes section); nil when
	// none applied. It is what the journal records the effect was checked
	// against.
	ScopesChecked []string
	// Verified is true when a provider call matched an operation of its
	// integration's contract (Effect.Contract).
	Verified bool
	// Approval is what the first approvals rule or agent card that
	// applies asks for (nil when none does), whether or not
	// Input.Approval satisfied it.
	Approval *ApprovalNeed
}
