package memory

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/broker/subject"
)

// Store keeps memory records by Key. Implementations must be safe for
// concurrent use and return *StoreError for failures of the store itself.
type Store interface {
	// Put keeps rec under k, replacing what was there, and returns once the
	// store acknowledged it, unless that would take k.Tenant past limit
	// bytes (the sum of Cost over its memories, private and shared): then
	// it stores nothing and returns a *quota.Error. Concurrent puts, from
	// any number of brokers, never together take a tenant past limit.
	// room is what Fit saw (or the zero Room), so Put's first try need
	// not read it again; a stale one costs a retry, never correctness.
	Put(ctx context.Context, k Key, rec []byte, limit int64, room Room) error
	// Fit returns the *quota.Error Put would return now, without storing;
	// a hint (another put may take the room first), never a reservation.
	Fit(ctx context.Context, k Key, rec []byte, limit int64) (Room, error)
	// Used returns the bytes tenant's memories count against its budget.
	Used(ctx context.Context, tenant string) (int64, error)
	// Get returns the record under k, or an error wrapping ErrNotFound.
	Get(ctx context.Context, k Key) ([]byte, error)
	// Delete removes the record under k and reports whether there was
	// one; its cost is given back to the tenant's budget.
	Delete(ctx context.Context, k Key) (existed bool, err error)
	// String names the store for operators ("redis 10.0.0.5:6379"),
	// without credentials.
	String() string
}

// Errors of the stores.
var (
	// ErrNotFound: no memory under the key. The sink answers found false.
	ErrNotFound = errors.New("memory not found")
	// ErrUnavailable matches a *StoreError that could not reach its store.
	ErrUnavailable = errors.New("memory store unavailable")
)

// StoreError is a failure of a memory store. The journal records its
// ErrorType, "store-unavailable" when the store could not be reached and
// "store-error" otherwise; the agent gets its message.
type StoreError struct {
	Store       string // which store, without credentials
	Op          string // put, read, delete
	Unavailable bool
	Err         error
}

func (e *StoreError) Error() string {
	if e.Unavailable {
		return fmt.Sprintf("memory store %s is unavailable (%s: %v); %s. Operator: make the store reachable (start it, or fix the URL Gatehouse was given); nothing needs restarting, the next effect tries again",
			e.Store, e.Op, e.Err, notDone(e.Op))
	}
	return fmt.Sprintf("memory store %s: %s: %v", e.Store, e.Op, e.Err)
}

func notDone(op string) string {
	switch op {
	case "put":
		return "the memory may not have been stored"
	case "delete":
		return "the memory may not have been deleted"
	case "read":
		return "the memory could not be read"
	}
	return "memories cannot be kept until it is"
}

// ErrorType names the failure for the journal.
func (e *StoreError) ErrorType() string {
	if e.Unavailable {
		return "store-unavailable"
	}
	return "store-error"
}

func (e *StoreError) Unwrap() error { return e.Err }

// Is reports whether target is ErrUnavailable and e is an unavailable store.
func (e *StoreError) Is(target error) bool { return target == ErrUnavailable && e.Unavailable }

// kvKey encodes k as a NATS KV key: "p.<tenant>.<person>.<name>" or
// "s.<tenant>.<name>", each part hex-encoded, so no part can contain a '.'
// or a wildcard and distinct Keys never meet.
func kvKey(k Key) string {
	if k.Person == "" {
		return "s." + hex.EncodeToString([]byte(k.Tenant)) + "." + hex.EncodeToString([]byte(k.Name))
	}
	return "p." + hex.EncodeToString([]byte(k.Tenant)) + "." + hex.EncodeToString([]byte(k.Person)) + "." + hex.EncodeToString([]byte(k.Name))
}

// KVConfig configures OpenKV. The zero value is useful.
type KVConfig struct {
	Bucket   string // "" is subject.MemoryBucket
	Replicas int    // 0 is 1; use 3 on a cluster
}

