package code

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/kvcas"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/code/contract"
)

// Integration is one integration stored in the registry for reuse: code
// and the effect it declares. Its source is kept in the object store
// under its digest; the entry names it.
type Integration struct {
	Name     string             `json:"name"`
	Program  string             `json:"program"` // a name of Config.Programs: python3
	Effect   policy.EffectClass `json:"effect"`  // read, write, destructive or notify
	Digest   string             `json:"digest"`  // sha256:<hex> of the source
	Size     int64              `json:"size"`
	StoredAt time.Time          `json:"stored_at"`
	StoredBy StoredBy           `json:"stored_by"`
	// Contract is the source's contract as this or another broker read it
	// when it was stored, or re-read when the entry changed; ContractOf is
	// the digest of the source it was read from. It is kept for people and
	// tools to see: a broker deciding a run reads the contract itself.
	Contract   *journal.ProgramContract `json:"contract,omitempty"`
	ContractOf string                   `json:"contract_of,omitempty"`
}

// StoredBy is whose work stored an integration.
type StoredBy struct {
	Run    string        `json:"run,omitempty"`
	Tenant string        `json:"tenant,omitempty"`
	Person string        `json:"person,omitempty"`
	Agent  string        `json:"agent,omitempty"`
	Origin policy.Origin `json:"origin,omitempty"`
}

// Registry errors, wrapped with %w.
var (
	// ErrNoIntegration: no integration of that name is stored.
	ErrNoIntegration = errors.New("no such integration in the registry")
	// ErrRegistry: the registry's buckets could not be read or written.
	ErrRegistry = errors.New("integration registry unavailable")
	// ErrRegistryTampered: a stored source does not match its entry's digest.
	ErrRegistryTampered = errors.New("integration source does not match its digest")
	// ErrIntegrationHeld: the name is held by an entry that work of
	// another tenant (or an operator) stored, or work of a more trusted
	// origin: this work cannot replace it (see MayReplace).
	ErrIntegrationHeld = errors.New("integration name is held by other work")
)

// MayReplace returns nil when work by may store an entry over one stored
// by old, else an error wrapping ErrIntegrationHeld. The registry is one
// namespace for every tenant, and whoever runs an entry by name runs what
// its holder stored; so a name is held by the tenant whose work stored it
// (an entry an operator wrote, naming no tenant, by nobody an agent acts
// for), and within it by the most trusted origin that stored it: model
// work cannot replace what shipped or registry work stored. Otherwise an
// agent of one tenant would choose the code another tenant's runs of the
// name carry out, or a model agent the code behind a trusted name.
func MayReplace(old, by StoredBy) error {
	if old.Tenant == "" || old.Tenant != by.Tenant {
		return fmt.Errorf("%w: it was stored by another tenant's work or by an operator; choose another name", ErrIntegrationHeld)
	}
	was, now := policy.LeastTrusted(old.Origin, old.Origin), policy.LeastTrusted(by.Origin, by.Origin)
	if was != now && policy.LeastTrusted(was, now) == now {
		return fmt.Errorf("%w: it was stored by %s work, which %s work cannot replace; choose another name", ErrIntegrationHeld, was, now)
	}
	return nil
}

// storeTries bounds the compare-and-set rounds of one Put against
// concurrent writes of the same entry (other registrations, contract
// rereads).
const storeTries = 8

// Holder returns who stored the entry under name, ok false when none is.
func (r *Registry) Holder(ctx context.Context, name string) (by StoredBy, rev uint64, ok bool, err error) {
	e, err := r.kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return StoredBy{}, 0, false, nil
	}
	if err != nil {
		return StoredBy{}, 0, false, fmt.Errorf("%w: %v", ErrRegistry, err)
	}
	var in struct {
		StoredBy StoredBy `json:"stored_by"`
	}
	if err := json.Unmarshal(e.Value(), &in); err != nil {
		// An entry nobody can read is held by nobody an agent acts for.
		return StoredBy{}, e.Revision(), true, nil
	}
	return in.StoredBy, e.Revision(), true, nil
}

var integrationName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidIntegrationName reports whether name can name an integration: 1
// to 64 letters, digits, '.', '_' and '-', starting with a letter or digit.
func ValidIntegrationName(name string) bool { return integrationName.MatchString(name) }

