package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/kvcas"
)

// Store errors. ErrStore wraps any failure to reach the store.
var (
	ErrStore = errors.New("approval store unavailable")
	// A Store returns these (unwrapped or wrapped) for the outcomes the
	// service acts on.
	ErrKeyExists       = errors.New("approval store: key exists")
	ErrRevisionChanged = errors.New("approval store: revision changed")
	ErrNoSuchKey       = errors.New("approval store: no such key")
)

// Store is the shared store approval requests live in. Every change is a
// create-if-absent or a compare-and-swap on the revision read, so two
// brokers (or two reviewers) racing on one request cannot both win: that is
// what makes the first decision stand and an approved action start at most
// once. Implementations: *KVStore (JetStream KV) here, and
// approvalredis.Store (Redis), kept in its own package so the broker does
// not import a Redis client.
type Store interface {
	// Create stores val under key only if key is absent (ErrKeyExists).
	Create(ctx context.Context, key string, val []byte) (uint64, error)
	// Get returns the value and its revision (ErrNoSuchKey).
	Get(ctx context.Context, key string) ([]byte, uint64, error)
	// Update replaces the value only if its revision is still rev
	// (ErrRevisionChanged).
	Update(ctx context.Context, key string, val []byte, rev uint64) (uint64, error)
	// Keys lists the keys starting with prefix.
	Keys(ctx context.Context, prefix string) ([]string, error)
	// Watch delivers every value written from now on, until ctx ends.
	Watch(ctx context.Context) (<-chan []byte, error)
}

// Entry is one stored key with its value.
type Entry struct {
	Key   string
	Value []byte
}

// Lister is a Store that reads every key under a prefix with its value
// faster than one Get after another (KVStore: the keys at one instant,
// then concurrent Gets; approvalredis: SCAN, then MGET). Service.List uses
// it when the store has it (both stores here do), and otherwise reads the
// keys and gets them a few at a time. Each entry is the key's value as
// stored at some moment during the call, as a Get would have returned it
// then; every key present for the whole call is listed exactly once; a key
// created or deleted during the call may or may not be. No order.
type Lister interface {
	Entries(ctx context.Context, prefix string) ([]Entry, error)
}

// KVStore keeps requests in a JetStream KV bucket: Create is kv.Create,
// Update is kv.Update on the revision.
type KVStore struct {
	kv       jetstream.KeyValue
	stream   jetstream.Stream // the bucket's stream, for Keys
	subjects string           // "$KV.<bucket>.", the stream subject of key ""
}

var _ Store = (*KVStore)(nil)

// NewKVStore opens (creating if needed) the bucket.
func NewKVStore(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (*KVStore, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: bucket, Description: "Gatehouse approval requests and claims",
		Storage: jetstream.FileStorage, Replicas: max(replicas, 1), History: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %v", ErrStore, bucket, err)
	}
	stream, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %v", ErrStore, bucket, err)
	}
	return &KVStore{kv: kv, stream: stream, subjects: "$KV." + bucket + "."}, nil
}

func (s *KVStore) Create(ctx context.Context, key string, val []byte) (uint64, error) {
	rev, err := s.kv.Create(ctx, key, val)
	if kvcas.Conflict(err) {
		return 0, ErrKeyExists
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrStore, err)
	}
	return rev, nil
}

func (s *KVStore) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNoSuchKey
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrStore, err)
	}
	return e.Value(), e.Revision(), nil
}

func (s *KVStore) Update(ctx context.Context, key string, val []byte, rev uint64) (uint64, error) {
	n, err := s.kv.Update(ctx, key, val, rev)
	if err != nil {
		if kvcas.Conflict(err) {
			return 0, ErrRevisionChanged
		}
		return 0, fmt.Errorf("%w: %v", ErrStore, err)
	}
	return n, nil
}

// Keys lists the keys under prefix from the bucket stream's subjects,
// which the server reports at one instant (one request up to 100,000
// keys). It does not use a KV watcher (nats.go's ListKeys): its
// initial-values count can stop short, leaving out a key that another
// process writes while it runs. A deleted or purged key whose marker is
// still stored is listed; Get reports it absent.
func (s *KVStore) Keys(ctx context.Context, prefix string) ([]string, error) {
	info, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(s.subjects+prefix+">"))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	out := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		out = append(out, strings.TrimPrefix(subj, s.subjects))
	}
	return out, nil
}

var _ Lister = (*KVStore)(nil)

// kvGets bounds the concurrent Gets of Entries.
const kvGets = 16

// Entries reads every key under prefix with its value: the keys at one
// instant (Keys), then the values from one KV watcher's initial values (one
// ordered consumer streaming them, not a request per key). The watcher can
// stop short when a key is written while it runs (see Keys), so any key of
// the first listing it did not deliver is then read with Get, kvGets at a
// time.
func (s *KVStore) Entries(ctx context.Context, prefix string) ([]Entry, error) {
	keys, err := s.Keys(ctx, prefix)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.kv.Watch(wctx, prefix+">", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	defer w.Stop()
	at := make(map[string]int, len(keys))
	revs := make([]uint64, 0, len(keys))
	out := make([]Entry, 0, len(keys))
watch:
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %v", ErrStore, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("%w: watcher closed", ErrStore)
			}
			if e == nil { // the initial values are delivered (or so it thinks)
				break watch
			}
			if i, seen := at[e.Key()]; seen { // written again meanwhile
				if e.Revision() > revs[i] {
					out[i].Value, revs[i] = e.Value(), e.Revision()
				}
				continue
			}
			at[e.Key()] = len(out)
			out = append(out, Entry{Key: e.Key(), Value: e.Value()})
			revs = append(revs, e.Revision())
		}
	}
	var missed []string
	for _, k := range keys {
		if _, ok := at[k]; !ok {
			missed = append(missed, k)
		}
	}
	if len(missed) == 0 {
		return out, nil
	}
	more, err := getConcurrently(ctx, s, missed, kvGets)
	if err != nil {
		return nil, err
	}
	return append(out, more...), nil
}

// getConcurrently gets keys, at most n at a time, leaving out those
// deleted since they were listed. It returns the first other error.
func getConcurrently(ctx context.Context, st Store, keys []string, n int) ([]Entry, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]Entry, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	sem := make(chan struct{}, n)
	for i, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i].Key = k
			out[i].Value, _, errs[i] = st.Get(ctx, k)
			if errors.Is(errs[i], ErrNoSuchKey) {
				errs[i] = nil
			} else if errs[i] != nil {
				cancel() // the others need not finish
			}
		})
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled) && !errors.Is(err, context.Canceled)) {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	return slices.DeleteFunc(out, func(e Entry) bool { return e.Value == nil }), nil
}

func (s *KVStore) Watch(ctx context.Context) (<-chan []byte, error) {
	w, err := s.kv.Watch(ctx, reqPrefix+">", jetstream.UpdatesOnly())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	out := make(chan []byte, 64)
	go func() {
		defer close(out)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil || e.Operation() != jetstream.KeyValuePut {
					continue
				}
				select {
				case out <- e.Value():
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
