package broker

import (
	"errors"

	"github.com/gatehouse/gatehouse/broker/approval"
)

// Sentinel errors of the broker. Handlers wrap them with %w; only the NATS
// edge turns them into a stable Code and a message, through Code.
var (
	ErrBadRequest      = errors.New("malformed request")
	ErrForbiddenField  = errors.New("field not allowed from this caller")
	ErrUnknownRun      = errors.New("unknown run")
	ErrRunClosed       = errors.New("run is closed")
	ErrUnknownSink     = errors.New("unknown sink")
	ErrJournal         = errors.New("journal unavailable")
	ErrRunStore        = errors.New("run store unavailable")
	ErrEffectFailed    = errors.New("effect failed")
	ErrShuttingDown    = errors.New("broker shutting down")
	ErrTooManyInFlight = errors.New("too many effects in flight")
	// ErrSinkUnavailable: the sink cannot work on this host (the browser
	// cannot start); the message it is wrapped with names the fix. Nothing
	// was decided, and the rest of Gatehouse keeps running.
	ErrSinkUnavailable = errors.New("sink unavailable")

	ErrApprovalRequired  = errors.New("held for a person's approval")
	ErrApprovalUsed      = errors.New("approved action already started")
	ErrApprovalStore     = errors.New("approval store unavailable")
	ErrPolicyWouldRefuse = errors.New("strict policy would refuse this action; nobody was asked")

	// ErrNoReply and ErrNoBroker are the client's (broker/client): a
	// request no broker answered in time, and one no broker was there to
	// take. Whether a timed-out effect was decided is not known.
	ErrNoReply = errors.New("no broker answered in time")
	// ErrCredentialRefused: the NATS server refused this credential a
	// publish on the request's subject or the subscription of its reply
	// inbox (the client speaks as another identity than the credential's);
	// no broker got the request.
	ErrCredentialRefused = errors.New("NATS refused this credential")
	ErrNoBroker          = errors.New("no Gatehouse broker is answering (is `gatehouse serve` running and the NATS URL right?)")
	// ErrRequestInProgress: another broker holds the request id and has
	// not answered (it may have died after recording the decision).
	ErrRequestInProgress = errors.New("request id is being decided by another broker")
	// ErrRequestIDReused: the request id was decided for a different request.
	ErrRequestIDReused = errors.New("request id already used for a different request")
	// ErrRequestStore: the request-id bucket could not be reached, so
	// at-most-once could not be promised and nothing was decided.
	ErrRequestStore = errors.New("request id store unavailable")

	// Refusals of the caller (see Caller): Gatehouse established who is
	// asking and what it holds as fact, and the request or the caller's
	// identity does not fit.
	ErrOriginNotEstablished = errors.New("origin not established by Gatehouse")
	ErrToolNotEstablished   = errors.New("tool not established by Gatehouse")
	ErrNotRunAgent          = errors.New("not the agent the run was opened for")
	ErrNotRunApp            = errors.New("not the application that opened the run")
	ErrTenantNotAllowed     = errors.New("application not allowed for this tenant")

	// ErrTooManyWaits: the agent identity already has as many requests
	// waiting on this broker as it may (tools.wait); nothing was waited on.
	ErrTooManyWaits = errors.New("too many waiting requests for this agent")

	// ErrQuotaExceeded: the put would take the run's tenant past its
	// budget of stored bytes in a sink's shared store (memory, artifacts);
	// nothing was stored. Sinks wrap it in their own error, which names the
	// budget and the flag that sets it.
	ErrQuotaExceeded = errors.New("tenant storage quota exceeded")
)

// Code is a stable error code carried in replies beside a human message.
// Clients match on codes, never on messages.
type Code string

