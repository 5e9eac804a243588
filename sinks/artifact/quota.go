package artifact

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/kvcas"
	"github.com/gatehouse/gatehouse/sinks/quota"
)

// DefaultQuotaBytes is a tenant's budget of artifacts (screenshots
// included) when Config.QuotaBytes is 0; see the package doc.
const DefaultQuotaBytes = 1 << 30

// EntryOverhead is what Cost charges for each artifact beyond its name and
// content: its content type and the store's own bookkeeping (an Object
// Store's meta message, a folder's inode and .meta file, a Redis hash).
const EntryOverhead = 512

// QuotaFlag is the serve flag that sets the budget, named in refusals.
const QuotaFlag = "--artifact-quota-mb"

// Cost is what an artifact of size bytes stored under name
// ("<tenant>/<key>") counts against its tenant's budget.
func Cost(name string, size int64) int64 { return int64(len(name)) + size + EntryOverhead }

func overQuota(used, delta, limit int64) error {
	return quota.Check("artifact", QuotaFlag, "delete artifacts it no longer needs (artifact delete)", used, delta, limit)
}

// tenantOf returns the tenant segment of a store name.
func tenantOf(name string) string {
	t, _, _ := strings.Cut(name, "/")
	return t
}

// quotaStore is a store that keeps its tenants' budgets beside its
// artifacts: ObjectStore, DirStore and RedisStore.
type quotaStore interface {
	Store
	// size returns the size of the artifact under name, ok false when none.
	size(ctx context.Context, name string) (n int64, ok bool, err error)
	// tenantBytes sums Cost over the tenant's artifacts in the store.
	tenantBytes(ctx context.Context, tenant string) (int64, error)
	register() register
}

// entry is a tenant's ledger: the bytes it holds and who holds its lease.
type entry struct {
	Used   int64  `json:"used"`
	Holder string `json:"holder,omitempty"`
	Until  int64  `json:"until,omitempty"` // unix milliseconds
}

// register keeps one entry a tenant, changed only by compare-and-swap.
type register interface {
	// load returns the tenant's entry and its revision; ok false when none.
	load(ctx context.Context, tenant string) (e entry, rev uint64, ok bool, err error)
	// swap stores e if the entry is still at rev (0: there is none) and
	// returns the new revision; errSwapLost when it is not.
	swap(ctx context.Context, tenant string, e entry, rev uint64) (uint64, error)
}

var errSwapLost = errors.New("ledger changed meanwhile")

// Quota is a Store that refuses a publish taking its tenant past Limit
// bytes (Cost summed over the tenant's artifacts). Every publish and delete
// of a tenant runs under that tenant's lease in the store's own register
// (the Object Store's bucket_quota KV, Redis, or the folder's .quota), so
// publishes on any number of brokers are accounted one after another: each
// reads the size it replaces, reserves what it adds before writing and
// gives back what it sheds after. A lease outlives a broker that died
// holding it by at most leaseFor. Safe for concurrent use.
//
// The guarantee: a tenant never holds more than Limit, except when a
// publish outlives its lease (leaseFor, minutes for at most 16 MiB) and
// another publish of the same tenant runs meanwhile: then by at most that
// publish's artifact. The ledger errs only towards refusing: a broker that
// dies mid-publish leaves what it reserved counted.
type Quota struct {
	inner   quotaStore
	reg     register
	limit   int64
	now     func() time.Time
	waitFor time.Duration // leaseWait
}

var _ Store = (*Quota)(nil)

// leaseFor bounds how long a tenant's lease is held; wait is how often a
// publish that waits for it looks again, at most.
const (
	leaseFor = 2 * time.Minute
	waitMax  = 100 * time.Millisecond
)

// leaseWait bounds how long a publish or delete waits for its tenant's
// lease. Effects run without a deadline of their own, so without it one
// would wait as long as others of its tenant keep taking the lease first
// (no turn is promised), or out a dead broker's lease, holding one of the
// broker's in-flight requests all along; past it the effect fails
// store-unavailable, nothing stored, and the agent retries.
const leaseWait = 30 * time.Second

