package artifact

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// RedisConfig configures OpenRedis.
type RedisConfig struct {
	URL    string // redis://[user:password@]host:port/db
	Prefix string // starts every key; "" is "gatehouse:artifact:"
}

// RedisStore keeps each artifact as a Redis hash (fields "data" and
// "type") under Prefix + the hex of its name, so no tenant or key can
// shape another's key. Safe for concurrent use; go-redis reconnects by
// itself, so a Redis that comes back serves the next effect.
type RedisStore struct {
	rdb    *redis.Client
	prefix string
	name   string
}

var _ Store = (*RedisStore)(nil)

// OpenRedis connects to Redis and checks it answers PING.
func OpenRedis(ctx context.Context, cfg RedisConfig) (*RedisStore, error) {
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "gatehouse:artifact:"
	}
	s := &RedisStore{rdb: redis.NewClient(opt), prefix: cfg.Prefix, name: "redis " + opt.Addr}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		_ = s.rdb.Close()
		return nil, s.fail(err)
	}
	return s, nil
}

// Close closes the connections.
func (s *RedisStore) Close() error { return s.rdb.Close() }

func (s *RedisStore) key(name string) string { return s.prefix + hex.EncodeToString([]byte(name)) }

// Put implements Store: data and type are replaced together.
func (s *RedisStore) Put(ctx context.Context, name, contentType string, data []byte) error {
	if err := s.rdb.HSet(ctx, s.key(name), "data", data, "type", contentType).Err(); err != nil {
		return s.fail(err)
	}
	return nil
}

// Get implements Store. The size is checked before the data is fetched.
func (s *RedisStore) Get(ctx context.Context, name string, max int64) ([]byte, string, error) {
	k := s.key(name)
	n, err := s.rdb.HStrLen(ctx, k, "data").Result()
	if err != nil {
		return nil, "", s.fail(err)
	}
	if n == 0 {
		exists, err := s.rdb.HExists(ctx, k, "data").Result()
		if err != nil {
			return nil, "", s.fail(err)
		}
		if !exists {
			return nil, "", ErrNotFound
		}
	}
	if max > 0 && n > max {
		return nil, "", ErrTooLarge
	}
	vals, err := s.rdb.HMGet(ctx, k, "data", "type").Result()
	if err != nil {
		return nil, "", s.fail(err)
	}
	data, ok := vals[0].(string)
	if !ok {
		return nil, "", ErrNotFound // removed between the two reads
	}
	ct, _ := vals[1].(string)
	return []byte(data), ct, nil
}

// Delete implements Store.
func (s *RedisStore) Delete(ctx context.Context, name string) (bool, error) {
	n, err := s.rdb.Del(ctx, s.key(name)).Result()
	if err != nil {
		return false, s.fail(err)
	}
	return n > 0, nil
}

// size implements quotaStore.
func (s *RedisStore) size(ctx context.Context, name string) (int64, bool, error) {
	k := s.key(name)
	r, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HStrLen(ctx, k, "data")
		p.HExists(ctx, k, "data")
		return nil
	})
	if err != nil {
		return 0, false, s.fail(err)
	}
	return r[0].(*redis.IntCmd).Val(), r[1].(*redis.BoolCmd).Val(), nil
}

// tenantBytes implements quotaStore: a SCAN of the tenant's keys (the hex
// of "<tenant>/" starts each of them).
func (s *RedisStore) tenantBytes(ctx context.Context, tenant string) (int64, error) {
	var n int64
	it := s.rdb.Scan(ctx, 0, s.prefix+hex.EncodeToString([]byte(tenant+"/"))+"*", 512).Iterator()
	for it.Next(ctx) {
		name, err := hex.DecodeString(strings.TrimPrefix(it.Val(), s.prefix))
		if err != nil {
			continue // not an artifact's key
		}
		l, err := s.rdb.HStrLen(ctx, it.Val(), "data").Result()
		if err != nil {
			return 0, s.fail(err)
		}
		n += Cost(string(name), l)
	}
	if err := it.Err(); err != nil {
		return 0, s.fail(err)
	}
	return n, nil
}

func (s *RedisStore) register() register {
	return redisRegister{rdb: s.rdb, prefix: s.prefix + "quota:"}
}

// fail sorts a Redis error into store-unavailable (the connection) or
// store-error (anything else), keeping the cause for the log.
func (s *RedisStore) fail(err error) error {
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) {
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, s.name, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrStore, s.name, err)
}
