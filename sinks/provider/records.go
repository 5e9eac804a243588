package provider

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/broker/kvcas"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/grounding"
)

// RecordStore keeps, per workflow, the provider responses grounding may
// rely on and the first time the workflow wrote to each path. It is
// shared by every broker process, so a read in one grounds a call decided
// in another. Implementations are safe for concurrent use; Lookup returns
// every record kept for a path, oldest first (two different reads of one
// path are both returned, which grounding treats as ambiguous).
type RecordStore interface {
	grounding.Records
	// Keep adds r to the records of workflow and returns once the store
	// acknowledged it.
	Keep(ctx context.Context, workflow string, r grounding.Record) error
	// Wrote notes that workflow wrote to provider and path at at; only the
	// first write's time is kept, and each later write keeps the mark
	// from expiring (for DefaultRecordAge after the last). Path
	// grounding.AnyPath marks the provider as a whole; workflow may be a
	// grounding.AgentScope.
	Wrote(ctx context.Context, workflow, provider, path string, at time.Time) error
	// Spend marks the record of provider and path read at readAt as spent
	// by a call workflow carries out (grounding.Spend): SpentThrough then
	// returns readAt. It is atomic across brokers: when a record read at or
	// after readAt was spent already (two calls relying on one record at
	// once), it returns ErrSpent and marks nothing.
	Spend(ctx context.Context, workflow, provider, path string, readAt time.Time) error
}

// ErrSpent is returned by Spend for a record another call spent first.
var ErrSpent = errors.New("the record was spent by another call")

// spendTries bounds the compare-and-set rounds of one Spend against
// concurrent spends of the same path.
const spendTries = 8

func encodeTime(t time.Time) []byte { return []byte(t.UTC().Format(time.RFC3339Nano)) }

// DefaultRecordAge is how long records and write marks are kept.
const DefaultRecordAge = 24 * time.Hour

// storedRecord is a record's metadata; the body follows it after a
// newline, as received.
type storedRecord struct {
	Provider string             `json:"provider"`
	Path     string             `json:"path"`
	ReadAt   time.Time          `json:"read_at"`
	Citation grounding.Citation `json:"citation"`
}

func encodeRecord(r grounding.Record) ([]byte, error) {
	meta, err := json.Marshal(storedRecord{Provider: r.Provider, Path: r.Path, ReadAt: r.ReadAt.UTC(), Citation: r.Citation})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(meta)+1+len(r.Body))
	out = append(append(append(out, meta...), '\n'), r.Body...)
	return out, nil
}

func decodeRecord(b []byte) (grounding.Record, error) {
	meta, body, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return grounding.Record{}, errors.New("stored record has no metadata line")
	}
	var m storedRecord
	if err := json.Unmarshal(meta, &m); err != nil {
		return grounding.Record{}, fmt.Errorf("stored record: %w", err)
	}
	return grounding.Record{Provider: m.Provider, Path: m.Path, Body: body, ReadAt: m.ReadAt, Citation: m.Citation}, nil
}

func hx(s string) string { return hex.EncodeToString([]byte(s)) }

// KVRecords keeps records in a JetStream KV bucket: every read of a path
// is a revision of "r.<workflow>.<provider>.<path>" (each part
// hex-encoded; the bucket keeps 64 revisions per key), the first write
// mark is "w.<workflow>.<provider>.<path>", the spend mark
// "s.<workflow>.<provider>.<path>". Entries expire after DefaultRecordAge.
type KVRecords struct {
	kv   jetstream.KeyValue
	name string
}

var _ RecordStore = (*KVRecords)(nil)

// OpenKVRecords creates or updates the bucket (subject.GroundingBucket by
// default) and returns the store.
func OpenKVRecords(ctx context.Context, js jetstream.JetStream, cfg KVConfig) (*KVRecords, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = subject.GroundingBucket
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: cfg.Bucket, Description: "Gatehouse grounding records: provider responses and write marks per workflow",
		Storage: jetstream.FileStorage, Replicas: max(cfg.Replicas, 1), History: jetstream.KeyValueMaxHistory,
		TTL: DefaultRecordAge,
	})
	if err != nil {
		return nil, fmt.Errorf("grounding bucket %s: %w", cfg.Bucket, err)
	}
	return &KVRecords{kv: kv, name: "jetstream kv " + cfg.Bucket}, nil
}

