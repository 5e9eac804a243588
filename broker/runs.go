package broker

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// Run is the application's record of one piece of work: whom it is for and
// within what. It is written once when work opens and never changed by an
// agent; Closed is the only field that changes.
type Run struct {
	ID            string           `json:"id"`
	For           policy.Principal `json:"acting_for"`
	Mandate       *policy.Mandate  `json:"mandate,omitempty"`
	MandateDigest string           `json:"mandate_digest,omitempty"`
	Scopes        []string         `json:"scopes"`
	// Agent is the agent identity the run accepts effects from ("" the
	// shared agent credential; see RunAgent).
	Agent string `json:"agent,omitempty"`
	// Incarnation is the registration of Agent the broker knew when the
	// run opened (Broker.AgentIncarnation; "" for none recorded): effects
	// are accepted only from that registration, never from an agent
	// registered under the name later.
	Incarnation string `json:"incarnation,omitempty"`
	// App is the application identity that opened the work (RunApp): only
	// it may close the run or read its outputs. Sub-runs keep the first
	// run's.
	App string `json:"app,omitempty"`
	// Input is the application's structured input (a JSON object), kept
	// verbatim so numbers stay exact; sub-runs share it.
	Input  json.RawMessage `json:"input,omitempty"`
	Opened time.Time       `json:"opened"`
	Closed bool            `json:"closed,omitempty"`

	// Parent is the run this one was delegated from, Root the first run
	// of the work and Depth the number of delegations from it; all three
	// are empty or zero for work an application opened (see OpenChild).
	Parent string `json:"parent,omitempty"`
	Root   string `json:"root,omitempty"`
	Depth  int    `json:"depth,omitempty"`
}

// Authority is the policy's view of the run.
func (r *Run) Authority() policy.Authority {
	return policy.Authority{For: r.For, Mandate: r.Mandate, Scopes: r.Scopes, Agent: r.Agent}
}

// NewRunID returns a fresh run id: "r_" and a lowercase ULID, 80 bits of it
// random, so a run id cannot be guessed from another.
func NewRunID(now time.Time) string {
	return "r_" + strings.ToLower(ulid.MustNew(ulid.Timestamp(now), rand.Reader).String())
}

// newID returns a fresh event or effect id with the given prefix.
func newID(prefix string, now time.Time) string {
	return prefix + strings.ToLower(ulid.MustNew(ulid.Timestamp(now), rand.Reader).String())
}

// ValidRunID reports whether s has the form NewRunID makes.
func ValidRunID(s string) bool {
	if len(s) != 28 || !strings.HasPrefix(s, "r_") {
		return false
	}
	for _, c := range s[2:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// runCacheTTL bounds how long a broker trusts its cached copy of a run.
const runCacheTTL = 5 * time.Second

// KVRuns keeps run records in a JetStream KV bucket, shared by every broker,
// with an in-process cache in front that a watch on the bucket keeps fresh
// (runswatch.go). Safe for concurrent use; Stop ends the watch.
type KVRuns struct {
	kv    jetstream.KeyValue
	cache *runCache
}

// OpenKVRuns creates or binds the runs bucket with the given replicas.
func OpenKVRuns(ctx context.Context, js jetstream.JetStream, replicas int) (*KVRuns, error) {
	if replicas < 1 {
		replicas = 1
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      subject.RunsBucket,
		Description: "Gatehouse run records: whom each run's work is for",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: runs bucket: %v", ErrRunStore, err)
	}
	s := &KVRuns{kv: kv, cache: newRunCache()}
	s.cache.watch(kv, slog.Default())
	return s, nil
}

// Create stores a new run record; it fails if the id exists.
func (s *KVRuns) Create(ctx context.Context, r *Run) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	rev, err := s.kv.Create(ctx, r.ID, b)
	if err != nil {
		return fmt.Errorf("%w: create run: %v", ErrRunStore, err)
	}
	s.cache.set(r, rev)
	return nil
}

// Get returns the run record, or ErrUnknownRun. Records are cached and
// kept fresh by the bucket's watch, so a close made through another broker
// is seen here as soon as it arrives (within runCacheTTL when there is no
// watch).
func (s *KVRuns) Get(ctx context.Context, id string) (*Run, error) {
	if r := s.cache.get(id); r != nil {
		return r, nil
	}
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownRun, id)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRunStore, err)
	}
	var r Run
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, fmt.Errorf("%w: run %s record unreadable: %v", ErrRunStore, id, err)
	}
	s.cache.set(&r, e.Revision())
	return &r, nil
}

// Close marks the run closed.
func (s *KVRuns) Close(ctx context.Context, id string) (*Run, error) {
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownRun, id)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRunStore, err)
	}
	var r Run
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, fmt.Errorf("%w: run %s record unreadable: %v", ErrRunStore, id, err)
	}
	if r.Closed {
		return nil, fmt.Errorf("%w: %s", ErrRunClosed, id)
	}
	r.Closed = true
	b, _ := json.Marshal(&r)
	rev, err := s.kv.Update(ctx, id, b, e.Revision())
	if err != nil {
		return nil, fmt.Errorf("%w: close run: %v", ErrRunStore, err)
	}
	s.cache.set(&r, rev)
	return &r, nil
}
