package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// MaxRequestBytes bounds every request body the broker decodes.
const MaxRequestBytes = 1 << 20

// OpenWork is an application's request to open work for a person
// (gatehouse.v1.app.<app>.work.open). It is the only source of whom work is
// for; the opening application is the subject's identity.
type OpenWork struct {
	Tenant  string          `json:"tenant"`
	Person  string          `json:"person"`
	Mandate *policy.Mandate `json:"mandate,omitempty"`
	Scopes  []string        `json:"scopes,omitempty"`
	Agent   string          `json:"agent,omitempty"`
	// Input is the caller's structured input for the work (a JSON object):
	// grounding rules with selectors_from: [input] take their selectors
	// from it, so an agent can never choose which record is pinned.
	Input json.RawMessage `json:"input,omitempty"`
}

// MaxInputBytes bounds OpenWork.Input.
const MaxInputBytes = 64 << 10

// OpenWorkReply answers OpenWork.
type OpenWorkReply struct {
	Run           string     `json:"run"`
	MandateDigest string     `json:"mandate_digest,omitempty"`
	Error         *ErrorBody `json:"error,omitempty"`
}

// CloseWork closes a run (gatehouse.v1.work.close).
type CloseWork struct {
	Run    string `json:"run"`
	Status string `json:"status,omitempty"`
}

// CloseWorkReply answers CloseWork.
type CloseWorkReply struct {
	Run   string     `json:"run"`
	Error *ErrorBody `json:"error,omitempty"`
}