func (s *KVRecords) String() string { return s.name }

func recKey(kind, workflow, provider, path string) string {
	return kind + "." + hx(workflow) + "." + hx(provider) + "." + hx(path)
}

// Keep implements RecordStore.
func (s *KVRecords) Keep(ctx context.Context, workflow string, r grounding.Record) error {
	b, err := encodeRecord(r)
	if err != nil {
		return err
	}
	if _, err := s.kv.Put(ctx, recKey("r", workflow, r.Provider, r.Path), b); err != nil {
		return fmt.Errorf("%s: keep: %w", s.name, err)
	}
	return nil
}

// Lookup implements grounding.Records.
func (s *KVRecords) Lookup(ctx context.Context, workflow, provider, path string) ([]grounding.Record, error) {
	hist, err := s.kv.History(ctx, recKey("r", workflow, provider, path))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: lookup: %w", s.name, err)
	}
	out := make([]grounding.Record, 0, len(hist))
	for _, e := range hist {
		if e.Operation() != jetstream.KeyValuePut {
			continue
		}
		r, err := decodeRecord(e.Value())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Wrote implements RecordStore: the first write creates the mark; a later
// one puts its value again (a new revision, so the bucket's TTL counts
// from it).
func (s *KVRecords) Wrote(ctx context.Context, workflow, provider, path string, at time.Time) error {
	key := recKey("w", workflow, provider, path)
	_, err := s.kv.Create(ctx, key, encodeTime(at))
	if kvcas.Conflict(err) {
		var e jetstream.KeyValueEntry
		if e, err = s.kv.Get(ctx, key); err == nil {
			_, err = s.kv.Update(ctx, key, e.Value(), e.Revision())
			if kvcas.Conflict(err) {
				err = nil // another write refreshed it at the same time
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%s: write mark: %w", s.name, err)
	}
	return nil
}

// WrittenAt implements grounding.Records: the first write, or the zero
// time when the workflow never wrote to the path.
func (s *KVRecords) WrittenAt(ctx context.Context, workflow, provider, path string) (time.Time, error) {
	e, err := s.kv.Get(ctx, recKey("w", workflow, provider, path))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: write mark: %w", s.name, err)
	}
	return time.Parse(time.RFC3339Nano, string(e.Value()))
}

// SpentThrough implements grounding.Records.
func (s *KVRecords) SpentThrough(ctx context.Context, workflow, provider, path string) (time.Time, error) {
	e, err := s.kv.Get(ctx, recKey("s", workflow, provider, path))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: spend mark: %w", s.name, err)
	}
	return time.Parse(time.RFC3339Nano, string(e.Value()))
}

// Spend implements RecordStore: a compare-and-set of
// "s.<workflow>.<provider>.<path>" on the key's revision.
func (s *KVRecords) Spend(ctx context.Context, workflow, provider, path string, readAt time.Time) error {
	key := recKey("s", workflow, provider, path)
	for range spendTries {
		e, err := s.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = s.kv.Create(ctx, key, encodeTime(readAt))
			if kvcas.Conflict(err) {
				continue
			}
		case err != nil:
		default:
			prev, perr := time.Parse(time.RFC3339Nano, string(e.Value()))
			if perr == nil && !readAt.After(prev) {
				return ErrSpent
			}
			_, err = s.kv.Update(ctx, key, encodeTime(readAt), e.Revision())
			if kvcas.Conflict(err) {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("%s: spend mark: %w", s.name, err)
		}
		return nil
	}
	return fmt.Errorf("%s: spend mark: %w", s.name, ErrSpent)
}

// RedisRecords keeps records in Redis: a list per path under Prefix +
// "r:<workflow>:<provider>:<path>", the first write mark under Prefix +
// "w:..." and the spend mark under Prefix + "s:...", each part
// hex-encoded, expiring after DefaultRecordAge. Close closes its
// connections.
type RedisRecords struct {
	rdb    *redis.Client
	prefix string
	name   string
}

var _ RecordStore = (*RedisRecords)(nil)

// RedisConfig configures OpenRedisRecords.
type RedisConfig struct {
	URL    string // redis://[user:password@]host:port[/db]
	Prefix string // "" is "gatehouse:grounding:"
}

// OpenRedisRecords connects to Redis and checks it answers PING.
func OpenRedisRecords(ctx context.Context, cfg RedisConfig) (*RedisRecords, error) {
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "gatehouse:grounding:"
	}
	s := &RedisRecords{rdb: redis.NewClient(opt), prefix: cfg.Prefix, name: "redis " + opt.Addr}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		_ = s.rdb.Close()
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	return s, nil
}

