package approval

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
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

// KVStore keeps requests in a JetStream KV bucket: Create is kv.Create,
// Update is kv.Update on the revision.
type KVStore struct{ kv jetstream.KeyValue }

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
	return &KVStore{kv: kv}, nil
}

func (s *KVStore) Create(ctx context.Context, key string, val []byte) (uint64, error) {
	rev, err := s.kv.Create(ctx, key, val)
	if errors.Is(err, jetstream.ErrKeyExists) {
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
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return 0, ErrRevisionChanged
		}
		if errors.Is(err, jetstream.ErrKeyExists) {
			return 0, ErrRevisionChanged
		}
		return 0, fmt.Errorf("%w: %v", ErrStore, err)
	}
	return n, nil
}

func (s *KVStore) Keys(ctx context.Context, prefix string) ([]string, error) {
	l, err := s.kv.ListKeysFiltered(ctx, prefix+">")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	var out []string
	for k := range l.Keys() {
		out = append(out, k)
	}
	return out, nil
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