// RegistryConfig configures OpenRegistry. Reader is required; the rest may
// be zero.
type RegistryConfig struct {
	// Reader reads the contracts of stored sources.
	Reader *Reader
	// Programs are the interpreters by name (nil: DefaultPrograms).
	Programs map[string]Program
	// Replicas of the two buckets (default 1).
	Replicas int
	// MaxSource bounds a stored source (default 4 MiB).
	MaxSource int64
	Logger    *slog.Logger
}

// Registry keeps integrations stored for reuse: each entry in the
// JetStream KV bucket subject.IntegrationsBucket under its name, each
// source in the object store subject.IntegrationCodeBucket under its
// digest. Every broker watches the bucket: when an entry is stored or
// changed, by any broker or by an operator writing the bucket, the
// contract of its source is read again, kept in the Reader's cache for
// the runs that follow, and written back to the entry when the one there
// was read from another source or by another reader version.
//
// The watch goroutine is the Registry's; Close stops it. Safe for
// concurrent use.
type Registry struct {
	kv  jetstream.KeyValue
	obj jetstream.ObjectStore
	cfg RegistryConfig
	log *slog.Logger

	stop context.CancelFunc
	done chan struct{}

	mu       sync.Mutex
	rereads  int // contracts written back by this broker's watch
	watching chan struct{}
}

// OpenRegistry creates or opens the buckets and starts watching them.
func OpenRegistry(ctx context.Context, js jetstream.JetStream, cfg RegistryConfig) (*Registry, error) {
	if cfg.Reader == nil {
		return nil, errors.New("code registry: a Reader is required")
	}
	if cfg.Programs == nil {
		cfg.Programs = DefaultPrograms
	}
	if cfg.Replicas < 1 {
		cfg.Replicas = 1
	}
	if cfg.MaxSource <= 0 {
		cfg.MaxSource = 4 << 20
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: subject.IntegrationsBucket, Description: "Gatehouse's registry of stored integrations, by name",
		Storage: jetstream.FileStorage, Replicas: cfg.Replicas, History: 8,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %v", ErrRegistry, subject.IntegrationsBucket, err)
	}
	obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: subject.IntegrationCodeBucket, Description: "Sources of Gatehouse's stored integrations, by digest",
		Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %v", ErrRegistry, subject.IntegrationCodeBucket, err)
	}
	r := &Registry{kv: kv, obj: obj, cfg: cfg, log: log, done: make(chan struct{}), watching: make(chan struct{})}
	wctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	w, err := kv.WatchAll(wctx)
	if err != nil {
		stop()
		return nil, fmt.Errorf("%w: watch %s: %v", ErrRegistry, subject.IntegrationsBucket, err)
	}
	go r.watch(wctx, w)
	return r, nil
}

// Close stops the watch and waits for it.
func (r *Registry) Close() error {
	r.stop()
	<-r.done
	return nil
}

