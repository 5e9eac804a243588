// Package memory is the memory sink: a fact an agent keeps for later
// sessions, private to the person the work is for or shared with their
// tenant.
//
// # Actions and params
//
//   - put {"key": K, "value": <any JSON but null>, "kind": "fact",
//     "visibility": "private"} keeps value under K, replacing what was
//     there. kind (default "fact") is 1 to 64 bytes of [A-Za-z0-9._-], e.g.
//     fact or preference.
//   - get {"key": K, "visibility": V} (class read) returns the memory, or
//     found false when there is none: absence is an answer, not a failure.
//   - delete {"key": K, "visibility": V} (class destructive) removes it;
//     existed says whether there was one.
//
// visibility is "private" (the default) or "shared". A key is 1 to 256
// bytes of "/"-separated segments of [A-Za-z0-9._-], no segment empty and
// no ".." anywhere. Params are decoded strictly, so an agent cannot name a
// tenant or a person: an unknown field is BAD_REQUEST.
//
// # Whose memory
//
// Private memory belongs to the run's tenant and person, shared memory to
// its tenant; both come from the run's record, never from the agent. An
// agent working for one person can therefore neither read nor change
// another person's private memory or another tenant's shared memory: the
// store key (Key) is built from the record alone.
//
// # What is decided and recorded
//
// Target is "<visibility>/<key>", so rules can match e.g. "shared/**". The
// decision of a put records the size and "sha256:<hex>" digest of the value
// in compact JSON; the outcome records the kind, the visibility, and the
// size and digest of the value stored or read. Values never reach the
// journal; keys do, so they must not carry secrets.
//
// # Stores
//
// The sink keeps memories through a Store: *KVStore (JetStream KV, the
// embedded default) or *RedisStore (when Redis is configured). A put
// returns once the store acknowledged it. When the store cannot be reached
// the effect fails with a *StoreError whose ErrorType is
// "store-unavailable" (errors.Is(err, ErrUnavailable)) and whose message
// tells the operator what to do; the next effect tries again, so work
// resumes by itself when the store is back.
//
// The Sink is safe for concurrent use; two puts of one key race and the
// last one stays.
//
// # Quota
//
// Each tenant has a budget of stored bytes (Config.QuotaBytes, serve
// --memory-quota-mb), its people's private memories and its shared ones
// together, so no agent can fill the store (and the disk the journal may
// share) for every tenant. What a memory counts is Cost: its stored record,
// its key as the store keeps it and EntryOverhead for the store's own
// bookkeeping, so a flood of tiny values under long keys is bounded too.
// An overwrite counts only what it adds (or gives back what it sheds); a
// delete gives its cost back.
//
// DefaultQuotaBytes is 64 MiB: a memory is a fact or a preference, a few
// hundred bytes, so 64 MiB is some hundred thousand of them (a thousand at
// the 64 KiB value bound) for a tenant, while a thousand tenants at their
// budget still fit a small server's disk (64 GiB). An operator with few,
// heavy tenants raises it; one with many small ones lowers it.
//
// The accounting lives in the store, beside the memories, never in a
// broker's memory: JetStream KV keeps the tenant's bytes in use under
// "q.<hex tenant>" in the same bucket, changed only by compare-and-swap
// (the protocol is on KVStore.Put); Redis keeps it at Prefix +
// "q:<hex tenant>", changed in the same Lua script that changes the
// memory. So it holds across restarts and across any number of brokers,
// and a tenant's first put after an upgrade counts what is already there.
// The guarantee: concurrent puts never together take a tenant past its
// budget, not even by one value; the counter errs only towards refusing (a
// broker that dies mid-put leaves at most that put's cost counted though
// unstored).
//
// A put over budget is refused, never stored, with QUOTA_EXCEEDED (errors
// wrapping broker.ErrQuotaExceeded, a *quota.Error whose message says to
// delete memories or have the operator raise --memory-quota-mb). Store.Put
// decides, after policy: the put is decided and recorded first, then is a
// recorded effect that failed with outcome error "quota-exceeded", whether
// the room was gone already or a concurrent put took it (Describe's
// Store.Fit is only a hint for Put). So an agent that policy refuses learns
// nothing of the tenant's usage, and every refusal is on record. It is not
// a policy refusal: policy decides what an agent may do, the budget is a
// fact of the store at the moment of writing, like a full stream. Reads
// and deletes are never refused for the budget.
package memory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/keys"
)

// Actions of the memory sink.
const (
	ActionPut    = "put"
	ActionGet    = "get"
	ActionDelete = "delete"
)

// Visibility says whose memory it is.
type Visibility string

