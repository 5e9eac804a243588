package memory

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/broker/kvcas"
	"github.com/gatehouse/gatehouse/sinks/quota"
)

// DefaultQuotaBytes is a tenant's budget of memory, private and shared
// together, when Config.QuotaBytes is 0 (see the package doc).
const DefaultQuotaBytes = 64 << 20

// EntryOverhead is what Cost charges for each memory beyond its key and
// record: the store's own bookkeeping per entry (a JetStream message's
// header, subject prefix and index; a Redis key's dictionary entry).
const EntryOverhead = 128

// QuotaFlag is the serve flag that sets the budget, named in refusals.
const QuotaFlag = "--memory-quota-mb"

// Cost is what a memory holding rec under k counts against its tenant's
// budget: the record, the key's parts as the store keeps them (hex, so
// twice their length) and EntryOverhead. Charging the key and the
// overhead keeps a flood of tiny values with long keys bounded too.
func Cost(k Key, rec []byte) int64 {
	return int64(2*(len(k.Tenant)+len(k.Person)+len(k.Name)) + len(rec) + EntryOverhead)
}

// storedCost is Cost from a key as a store spells it ("p.<hex>.<hex>.<hex>"
// or Redis's "p:<hex>:<hex>:<hex>" without its prefix): every byte but
// the kind letter and the separators is hex.
func storedCost(key string, sep byte, recLen int) int64 {
	return int64(len(key)-1-strings.Count(key, string(sep))+recLen) + EntryOverhead
}

func overQuota(used, delta, limit int64) error {
	return quota.Check("memory", QuotaFlag, "delete memories it no longer needs (memory delete)", used, delta, limit)
}

// Room is what Store.Fit read of a tenant and a key, for Put's first
// compare-and-swap. The zero Room has seen nothing.
type Room struct {
	seen      bool
	old, used int64  // the key's cost, the tenant's bytes in use
	rev, qrev uint64 // their revisions
}

// maxCASRounds bounds a put's or delete's retries when other puts keep
// winning the race for the same counter or key.
const maxCASRounds = 64

// errContended: maxCASRounds lost in a row; nothing was stored.
var errContended = errors.New("too many concurrent writes of this tenant's memory; nothing was stored, retry")

// quotaKey is the KV key of a tenant's bytes in use ("q.<hex tenant>"),
// beside its memories ("p." and "s."), so it lives and fails with them.
func quotaKey(tenant string) string { return "q." + hex.EncodeToString([]byte(tenant)) }

// kvEntry returns the cost and revision of what is under key, (0, 0) when
// nothing is.
func (s *KVStore) kvEntry(ctx context.Context, key string) (cost int64, rev uint64, err error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	return storedCost(key, '.', len(e.Value())), e.Revision(), nil
}

// used returns the tenant's bytes in use and the counter's revision. A
// tenant without a counter (its first put, or memories kept before
// quotas) is counted from the store once: the sum of Cost over its keys,
// created with Create so two brokers counting at once agree on one.
func (s *KVStore) used(ctx context.Context, tenant string) (int64, uint64, error) {
	qk := quotaKey(tenant)
	for range maxCASRounds {
		e, err := s.kv.Get(ctx, qk)
		if err == nil {
			n, perr := strconv.ParseInt(string(e.Value()), 10, 64)
			if perr != nil {
				return 0, 0, fmt.Errorf("quota counter %s is not a number: %w", qk, perr)
			}
			return n, e.Revision(), nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, 0, err
		}
		n, err := s.count(ctx, tenant)
		if err != nil {
			return 0, 0, err
		}
		if _, err := s.kv.Create(ctx, qk, []byte(strconv.FormatInt(n, 10))); err != nil && !kvcas.Conflict(err) {
			return 0, 0, err
		}
	}
	return 0, 0, errContended
}

