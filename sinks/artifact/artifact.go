// Package artifact is the artifact sink: a file an agent publishes to blob
// storage, and reads back.
//
// # Actions and params
//
//   - publish {"key": K, "content": <base64 bytes>, "content_type": T}
//     stores content under K, replacing what was there. content_type is
//     optional (application/octet-stream) and must parse as a media type.
//   - get {"key": K} reads an artifact back; its class is read, and it is
//     decided and recorded like any other effect. A missing artifact fails
//     with the error type "not-found".
//   - delete {"key": K} (class destructive) removes it and gives its room
//     in the tenant's budget back; existed says whether there was one.
//
// Params are decoded strictly: an unknown field (a tenant, a person, a
// bucket) is BAD_REQUEST, so an agent cannot choose where its artifact goes.
// A key is 1 to 512 bytes of "/"-separated segments of [A-Za-z0-9._-], with
// no empty segment, no leading "/" and no ".." anywhere.
//
// # What is decided and recorded
//
// The effect's Target is the key exactly as the agent gave it, so a rule
// such as {sink: artifact, target: "*/exports/*"} matches it. The decision
// records the content's size and "sha256:<hex>" digest; the outcome records
// the key, the content type, size and digest. Content never reaches the
// journal.
//
// # Tenants
//
// Artifacts are kept per tenant: the store name is "<tenant>/<key>", the
// tenant taken from the run's record (never from the agent) and made a safe
// path segment (TenantDir). One tenant can neither read nor replace another
// tenant's artifact. The people of one tenant share its artifacts.
//
// # Limits
//
// Content larger than Config.MaxBytes is BAD_REQUEST before anything is
// decided. A get of an artifact larger than Config.MaxReadBytes fails with
// "too-large", since the reply must fit in one NATS message. Note that the
// broker bounds a whole request at broker.MaxRequestBytes, which is lower
// than the default MaxBytes today.
//
// # Quota
//
// Each tenant has a budget of stored bytes (Config.QuotaBytes, serve
// --artifact-quota-mb) over all its artifacts, browser screenshots
// included (serve hands the browser the same *Quota), so no agent can fill
// the store, or the disk the journal shares with it, for every tenant. An
// artifact counts Cost: its content, its name and EntryOverhead. An
// overwrite counts what it adds; a delete gives its cost back.
//
// DefaultQuotaBytes is 1 GiB: 64 artifacts at the 16 MiB bound, or
// thousands of reports and screenshots (a page's PNG is some hundred KiB),
// while ten tenants at their budget still fit a modest disk. Deployments
// with few heavy tenants raise it, many light ones lower it.
//
// The ledger lives with the artifacts, never in a broker's memory: an
// entry per tenant (its bytes in use and a write lease) in the KV bucket
// "<bucket>_quota" beside an Object Store, in the same Redis, or in
// .quota/ of a folder store, each changed only by compare-and-swap. Every
// publish and delete of one tenant runs under that tenant's lease (see
// Quota), so it holds across restarts and any number of brokers, and the
// first publish after an upgrade counts what is already there. The bound:
// a tenant never holds more than its budget, except that a publish
// outliving its two-minute lease can overlap another of the same tenant
// and pass it by at most that one artifact. A broker that dies mid-publish
// leaves at most what it reserved counted, and its lease stops the
// tenant's writes for at most two minutes; a write waits for its tenant's
// lease at most leaseWait (30 s), then fails store-unavailable, nothing
// done, so that waiting writes do not hold the broker's in-flight requests
// without end. A write whose store call failed counts what the store then
// holds (Quota.settle). In a folder store the folders a
// key's segments make are not counted beyond EntryOverhead, and a delete
// leaves them (empty) in place.
//
// A publish past the budget is refused with nothing stored, QUOTA_EXCEEDED
// (a *quota.Error wrapping broker.ErrQuotaExceeded; its message says to
// delete artifacts or have the operator raise --artifact-quota-mb). The
// store decides, after policy: the publish is decided and recorded first,
// then is a recorded effect that failed with outcome error
// "quota-exceeded", so an agent that policy refuses learns nothing of the
// tenant's usage and every refusal is on record. Not a policy refusal: the
// budget is a fact of the store at the moment of writing.
// Reads and deletes are never refused for it.
//
// # Stores
//
// The sink writes through a Store: *ObjectStore (a NATS JetStream Object
// Store, the embedded default) or *DirStore (a local folder, confined with
// os.Root). A publish returns only once the store holds the content (the
// Object Store acknowledged it; the folder's file and directory are synced).
//
// The Sink is safe for concurrent use; two publishes of one key race and
// the last one stays.
package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"strconv"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// Actions of the artifact sink.
const (
	ActionPublish = "publish"
	ActionGet     = "get"
	ActionDelete  = "delete"
)