// KVStore keeps memories in a JetStream KV bucket (kvKey), and each
// tenant's bytes in use under quotaKey in the same bucket (see Put). Safe
// for concurrent use.
type KVStore struct {
	kv   jetstream.KeyValue
	name string
}

var _ Store = (*KVStore)(nil)

// OpenKV creates or updates the bucket and returns the store.
func OpenKV(ctx context.Context, js jetstream.JetStream, cfg KVConfig) (*KVStore, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = subject.MemoryBucket
	}
	if cfg.Replicas < 1 {
		cfg.Replicas = 1
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "Gatehouse memories: private (tenant, person) and shared (tenant)",
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		History:     1,
		// Lets a delete's purge marker expire (Delete), so a deleted
		// memory leaves nothing behind that holds room.
		LimitMarkerTTL: markerTTL,
	})
	if err != nil {
		return nil, fmt.Errorf("memory bucket %s: %w", cfg.Bucket, err)
	}
	return &KVStore{kv: kv, name: "jetstream kv " + cfg.Bucket}, nil
}

func (s *KVStore) String() string { return s.name }

// Get implements Store.
func (s *KVStore) Get(ctx context.Context, k Key) ([]byte, error) {
	e, err := s.kv.Get(ctx, kvKey(k))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, s.fail("read", err)
	}
	return e.Value(), nil
}

func (s *KVStore) fail(op string, err error) error {
	unavailable := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, jetstream.ErrBucketNotFound)
	return &StoreError{Store: s.name, Op: op, Unavailable: unavailable, Err: err}
}

// RedisConfig configures OpenRedis.
type RedisConfig struct {
	// URL is a go-redis URL: redis://[user:password@]host:port[/db], or
	// rediss:// for TLS; options such as dial_timeout go in the query.
	URL string
	// Prefix starts every key; "" is "gatehouse:memory:".
	Prefix string
}

// RedisStore keeps memories in Redis under Prefix + "p:<tenant>:<person>:
// <name>" or Prefix + "s:<tenant>:<name>", each part hex-encoded. Safe for
// concurrent use; Close closes its connections. go-redis reconnects by
// itself, so a Redis that comes back serves the next effect.
type RedisStore struct {
	rdb    *redis.Client
	prefix string
	name   string
}

var _ Store = (*RedisStore)(nil)

// OpenRedis connects to Redis at cfg.URL and checks it answers PING; an
// unreachable Redis is a *StoreError (errors.Is ErrUnavailable).
func OpenRedis(ctx context.Context, cfg RedisConfig) (*RedisStore, error) {
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err) // ParseURL's errors do not echo the URL
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "gatehouse:memory:"
	}
	s := &RedisStore{rdb: redis.NewClient(opt), prefix: cfg.Prefix, name: "redis " + opt.Addr}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		_ = s.rdb.Close()
		return nil, s.fail("ping", err)
	}
	return s, nil
}

// Close closes the connections.
func (s *RedisStore) Close() error { return s.rdb.Close() }

func (s *RedisStore) String() string { return s.name }

func (s *RedisStore) key(k Key) string {
	if k.Person == "" {
		return s.prefix + "s:" + hex.EncodeToString([]byte(k.Tenant)) + ":" + hex.EncodeToString([]byte(k.Name))
	}
	return s.prefix + "p:" + hex.EncodeToString([]byte(k.Tenant)) + ":" + hex.EncodeToString([]byte(k.Person)) + ":" + hex.EncodeToString([]byte(k.Name))
}

// Get implements Store.
func (s *RedisStore) Get(ctx context.Context, k Key) ([]byte, error) {
	b, err := s.rdb.Get(ctx, s.key(k)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, s.fail("read", err)
	}
	return b, nil
}

func (s *RedisStore) fail(op string, err error) error {
	var ne net.Error
	unavailable := errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		redis.HasErrorPrefix(err, "LOADING") || redis.HasErrorPrefix(err, "MASTERDOWN")
	return &StoreError{Store: s.name, Op: op, Unavailable: unavailable, Err: err}
}
