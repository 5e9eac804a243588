package artifact_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/artifact"
	"github.com/gatehouse/gatehouse/sinks/quota"
	"github.com/gatehouse/gatehouse/sinks/quota/quotatest"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// qstore is one backend's data for a quota test, read and written in the
// store itself by its documented layout.
type qstore struct {
	// open opens another store on the same data, as another broker does.
	open func(t testing.TB) artifact.Store
	// ledger returns the tenant's entry as the store keeps it.
	ledger func(t testing.TB, tenant string) (used int64, holder string, ok bool)
	// setLedger writes the tenant's entry, as a broker that died would
	// have left it.
	setLedger func(t testing.TB, tenant string, used int64, holder string, until time.Time)
	// read returns an artifact's content.
	read func(t testing.TB, name string) ([]byte, bool)
	dir  string // a folder store's folder
}

type ledgerJSON struct {
	Used   int64  `json:"used"`
	Holder string `json:"holder,omitempty"`
	Until  int64  `json:"until,omitempty"`
	Rev    uint64 `json:"rev,omitempty"`
}

func decodeLedger(t testing.TB, b []byte, err error) (int64, string, bool) {
	var l ledgerJSON
	if err == nil {
		err = json.Unmarshal(b, &l)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l.Used, l.Holder, true
}

func hx(s string) string { return hex.EncodeToString([]byte(s)) }

func qbackend(t testing.TB, name string, env *sinktest.Env) *qstore {
	ctx := sinktest.Ctx(t)
	switch name {
	case "object-store":
		kv := func() jetstream.KeyValue {
			kv, err := env.JS.KeyValue(ctx, subject.ArtifactBucket+"_quota")
			if err != nil {
				t.Fatal(err)
			}
			return kv
		}
		return &qstore{
			open: func(t testing.TB) artifact.Store {
				s, err := artifact.OpenObjectStore(ctx, env.JS, artifact.ObjectStoreConfig{})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			ledger: func(t testing.TB, tenant string) (int64, string, bool) {
				e, err := kv().Get(ctx, hx(tenant))
				if errors.Is(err, jetstream.ErrKeyNotFound) {
					return 0, "", false
				}
				var b []byte
				if err == nil {
					b = e.Value()
				}
				return decodeLedger(t, b, err)
			},
			setLedger: func(t testing.TB, tenant string, used int64, holder string, until time.Time) {
				b, _ := json.Marshal(ledgerJSON{Used: used, Holder: holder, Until: until.UnixMilli()})
				if _, err := kv().Put(ctx, hx(tenant), b); err != nil {
					t.Fatal(err)
				}
			},
			read: func(t testing.TB, name string) ([]byte, bool) { return backends[0].read(t, env, name) },
		}
	case "dir":
		dir := filepath.Join(env.Dir, "artifacts")
		return &qstore{
			open: func(t testing.TB) artifact.Store {
				s, err := artifact.OpenDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			},
			ledger: func(t testing.TB, tenant string) (int64, string, bool) {
				b, err := os.ReadFile(filepath.Join(dir, ".quota", tenant))
				if errors.Is(err, os.ErrNotExist) {
					return 0, "", false
				}
				return decodeLedger(t, b, err)
			},
			setLedger: func(t testing.TB, tenant string, used int64, holder string, until time.Time) {
				b, _ := os.ReadFile(filepath.Join(dir, ".quota", tenant))
				var l ledgerJSON
				_ = json.Unmarshal(b, &l)
				l.Used, l.Holder, l.Until = used, holder, until.UnixMilli()
				b, _ = json.Marshal(l)
				if err := os.WriteFile(filepath.Join(dir, ".quota", tenant), b, 0o640); err != nil {
					t.Fatal(err)
				}
			},
			read: func(t testing.TB, name string) ([]byte, bool) { return backends[1].read(t, env, name) },
			dir:  dir,
		}
	}
	url, _, _ := sinktest.StartRedis(t)
	redisURLs[env] = url
	opt, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	key := func(tenant string) string { return "gatehouse:artifact:quota:" + hx(tenant) }
	return &qstore{
		open: func(t testing.TB) artifact.Store {
			s, err := artifact.OpenRedis(ctx, artifact.RedisConfig{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		ledger: func(t testing.TB, tenant string) (int64, string, bool) {
			b, err := rdb.HGet(ctx, key(tenant), "v").Bytes()
			if errors.Is(err, redis.Nil) {
				return 0, "", false
			}
			return decodeLedger(t, b, err)
		},
		setLedger: func(t testing.TB, tenant string, used int64, holder string, until time.Time) {
			b, _ := json.Marshal(ledgerJSON{Used: used, Holder: holder, Until: until.UnixMilli()})
			if err := rdb.HSet(ctx, key(tenant), "v", b).Err(); err != nil {
				t.Fatal(err)
			}
		},
		read: func(t testing.TB, name string) ([]byte, bool) { return backends[2].read(t, env, name) },
	}
}

// storesOnly returns backend name's data on a running Gatehouse that
// serves no sink, for tests of the stores themselves.
func storesOnly(t *testing.T, name string) *qstore {
	var q *qstore
	sinktest.Start(t, policy.ModeStrict, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
		q = qbackend(t, name, env)
		return nil
	})
	return q
}

var qbackends = []string{"object-store", "dir", "redis"}

// storedBytes sums Cost over the names that hold an artifact in the store.
func storedBytes(t testing.TB, q *qstore, names []string) (n int, bytes int64) {
	for _, name := range names {
		if b, ok := q.read(t, name); ok {
			n++
			bytes += artifact.Cost(name, int64(len(b)))
		}
	}
	return n, bytes
}

func deleteReq(run, key string) broker.EffectRequest {
	p, _ := json.Marshal(artifact.GetParams{Key: key})
	return broker.EffectRequest{Run: run, Action: artifact.ActionDelete, Params: p}
}

// TestQuota: publishes under one tenant stop at its budget with nothing
// more stored; the refusal says what to do; reads, same-size overwrites
// and deletes work at the budget; a delete gives the room back; another
// tenant is not affected.
func TestQuota(t *testing.T) {
	for _, name := range qbackends {
		t.Run(name, func(t *testing.T) {
			const limit = 16 << 10
			var q *qstore
			env := sinktest.Start(t, policy.ModeStrict, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
				q = qbackend(t, name, env)
				return []broker.Sink{artifact.New(q.open(t), artifact.Config{QuotaBytes: limit})}
			})
			ctx := sinktest.Ctx(t)
			run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
			other := env.Open(t, broker.OpenWork{Tenant: "globex", Person: "gus"})
			content := []byte(strings.Repeat("c", 1000))
			var names []string
			var refused error
			n := 0
			for ; n < 100; n++ {
				names = append(names, fmt.Sprintf("acme/r/%d.csv", n))
				if _, refused = env.Agent.Effect(ctx, policy.SinkArtifact, publish(run, fmt.Sprintf("r/%d.csv", n), content)); refused != nil {
					break
				}
			}
			if code(refused) != broker.CodeQuotaExceeded || !strings.Contains(refused.Error(), "--artifact-quota-mb") ||
				!strings.Contains(refused.Error(), "artifact delete") || n < 10 {
				t.Fatalf("publish %d: %v", n, refused)
			}
			count, used := storedBytes(t, q, names)
			if l, _, _ := q.ledger(t, "acme"); count != n || l != used || used > limit {
				t.Fatalf("%d stored (%d bytes), ledger %d, budget %d", count, used, l, limit)
			}
			// The refused publish was decided by policy first and recorded
			// as a failed effect: every refusal is on record, and an agent
			// policy refuses learns nothing of the tenant's usage.
			if ds, rs := events(t, env, run); len(ds) != n+1 || len(rs) != n+1 || rs[n].Status != "failed" || rs[n].Error != quota.ErrorType {
				t.Fatalf("%d decisions and outcomes %+v for %d stored publishes and one refused", len(ds), rs, n)
			}
			if _, err := env.Agent.Effect(ctx, policy.SinkArtifact, publish(other, "r/0.csv", content)); err != nil {
				t.Fatalf("globex at acme's budget: %v", err)
			}
			if _, ok := q.read(t, "globex/r/0.csv"); !ok {
				t.Fatal("globex's artifact was not stored")
			}
			if _, err := env.Agent.Effect(ctx, policy.SinkArtifact, get(run, "r/0.csv")); err != nil {
				t.Fatalf("get at the budget: %v", err)
			}
			if _, err := env.Agent.Effect(ctx, policy.SinkArtifact, publish(run, "r/0.csv", []byte(strings.Repeat("d", 1000)))); err != nil {
				t.Fatalf("same-size overwrite at the budget: %v", err)
			}
			if l, holder, _ := q.ledger(t, "acme"); l != used || holder != "" {
				t.Fatalf("ledger %d (holder %q) after an overwrite, %d stored", l, holder, used)
			}
			r, err := env.Agent.Effect(ctx, policy.SinkArtifact, deleteReq(run, "r/0.csv"))
			var dr artifact.DeleteReply
			if err != nil || json.Unmarshal(r.Result, &dr) != nil || !dr.Existed {
				t.Fatalf("delete at the budget: %v %s", err, r.Result)
			}
			if _, ok := q.read(t, "acme/r/0.csv"); ok {
				t.Fatal("the deleted artifact is still there")
			}
			if l, _, _ := q.ledger(t, "acme"); l != used-artifact.Cost("acme/r/0.csv", 1000) {
				t.Fatalf("ledger %d after a delete, want %d", l, used-artifact.Cost("acme/r/0.csv", 1000))
			}
			if _, err := env.Agent.Effect(ctx, policy.SinkArtifact, publish(run, fmt.Sprintf("r/%d.csv", n), content)); err != nil {
				t.Fatalf("publish after a delete: %v", err)
			}
			_, used = storedBytes(t, q, names)
			if l, _, _ := q.ledger(t, "acme"); l != used || used > limit {
				t.Fatalf("ledger %d, %d stored, budget %d", l, used, limit)
			}
			if r, err := env.Agent.Effect(ctx, policy.SinkArtifact, deleteReq(run, "r/0.csv")); err != nil || json.Unmarshal(r.Result, &dr) != nil || dr.Existed {
				t.Fatalf("second delete: %v %s", err, r.Result)
			}
			_, rs := events(t, env, run)
			if last := rs[len(rs)-1]; last.Detail["existed"] != "false" || last.Status != "ok" {
				t.Fatalf("delete recorded %+v", last)
			}
			env.Verify(t)
		})
	}
}

// TestQuotaConcurrent: publishes racing from two stores (two brokers)
// never together pass the budget, and the ledger ends equal to what the
// store holds, through racing overwrites and deletes too.
func TestQuotaConcurrent(t *testing.T) {
	for _, name := range qbackends {
		t.Run(name, func(t *testing.T) {
			q := storesOnly(t, name)
			ctx := sinktest.Ctx(t)
			content := []byte(strings.Repeat("x", 2000))
			one := artifact.Cost("acme/k/00-00", int64(len(content)))
			limit := 12*one + one/2
			stores := []artifact.Store{artifact.WithQuota(q.open(t), limit), artifact.WithQuota(q.open(t), limit)}
			var names []string
			for g := range 8 {
				for i := range 4 {
					names = append(names, fmt.Sprintf("acme/k/%02d-%02d", g, i))
				}
			}
			ok := quotatest.Race(t, 8, 4, func(g, i int) error {
				return stores[g%2].Put(ctx, names[g*4+i], "text/plain", content)
			})
			n, used := storedBytes(t, q, names)
			if l, _, _ := q.ledger(t, "acme"); n != ok || n != 12 || l != used || used > limit {
				t.Fatalf("%d publishes succeeded, %d stored (%d bytes), ledger %d, budget %d", ok, n, used, l, limit)
			}
			hot := names[:3]
			quotatest.Race(t, 8, 4, func(g, i int) error {
				name, st := hot[(g+i)%len(hot)], stores[(g+i)%2]
				if (g+i)%4 == 0 {
					_, err := st.Delete(ctx, name)
					return err
				}
				return st.Put(ctx, name, "text/plain", []byte(strings.Repeat("y", 300*(g%7))))
			})
			_, used = storedBytes(t, q, names)
			if l, holder, _ := q.ledger(t, "acme"); l != used || used > limit || holder != "" {
				t.Fatalf("after racing overwrites: ledger %d (holder %q), %d stored, budget %d", l, holder, used, limit)
			}
		})
	}
}

// TestQuotaLeaseOfADeadBroker: a lease left by a broker that died holding
// it stops nobody once it has expired; one still running makes others
// wait, not pass it.
func TestQuotaLeaseOfADeadBroker(t *testing.T) {
	for _, name := range qbackends {
		t.Run(name, func(t *testing.T) {
			q := storesOnly(t, name)
			ctx := sinktest.Ctx(t)
			st := artifact.WithQuota(q.open(t), 1<<20)
			if err := st.Put(ctx, "acme/a", "text/plain", []byte("a")); err != nil {
				t.Fatal(err)
			}
			used, _, _ := q.ledger(t, "acme")
			q.setLedger(t, "acme", used, "dead-broker", time.Now().Add(time.Hour))
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			if err := st.Put(short, "acme/b", "text/plain", []byte("b")); !errors.Is(err, artifact.ErrUnavailable) {
				t.Fatalf("publish under another's live lease: %v", err)
			}
			if _, ok := q.read(t, "acme/b"); ok {
				t.Fatal("written under another's lease")
			}
			q.setLedger(t, "acme", used, "dead-broker", time.Now().Add(-time.Second))
			if err := st.Put(ctx, "acme/b", "text/plain", []byte("b")); err != nil {
				t.Fatalf("publish after the lease expired: %v", err)
			}
			if l, holder, _ := q.ledger(t, "acme"); l != used+artifact.Cost("acme/b", 1) || holder != "" {
				t.Fatalf("ledger %d holder %q", l, holder)
			}
		})
	}
}

// TestQuotaCountsWhatIsThere: artifacts stored before quotas are counted
// from the store on the tenant's first publish, and survive a reopen (the
// ledger is the store's, not the process's).
func TestQuotaCountsWhatIsThere(t *testing.T) {
	for _, name := range qbackends {
		t.Run(name, func(t *testing.T) {
			q := storesOnly(t, name)
			ctx := sinktest.Ctx(t)
			raw := q.open(t) // no budget: as before quotas
			for _, n := range []string{"acme/old/1", "acme/old/2/x", "acme2/old"} {
				if err := raw.Put(ctx, n, "text/plain", []byte("before quotas")); err != nil {
					t.Fatal(err)
				}
			}
			want := artifact.Cost("acme/old/1", 13) + artifact.Cost("acme/old/2/x", 13)
			qs := artifact.WithQuota(q.open(t), 1<<20).(*artifact.Quota)
			if u, err := qs.Used(ctx, "acme"); err != nil || u != want {
				t.Fatalf("Used = %d, %v; want %d", u, err, want)
			}
			if err := qs.Put(ctx, "acme/new", "text/plain", []byte("n")); err != nil {
				t.Fatal(err)
			}
			want += artifact.Cost("acme/new", 1)
			if l, _, _ := q.ledger(t, "acme"); l != want {
				t.Fatalf("ledger %d, want %d", l, want)
			}
			reopened := artifact.WithQuota(q.open(t), 1<<20).(*artifact.Quota)
			if u, err := reopened.Used(ctx, "acme"); err != nil || u != want {
				t.Fatalf("after reopening: Used = %d, %v; want %d", u, err, want)
			}
		})
	}
}

// TestQuotaRefusedInPerform: a publish Describe let through that the store
// then refuses (another broker took the room) is a decided, recorded
// failure with outcome error quota-exceeded, and nothing is stored.
func TestQuotaRefusedInPerform(t *testing.T) {
	var q *qstore
	const limit = 8 << 10
	env := sinktest.Start(t, policy.ModeStrict, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
		q = qbackend(t, "object-store", env)
		return []broker.Sink{artifact.New(racer{Store: artifact.WithQuota(q.open(t), limit), other: artifact.WithQuota(q.open(t), limit)}, artifact.Config{})}
	})
	ctx := sinktest.Ctx(t)
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	r, err := env.Agent.Effect(ctx, policy.SinkArtifact, publish(run, "late.csv", []byte("late")))
	if code(err) != broker.CodeQuotaExceeded || !strings.Contains(err.Error(), "--artifact-quota-mb") ||
		r.Outcome == nil || r.Outcome.Error != quota.ErrorType || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("publish that lost the race: %v %+v", err, r)
	}
	if _, ok := q.read(t, "acme/late.csv"); ok {
		t.Fatal("stored past the budget")
	}
	if _, rs := events(t, env, run); len(rs) != 1 || rs[0].Status != "failed" || rs[0].Error != quota.ErrorType {
		t.Fatalf("recorded outcomes %+v", rs)
	}
	env.Verify(t)
}

// racer is a budgeted store whose every Put first lets another broker's
// store fill the tenant's budget: the race between Describe's Fit and
// Perform's Put, made to happen every time.
type racer struct {
	artifact.Store
	other artifact.Store
}

func (r racer) Fit(ctx context.Context, name string, size int64) error {
	return r.Store.(*artifact.Quota).Fit(ctx, name, size)
}

func (r racer) Put(ctx context.Context, name, ct string, data []byte) error {
	filler := "acme/filler"
	lim := r.Store.(*artifact.Quota).Limit()
	if err := r.other.Put(ctx, filler, "text/plain", make([]byte, lim-artifact.Cost(filler, 0))); err != nil {
		return err
	}
	return r.Store.Put(ctx, name, ct, data)
}

// BenchmarkQuotaPut measures a publish's store write with the quota (take
// the tenant's lease, read the old size, reserve, write, release) against
// the same store's plain write, in one run: 64 KiB artifacts, 100 names
// overwritten in turn.
func BenchmarkQuotaPut(b *testing.B) {
	for _, name := range qbackends {
		var q *qstore
		sinktest.Start(b, policy.ModeStrict, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
			q = qbackend(t, name, env)
			return nil
		})
		ctx := sinktest.Ctx(b)
		content := make([]byte, 64<<10)
		for _, variant := range []string{"quota", "no-quota"} {
			st := q.open(b)
			if variant == "quota" {
				st = artifact.WithQuota(st, artifact.DefaultQuotaBytes)
			}
			b.Run(name+"/"+variant, func(b *testing.B) {
				b.SetBytes(int64(len(content)))
				for i := 0; b.Loop(); i++ {
					if err := st.Put(ctx, fmt.Sprintf("acme/bench/%d", i%100), "application/octet-stream", content); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestQuotaDirTenantsNamedAlike: in a folder store, tenants "acme" and
// "acme.lock" keep apart ledgers: one tenant's lock file is not the
// other's ledger (which made "acme.lock" fail every publish once "acme"
// had published, and let its ledger writes replace the file "acme"'s
// publishes lock). An empty file where a ledger goes (the lock an older
// Gatehouse left) counts as no ledger: the tenant is counted from the
// store.
func TestQuotaDirTenantsNamedAlike(t *testing.T) {
	q := storesOnly(t, "dir")
	ctx := sinktest.Ctx(t)
	st := artifact.WithQuota(q.open(t), 1<<20)
	if err := os.MkdirAll(filepath.Join(q.dir, ".quota"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(q.dir, ".quota", "acme.lock"), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"acme/a", "acme.lock/b", "acme/c", "acme.lock/d"} {
		if err := st.Put(ctx, n, "text/plain", []byte(n)); err != nil {
			t.Fatalf("publish %s: %v", n, err)
		}
	}
	for tenant, names := range map[string][]string{"acme": {"acme/a", "acme/c"}, "acme.lock": {"acme.lock/b", "acme.lock/d"}} {
		_, want := storedBytes(t, q, names)
		if l, holder, ok := q.ledger(t, tenant); !ok || l != want || holder != "" {
			t.Fatalf("%s: ledger %d (holder %q, %v), %d stored", tenant, l, holder, ok, want)
		}
	}
}
