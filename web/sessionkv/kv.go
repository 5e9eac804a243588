// Package sessionkv keeps the dashboard's sign-in state (web.StateStore:
// sessions, half-done TOTP sign-ins, failure counts, the TOTP replay
// guard) in a JetStream KV bucket, so it survives a restart of serve and
// is shared by every dashboard process on the same NATS. It is its own
// package so that package web does not import NATS.
//
// Create is kv.Create, Update is kv.Update on the revision read, Delete a
// kv.Delete. The bucket keeps one value per key (History 1) and drops
// values MaxAge after their last write; the dashboard checks the expiry
// each value carries, so MaxAge only bounds how long an expired value
// lingers (Open sets it to the longest time any value is needed).
package sessionkv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/kvcas"
	"github.com/gatehouse/gatehouse/web"
)

// Store is a web.StateStore on a JetStream KV bucket.
type Store struct {
	kv jetstream.KeyValue
}

var _ web.StateStore = (*Store)(nil)

// Open opens (creating or updating) the bucket, its values kept at most
// maxAge after their last write (at least an hour).
func Open(ctx context.Context, js jetstream.JetStream, bucket string, replicas int, maxAge time.Duration) (*Store, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: bucket, Description: "Gatehouse dashboard sessions and sign-in state",
		Storage: jetstream.FileStorage, Replicas: max(replicas, 1), History: 1, TTL: max(maxAge, time.Hour),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %v", web.ErrStateStore, bucket, err)
	}
	return &Store{kv: kv}, nil
}

func (s *Store) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, web.ErrNoState
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", web.ErrStateStore, err)
	}
	return e.Value(), e.Revision(), nil
}

func (s *Store) Create(ctx context.Context, key string, val []byte, _ time.Duration) (uint64, error) {
	rev, err := s.kv.Create(ctx, key, val)
	if kvcas.Conflict(err) {
		return 0, web.ErrStateExists
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %v", web.ErrStateStore, err)
	}
	return rev, nil
}

func (s *Store) Update(ctx context.Context, key string, val []byte, rev uint64, _ time.Duration) (uint64, error) {
	n, err := s.kv.Update(ctx, key, val, rev)
	if err != nil {
		if kvcas.Conflict(err) {
			return 0, web.ErrStateChanged
		}
		return 0, fmt.Errorf("%w: %v", web.ErrStateStore, err)
	}
	return n, nil
}

func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%w: %v", web.ErrStateStore, err)
	}
	return nil
}