func sourceDigest(src []byte) string {
	sum := sha256.Sum256(src)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func objectName(digest string) string { return "src-" + digest[len("sha256:"):] }

// Put stores an integration: its source under its digest, then its
// entry, with the contract read from that source, if in.StoredBy may
// replace the entry there (MayReplace; checked and written as one
// compare-and-set, so two registrations racing for a free name leave
// one holder). It returns the entry's revision.
func (r *Registry) Put(ctx context.Context, in *Integration, source []byte, c *contract.Contract) (uint64, error) {
	if !ValidIntegrationName(in.Name) {
		return 0, fmt.Errorf("%w: %q is not an integration name", ErrRegistry, in.Name)
	}
	if int64(len(source)) > r.cfg.MaxSource {
		return 0, fmt.Errorf("%w: the source is %d bytes, the limit is %d", ErrRegistry, len(source), r.cfg.MaxSource)
	}
	in.Digest, in.Size = sourceDigest(source), int64(len(source))
	in.Contract, in.ContractOf = Record(c), in.Digest
	if _, err := r.obj.PutBytes(ctx, objectName(in.Digest), source); err != nil {
		return 0, fmt.Errorf("%w: store the source: %v", ErrRegistry, err)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	for range storeTries {
		old, seen, held, err := r.Holder(ctx, in.Name)
		if err != nil {
			return 0, err
		}
		var rev uint64
		if !held {
			rev, err = r.kv.Create(ctx, in.Name, b)
		} else if err := MayReplace(old, in.StoredBy); err != nil {
			return 0, fmt.Errorf("integration %q: %w", in.Name, err)
		} else {
			rev, err = r.kv.Update(ctx, in.Name, b, seen)
		}
		if kvcas.Conflict(err) {
			continue // written meanwhile: look at its holder again
		}
		if err != nil {
			return 0, fmt.Errorf("%w: store the entry: %v", ErrRegistry, err)
		}
		return rev, nil
	}
	return 0, fmt.Errorf("%w: store the entry: it kept changing while being stored; try again", ErrRegistry)
}

// Get returns a stored integration and its source, checked against its
// digest.
func (r *Registry) Get(ctx context.Context, name string) (*Integration, []byte, error) {
	if !ValidIntegrationName(name) {
		return nil, nil, fmt.Errorf("%w: %q", ErrNoIntegration, name)
	}
	e, err := r.kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil, fmt.Errorf("%w: %q", ErrNoIntegration, name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrRegistry, err)
	}
	return r.load(ctx, e.Value())
}

// load decodes an entry and fetches its source.
func (r *Registry) load(ctx context.Context, b []byte) (*Integration, []byte, error) {
	var in Integration
	if err := json.Unmarshal(b, &in); err != nil || !ValidIntegrationName(in.Name) || len(in.Digest) != len("sha256:")+64 {
		return nil, nil, fmt.Errorf("%w: an entry that cannot be read", ErrRegistry)
	}
	src, err := r.obj.GetBytes(ctx, objectName(in.Digest))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the source of %s: %v", ErrRegistry, in.Name, err)
	}
	if sourceDigest(src) != in.Digest {
		return nil, nil, fmt.Errorf("%w: %s", ErrRegistryTampered, in.Name)
	}
	return &in, src, nil
}

// Contract reads the contract of an integration's source.
func (r *Registry) Contract(ctx context.Context, in *Integration, src []byte) *contract.Contract {
	prog, ok := r.cfg.Programs[in.Program]
	if !ok || !prog.Python {
		return contract.Unverified(contract.ReasonNotPython, fmt.Sprintf("the integration's program %q is not Python", in.Program))
	}
	return r.cfg.Reader.Read(ctx, prog.Path, src, contract.Options{})
}

// watch re-reads the contract of every entry stored or changed.
func (r *Registry) watch(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(r.done)
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil { // the values stored before the watch began have all been seen
				close(r.watching)
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			r.reread(ctx, e)
		}
	}
}

// reread reads an entry's contract again and writes it back when the one
// stored is not what this reader reads from this source.
func (r *Registry) reread(ctx context.Context, e jetstream.KeyValueEntry) {
	in, src, err := r.load(ctx, e.Value())
	if err != nil {
		r.log.Warn("registry entry not read", "key", e.Key(), "err", err)
		return
	}
	rec := Record(r.Contract(ctx, in, src))
	if in.ContractOf == in.Digest && reflect.DeepEqual(in.Contract, rec) {
		return
	}
	in.Contract, in.ContractOf = rec, in.Digest
	b, err := json.Marshal(in)
	if err != nil {
		return
	}
	// Compare and set: a broker or person that changed the entry since
	// wins, and its change comes through this watch in turn.
	if _, err := r.kv.Update(ctx, e.Key(), b, e.Revision()); err != nil {
		r.log.Info("registry entry changed while its contract was re-read", "key", e.Key(), "err", err)
		return
	}
	r.mu.Lock()
	r.rereads++
	r.mu.Unlock()
	r.log.Info("integration contract re-read", "name", in.Name, "digest", in.Digest, "verified", rec.Verified)
}

// Rereads reports how many contracts this broker's watch wrote back.
func (r *Registry) Rereads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rereads
}

// Watching is closed once the watch has seen every entry stored before it
// began.
func (r *Registry) Watching() <-chan struct{} { return r.watching }