// WithQuota returns store with a budget of limit bytes a tenant (0 is
// DefaultQuotaBytes), or store itself when it is already a *Quota or a
// store that keeps no ledger (a test's).
func WithQuota(store Store, limit int64) Store {
	qs, ok := store.(quotaStore)
	if !ok {
		return store
	}
	if limit <= 0 {
		limit = DefaultQuotaBytes
	}
	return &Quota{inner: qs, reg: qs.register(), limit: limit, now: time.Now, waitFor: leaseWait}
}

// Limit returns the budget of each tenant.
func (q *Quota) Limit() int64 { return q.limit }

// Get implements Store.
func (q *Quota) Get(ctx context.Context, name string, max int64) ([]byte, string, error) {
	return q.inner.Get(ctx, name, max)
}

// lease is a tenant's ledger while one publish or delete holds it.
type lease struct {
	tenant string
	e      entry
	rev    uint64
}

// acquire takes the tenant's lease, counting the tenant from the store when
// it has no ledger yet, and waits (until ctx ends) while another holds it.
func (q *Quota) acquire(ctx context.Context, tenant string) (*lease, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	me := hex.EncodeToString(b[:])
	wait := time.Millisecond
	waiting, stop := context.WithTimeout(ctx, q.waitFor)
	defer stop()
	for {
		e, rev, ok, err := q.reg.load(ctx, tenant)
		if err != nil {
			return nil, err
		}
		now := q.now()
		if !ok {
			if e.Used, err = q.inner.tenantBytes(ctx, tenant); err != nil {
				return nil, err
			}
		} else if e.Holder != "" && e.Until > now.UnixMilli() {
			select {
			case <-waiting.Done():
				if ctx.Err() != nil {
					return nil, fmt.Errorf("%w: waiting for this tenant's other artifact writes: %v", ErrUnavailable, ctx.Err())
				}
				return nil, fmt.Errorf("%w: waited %s for this tenant's other artifact writes to finish (a lease another publish or delete holds, or one a stopped broker left, which expires within %s); nothing was done, retry",
					ErrUnavailable, q.waitFor, leaseFor)
			case <-time.After(wait):
			}
			wait = min(2*wait, waitMax)
			continue
		}
		e.Holder, e.Until = me, now.Add(leaseFor).UnixMilli()
		rev, err = q.reg.swap(ctx, tenant, e, rev)
		if errors.Is(err, errSwapLost) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &lease{tenant: tenant, e: e, rev: rev}, nil
	}
}

// set records used bytes, keeping the lease (release false) or not.
func (q *Quota) set(ctx context.Context, l *lease, used int64, release bool) error {
	e := entry{Used: max(used, 0), Holder: l.e.Holder, Until: l.e.Until}
	if release {
		e.Holder, e.Until = "", 0
	}
	rev, err := q.reg.swap(ctx, l.tenant, e, l.rev)
	if err != nil {
		return fmt.Errorf("artifact quota ledger: %w", err) // the lease expired and another took it
	}
	l.e, l.rev = e, rev
	return nil
}

// Put implements Store: under the tenant's lease, reserve what the publish
// adds, write, then give back what it shed (or, when the write failed,
// count what the store holds under name after it: see settle).
func (q *Quota) Put(ctx context.Context, name, contentType string, data []byte) error {
	l, err := q.acquire(ctx, tenantOf(name))
	if err != nil {
		return err
	}
	used := l.e.Used
	old, err := q.cost(ctx, name)
	delta := Cost(name, int64(len(data))) - old
	if err == nil {
		err = overQuota(used, delta, q.limit)
	}
	if err == nil && delta > 0 {
		err = q.set(ctx, l, used+delta, false)
	}
	if err != nil {
		q.release(ctx, l, used)
		return err
	}
	if err := q.inner.Put(ctx, name, contentType, data); err != nil {
		q.release(ctx, l, q.settle(ctx, name, used-old, used+max(delta, 0)))
		return err
	}
	// Stored, and the growth already counted: a release that fails (the
	// ledger unreachable, the lease taken after it expired) leaves the
	// ledger high or the lease to expire, never the publish undone.
	q.release(ctx, l, used+delta)
	return nil
}

// release records used bytes and gives the lease up, even when ctx has
// ended (a broker shutting down): a lease left held stops the tenant's
// writes until it expires.
func (q *Quota) release(ctx context.Context, l *lease, used int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWithin)
	defer cancel()
	_ = q.set(ctx, l, used, true)
}