const (
	CodeBadRequest     Code = "BAD_REQUEST"
	CodeForbiddenField Code = "FORBIDDEN_FIELD"
	CodeUnknownRun     Code = "UNKNOWN_RUN"
	CodeRunClosed      Code = "RUN_CLOSED"
	CodeUnknownSink    Code = "UNKNOWN_SINK"
	CodeJournal        Code = "JOURNAL_UNAVAILABLE"
	CodeRunStore       Code = "RUN_STORE_UNAVAILABLE"
	CodeEffectFailed   Code = "EFFECT_FAILED"
	CodeUnavailable    Code = "UNAVAILABLE"
	CodeInternal       Code = "INTERNAL"

	CodeApprovalRequired  Code = "APPROVAL_REQUIRED"
	CodeApprovalUsed      Code = "APPROVAL_USED"
	CodeApprovalStore     Code = "APPROVAL_STORE_UNAVAILABLE"
	CodePolicyWouldRefuse Code = "POLICY_WOULD_REFUSE"
	CodeApprovalNotFound  Code = "APPROVAL_NOT_FOUND"
	CodeAlreadyDecided    Code = "ALREADY_DECIDED"
	CodeNotAllowed        Code = "NOT_ALLOWED"
	CodeWrongState        Code = "WRONG_STATE"
	CodeBadAssertion      Code = "BAD_ASSERTION"

	CodeTimeout           Code = "TIMEOUT"
	CodeNoBroker          Code = "NO_BROKER"
	CodeCredentialRefused Code = "CREDENTIAL_REFUSED"
	CodeRequestInProgress Code = "REQUEST_IN_PROGRESS"
	CodeRequestIDReused   Code = "REQUEST_ID_REUSED"
	CodeRequestStore      Code = "REQUEST_STORE_UNAVAILABLE"

	CodeOriginNotEstablished Code = "ORIGIN_NOT_ESTABLISHED"
	CodeToolNotEstablished   Code = "TOOL_NOT_ESTABLISHED"
	CodeNotRunAgent          Code = "NOT_RUN_AGENT"
	CodeNotRunApp            Code = "NOT_RUN_APPLICATION"
	CodeTenantNotAllowed     Code = "TENANT_NOT_ALLOWED"

	CodeTooManyWaits Code = "TOO_MANY_WAITS"
	CodeTooLarge     Code = "TOO_LARGE"

	CodeQuotaExceeded Code = "QUOTA_EXCEEDED"
)