// Close closes the connections.
func (s *RedisRecords) Close() error { return s.rdb.Close() }

func (s *RedisRecords) String() string { return s.name }

func (s *RedisRecords) key(kind, workflow, provider, path string) string {
	return s.prefix + kind + ":" + hx(workflow) + ":" + hx(provider) + ":" + hx(path)
}

// Keep implements RecordStore.
func (s *RedisRecords) Keep(ctx context.Context, workflow string, r grounding.Record) error {
	b, err := encodeRecord(r)
	if err != nil {
		return err
	}
	k := s.key("r", workflow, r.Provider, r.Path)
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, k, b)
		p.Expire(ctx, k, DefaultRecordAge)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: keep: %w", s.name, err)
	}
	return nil
}

// Lookup implements grounding.Records.
func (s *RedisRecords) Lookup(ctx context.Context, workflow, provider, path string) ([]grounding.Record, error) {
	items, err := s.rdb.LRange(ctx, s.key("r", workflow, provider, path), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: lookup: %w", s.name, err)
	}
	out := make([]grounding.Record, 0, len(items))
	for _, it := range items {
		r, err := decodeRecord([]byte(it))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Wrote implements RecordStore: SET NX keeps the first write's time, and
// EXPIRE keeps the mark for DefaultRecordAge after the last.
func (s *RedisRecords) Wrote(ctx context.Context, workflow, provider, path string, at time.Time) error {
	key := s.key("w", workflow, provider, path)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SetArgs(ctx, key, encodeTime(at), redis.SetArgs{Mode: "NX", TTL: DefaultRecordAge})
		p.Expire(ctx, key, DefaultRecordAge)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("%s: write mark: %w", s.name, err)
	}
	return nil
}

// SpentThrough implements grounding.Records.
func (s *RedisRecords) SpentThrough(ctx context.Context, workflow, provider, path string) (time.Time, error) {
	v, err := s.rdb.Get(ctx, s.key("s", workflow, provider, path)).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: spend mark: %w", s.name, err)
	}
	return time.Parse(time.RFC3339Nano, v)
}

// Spend implements RecordStore: a compare-and-set under WATCH.
func (s *RedisRecords) Spend(ctx context.Context, workflow, provider, path string, readAt time.Time) error {
	key := s.key("s", workflow, provider, path)
	for range spendTries {
		err := s.rdb.Watch(ctx, func(tx *redis.Tx) error {
			v, err := tx.Get(ctx, key).Result()
			switch {
			case errors.Is(err, redis.Nil):
			case err != nil:
				return err
			default:
				if prev, perr := time.Parse(time.RFC3339Nano, v); perr == nil && !readAt.After(prev) {
					return ErrSpent
				}
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, key, encodeTime(readAt), DefaultRecordAge)
				return nil
			})
			return err
		}, key)
		switch {
		case errors.Is(err, redis.TxFailedErr):
			continue
		case errors.Is(err, ErrSpent):
			return ErrSpent
		case err != nil:
			return fmt.Errorf("%s: spend mark: %w", s.name, err)
		}
		return nil
	}
	return fmt.Errorf("%s: spend mark: %w", s.name, ErrSpent)
}

// WrittenAt implements grounding.Records.
func (s *RedisRecords) WrittenAt(ctx context.Context, workflow, provider, path string) (time.Time, error) {
	v, err := s.rdb.Get(ctx, s.key("w", workflow, provider, path)).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: write mark: %w", s.name, err)
	}
	return time.Parse(time.RFC3339Nano, v)
}
