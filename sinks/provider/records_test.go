package provider_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"

	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/provider"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// TestRecordStores runs both stores through the same checks: every read
// of a path is kept (oldest first), workflows are apart, and the first
// write mark stays.
func TestRecordStores(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", nil)
	kv, err := provider.OpenKVRecords(ctxT(t), env.JS, provider.KVConfig{})
	if err != nil {
		t.Fatal(err)
	}
	url, _, _ := sinktest.StartRedis(t)
	rd, err := provider.OpenRedisRecords(ctxT(t), provider.RedisConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rd.Close() })
	for name, st := range map[string]provider.RecordStore{"jetstream-kv": kv, "redis": rd} {
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t)
			t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
			rec := func(body string, at time.Time) grounding.Record {
				return grounding.Record{Provider: "erp", Path: "/suppliers/S-1", Body: []byte(body), ReadAt: at,
					Citation: grounding.Citation{Run: "r_1", Effect: "e_" + body, Digest: "sha256:x", Path: "erp:/suppliers/S-1"}}
			}
			for i, b := range []string{`{"a":1}`, "{\"a\":\n2}"} {
				if err := st.Keep(ctx, "wf1", rec(b, t0.Add(time.Duration(i)*time.Second))); err != nil {
					t.Fatal(err)
				}
			}
			got, err := st.Lookup(ctx, "wf1", "erp", "/suppliers/S-1")
			if err != nil || len(got) != 2 || string(got[1].Body) != "{\"a\":\n2}" || !got[0].ReadAt.Equal(t0) || got[0].Citation.Effect != `e_{"a":1}` {
				t.Fatalf("lookup %+v %v", got, err)
			}
			if got, _ := st.Lookup(ctx, "wf2", "erp", "/suppliers/S-1"); len(got) != 0 {
				t.Fatalf("another workflow sees %+v", got)
			}
			if at, err := st.WrittenAt(ctx, "wf1", "erp", "/suppliers/S-1"); err != nil || !at.IsZero() {
				t.Fatalf("written at %v %v", at, err)
			}
			for _, at := range []time.Time{t0, t0.Add(time.Hour)} {
				if err := st.Wrote(ctx, "wf1", "erp", "/suppliers/S-1", at); err != nil {
					t.Fatal(err)
				}
			}
			if at, err := st.WrittenAt(ctx, "wf1", "erp", "/suppliers/S-1"); err != nil || !at.Equal(t0) {
				t.Fatalf("written at %v %v, want the first write", at, err)
			}
			if err := st.Wrote(ctx, "wf1", "erp", grounding.AnyPath, t0); err != nil {
				t.Fatal(err)
			}
			if at, err := st.WrittenAt(ctx, "wf1", "erp", grounding.AnyPath); err != nil || !at.Equal(t0) {
				t.Fatalf("written anywhere at %v %v", at, err)
			}

			// Spends: the newest record spent; one read at or before it
			// cannot be spent again, one read after it can.
			const inv = "/invoices/INV-7"
			if at, err := st.SpentThrough(ctx, "wf1", "erp", inv); err != nil || !at.IsZero() {
				t.Fatalf("spent through %v %v", at, err)
			}
			read := t0.Add(1500 * time.Nanosecond)
			if err := st.Spend(ctx, "wf1", "erp", inv, read); err != nil {
				t.Fatal(err)
			}
			for _, again := range []time.Time{read, t0} {
				if err := st.Spend(ctx, "wf1", "erp", inv, again); !errors.Is(err, provider.ErrSpent) {
					t.Fatalf("spent again at %v: %v", again, err)
				}
			}
			if at, err := st.SpentThrough(ctx, "wf1", "erp", inv); err != nil || !at.Equal(read) {
				t.Fatalf("spent through %v %v, want %v", at, err, read)
			}
			if err := st.Spend(ctx, "wf2", "erp", inv, t0); err != nil {
				t.Fatalf("another workflow: %v", err)
			}
			// Many calls relying on one record at once: exactly one spends it.
			later := read.Add(time.Second)
			var wg sync.WaitGroup
			var won atomic.Int32
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					switch err := st.Spend(ctx, "wf1", "erp", inv, later); {
					case err == nil:
						won.Add(1)
					case !errors.Is(err, provider.ErrSpent):
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if won.Load() != 1 {
				t.Fatalf("%d concurrent spends of one record succeeded, want 1", won.Load())
			}
		})
	}
}

// TestKVCredentials: credentials kept in JetStream KV are found per
// person; a person without one fails no-credential.
func TestKVCredentials(t *testing.T) {
	e := newERP(t)
	var sink *provider.Sink
	env := sinktest.Start(t, policy.ModeStrict, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
		kv, err := provider.OpenKVCredentials(ctxT(t), env.JS, provider.KVConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := kv.Put(ctxT(t), policy.Principal{Tenant: "acme", Person: "ada"}, "erp", provider.Credential{Token: provider.NewSecret(adaToken)}); err != nil {
			t.Fatal(err)
		}
		cat, err := provider.ParseCatalogue("c.yaml", []byte(catalogue(e.srv.URL)))
		if err != nil {
			t.Fatal(err)
		}
		sink, err = provider.New(ctxT(t), env.JS, provider.Config{Catalogue: cat, Credentials: kv})
		if err != nil {
			t.Fatal(err)
		}
		return []broker.Sink{sink}
	})
	s := &setup{erp: e, env: env, sink: sink}
	r := s.call(t, s.open(t, "ada"), policy.OriginShipped, get("/invoices/INV-7"))
	mustAllow(t, r)
	if c := e.snapshot(); len(c) != 1 || c[0].Auth != "Bearer "+adaToken {
		t.Fatalf("calls %+v", c)
	}
	r = s.call(t, s.open(t, "bob"), policy.OriginShipped, get("/invoices/INV-7"))
	if r.Outcome == nil || r.Outcome.Error != "no-credential" || len(e.snapshot()) != 1 {
		t.Fatalf("bob: %+v", r.Outcome)
	}
}