// codes is the one table from sentinel errors to codes and advice; a test
// keeps every sentinel in it.
var codes = []struct {
	err    error
	code   Code
	advice string
}{
	// ErrTooLarge wraps ErrBadRequest too, so it comes first.
	{ErrTooLarge, CodeTooLarge, "send less: a peer message or output must fit in one message of its stream (serve --stream-max-message-kb)"},
	{ErrQuotaExceeded, CodeQuotaExceeded, "an overwrite with smaller content fits too, and other tenants are not affected"},
	{ErrBadRequest, CodeBadRequest, "fix the request: every sink's actions and params are in sinks/REFERENCE.md (gatehouse sinks SINK)"},
	{ErrForbiddenField, CodeForbiddenField, "whom work is for comes only from the application that opened the run; remove the field"},
	{ErrUnknownRun, CodeUnknownRun, "open work first (gatehouse.v1.app.<app>.work.open) and use the run id it returns"},
	{ErrRunClosed, CodeRunClosed, "the application closed this run; open new work"},
	{ErrUnknownSink, CodeUnknownSink, "propose it to one of the sinks this broker serves, named above (their actions and params: sinks/REFERENCE.md, gatehouse sinks)"},
	{ErrJournal, CodeJournal, "the decision could not be recorded; check the NATS JetStream stream and retry"},
	{ErrRunStore, CodeRunStore, "the run store (JetStream KV) could not be reached; retry when NATS is healthy"},
	{ErrEffectFailed, CodeEffectFailed, "the effect was decided and attempted but failed; see the outcome"},
	{ErrShuttingDown, CodeUnavailable, "retry against another broker"},
	{ErrTooManyInFlight, CodeUnavailable, "the broker is at its in-flight limit; retry with backoff"},
	{ErrSinkUnavailable, CodeUnavailable, "this sink cannot work on this host until the fix above is applied; other sinks keep working"},
	{ErrApprovalRequired, CodeApprovalRequired, "a person must approve this exact action; propose it again, unchanged, once decision.approval is approved"},
	{ErrApprovalUsed, CodeApprovalUsed, "an approved action runs at most once; a new one needs a new approval"},
	{ErrApprovalStore, CodeApprovalStore, "the approval store (JetStream KV or Redis) could not be reached; retry when it is healthy"},
	{ErrPolicyWouldRefuse, CodePolicyWouldRefuse, "change the action so policy allows it; see the reasons"},
	{ErrUnknownApproval, CodeApprovalNotFound, "wait only on the approval id a held effect of this run returned"},
	{approval.ErrNotFound, CodeApprovalNotFound, "list requests with 'gatehouse approve list'"},
	{approval.ErrAlreadyDecided, CodeAlreadyDecided, "the first decision stands"},
	{approval.ErrNotAllowed, CodeNotAllowed, "the requester cannot approve; the approver needs one of the rule's roles and its least assurance"},
	{approval.ErrWrongState, CodeWrongState, "see the request's state with 'gatehouse approve show'"},
	{approval.ErrBadAssertion, CodeBadAssertion, "sign the assertion over the request's exact action with the key the broker is configured with"},
	{approval.ErrStore, CodeApprovalStore, "the approval store could not be reached; retry"},
	{ErrNoReply, CodeTimeout, "the effect may or may not have been decided: look its run up with 'gatehouse evidence' before proposing it again, or propose it again with the same request_id, which is decided at most once"},
	{ErrNoBroker, CodeNoBroker, "nothing was decided; start a broker or fix the NATS URL, then retry"},
	{ErrCredentialRefused, CodeCredentialRefused, "nothing was decided; speak as the identity the credential belongs to: a named agent's credential (agent-NAME.nk) needs --agent NAME, an application's (app-NAME.nk) --app NAME (gatehouse agents list, gatehouse apps list)"},
	{ErrRequestInProgress, CodeRequestInProgress, "wait and propose it again with the same request_id; if this persists, the broker deciding it died: look its run up with 'gatehouse evidence' before proposing it under a new request_id"},
	{ErrRequestIDReused, CodeRequestIDReused, "a request_id names one request in a run; use a new request_id for a different request"},
	{ErrRequestStore, CodeRequestStore, "nothing was decided; retry when NATS JetStream is healthy, or send the request without a request_id"},
	{ErrOriginNotEstablished, CodeOriginNotEstablished, "leave origin out: Gatehouse establishes it (model for agent credentials unless the deployment declares the agent's origin: gatehouse agents add NAME --origin O)"},
	{ErrToolNotEstablished, CodeToolNotEstablished, "leave tool out: Gatehouse names an effect SINK.ACTION, which agent cards match"},
	{ErrNotRunAgent, CodeNotRunAgent, "a run accepts effects only from the agent identity it was opened for (a sub-run: its delegate); connect with that agent's own credential"},
	{ErrNotRunApp, CodeNotRunApp, "an application may close and read only the runs it opened; use that application's credential"},
	{ErrTooManyWaits, CodeTooManyWaits, "let one of this agent's waiting requests end (each ends within its bound) before opening another"},
	{ErrTenantNotAllowed, CodeTenantNotAllowed, "this application credential is bound to other tenants (gatehouse apps list); use one registered for this tenant"},
}

// CodeOf returns the stable code and advice for err. Unknown errors are
// CodeInternal.
func CodeOf(err error) (Code, string) {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code, c.advice
		}
	}
	return CodeInternal, "see the broker's log"
}

// OutcomeError is a sink failure with a stable type for the journal's
// effect.outcome ("not-found", "store-unavailable", ...). The broker
// records the type, never the message, which may carry content. Sinks
// declare their sentinels with NewOutcomeError and wrap them with %w.
type OutcomeError struct{ typ, msg string }

// NewOutcomeError returns a sentinel failure of type typ.
func NewOutcomeError(typ, msg string) error { return &OutcomeError{typ: typ, msg: msg} }

func (e *OutcomeError) Error() string { return e.msg }

// ErrorType is the type recorded in the journal.
func (e *OutcomeError) ErrorType() string { return e.typ }