const (
	Private Visibility = "private" // the person's, within their tenant
	Shared  Visibility = "shared"  // the tenant's
)

// Defaults for Config and params.
const (
	DefaultMaxValueBytes = 64 << 10
	DefaultKind          = "fact"
	MaxKeyBytes          = 256
)

// Config configures the sink. The zero value is useful.
type Config struct {
	// MaxValueBytes bounds a value in compact JSON; 0 is
	// DefaultMaxValueBytes.
	MaxValueBytes int
	// QuotaBytes is each tenant's budget of stored memory (Cost summed
	// over its private and shared memories); 0 is DefaultQuotaBytes.
	QuotaBytes int64
	// Now stamps stored records; nil is time.Now.
	Now func() time.Time
}

// PutParams are the params of a put.
type PutParams struct {
	Key        string          `json:"key"`
	Value      json.RawMessage `json:"value"`
	Kind       string          `json:"kind,omitempty"`
	Visibility Visibility      `json:"visibility,omitempty"`
}

// KeyParams are the params of a get or a delete.
type KeyParams struct {
	Key        string     `json:"key"`
	Visibility Visibility `json:"visibility,omitempty"`
}

// Record is what the store keeps under a key.
type Record struct {
	Kind    string          `json:"kind"`
	Value   json.RawMessage `json:"value"`
	Run     string          `json:"run"` // the run that stored it
	Updated time.Time       `json:"updated"`
}

// Reply answers every action; fields that do not apply are left out.
type Reply struct {
	Key        string          `json:"key"`
	Visibility Visibility      `json:"visibility"`
	Found      *bool           `json:"found,omitempty"`   // get
	Existed    *bool           `json:"existed,omitempty"` // delete
	Kind       string          `json:"kind,omitempty"`
	Value      json.RawMessage `json:"value,omitempty"`
	Updated    *time.Time      `json:"updated,omitempty"`
	Size       int64           `json:"size"`
	Digest     string          `json:"digest,omitempty"`
}

// Key names one memory in a store. Person is "" for shared memory. Stores
// must keep distinct Keys apart.
type Key struct {
	Tenant string
	Person string
	Name   string
}

// Visibility returns Shared when k has no person, else Private.
func (k Key) Visibility() Visibility {
	if k.Person == "" {
		return Shared
	}
	return Private
}

// Sink keeps memories. Safe for concurrent use.
type Sink struct {
	store Store
	max   int
	quota int64
	now   func() time.Time
}

var _ broker.Sink = (*Sink)(nil)