// EffectRequest is an agent's proposal of one effect
// (gatehouse.v1.agent.<agent>.effect.<sink>). It names the run and what to
// do; whom the work is for comes from the run's record. Params are the
// sink's own arguments, decoded strictly by the sink.
type EffectRequest struct {
	Run    string `json:"run"`
	Action string `json:"action"`
	// Origin and Tool are Gatehouse's facts, not the agent's: on the wire
	// a request may leave them out or repeat the established ones (see
	// Broker.Propose, admit); by the time a sink sees the request, Origin
	// is the origin Gatehouse established and Tool is "" (the policy
	// derives "<sink>.<action>").
	Origin policy.Origin   `json:"origin,omitempty"`
	Tool   string          `json:"tool,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	// RequestID is the agent's idempotency key, optional: 1 to
	// MaxRequestIDLen ASCII letters, digits, '-' or '_'. A run's request
	// with an id is decided at most once while the broker keeps the id
	// (see RequestIDs); proposing it again, to any broker, answers with
	// the recorded reply (Replayed) instead of deciding again.
	RequestID string `json:"request_id,omitempty"`

	// Fields an agent may never send. They are declared only so a request
	// that carries one is refused with ErrForbiddenField by name instead of
	// being ignored.
	ActingFor json.RawMessage `json:"acting_for,omitempty"`
	Tenant    json.RawMessage `json:"tenant,omitempty"`
	Person    json.RawMessage `json:"person,omitempty"`
	Mandate   json.RawMessage `json:"mandate,omitempty"`
	Scopes    json.RawMessage `json:"scopes,omitempty"`
	Agent     json.RawMessage `json:"agent,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// EffectReply answers an EffectRequest.
type EffectReply struct {
	Run      string          `json:"run,omitempty"`
	Effect   string          `json:"effect,omitempty"`
	Decision *DecisionBody   `json:"decision,omitempty"`
	Outcome  *journal.Result `json:"outcome,omitempty"`
	// Result is what the sink returns to the agent, if anything.
	Result json.RawMessage `json:"result,omitempty"`
	Error  *ErrorBody      `json:"error,omitempty"`
	// Replayed is set when the reply is the one recorded for an earlier
	// request with the same request_id, not a new decision.
	Replayed bool `json:"replayed,omitempty"`
}

// DecisionBody is the decision as an agent sees it.
type DecisionBody struct {
	Outcome  journal.Outcome `json:"outcome"` // allowed, refused, held
	Refusal  policy.Refusal  `json:"refusal,omitempty"`
	Rule     string          `json:"rule,omitempty"`
	Enforced bool            `json:"enforced"`
	Mode     policy.Mode     `json:"mode"`
	// Recorded is false only when the decision could not be journaled and
	// the mode let the effect through anyway (report) or the mode is off.
	Recorded  bool            `json:"recorded"`
	AllowedBy string          `json:"allowed_by,omitempty"`
	Reasons   []policy.Reason `json:"reasons,omitempty"`
	// Approval is the approval request this effect is held in, or the
	// approval it ran under; see ErrorBody for what to do while held.
	Approval string `json:"approval,omitempty"`
}

// ErrorBody is the error member of every reply: a stable code and a message
// that tells the caller what to do.
type ErrorBody struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`

	cause error // set by NewErrorBody, never sent
}

func (e *ErrorBody) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap returns the error NewErrorBody was given (nil for one decoded
// from a reply), so errors.Is sees the sentinel behind the code.
func (e *ErrorBody) Unwrap() error { return e.cause }

// NewErrorBody returns err's stable code (CodeOf) with err's text and the
// code's advice as the message, keeping err for errors.Is.
func NewErrorBody(err error) *ErrorBody {
	code, advice := CodeOf(err)
	return &ErrorBody{Code: code, Message: err.Error() + "; " + advice, cause: err}
}

// decodeStrict decodes one JSON object into v, refusing unknown fields,
// trailing data and oversized input.
func decodeStrict(data []byte, v any) error {
	if len(data) > MaxRequestBytes {
		return fmt.Errorf("%w: body is %d bytes, the limit is %d", ErrBadRequest, len(data), MaxRequestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the JSON object", ErrBadRequest)
	}
	return nil
}

// DecodeEffectRequest decodes and validates an agent's effect request.
func DecodeEffectRequest(data []byte) (*EffectRequest, error) {
	var r EffectRequest
	if err := decodeStrict(data, &r); err != nil {
		return nil, err
	}
	for name, v := range map[string]json.RawMessage{
		"acting_for": r.ActingFor, "tenant": r.Tenant, "person": r.Person,
		"mandate": r.Mandate, "scopes": r.Scopes, "agent": r.Agent, "input": r.Input,
	} {
		if v != nil {
			return nil, fmt.Errorf("%w: %q: an agent cannot name or change whom work is for", ErrForbiddenField, name)
		}
	}
	if !ValidRunID(r.Run) {
		return nil, fmt.Errorf("%w: run %q is not a run id", ErrBadRequest, clip(r.Run))
	}
	if err := checkName("action", r.Action, true); err != nil {
		return nil, err
	}
	switch r.Origin {
	case "", policy.OriginShipped, policy.OriginRuntime, policy.OriginRegistry, policy.OriginModel, policy.OriginDirect:
	default:
		return nil, fmt.Errorf("%w: origin %q is not one of shipped, runtime, registry, model, direct", ErrBadRequest, clip(string(r.Origin)))
	}
	if err := checkName("tool", r.Tool, false); err != nil {
		return nil, err
	}
	if r.Params != nil && !json.Valid(r.Params) {
		return nil, fmt.Errorf("%w: params is not JSON", ErrBadRequest)
	}
	if r.RequestID != "" && !ValidRequestID(r.RequestID) {
		return nil, fmt.Errorf("%w: request_id %q must be 1 to %d ASCII letters, digits, '-' or '_'", ErrBadRequest, clip(r.RequestID), MaxRequestIDLen)
	}
	return &r, nil
}

// MaxRequestIDLen bounds EffectRequest.RequestID.
const MaxRequestIDLen = 64

// ValidRequestID reports whether s is a well-formed request id (a UUID
// or a ULID is).
func ValidRequestID(s string) bool {
	if len(s) == 0 || len(s) > MaxRequestIDLen {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// DecodeOpenWork decodes and validates an application's request to open work.
func DecodeOpenWork(data []byte) (*OpenWork, error) {
	var w OpenWork
	if err := decodeStrict(data, &w); err != nil {
		return nil, err
	}
	if err := checkOpenWorkJSON(data); err != nil {
		return nil, err
	}
	if err := checkPrincipalPart("tenant", w.Tenant); err != nil {
		return nil, err
	}
	if err := checkPrincipalPart("person", w.Person); err != nil {
		return nil, err
	}
	if err := checkName("agent", w.Agent, false); err != nil {
		return nil, err
	}
	if w.Input != nil {
		if len(w.Input) > MaxInputBytes {
			return nil, fmt.Errorf("%w: input is %d bytes, the limit is %d", ErrBadRequest, len(w.Input), MaxInputBytes)
		}
		if t := bytes.TrimLeft(w.Input, " \t\r\n"); len(t) == 0 || t[0] != '{' {
			return nil, fmt.Errorf("%w: input must be a JSON object", ErrBadRequest)
		}
	}
	for _, s := range w.Scopes {
		if err := checkName("scope", s, true); err != nil {
			return nil, err
		}
	}
	if m := w.Mandate; m != nil {
		for _, s := range m.Systems {
			if err := checkName("mandate system", s, true); err != nil {
				return nil, err
			}
		}
		for _, e := range m.Effects {
			switch e {
			case policy.EffectRead, policy.EffectWrite, policy.EffectDestructive, policy.EffectNotify:
			default:
				return nil, fmt.Errorf("%w: mandate effect %q is not one of read, write, destructive, notify", ErrBadRequest, clip(string(e)))
			}
		}
		for _, s := range m.Scopes {
			if err := checkName("mandate scope", s, true); err != nil {
				return nil, err
			}
		}
	}
	return &w, nil
}

// DecodeCloseWork decodes an application's request to close a run.
func DecodeCloseWork(data []byte) (*CloseWork, error) {
	var c CloseWork
	if err := decodeStrict(data, &c); err != nil {
		return nil, err
	}
	if !ValidRunID(c.Run) {
		return nil, fmt.Errorf("%w: run %q is not a run id", ErrBadRequest, clip(c.Run))
	}
	if err := checkName("status", c.Status, false); err != nil {
		return nil, err
	}
	return &c, nil
}

// checkPrincipalPart accepts a tenant or person name: 1 to 128 printable
// characters, none of them '/', since evidence is addressed TENANT/PERSON.
func checkPrincipalPart(field, s string) error {
	if s == "" {
		return fmt.Errorf("%w: %s is required", ErrBadRequest, field)
	}
	if len(s) > 128 || !utf8.ValidString(s) || strings.ContainsRune(s, '/') || strings.IndexFunc(s, notPrintable) >= 0 {
		return fmt.Errorf("%w: %s %q must be 1 to 128 printable characters without '/'", ErrBadRequest, field, clip(s))
	}
	return nil
}

// checkName accepts short printable identifiers (actions, tools, scopes).
func checkName(field, s string, required bool) error {
	if s == "" {
		if required {
			return fmt.Errorf("%w: %s is required", ErrBadRequest, field)
		}
		return nil
	}
	if len(s) > 256 || !utf8.ValidString(s) || strings.IndexFunc(s, notPrintable) >= 0 {
		return fmt.Errorf("%w: %s %q must be 1 to 256 printable characters", ErrBadRequest, field, clip(s))
	}
	return nil
}

func notPrintable(r rune) bool { return !unicode.IsPrint(r) }

// clip shortens untrusted text before it goes into an error message.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// DecodeParams decodes a sink's params strictly into v; missing params
// decode as an empty object. Errors wrap ErrBadRequest.
func DecodeParams(raw json.RawMessage, v any) error {
	if raw == nil {
		raw = json.RawMessage("{}")
	}
	if err := decodeStrict(raw, v); err != nil {
		return fmt.Errorf("params: %w", err)
	}
	return nil
}
