package content

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/gatehouse/gatehouse/policy"
)

// ErrBadRequest: a request blob that cannot be read as a Request.
var ErrBadRequest = errors.New("content: not a request record")

// RequestVersion is the version of the Request encoding.
const RequestVersion = 1

// Request is one effect as the agent proposed it and as its sink described
// it: everything policy.Decide was given besides the run's authority
// (which run.open records) and the policy (kept by its digest).
type Request struct {
	V         int              `json:"v"`
	Run       string           `json:"run"`
	Effect    string           `json:"effect"` // the effect id the journal names
	ActingFor policy.Principal `json:"acting_for"`
	Sink      policy.Sink      `json:"sink"`
	Action    string           `json:"action"`
	Origin    policy.Origin    `json:"origin,omitempty"`
	Tool      string           `json:"tool,omitempty"`
	// Params are the agent's params as sent.
	Params json.RawMessage `json:"params,omitempty"`
	// Described is the effect the sink built from them, as decided.
	Described    EffectRecord `json:"described"`
	PolicyDigest string       `json:"policy_digest"`
	Mode         policy.Mode  `json:"mode"`
	// DecidedAt is the time Decide was given.
	DecidedAt time.Time `json:"decided_at"`
	// Grounding is what the grounding check of a provider call was given
	// and what the record store answered; nil when no rule applied.
	Grounding *Grounding `json:"grounding_input,omitempty"`
}

// Encode returns the request's bytes as kept; their digest is the
// request_digest the journal records. The encoding is deterministic.
func (r *Request) Encode() ([]byte, error) {
	c := *r
	c.V = RequestVersion
	c.DecidedAt = c.DecidedAt.UTC()
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("content: encode request: %w", err)
	}
	return b, nil
}

// DecodeRequest reads a request blob. It returns an error wrapping
// ErrBadRequest for anything but a version 1 request.
func DecodeRequest(b []byte) (*Request, error) {
	var r Request
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if r.V != RequestVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadRequest, r.V)
	}
	return &r, nil
}

// EffectRecord is policy.Effect with stable JSON names. FromEffect and
// Effect convert every field; a test checks none is missed.
type EffectRecord struct {
	Sink      policy.Sink        `json:"sink"`
	Action    string             `json:"action"`
	Origin    policy.Origin      `json:"origin,omitempty"`
	Tool      string             `json:"tool,omitempty"`
	Target    string             `json:"target,omitempty"`
	Confined  bool               `json:"confined,omitempty"`
	Recipient string             `json:"recipient,omitempty"`
	Provider  string             `json:"provider,omitempty"`
	Method    string             `json:"method,omitempty"`
	Host      string             `json:"host,omitempty"`
	Path      string             `json:"path,omitempty"`
	Atom      string             `json:"atom,omitempty"`
	Declared  policy.EffectClass `json:"declared,omitempty"`
	// Contract is absent for a nil contract and present (operations
	// possibly empty) otherwise, since the two decide differently.
	Contract *policy.Contract `json:"contract,omitempty"`
	// FromProgram, ProgramContract (nil and empty kept apart, as for
	// Contract), Ambiguous and PathFold: see policy.Effect.
	FromProgram     bool               `json:"from_program,omitempty"`
	ProgramContract *policy.Contract   `json:"program_contract,omitempty"`
	Ambiguous       string             `json:"ambiguous,omitempty"`
	PathFold        bool               `json:"path_fold,omitempty"`
	Class           policy.EffectClass `json:"class,omitempty"`
	PageHost        string             `json:"page_host,omitempty"`
	Grounding       *GroundingRecord   `json:"grounding,omitempty"`
	Values          map[string]string  `json:"values,omitempty"`
	Unpinned        string             `json:"unpinned,omitempty"`
}

// GroundingRecord is policy.Grounding: what a grounding rule found.
type GroundingRecord struct {
	Rule     string   `json:"rule"`
	Failures []string `json:"failures,omitempty"`
}

// FromEffect records e.
func FromEffect(e policy.Effect) EffectRecord {
	r := EffectRecord{
		Sink: e.Sink, Action: e.Action, Origin: e.Origin, Tool: e.Tool, Target: e.Target, Confined: e.Confined,
		Recipient: e.Recipient, Provider: e.Provider, Method: e.Method, Host: e.Host, Path: e.Path, Atom: e.Atom,
		Declared: e.Declared, Class: e.Class, PageHost: e.PageHost, Values: maps.Clone(e.Values), Unpinned: e.Unpinned,
		FromProgram: e.FromProgram, Ambiguous: e.Ambiguous, PathFold: e.PathFold,
	}
	r.Contract, r.ProgramContract = recordContract(e.Contract), recordContract(e.ProgramContract)
	if e.Grounding != nil {
		r.Grounding = &GroundingRecord{Rule: e.Grounding.Rule, Failures: e.Grounding.Failures}
	}
	return r
}

// recordContract copies a contract for the record: nil stays nil, and a
// contract without operations keeps an empty list (the two decide
// differently).
func recordContract(in *policy.Contract) *policy.Contract {
	if in == nil {
		return nil
	}
	c := *in
	if c.Operations == nil {
		c.Operations = []policy.Operation{}
	}
	return &c
}

// Effect returns the recorded policy.Effect.
func (r EffectRecord) Effect() policy.Effect {
	e := policy.Effect{
		Sink: r.Sink, Action: r.Action, Origin: r.Origin, Tool: r.Tool, Target: r.Target, Confined: r.Confined,
		Recipient: r.Recipient, Provider: r.Provider, Method: r.Method, Host: r.Host, Path: r.Path, Atom: r.Atom,
		Declared: r.Declared, Class: r.Class, PageHost: r.PageHost, Values: r.Values, Unpinned: r.Unpinned,
		FromProgram: r.FromProgram, Ambiguous: r.Ambiguous, PathFold: r.PathFold,
	}
	if r.Contract != nil {
		c := *r.Contract
		e.Contract = &c
	}
	if r.ProgramContract != nil {
		c := *r.ProgramContract
		e.ProgramContract = &c
	}
	if r.Grounding != nil {
		e.Grounding = &policy.Grounding{Rule: r.Grounding.Rule, Failures: r.Grounding.Failures}
	}
	return e
}
