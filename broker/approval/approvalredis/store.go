// Package approvalredis keeps approval requests in Redis, for deployments
// that share state through Redis (serve --redis-url) rather than JetStream
// KV. It is its own package so that the broker, which only needs the
// approval.Store contract, never imports a Redis client.
package approvalredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/broker/approval"
)

// Store keeps requests in Redis: Create is SET NX, Update is
// WATCH/GET/MULTI/SET/EXEC on a revision stored in front of the value, and
// every write is published on a channel for Watch.
type Store struct {
	rdb    *redis.Client
	prefix string
}

var _ approval.Store = (*Store)(nil)

// Prefix is where Gatehouse keeps approval requests in Redis: serve
// writes under it and status reads under it.
const Prefix = "gatehouse:approval:"

// New returns a store on rdb, its keys under prefix (Prefix in a
// deployment).
func New(rdb *redis.Client, prefix string) *Store {
	return &Store{rdb: rdb, prefix: prefix}
}

func (s *Store) channel() string { return s.prefix + "changes" }

func encodeRev(rev uint64, val []byte) string {
	return strconv.FormatUint(rev, 10) + "\n" + string(val)
}

func decodeRev(s string) ([]byte, uint64, error) {
	i := strings.IndexByte(s, '\n')
	if i < 0 {
		return nil, 0, fmt.Errorf("%w: malformed value", approval.ErrStore)
	}
	rev, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: malformed revision", approval.ErrStore)
	}
	return []byte(s[i+1:]), rev, nil
}

func (s *Store) Create(ctx context.Context, key string, val []byte) (uint64, error) {
	ok, err := s.rdb.SetNX(ctx, s.prefix+key, encodeRev(1, val), 0).Result()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", approval.ErrStore, err)
	}
	if !ok {
		return 0, approval.ErrKeyExists
	}
	s.publish(ctx, key, val)
	return 1, nil
}

func (s *Store) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	v, err := s.rdb.Get(ctx, s.prefix+key).Result()
	if errors.Is(err, redis.Nil) {
		return nil, 0, approval.ErrNoSuchKey
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", approval.ErrStore, err)
	}
	return decodeRev(v)
}

func (s *Store) Update(ctx context.Context, key string, val []byte, rev uint64) (uint64, error) {
	k := s.prefix + key
	next := rev + 1
	err := s.rdb.Watch(ctx, func(tx *redis.Tx) error {
		cur, err := tx.Get(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			return approval.ErrRevisionChanged
		}
		if err != nil {
			return err
		}
		_, have, err := decodeRev(cur)
		if err != nil {
			return err
		}
		if have != rev {
			return approval.ErrRevisionChanged
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k, encodeRev(next, val), 0)
			return nil
		})
		return err
	}, k)
	switch {
	case errors.Is(err, approval.ErrRevisionChanged), errors.Is(err, redis.TxFailedErr):
		return 0, approval.ErrRevisionChanged
	case errors.Is(err, approval.ErrStore):
		return 0, err
	case err != nil:
		return 0, fmt.Errorf("%w: %v", approval.ErrStore, err)
	}
	s.publish(ctx, key, val)
	return next, nil
}

// publish tells watchers; a lost notification only delays a dashboard.
func (s *Store) publish(ctx context.Context, key string, val []byte) {
	if strings.HasPrefix(key, approval.RequestKeyPrefix) {
		_ = s.rdb.Publish(ctx, s.channel(), val).Err()
	}
}

func (s *Store) Keys(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	seen := map[string]bool{} // SCAN may return a key more than once
	it := s.rdb.Scan(ctx, 0, s.prefix+prefix+"*", 500).Iterator()
	for it.Next(ctx) {
		k := strings.TrimPrefix(it.Val(), s.prefix)
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", approval.ErrStore, err)
	}
	return out, nil
}

var _ approval.Lister = (*Store)(nil)

// entriesChunk is how many keys one MGET reads.
const entriesChunk = 500

// Entries reads every key under prefix with SCAN and its values with one
// MGET per entriesChunk keys, not one GET per key. A key deleted between
// the SCAN and its MGET is left out.
func (s *Store) Entries(ctx context.Context, prefix string) ([]approval.Entry, error) {
	keys, err := s.Keys(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]approval.Entry, 0, len(keys))
	full := make([]string, 0, min(len(keys), entriesChunk))
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), entriesChunk)]
		keys = keys[len(chunk):]
		full = full[:0]
		for _, k := range chunk {
			full = append(full, s.prefix+k)
		}
		vals, err := s.rdb.MGet(ctx, full...).Result()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", approval.ErrStore, err)
		}
		for i, v := range vals {
			str, ok := v.(string)
			if !ok { // deleted since the SCAN
				continue
			}
			val, _, err := decodeRev(str)
			if err != nil {
				return nil, err
			}
			out = append(out, approval.Entry{Key: chunk[i], Value: val})
		}
	}
	return out, nil
}

func (s *Store) Watch(ctx context.Context) (<-chan []byte, error) {
	sub := s.rdb.Subscribe(ctx, s.channel())
	if _, err := sub.Receive(ctx); err != nil {
		_ = sub.Close()
		return nil, fmt.Errorf("%w: %v", approval.ErrStore, err)
	}
	out := make(chan []byte, 64)
	go func() {
		defer close(out)
		defer sub.Close()
		ch := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				select {
				case out <- []byte(m.Payload):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