// count sums Cost over the tenant's memories in the store.
func (s *KVStore) count(ctx context.Context, tenant string) (int64, error) {
	t := hex.EncodeToString([]byte(tenant))
	l, err := s.kv.ListKeysFiltered(ctx, "p."+t+".>", "s."+t+".>")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Stop() }()
	var n int64
	for key := range l.Keys() {
		c, _, err := s.kvEntry(ctx, key)
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// add moves the tenant's counter by delta (compare-and-swap, retried).
func (s *KVStore) add(ctx context.Context, tenant string, delta int64) error {
	for range maxCASRounds {
		n, rev, err := s.used(ctx, tenant)
		if err != nil {
			return err
		}
		if _, err = s.kv.Update(ctx, quotaKey(tenant), []byte(strconv.FormatInt(max(n+delta, 0), 10)), rev); err == nil || !kvcas.Conflict(err) {
			return err
		}
	}
	return errContended
}

// Put implements Store. The protocol keeps the counter at or above what
// the tenant stores at every moment, so concurrent puts on any broker can
// never together pass quota:
//
//  1. read the old entry (cost, revision) and the counter (value, revision);
//  2. a put that grows the tenant reserves the growth first, by
//     compare-and-swap on the counter, refusing when it would pass quota;
//  3. the record is written by compare-and-swap on the old revision (Create
//     when there was none); a lost race gives the reservation back and
//     starts again, so an overwrite is charged against what it replaced;
//  4. a put that shrinks the tenant lowers the counter only after writing.
//
// A broker that dies between 2 and 3 leaves its reservation counted
// though nothing was stored: the budget errs towards refusing.
func (s *KVStore) Put(ctx context.Context, k Key, rec []byte, limit int64, room Room) error {
	key := kvKey(k)
	c := Cost(k, rec)
	for range maxCASRounds {
		if !room.seen {
			var err error
			if room, err = s.look(ctx, key, k.Tenant); err != nil {
				return s.fail("put", err)
			}
		}
		old, rev, used, qrev := room.old, room.rev, room.used, room.qrev
		room = Room{} // a retry reads afresh
		delta := c - old
		if err := overQuota(used, delta, limit); err != nil {
			return err
		}
		if delta > 0 {
			if _, err := s.kv.Update(ctx, quotaKey(k.Tenant), []byte(strconv.FormatInt(used+delta, 10)), qrev); err != nil {
				if kvcas.Conflict(err) {
					continue
				}
				return s.fail("put", err)
			}
		}
		var err error
		if rev == 0 {
			_, err = s.kv.Create(ctx, key, rec)
		} else {
			_, err = s.kv.Update(ctx, key, rec, rev)
		}
		if err != nil {
			lost := kvcas.Conflict(err)
			if delta > 0 && (lost || s.unwritten(ctx, key, rev)) {
				s.settle(ctx, k.Tenant, -delta) // a counter left high errs towards refusing
			}
			if lost {
				continue
			}
			return s.fail("put", err)
		}
		if delta < 0 {
			s.settle(ctx, k.Tenant, delta) // stored; a counter left high errs towards refusing
		}
		return nil
	}
	return s.fail("put", errContended)
}

// settleWithin bounds a counter's change after a write once the caller's
// context has ended.
const settleWithin = 10 * time.Second

// settle moves the tenant's counter by delta after a write, even when ctx
// has ended (a broker shutting down): a reservation not given back would
// hold the tenant's room for good.
func (s *KVStore) settle(ctx context.Context, tenant string, delta int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleWithin)
	defer cancel()
	_ = s.add(ctx, tenant, delta)
}

// unwritten reports whether the entry under key is still at rev (0: still
// none) after a write that failed otherwise than by losing its
// compare-and-swap: a timeout can come after the server stored it, and
// giving that write's reservation back would count it out. A read that
// fails too counts as written, erring towards refusing.
func (s *KVStore) unwritten(ctx context.Context, key string, rev uint64) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleWithin)
	defer cancel()
	_, now, err := s.kvEntry(ctx, key)
	return err == nil && now == rev
}

// look reads the key's entry and the tenant's counter, at once.
func (s *KVStore) look(ctx context.Context, key, tenant string) (Room, error) {
	r := Room{seen: true}
	var err error
	done := make(chan error, 1)
	go func() {
		var err error
		r.used, r.qrev, err = s.used(ctx, tenant)
		done <- err
	}()
	r.old, r.rev, err = s.kvEntry(ctx, key)
	if uerr := <-done; err == nil {
		err = uerr
	}
	return r, err
}

// Fit implements Store.
func (s *KVStore) Fit(ctx context.Context, k Key, rec []byte, limit int64) (Room, error) {
	r, err := s.look(ctx, kvKey(k), k.Tenant)
	if err != nil {
		return Room{}, s.fail("read", err)
	}
	return r, overQuota(r.used, Cost(k, rec)-r.old, limit)
}

// Used implements Store.
func (s *KVStore) Used(ctx context.Context, tenant string) (int64, error) {
	n, _, err := s.used(ctx, tenant)
	if err != nil {
		return 0, s.fail("read", err)
	}
	return n, nil
}

// markerTTL is how long the purge marker of a deleted memory stays in the
// bucket; then nothing of it is left.
const markerTTL = time.Second

// Delete implements Store. The record is purged by compare-and-swap on its
// revision, with a marker that expires after markerTTL (so a deleted
// memory holds no room), then the counter gives its cost back. A put that
// replaced the record meanwhile makes the purge miss; it starts again.
//
// The counter is read (made, for a tenant without one) before the purge,
// so it counts the record: one first counted after the purge would not,
// and giving the cost back to it would count the record out twice.
func (s *KVStore) Delete(ctx context.Context, k Key) (bool, error) {
	key := kvKey(k)
	for range maxCASRounds {
		r, err := s.look(ctx, key, k.Tenant)
		if err != nil {
			return false, s.fail("delete", err)
		}
		c, rev := r.old, r.rev
		if rev == 0 {
			return false, nil
		}
		if err := s.kv.Purge(ctx, key, jetstream.LastRevision(rev), jetstream.PurgeTTL(markerTTL)); err != nil {
			if kvcas.Conflict(err) {
				continue
			}
			return false, s.fail("delete", err)
		}
		s.settle(ctx, k.Tenant, -c) // deleted; a counter left high errs towards refusing
		return true, nil
	}
	return false, s.fail("delete", errContended)
}