// Defaults for Config.
const (
	DefaultMaxBytes     = 16 << 20
	DefaultMaxReadBytes = 700 << 10 // base64 of it, with the reply around it, fits a 1 MiB NATS message
	DefaultContentType  = "application/octet-stream"
)

// Config configures the sink. The zero value is useful.
type Config struct {
	// MaxBytes bounds published content; 0 is DefaultMaxBytes.
	MaxBytes int64
	// MaxReadBytes bounds the artifact a get returns; 0 is
	// DefaultMaxReadBytes.
	MaxReadBytes int64
	// QuotaBytes is each tenant's budget (see WithQuota) when New is given
	// one of this package's stores; 0 is DefaultQuotaBytes.
	QuotaBytes int64
}

// PublishParams are the params of a publish.
type PublishParams struct {
	Key         string `json:"key"`
	Content     []byte `json:"content"`
	ContentType string `json:"content_type,omitempty"`
}

// GetParams are the params of a get or a delete.
type GetParams struct {
	Key string `json:"key"`
}

// DeleteReply is what a delete returns to the agent.
type DeleteReply struct {
	Key     string `json:"key"`
	Existed bool   `json:"existed"`
}

// PublishReply is what a publish returns to the agent.
type PublishReply struct {
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
}

// GetReply is what a get returns to the agent.
type GetReply struct {
	Key         string `json:"key"`
	Content     []byte `json:"content"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	Digest      string `json:"digest"`
}

// Sink publishes and reads artifacts. Safe for concurrent use.
type Sink struct {
	store   Store
	max     int64
	maxRead int64
}

var _ broker.Sink = (*Sink)(nil)

// New returns the sink writing through store, which the caller owns and
// closes. One of this package's stores is given the tenants' budget
// (WithQuota, cfg.QuotaBytes); a *Quota is used as it is, so a caller that
// also hands the store to others (the browser's screenshots) wraps it
// first and passes the same *Quota to all.
func New(store Store, cfg Config) *Sink {
	s := &Sink{store: WithQuota(store, cfg.QuotaBytes), max: cfg.MaxBytes, maxRead: cfg.MaxReadBytes}
	if s.max <= 0 {
		s.max = DefaultMaxBytes
	}
	if s.maxRead <= 0 {
		s.maxRead = DefaultMaxReadBytes
	}
	return s
}

// state is the decoded request handed from Describe to Perform.
type state struct {
	action      string
	key         string // as the agent gave it
	name        string // "<tenant>/<key>" in the store
	content     []byte
	contentType string
}

// Name implements broker.Sink.
func (s *Sink) Name() policy.Sink { return policy.SinkArtifact }

// Describe implements broker.Sink.
func (s *Sink) Describe(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	st := &state{action: req.Action}
	e := policy.Effect{Sink: policy.SinkArtifact, Action: req.Action, Origin: req.Origin, Tool: req.Tool}
	p := &broker.Proposal{State: st}
	switch req.Action {
	case ActionPublish:
		var pp PublishParams
		if err := broker.DecodeParams(req.Params, &pp); err != nil {
			return nil, err
		}
		if int64(len(pp.Content)) > s.max {
			return nil, fmt.Errorf("%w: content is %d bytes, the limit is %d", broker.ErrBadRequest, len(pp.Content), s.max)
		}
		ct, err := contentType(pp.ContentType)
		if err != nil {
			return nil, err
		}
		st.key, st.content, st.contentType = pp.Key, pp.Content, ct
		p.Size, p.Digest = int64(len(pp.Content)), digest(pp.Content)
	case ActionGet, ActionDelete:
		var gp GetParams
		if err := broker.DecodeParams(req.Params, &gp); err != nil {
			return nil, err
		}
		st.key = gp.Key
		e.Class = policy.EffectRead
		if req.Action == ActionDelete {
			e.Class = policy.EffectDestructive
		}
	default:
		return nil, fmt.Errorf("%w: the artifact sink's actions are %q, %q and %q", broker.ErrBadRequest, ActionPublish, ActionGet, ActionDelete)
	}
	if err := CheckKey(st.key); err != nil {
		return nil, err
	}
	st.name = TenantDir(run.For.Tenant) + "/" + st.key
	// The tenant's budget is the store's Put to decide, after policy: a
	// publish over it is recorded as a failed effect (quota-exceeded), so
	// an agent policy would refuse learns nothing of the tenant's usage
	// and every refusal is on record.
	e.Target = st.key
	p.Effect = e
	return p, nil
}

// Perform implements broker.Sink.
func (s *Sink) Perform(ctx context.Context, run *broker.Run, req *broker.EffectRequest, prop *broker.Proposal) (*broker.Performed, error) {
	st := prop.State.(*state)
	switch st.action {
	case ActionGet:
		return s.get(ctx, st)
	case ActionDelete:
		return s.delete(ctx, st)
	}
	if err := s.store.Put(ctx, st.name, st.contentType, st.content); err != nil {
		return nil, err
	}
	reply, err := json.Marshal(PublishReply{Key: st.key, Size: prop.Size, Digest: prop.Digest})
	if err != nil {
		return nil, err
	}
	return &broker.Performed{
		Result: journal.Result{Status: "ok", Size: prop.Size, Digest: prop.Digest,
			Detail: map[string]string{"key": st.key, "content_type": st.contentType}},
		Reply: reply,
	}, nil
}

func (s *Sink) get(ctx context.Context, st *state) (*broker.Performed, error) {
	data, ct, err := s.store.Get(ctx, st.name, s.maxRead)
	if err != nil {
		return nil, err
	}
	d := digest(data)
	reply, err := json.Marshal(GetReply{Key: st.key, Content: data, ContentType: ct, Size: int64(len(data)), Digest: d})
	if err != nil {
		return nil, err
	}
	return &broker.Performed{
		Result: journal.Result{Status: "ok", Size: int64(len(data)), Digest: d,
			Detail: map[string]string{"key": st.key, "content_type": ct}},
		Reply: reply,
	}, nil
}

func (s *Sink) delete(ctx context.Context, st *state) (*broker.Performed, error) {
	existed, err := s.store.Delete(ctx, st.name)
	if err != nil {
		return nil, err
	}
	reply, err := json.Marshal(DeleteReply{Key: st.key, Existed: existed})
	if err != nil {
		return nil, err
	}
	return &broker.Performed{
		Result: journal.Result{Status: "ok", Detail: map[string]string{"key": st.key, "existed": strconv.FormatBool(existed)}},
		Reply:  reply,
	}, nil
}

func contentType(ct string) (string, error) {
	if ct == "" {
		return DefaultContentType, nil
	}
	if len(ct) > 128 {
		return "", fmt.Errorf("%w: content_type is longer than 128 bytes", broker.ErrBadRequest)
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return "", fmt.Errorf("%w: content_type %q is not a media type: %v", broker.ErrBadRequest, clip(ct), err)
	}
	return ct, nil
}

// digest returns "sha256:<hex>" of b.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