// releaseWithin bounds a release once the caller's context has ended.
const releaseWithin = 10 * time.Second

// settle returns the tenant's bytes after a write or delete of name that
// failed, measured under the lease: without the name (without), plus what
// the store now holds under it. A failure can come after the store changed
// (a folder's fsync after the rename, an acknowledgement lost), so giving
// back all that was reserved could count a stored artifact out. When even
// that read fails, reserved (what the ledger would hold had the write
// stored) stays counted, erring towards refusing.
func (q *Quota) settle(ctx context.Context, name string, without, reserved int64) int64 {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWithin)
	defer cancel()
	now, err := q.cost(ctx, name)
	if err != nil {
		return reserved
	}
	return without + now
}

// cost is what the artifact under name counts now, 0 when there is none.
func (q *Quota) cost(ctx context.Context, name string) (int64, error) {
	n, ok, err := q.inner.size(ctx, name)
	if err != nil || !ok {
		return 0, err
	}
	return Cost(name, n), nil
}

// Fit returns the *quota.Error Put would return now, without storing or
// waiting for a lease: a hint, since another publish may take the room.
func (q *Quota) Fit(ctx context.Context, name string, size int64) error {
	e, _, ok, err := q.reg.load(ctx, tenantOf(name))
	if err != nil || !ok {
		return err // a tenant without a ledger is counted by Put
	}
	old, err := q.cost(ctx, name)
	if err != nil {
		return err
	}
	return overQuota(e.Used, Cost(name, size)-old, q.limit)
}

// Used returns the bytes the tenant (its TenantDir) holds, counted from
// the store when it has no ledger yet.
func (q *Quota) Used(ctx context.Context, tenant string) (int64, error) {
	e, _, ok, err := q.reg.load(ctx, tenant)
	if err != nil || ok {
		return e.Used, err
	}
	return q.inner.tenantBytes(ctx, tenant)
}

// Delete implements Store: under the tenant's lease, delete, then give the
// artifact's cost back (when the delete failed, what the store holds under
// name after it stays counted: see settle).
func (q *Quota) Delete(ctx context.Context, name string) (bool, error) {
	l, err := q.acquire(ctx, tenantOf(name))
	if err != nil {
		return false, err
	}
	used := l.e.Used
	old, err := q.cost(ctx, name)
	if err != nil || old == 0 {
		q.release(ctx, l, used)
		return false, err
	}
	ok, err := q.inner.Delete(ctx, name)
	if err != nil || !ok {
		q.release(ctx, l, q.settle(ctx, name, used-old, used))
		return false, err
	}
	q.release(ctx, l, used-old) // as in Put: deleted, whatever the release
	return true, nil
}

// kvRegister keeps entries in a JetStream KV bucket, at the hex of the
// tenant, with the KV revision as the entry's.
type kvRegister struct{ kv jetstream.KeyValue }

func openKVRegister(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (kvRegister, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "Gatehouse artifact quotas: each tenant's bytes in use and write lease",
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
		History:     1,
	})
	if err != nil {
		return kvRegister{}, fmt.Errorf("quota bucket %s: %w", bucket, err)
	}
	return kvRegister{kv: kv}, nil
}

func (r kvRegister) load(ctx context.Context, tenant string) (entry, uint64, bool, error) {
	kve, err := r.kv.Get(ctx, hex.EncodeToString([]byte(tenant)))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return entry{}, 0, false, nil
	}
	if err != nil {
		return entry{}, 0, false, natsError("read", err)
	}
	var e entry
	if err := json.Unmarshal(kve.Value(), &e); err != nil {
		return entry{}, 0, false, fmt.Errorf("%w: quota ledger of %s: %v", ErrStore, tenant, err)
	}
	return e, kve.Revision(), true, nil
}

func (r kvRegister) swap(ctx context.Context, tenant string, e entry, rev uint64) (uint64, error) {
	b, _ := json.Marshal(e)
	key := hex.EncodeToString([]byte(tenant))
	var err error
	if rev == 0 {
		rev, err = r.kv.Create(ctx, key, b)
	} else {
		rev, err = r.kv.Update(ctx, key, b, rev)
	}
	if kvcas.Conflict(err) {
		return 0, errSwapLost
	}
	if err != nil {
		return 0, natsError("quota", err)
	}
	return rev, nil
}