// Redis keeps a tenant's counter at Prefix + "q:<hex tenant>", and changes
// it in the same Lua script that changes a memory, so the two move
// together (Redis runs a script alone). A single Redis (not Cluster): the
// script touches two keys.

// redisPut: KEYS = record, counter; ARGV = record, limit, the key's cost
// beyond the record. Returns {1, used} stored, {0, used} over quota (delta
// is the caller's to compute), {-1} no counter yet.
var redisPut = redis.NewScript(`
local used = redis.call('GET', KEYS[2])
if not used then return {-1, 0} end
used = tonumber(used)
local fixed = tonumber(ARGV[3])
local old = redis.call('STRLEN', KEYS[1])
local oldc = 0
if old > 0 then oldc = old + fixed end
local delta = string.len(ARGV[1]) + fixed - oldc
if delta > 0 and used + delta > tonumber(ARGV[2]) then return {0, used, delta} end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('INCRBY', KEYS[2], delta)
return {1, used + delta, delta}
`)

// redisDelete: KEYS = record, counter; ARGV = the key's cost beyond the
// record. Returns 1 when there was a record.
var redisDelete = redis.NewScript(`
local old = redis.call('STRLEN', KEYS[1])
if old == 0 then return 0 end
redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[2]) == 1 then
  local left = redis.call('DECRBY', KEYS[2], old + tonumber(ARGV[1]))
  if left < 0 then redis.call('SET', KEYS[2], 0) end
end
return 1
`)

func (s *RedisStore) quotaKey(tenant string) string {
	return s.prefix + "q:" + hex.EncodeToString([]byte(tenant))
}

// fixedCost is Cost less the record.
func fixedCost(k Key) int64 { return Cost(k, nil) }

// Put implements Store, in one script (redisPut).
func (s *RedisStore) Put(ctx context.Context, k Key, rec []byte, limit int64, _ Room) error {
	keys := []string{s.key(k), s.quotaKey(k.Tenant)}
	for range maxCASRounds {
		r, err := redisPut.Run(ctx, s.rdb, keys, rec, limit, fixedCost(k)).Int64Slice()
		if err != nil {
			return s.fail("put", err)
		}
		switch r[0] {
		case 1:
			return nil
		case 0:
			return overQuota(r[1], r[2], limit)
		}
		if err := s.initCounter(ctx, k.Tenant); err != nil {
			return s.fail("put", err)
		}
	}
	return s.fail("put", errContended)
}

// initCounter counts a tenant without a counter from its keys (SCAN), and
// sets the counter only if still absent (SETNX), so two brokers counting
// at once agree on one. A delete while it counts errs towards refusing.
func (s *RedisStore) initCounter(ctx context.Context, tenant string) error {
	t := hex.EncodeToString([]byte(tenant))
	var n int64
	for _, kind := range []string{"p:", "s:"} {
		it := s.rdb.Scan(ctx, 0, s.prefix+kind+t+":*", 512).Iterator()
		for it.Next(ctx) {
			l, err := s.rdb.StrLen(ctx, it.Val()).Result()
			if err != nil {
				return err
			}
			if l > 0 {
				n += storedCost(strings.TrimPrefix(it.Val(), s.prefix), ':', int(l))
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
	}
	return s.rdb.SetNX(ctx, s.quotaKey(tenant), n, 0).Err()
}

// Fit implements Store.
func (s *RedisStore) Fit(ctx context.Context, k Key, rec []byte, limit int64) (Room, error) {
	used, err := s.used(ctx, k.Tenant)
	if err != nil {
		return Room{}, s.fail("read", err)
	}
	old, err := s.rdb.StrLen(ctx, s.key(k)).Result()
	if err != nil {
		return Room{}, s.fail("read", err)
	}
	delta := Cost(k, rec)
	if old > 0 {
		delta -= old + fixedCost(k)
	}
	return Room{}, overQuota(used, delta, limit) // the script reads for itself
}

func (s *RedisStore) used(ctx context.Context, tenant string) (int64, error) {
	for range 2 {
		n, err := s.rdb.Get(ctx, s.quotaKey(tenant)).Int64()
		if !errors.Is(err, redis.Nil) {
			return n, err
		}
		if err := s.initCounter(ctx, tenant); err != nil {
			return 0, err
		}
	}
	return 0, errContended
}

// Used implements Store.
func (s *RedisStore) Used(ctx context.Context, tenant string) (int64, error) {
	n, err := s.used(ctx, tenant)
	if err != nil {
		return 0, s.fail("read", err)
	}
	return n, nil
}

// Delete implements Store, in one script (redisDelete).
func (s *RedisStore) Delete(ctx context.Context, k Key) (bool, error) {
	n, err := redisDelete.Run(ctx, s.rdb, []string{s.key(k), s.quotaKey(k.Tenant)}, fixedCost(k)).Int64()
	if err != nil {
		return false, s.fail("delete", err)
	}
	return n > 0, nil
}
