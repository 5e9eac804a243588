// Package sessionredis keeps the dashboard's sign-in state (web.StateStore)
// in Redis, for deployments that share state through Redis (serve
// --redis-url). It is its own package so that package web does not import
// a Redis client.
//
// A value is stored as "<revision>\n<value>" with the expiry the
// dashboard asks (PX). Create is SET NX; Update is a Lua script that
// compares the stored revision and sets the next one atomically.
package sessionredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/web"
)

// Prefix is where serve keeps the dashboard's state in Redis.
const Prefix = "gatehouse:dashboard:"

// Store is a web.StateStore in Redis.
type Store struct {
	rdb    *redis.Client
	prefix string
}

var _ web.StateStore = (*Store)(nil)

// New returns a store on rdb, its keys under prefix.
func New(rdb *redis.Client, prefix string) *Store { return &Store{rdb: rdb, prefix: prefix} }

func decode(s string) ([]byte, uint64, error) {
	i := strings.IndexByte(s, '\n')
	if i < 0 {
		return nil, 0, fmt.Errorf("%w: malformed value", web.ErrStateStore)
	}
	rev, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: malformed revision", web.ErrStateStore)
	}
	return []byte(s[i+1:]), rev, nil
}

func ttlOf(d time.Duration) time.Duration { return max(d, time.Second) }

func (s *Store) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	v, err := s.rdb.Get(ctx, s.prefix+key).Result()
	if errors.Is(err, redis.Nil) {
		return nil, 0, web.ErrNoState
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", web.ErrStateStore, err)
	}
	return decode(v)
}

func (s *Store) Create(ctx context.Context, key string, val []byte, ttl time.Duration) (uint64, error) {
	ok, err := s.rdb.SetNX(ctx, s.prefix+key, "1\n"+string(val), ttlOf(ttl)).Result()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", web.ErrStateStore, err)
	}
	if !ok {
		return 0, web.ErrStateExists
	}
	return 1, nil
}

// update sets KEYS[1] to ARGV[2] at revision ARGV[1]+1 if it is still at
// ARGV[1], for ARGV[3] milliseconds: the new revision, 0 when it moved
// on, -1 when it is gone.
var update = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
local nl = string.find(cur, '\n', 1, true)
if not nl then return 0 end
local rev = tonumber(string.sub(cur, 1, nl - 1))
if rev ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], tostring(rev + 1) .. '\n' .. ARGV[2], 'PX', ARGV[3])
return rev + 1
`)

func (s *Store) Update(ctx context.Context, key string, val []byte, rev uint64, ttl time.Duration) (uint64, error) {
	n, err := update.Run(ctx, s.rdb, []string{s.prefix + key}, rev, string(val), ttlOf(ttl).Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", web.ErrStateStore, err)
	}
	switch {
	case n == -1:
		return 0, web.ErrNoState
	case n == 0:
		return 0, web.ErrStateChanged
	}
	return uint64(n), nil
}

func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.rdb.Del(ctx, s.prefix+key).Err(); err != nil {
		return fmt.Errorf("%w: %v", web.ErrStateStore, err)
	}
	return nil
}
