package memory_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/memory"
	"github.com/gatehouse/gatehouse/sinks/quota"
	"github.com/gatehouse/gatehouse/sinks/quota/quotatest"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// raw reads a store by its documented layout, not through the sink: a
// memory's record, and a tenant's counter.
type raw interface {
	record(t testing.TB, k memory.Key) ([]byte, bool)
	counter(t testing.TB, tenant string) (int64, bool)
	// open opens another store on the same data, as a second broker does.
	open(t testing.TB) memory.Store
}

type rawKV struct{ js jetstream.JetStream }

func (r rawKV) kv(t testing.TB) jetstream.KeyValue {
	kv, err := r.js.KeyValue(sinktest.Ctx(t), subject.MemoryBucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func kvKeyOf(k memory.Key) string {
	if k.Person == "" {
		return "s." + hx(k.Tenant) + "." + hx(k.Name)
	}
	return "p." + hx(k.Tenant) + "." + hx(k.Person) + "." + hx(k.Name)
}

func (r rawKV) record(t testing.TB, k memory.Key) ([]byte, bool) {
	e, err := r.kv(t).Get(sinktest.Ctx(t), kvKeyOf(k))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return e.Value(), true
}

func (r rawKV) counter(t testing.TB, tenant string) (int64, bool) {
	e, err := r.kv(t).Get(sinktest.Ctx(t), "q."+hx(tenant))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(string(e.Value()), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n, true
}

func (r rawKV) open(t testing.TB) memory.Store {
	st, err := memory.OpenKV(sinktest.Ctx(t), r.js, memory.KVConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

type rawRedis struct{ url string }

func (r rawRedis) rdb(t testing.TB) *redis.Client {
	opt, _ := redis.ParseURL(r.url)
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (r rawRedis) record(t testing.TB, k memory.Key) ([]byte, bool) {
	key := "gatehouse:memory:s:" + hx(k.Tenant) + ":" + hx(k.Name)
	if k.Person != "" {
		key = "gatehouse:memory:p:" + hx(k.Tenant) + ":" + hx(k.Person) + ":" + hx(k.Name)
	}
	b, err := r.rdb(t).Get(sinktest.Ctx(t), key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

func (r rawRedis) counter(t testing.TB, tenant string) (int64, bool) {
	n, err := r.rdb(t).Get(sinktest.Ctx(t), "gatehouse:memory:q:"+hx(tenant)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return n, true
}

func (r rawRedis) open(t testing.TB) memory.Store {
	st, err := memory.OpenRedis(sinktest.Ctx(t), memory.RedisConfig{URL: r.url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// quotaEnv runs Gatehouse with the memory sink on backend name ("kv" or
// "redis") under a budget of limit bytes a tenant.
func quotaEnv(t testing.TB, name string, limit int64) (*sinktest.Env, raw) {
	return quotaEnvWith(t, name, limit, func(t testing.TB, r raw) memory.Store { return r.open(t) })
}

// quotaEnvWith is quotaEnv with the sink's store made by store.
func quotaEnvWith(t testing.TB, name string, limit int64, store func(testing.TB, raw) memory.Store) (*sinktest.Env, raw) {
	var r raw
	env := sinktest.Start(t, policy.ModeStrict, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
		if name == "redis" {
			url, _, _ := sinktest.StartRedis(t)
			r = rawRedis{url: url}
		} else {
			r = rawKV{js: env.JS}
		}
		return []broker.Sink{memory.New(store(t, r), memory.Config{QuotaBytes: limit})}
	})
	return env, r
}

// stored sums Cost over the keys that hold a memory in the store itself.
func stored(t testing.TB, r raw, keys []memory.Key) (n int, bytes int64) {
	for _, k := range keys {
		if rec, ok := r.record(t, k); ok {
			n++
			bytes += memory.Cost(k, rec)
		}
	}
	return n, bytes
}

// TestQuota: puts under one tenant stop at its budget (nothing more is
// stored), the refusal says what to do, an overwrite is charged for what
// it adds, a delete gives the room back, reads still work, and another
// tenant is not affected.
func TestQuota(t *testing.T) {
	for _, name := range []string{"kv", "redis"} {
		t.Run(name, func(t *testing.T) {
			const limit = 16 << 10
			env, r := quotaEnv(t, name, limit)
			ctx := sinktest.Ctx(t)
			ada := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
			bob := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "bob"})
			globex := env.Open(t, broker.OpenWork{Tenant: "globex", Person: "gus"})
			value := strings.Repeat("v", 1000)

			var keys []memory.Key
			var refused error
			n := 0
			for ; n < 100; n++ {
				run, vis, k := ada, memory.Private, memory.Key{Tenant: "acme", Person: "ada", Name: fmt.Sprintf("k%d", n)}
				if n%2 == 1 { // both people of the tenant, private and shared, share one budget
					run, vis, k = bob, memory.Shared, memory.Key{Tenant: "acme", Name: k.Name}
				}
				keys = append(keys, k)
				if _, refused = env.Agent.Effect(ctx, policy.SinkMemory, put(run, k.Name, vis, value)); refused != nil {
					break
				}
			}
			if code(refused) != broker.CodeQuotaExceeded || !strings.Contains(refused.Error(), "--memory-quota-mb") ||
				!strings.Contains(refused.Error(), "memory delete") {
				t.Fatalf("put %d: %v", n, refused)
			}
			if n < 10 {
				t.Fatalf("refused at put %d, well under the budget", n)
			}
			if _, ok := r.record(t, keys[n]); ok {
				t.Fatal("the refused put was stored")
			}
			// The refused put was decided by policy first and recorded as a
			// failed effect: every refusal is on record, and an agent policy
			// refuses learns nothing of the tenant's usage.
			decided, overBudget := 0, 0
			for _, run := range []string{ada, bob} {
				for _, ev := range env.Events(t, run) {
					switch ev.Type {
					case journal.TypeDecision:
						decided++
					case journal.TypeOutcome:
						var o journal.Result
						if json.Unmarshal(ev.Data, &o) == nil && o.Status == "failed" && o.Error == quota.ErrorType {
							overBudget++
						}
					}
				}
			}
			if decided != n+1 || overBudget != 1 {
				t.Fatalf("%d decisions, %d outcomes over budget, for %d stored puts and one refused", decided, overBudget, n)
			}
			count, used := stored(t, r, keys)
			if c, _ := r.counter(t, "acme"); count != n || c != used || used > limit {
				t.Fatalf("%d stored (%d bytes), counter %d, budget %d", count, used, c, limit)
			}

			// Another tenant puts as before.
			if _, err := env.Agent.Effect(ctx, policy.SinkMemory, put(globex, "k0", memory.Private, value)); err != nil {
				t.Fatalf("globex at acme's quota: %v", err)
			}
			if _, ok := r.record(t, memory.Key{Tenant: "globex", Person: "gus", Name: "k0"}); !ok {
				t.Fatal("globex's put was not stored")
			}
			// Reads work at the quota; an overwrite no larger fits and is
			// not counted twice; a larger one is refused. (The record's
			// "updated" time is RFC 3339 with its trailing zeros cut, up to
			// ten bytes wider or narrower from one put to the next: the
			// overwrite is 20 bytes smaller so that it is never larger.)
			if rep, err := env.Agent.Effect(ctx, policy.SinkMemory, keyReq("get", ada, "k0", memory.Private)); err != nil || !*reply(t, rep).Found {
				t.Fatalf("get at the quota: %v", err)
			}
			if _, err := env.Agent.Effect(ctx, policy.SinkMemory, put(ada, "k0", memory.Private, strings.Repeat("w", 980))); err != nil {
				t.Fatalf("smaller overwrite at the quota: %v", err)
			}
			_, after := stored(t, r, keys)
			if after > used-10 || after < used-30 {
				t.Fatalf("a 20-byte smaller overwrite moved the stored bytes %d -> %d", used, after)
			}
			if c, _ := r.counter(t, "acme"); c != after {
				t.Fatalf("counter %d after an overwrite, %d stored", c, after)
			}
			used = after
			if _, err := env.Agent.Effect(ctx, policy.SinkMemory, put(ada, "k0", memory.Private, strings.Repeat("w", limit))); code(err) != broker.CodeBadRequest && code(err) != broker.CodeQuotaExceeded {
				t.Fatalf("growing overwrite: %v", err)
			}
			// A delete gives the room back, and the refused put now fits.
			rec0, _ := r.record(t, keys[0])
			if rep, err := env.Agent.Effect(ctx, policy.SinkMemory, keyReq("delete", ada, "k0", memory.Private)); err != nil || !*reply(t, rep).Existed {
				t.Fatalf("delete at the quota: %v", err)
			}
			if c, _ := r.counter(t, "acme"); c != used-memory.Cost(keys[0], rec0) {
				t.Fatalf("counter %d after delete, want %d", c, used-memory.Cost(keys[0], rec0))
			}
			last := keys[n]
			run, vis := ada, memory.Private
			if last.Person == "" {
				run, vis = bob, memory.Shared
			}
			if _, err := env.Agent.Effect(ctx, policy.SinkMemory, put(run, last.Name, vis, value)); err != nil {
				t.Fatalf("put after a delete: %v", err)
			}
			_, used = stored(t, r, keys)
			if c, _ := r.counter(t, "acme"); c != used || used > limit {
				t.Fatalf("counter %d, %d stored, budget %d", c, used, limit)
			}
			env.Verify(t)
		})
	}
}

// racer is a real store whose every Put first lets another broker's
// store (other) take the tenant's last room: the race between Describe's
// Fit and Perform's Put, made to happen every time.
type racer struct {
	memory.Store
	other memory.Store
	limit int64
}

func (r racer) Put(ctx context.Context, k memory.Key, rec []byte, limit int64, room memory.Room) error {
	filler := memory.Key{Tenant: k.Tenant, Name: "filler"}
	fill := []byte(strings.Repeat("f", int(r.limit-memory.Cost(filler, nil))))
	if err := r.other.Put(ctx, filler, fill, r.limit, memory.Room{}); err != nil {
		return err
	}
	return r.Store.Put(ctx, k, rec, limit, room)
}

// TestQuotaRefusedInPerform: a put Describe let through (the room was
// there) that the store then refuses, because another broker's put took
// the room, is decided, recorded as a failed effect with outcome error
// quota-exceeded, and stores nothing.
func TestQuotaRefusedInPerform(t *testing.T) {
	for _, name := range []string{"kv", "redis"} {
		t.Run(name, func(t *testing.T) {
			const limit = 4 << 10
			env, r := quotaEnvWith(t, name, limit, func(t testing.TB, r raw) memory.Store {
				return racer{Store: r.open(t), other: r.open(t), limit: limit}
			})
			ctx := sinktest.Ctx(t)
			run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
			rep, err := env.Agent.Effect(ctx, policy.SinkMemory, put(run, "late", "", "x"))
			if code(err) != broker.CodeQuotaExceeded || !strings.Contains(err.Error(), "--memory-quota-mb") ||
				rep.Outcome == nil || rep.Outcome.Error != quota.ErrorType || rep.Decision.Outcome != journal.OutcomeAllowed {
				t.Fatalf("put that lost the race: %v %+v", err, rep)
			}
			if _, ok := r.record(t, memory.Key{Tenant: "acme", Person: "ada", Name: "late"}); ok {
				t.Fatal("stored past the budget")
			}
			if c, _ := r.counter(t, "acme"); c != limit {
				t.Fatalf("counter %d, want %d (the filler alone)", c, limit)
			}
			var outcomes []journal.Result
			for _, ev := range env.Events(t, run) {
				if ev.Type == journal.TypeOutcome {
					var o journal.Result
					_ = json.Unmarshal(ev.Data, &o)
					outcomes = append(outcomes, o)
				}
			}
			if len(outcomes) != 1 || outcomes[0].Status != "failed" || outcomes[0].Error != quota.ErrorType {
				t.Fatalf("recorded outcomes %+v", outcomes)
			}
			env.Verify(t)
		})
	}
}

// TestQuotaConcurrent: puts racing from two stores (two brokers) and many
// goroutines never together pass the budget, and the counter ends equal
// to what the store holds, through racing overwrites and deletes too.
func TestQuotaConcurrent(t *testing.T) {
	for _, name := range []string{"kv", "redis"} {
		t.Run(name, func(t *testing.T) {
			_, r := quotaEnv(t, name, 0)
			stores := []memory.Store{r.open(t), r.open(t)}
			ctx := sinktest.Ctx(t)
			rec := []byte(`{"kind":"fact","value":"` + strings.Repeat("x", 500) + `"}`)
			one := memory.Cost(memory.Key{Tenant: "acme", Name: "k-00-00"}, rec)
			limit := 12*one + one/2
			var keys []memory.Key
			for g := range 16 {
				for i := range 4 {
					keys = append(keys, memory.Key{Tenant: "acme", Name: fmt.Sprintf("k-%02d-%02d", g, i)})
				}
			}
			ok := quotatest.Race(t, 16, 4, func(g, i int) error {
				return stores[g%2].Put(ctx, keys[g*4+i], rec, limit, memory.Room{})
			})
			n, used := stored(t, r, keys)
			if c, _ := r.counter(t, "acme"); n != ok || n != 12 || c != used || used > limit {
				t.Fatalf("%d puts succeeded, %d stored (%d bytes), counter %d, budget %d", ok, n, used, c, limit)
			}

			// Racing overwrites of a few keys with values of different
			// sizes, and deletes, from both stores.
			hot := keys[:4]
			quotatest.Race(t, 16, 6, func(g, i int) error {
				k, st := hot[(g+i)%len(hot)], stores[(g+i)%2]
				if (g+i)%5 == 0 {
					_, err := st.Delete(ctx, k)
					return err
				}
				return st.Put(ctx, k, []byte(`{"kind":"fact","value":"`+strings.Repeat("y", 50*(g%9))+`"}`), limit, memory.Room{})
			})
			_, used = stored(t, r, keys)
			if c, _ := r.counter(t, "acme"); c != used || used > limit {
				t.Fatalf("after racing overwrites: counter %d, %d stored, budget %d", c, used, limit)
			}
			for _, st := range stores {
				if u, err := st.Used(ctx, "acme"); err != nil || u != used {
					t.Fatalf("Used = %d, %v; %d stored", u, err, used)
				}
			}
		})
	}
}

// TestQuotaCountsWhatIsThere: memories kept before quotas (no counter)
// are counted from the store on a tenant's first put.
func TestQuotaCountsWhatIsThere(t *testing.T) {
	for _, name := range []string{"kv", "redis"} {
		t.Run(name, func(t *testing.T) {
			env, r := quotaEnv(t, name, 0)
			ctx := sinktest.Ctx(t)
			old := []memory.Key{{Tenant: "acme", Person: "ada", Name: "a"}, {Tenant: "acme", Name: "b/c"}}
			rec := []byte(`{"kind":"fact","value":"from before quotas"}`)
			for _, k := range old {
				rawPut(t, r, k, rec)
			}
			// Another tenant's and another key space's entries are not counted.
			if _, err := env.Agent.Effect(ctx, policy.SinkMemory, put(env.Open(t, broker.OpenWork{Tenant: "acme2", Person: "ada"}), "a", "", "x")); err != nil {
				t.Fatal(err)
			}
			want := memory.Cost(old[0], rec) + memory.Cost(old[1], rec)
			if u, err := r.open(t).Used(ctx, "acme"); err != nil || u != want {
				t.Fatalf("Used = %d, %v; want %d", u, err, want)
			}
			if c, _ := r.counter(t, "acme"); c != want {
				t.Fatalf("counter %d, want %d", c, want)
			}
		})
	}
}

// TestQuotaFirstDeleteCountsOnce: a tenant whose memories predate quotas
// (no counter) and whose first write is a delete ends with the counter
// equal to what it stores: the count the delete starts is not also given
// the deleted memory's cost back (which would let the tenant pass its
// budget by that much).
func TestQuotaFirstDeleteCountsOnce(t *testing.T) {
	for _, name := range []string{"kv", "redis"} {
		t.Run(name, func(t *testing.T) {
			_, r := quotaEnv(t, name, 0)
			ctx := sinktest.Ctx(t)
			old := []memory.Key{{Tenant: "acme", Person: "ada", Name: "a"}, {Tenant: "acme", Name: "b"}}
			rec := []byte(`{"kind":"fact","value":"from before quotas"}`)
			for _, k := range old {
				rawPut(t, r, k, rec)
			}
			st := r.open(t)
			if ok, err := st.Delete(ctx, old[0]); err != nil || !ok {
				t.Fatal(ok, err)
			}
			_, used := stored(t, r, old)
			if c, ok := r.counter(t, "acme"); ok && c != used {
				t.Fatalf("counter %d after the first delete, %d stored", c, used)
			}
			if u, err := st.Used(ctx, "acme"); err != nil || u != used {
				t.Fatalf("Used = %d, %v; %d stored", u, err, used)
			}
		})
	}
}

// rawPut writes a memory record straight into the store, as one kept
// before quotas is.
func rawPut(t testing.TB, r raw, k memory.Key, rec []byte) {
	ctx := sinktest.Ctx(t)
	switch r := r.(type) {
	case rawKV:
		if _, err := r.kv(t).Put(ctx, kvKeyOf(k), rec); err != nil {
			t.Fatal(err)
		}
	case rawRedis:
		key := "gatehouse:memory:s:" + hx(k.Tenant) + ":" + hx(k.Name)
		if k.Person != "" {
			key = "gatehouse:memory:p:" + hx(k.Tenant) + ":" + hx(k.Person) + ":" + hx(k.Name)
		}
		if err := r.rdb(t).Set(ctx, key, rec, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestQuotaSurvivesRestart: the counter lives in the bucket, so a NATS
// restart (serve's embedded server on the same folder) keeps it, and the
// budget still holds after.
func TestQuotaSurvivesRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	ctx := sinktest.Ctx(t)
	open := func() (*embedded.Server, memory.Store, rawKV) {
		ns, err := embedded.Start(embedded.Config{Dir: dir, Port: -1})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := ns.Connect(embedded.RoleBroker)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		r := rawKV{js: js}
		return ns, r.open(t), r
	}
	ns, st, _ := open()
	rec := []byte(strings.Repeat("r", 100))
	k := func(i int) memory.Key { return memory.Key{Tenant: "acme", Name: fmt.Sprintf("k%d", i)} }
	limit := 3 * memory.Cost(k(0), rec)
	for i := range 3 {
		if err := st.Put(ctx, k(i), rec, limit, memory.Room{}); err != nil {
			t.Fatal(err)
		}
	}
	ns.Shutdown()
	ns, st, r := open()
	t.Cleanup(ns.Shutdown)
	if c, ok := r.counter(t, "acme"); !ok || c != limit {
		t.Fatalf("counter after restart %d (%v), want %d", c, ok, limit)
	}
	var qe *quota.Error
	if err := st.Put(ctx, k(3), rec, limit, memory.Room{}); !errors.As(err, &qe) {
		t.Fatalf("put past the budget after restart: %v", err)
	}
	if _, ok := r.record(t, k(3)); ok {
		t.Fatal("stored past the budget after restart")
	}
	// A delete leaves nothing that holds room: its marker expires.
	if ok, err := st.Delete(ctx, k(0)); err != nil || !ok {
		t.Fatal(ok, err)
	}
	s, err := r.js.Stream(ctx, "KV_"+subject.MemoryBucket)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter("$KV."+subject.MemoryBucket+"."+kvKeyOf(k(0))))
		if err != nil {
			t.Fatal(err)
		}
		if len(info.State.Subjects) == 0 && info.State.Msgs == 3 { // k1, k2 and the counter
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted memory's marker stays: %+v", info.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkPut measures a store's put with the quota (read the old entry
// and the counter, reserve, write by compare-and-swap; Redis: one script)
// against the same store's plain write without one, in one run, over 1000
// keys of one tenant overwritten in turn, 200-byte records.
func BenchmarkPut(b *testing.B) {
	for _, name := range []string{"kv", "redis"} {
		_, r := quotaEnv(b, name, 0)
		st := r.open(b)
		ctx := sinktest.Ctx(b)
		rec := []byte(`{"kind":"fact","value":"` + strings.Repeat("b", 170) + `"}`)
		keys := make([]memory.Key, 1000)
		for i := range keys {
			keys[i] = memory.Key{Tenant: "acme", Person: "ada", Name: fmt.Sprintf("bench/%d", i)}
		}
		b.Run(name+"/quota", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if err := st.Put(ctx, keys[i%len(keys)], rec, memory.DefaultQuotaBytes, memory.Room{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/no-quota", func(b *testing.B) {
			switch r := r.(type) {
			case rawKV:
				kv := r.kv(b)
				for i := 0; b.Loop(); i++ {
					if _, err := kv.Put(ctx, "p.bench."+strconv.Itoa(i%len(keys)), rec); err != nil {
						b.Fatal(err)
					}
				}
			case rawRedis:
				rdb := r.rdb(b)
				for i := 0; b.Loop(); i++ {
					if err := rdb.Set(ctx, "gatehouse:memory:p:bench:"+strconv.Itoa(i%len(keys)), rec, 0).Err(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// plainKV is the memory store as it was before quotas: a plain KV write,
// no counter. BenchmarkRoundTripQuota's baseline only.
type plainKV struct {
	memory.Store
	kv jetstream.KeyValue
}

func (p plainKV) Fit(context.Context, memory.Key, []byte, int64) (memory.Room, error) {
	return memory.Room{}, nil
}

func (p plainKV) Put(ctx context.Context, k memory.Key, rec []byte, _ int64, _ memory.Room) error {
	_, err := p.kv.Put(ctx, kvKeyOf(k), rec)
	return err
}

// BenchmarkRoundTripQuota measures an agent's memory put end to end
// (decided, recorded, stored, answered) with the quota and, in the same
// run, with the plain write it replaced, on JetStream KV.
func BenchmarkRoundTripQuota(b *testing.B) {
	for _, variant := range []string{"quota", "no-quota"} {
		b.Run(variant, func(b *testing.B) {
			env, _ := quotaEnvWith(b, "kv", 0, func(t testing.TB, r raw) memory.Store {
				if variant == "quota" {
					return r.open(t)
				}
				return plainKV{Store: r.open(t), kv: r.(rawKV).kv(t)}
			})
			run := env.Open(b, broker.OpenWork{Tenant: "acme", Person: "ada"})
			ctx := sinktest.Ctx(b)
			req := put(run, "bench", "", map[string]any{"lang": "nl", "n": 42})
			for b.Loop() {
				if r, err := env.Agent.Effect(ctx, policy.SinkMemory, req); err != nil || r.Outcome == nil || r.Outcome.Status != "ok" {
					b.Fatalf("%v %+v", err, r)
				}
			}
		})
	}
}