// New returns the sink keeping memories in store, which the caller owns
// and closes.
func New(store Store, cfg Config) *Sink {
	s := &Sink{store: store, max: cfg.MaxValueBytes, quota: cfg.QuotaBytes, now: cfg.Now}
	if s.max <= 0 {
		s.max = DefaultMaxValueBytes
	}
	if s.quota <= 0 {
		s.quota = DefaultQuotaBytes
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// state is the decoded request handed from Describe to Perform.
type state struct {
	action string
	key    Key
	name   string // as the agent gave it
	kind   string
	value  []byte // compact JSON
	rec    []byte // a put's Record, as stored
	room   Room   // what Describe's Fit saw
}

// Name implements broker.Sink.
func (s *Sink) Name() policy.Sink { return policy.SinkMemory }

// Describe implements broker.Sink.
func (s *Sink) Describe(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	e := policy.Effect{Sink: policy.SinkMemory, Action: req.Action, Origin: req.Origin, Tool: req.Tool}
	st := &state{action: req.Action}
	p := &broker.Proposal{State: st}
	var vis Visibility
	switch req.Action {
	case ActionPut:
		var pp PutParams
		if err := broker.DecodeParams(req.Params, &pp); err != nil {
			return nil, err
		}
		if pp.Value == nil || string(pp.Value) == "null" {
			return nil, fmt.Errorf("%w: value is required and may not be null (to forget a memory, delete it)", broker.ErrBadRequest)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, pp.Value); err != nil {
			return nil, fmt.Errorf("%w: value: %v", broker.ErrBadRequest, err)
		}
		if buf.Len() > s.max {
			return nil, fmt.Errorf("%w: value is %d bytes, the limit is %d", broker.ErrBadRequest, buf.Len(), s.max)
		}
		if pp.Kind == "" {
			pp.Kind = DefaultKind
		}
		if err := checkKind(pp.Kind); err != nil {
			return nil, err
		}
		st.name, st.kind, st.value, vis = pp.Key, pp.Kind, buf.Bytes(), pp.Visibility
		p.Size, p.Digest = int64(buf.Len()), digest(st.value)
	case ActionGet, ActionDelete:
		var kp KeyParams
		if err := broker.DecodeParams(req.Params, &kp); err != nil {
			return nil, err
		}
		st.name, vis = kp.Key, kp.Visibility
		e.Class = policy.EffectRead
		if req.Action == ActionDelete {
			e.Class = policy.EffectDestructive
		}
	default:
		return nil, fmt.Errorf("%w: the memory sink's actions are %q, %q and %q", broker.ErrBadRequest, ActionPut, ActionGet, ActionDelete)
	}
	if err := CheckKey(st.name); err != nil {
		return nil, err
	}
	key, err := keyFor(run.For, vis, st.name)
	if err != nil {
		return nil, err
	}
	st.key = key
	if req.Action == ActionPut {
		if st.rec, err = json.Marshal(Record{Kind: st.kind, Value: st.value, Run: run.ID, Updated: s.now().UTC()}); err != nil {
			return nil, err
		}
		// What Fit sees is only a hint for Put, which decides for good:
		// a put over budget is decided by policy first and recorded as a
		// failed effect (quota-exceeded), so an agent policy would refuse
		// learns nothing of the tenant's usage and every refusal is on
		// record.
		if room, err := s.store.Fit(ctx, key, st.rec, s.quota); err == nil {
			st.room = room
		}
	}
	e.Target = string(key.Visibility()) + "/" + st.name
	p.Effect = e
	return p, nil
}

// keyFor builds the store key from whom the run is for; the agent chooses
// only the visibility and the name.
func keyFor(who policy.Principal, vis Visibility, name string) (Key, error) {
	if who.Tenant == "" || who.Person == "" {
		return Key{}, fmt.Errorf("%w: the run names no tenant or person", broker.ErrBadRequest)
	}
	switch vis {
	case "", Private:
		return Key{Tenant: who.Tenant, Person: who.Person, Name: name}, nil
	case Shared:
		return Key{Tenant: who.Tenant, Name: name}, nil
	}
	return Key{}, fmt.Errorf("%w: visibility %q is not private or shared", broker.ErrBadRequest, clip(string(vis)))
}

// Perform implements broker.Sink.
func (s *Sink) Perform(ctx context.Context, run *broker.Run, req *broker.EffectRequest, prop *broker.Proposal) (*broker.Performed, error) {
	st := prop.State.(*state)
	vis := st.key.Visibility()
	r := Reply{Key: st.name, Visibility: vis}
	res := journal.Result{Status: "ok", Detail: map[string]string{"visibility": string(vis)}}
	switch st.action {
	case ActionPut:
		if err := s.store.Put(ctx, st.key, st.rec, s.quota, st.room); err != nil {
			return nil, err
		}
		r.Kind, r.Size, r.Digest = st.kind, prop.Size, prop.Digest
		res.Size, res.Digest, res.Detail["kind"] = prop.Size, prop.Digest, st.kind
	case ActionGet:
		b, err := s.store.Get(ctx, st.key)
		found := err == nil
		r.Found = &found
		res.Detail["found"] = strconv.FormatBool(found)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return nil, err
		default:
			var rec Record
			if err := json.Unmarshal(b, &rec); err != nil {
				return nil, &StoreError{Store: s.store.String(), Op: "read", Err: fmt.Errorf("stored record is not JSON: %w", err)}
			}
			r.Kind, r.Value, r.Updated = rec.Kind, rec.Value, &rec.Updated
			r.Size, r.Digest = int64(len(rec.Value)), digest(rec.Value)
			res.Size, res.Digest, res.Detail["kind"] = r.Size, r.Digest, rec.Kind
		}
	case ActionDelete:
		existed, err := s.store.Delete(ctx, st.key)
		if err != nil {
			return nil, err
		}
		r.Existed = &existed
		res.Detail["existed"] = strconv.FormatBool(existed)
	}
	reply, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return &broker.Performed{Result: res, Reply: reply}, nil
}

// CheckKey accepts a memory key (see package keys). Errors wrap
// broker.ErrBadRequest.
func CheckKey(k string) error { return keys.Check(k, MaxKeyBytes) }

func checkKind(k string) error {
	if len(k) > 64 {
		return fmt.Errorf("%w: kind is longer than 64 bytes", broker.ErrBadRequest)
	}
	for i := 0; i < len(k); i++ {
		if !keys.Byte(k[i]) {
			return fmt.Errorf("%w: kind %q: use A-Z, a-z, 0-9, '.', '_' and '-'", broker.ErrBadRequest, clip(k))
		}
	}
	return nil
}

// digest returns "sha256:<hex>" of b.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// clip shortens untrusted text before it goes into an error message.
func clip(s string) string { return keys.Clip(s) }
