package memory_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/memory"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

const secret = "s3cr3t-memory-value-93ac"

// backend is one of the two stores. lookup reads a memory from the store
// itself, not through the sink, by the documented key layout.
type backend struct {
	name   string
	sinks  func(t testing.TB) sinktest.SinkFactory
	lookup func(t testing.TB, env *sinktest.Env, k memory.Key) ([]byte, bool)
}

func hx(s string) string { return hex.EncodeToString([]byte(s)) }

var kvBackend = backend{
	name: "jetstream-kv",
	sinks: func(testing.TB) sinktest.SinkFactory {
		return func(t testing.TB, env *sinktest.Env) []broker.Sink {
			st, err := memory.OpenKV(sinktest.Ctx(t), env.JS, memory.KVConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return []broker.Sink{memory.New(st, memory.Config{})}
		}
	},
	lookup: func(t testing.TB, env *sinktest.Env, k memory.Key) ([]byte, bool) {
		kv, err := env.JS.KeyValue(sinktest.Ctx(t), subject.MemoryBucket)
		if err != nil {
			t.Fatal(err)
		}
		key := "s." + hx(k.Tenant) + "." + hx(k.Name)
		if k.Person != "" {
			key = "p." + hx(k.Tenant) + "." + hx(k.Person) + "." + hx(k.Name)
		}
		e, err := kv.Get(sinktest.Ctx(t), key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return e.Value(), true
	},
}

// redisBackend starts a redis-server per test; redisURL is the last one.
func redisBackend() backend {
	var url string
	return backend{
		name: "redis",
		sinks: func(t testing.TB) sinktest.SinkFactory {
			return func(t testing.TB, env *sinktest.Env) []broker.Sink {
				url, _, _ = sinktest.StartRedis(t)
				st, err := memory.OpenRedis(sinktest.Ctx(t), memory.RedisConfig{URL: url})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return []broker.Sink{memory.New(st, memory.Config{})}
			}
		},
		lookup: func(t testing.TB, env *sinktest.Env, k memory.Key) ([]byte, bool) {
			opt, _ := redis.ParseURL(url)
			rdb := redis.NewClient(opt)
			defer rdb.Close()
			key := "gatehouse:memory:s:" + hx(k.Tenant) + ":" + hx(k.Name)
			if k.Person != "" {
				key = "gatehouse:memory:p:" + hx(k.Tenant) + ":" + hx(k.Person) + ":" + hx(k.Name)
			}
			b, err := rdb.Get(sinktest.Ctx(t), key).Bytes()
			if errors.Is(err, redis.Nil) {
				return nil, false
			}
			if err != nil {
				t.Fatal(err)
			}
			return b, true
		},
	}
}

func backends() []backend { return []backend{kvBackend, redisBackend()} }

func put(run, key string, vis memory.Visibility, value any) broker.EffectRequest {
	v, _ := json.Marshal(value)
	p, _ := json.Marshal(memory.PutParams{Key: key, Value: v, Kind: "preference", Visibility: vis})
	return broker.EffectRequest{Run: run, Action: memory.ActionPut, Origin: policy.OriginModel, Params: p}
}

func keyReq(action, run, key string, vis memory.Visibility) broker.EffectRequest {
	p, _ := json.Marshal(memory.KeyParams{Key: key, Visibility: vis})
	return broker.EffectRequest{Run: run, Action: action, Params: p}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func code(err error) broker.Code {
	var eb *broker.ErrorBody
	if errors.As(err, &eb) {
		return eb.Code
	}
	return ""
}

func reply(t testing.TB, r *broker.EffectReply) memory.Reply {
	t.Helper()
	var m memory.Reply
	if err := json.Unmarshal(r.Result, &m); err != nil {
		t.Fatalf("reply %s: %v", r.Result, err)
	}
	return m
}

func TestConformance(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			sinktest.Conformance(t, sinktest.Case{
				Sink: policy.SinkMemory,
				Request: func(run string) broker.EffectRequest {
					return put(run, "prefs/lang", "", map[string]string{"note": secret})
				},
				Deny:   `{sink: memory, target: "private/**"}`,
				Secret: secret,
				Sinks:  be.sinks(t),
				Happened: func(t testing.TB, env *sinktest.Env, run string, _ *broker.EffectReply) bool {
					b, ok := be.lookup(t, env, memory.Key{Tenant: "acme", Person: "ada", Name: "prefs/lang"})
					if ok {
						var rec memory.Record
						if err := json.Unmarshal(b, &rec); err != nil || rec.Run != run || !strings.Contains(string(rec.Value), secret) {
							t.Fatalf("stored %s: %v", b, err)
						}
					}
					return ok
				},
			})
		})
	}
}

func TestRoundTrip(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			env := sinktest.Start(t, policy.ModeStrict, "", be.sinks(t))
			run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
			ctx := sinktest.Ctx(t)
			value := []byte(`{"lang":"nl","note":"` + secret + `"}`)
			if _, err := env.Agent.Effect(ctx, policy.SinkMemory, put(run, "prefs", memory.Shared, json.RawMessage(" \n"+string(value)))); err != nil {
				t.Fatal(err)
			}
			r, err := env.Agent.Effect(ctx, policy.SinkMemory, keyReq("get", run, "prefs", memory.Shared))
			if err != nil {
				t.Fatal(err)
			}
			m := reply(t, r)
			if *m.Found != true || string(m.Value) != string(value) || m.Kind != "preference" || m.Digest != sha(value) || m.Visibility != memory.Shared {
				t.Fatalf("get = %+v", m)
			}
			r, err = env.Agent.Effect(ctx, policy.SinkMemory, keyReq("delete", run, "prefs", memory.Shared))
			if err != nil || !*reply(t, r).Existed {
				t.Fatalf("delete: %s %v", r.Result, err)
			}
			r, err = env.Agent.Effect(ctx, policy.SinkMemory, keyReq("get", run, "prefs", memory.Shared))
			if err != nil || *reply(t, r).Found {
				t.Fatalf("get after delete: %s %v", r.Result, err)
			}
			r, err = env.Agent.Effect(ctx, policy.SinkMemory, keyReq("delete", run, "prefs", memory.Shared))
			if err != nil || *reply(t, r).Existed {
				t.Fatalf("second delete: %s %v", r.Result, err)
			}

			var ds []journal.Decision
			var rs []journal.Result
			for _, ev := range env.Events(t, run) {
				switch ev.Type {
				case journal.TypeDecision:
					var d journal.Decision
					_ = json.Unmarshal(ev.Data, &d)
					ds = append(ds, d)
				case journal.TypeOutcome:
					var o journal.Result
					_ = json.Unmarshal(ev.Data, &o)
					rs = append(rs, o)
				}
			}
			if len(ds) != 5 || len(rs) != 5 {
				t.Fatalf("%d decisions, %d outcomes", len(ds), len(rs))
			}
			for i, action := range []string{"put", "get", "delete", "get", "delete"} {
				if ds[i].Action != action || ds[i].Target != "shared/prefs" || ds[i].Outcome != journal.OutcomeAllowed {
					t.Fatalf("decision %d: %+v", i, ds[i])
				}
				if rs[i].Status != "ok" || rs[i].Detail["visibility"] != "shared" {
					t.Fatalf("outcome %d: %+v", i, rs[i])
				}
			}
			if ds[0].Digest != sha(value) || ds[0].Size != int64(len(value)) || rs[0].Detail["kind"] != "preference" {
				t.Fatalf("put recorded %+v / %+v", ds[0], rs[0])
			}
			if rs[1].Digest != sha(value) || rs[1].Detail["found"] != "true" || rs[1].Detail["kind"] != "preference" ||
				rs[2].Detail["existed"] != "true" || rs[3].Detail["found"] != "false" || rs[4].Detail["existed"] != "false" {
				t.Fatalf("outcomes %+v", rs)
			}
			env.Verify(t)
			env.NoContent(t, secret)
		})
	}
}

// TestIsolation: an agent working for one person never reaches another
// person's private memory or another tenant's shared memory.
func TestIsolation(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			env := sinktest.Start(t, policy.ModeStrict, "", be.sinks(t))
			ctx := sinktest.Ctx(t)
			ada := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
			bob := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "bob"})
			globexAda := env.Open(t, broker.OpenWork{Tenant: "globex", Person: "ada"})
			// Names that would collide if parts were joined without encoding.
			tricky := env.Open(t, broker.OpenWork{Tenant: "acme.ada", Person: "x"})

			must := func(r *broker.EffectReply, err error) memory.Reply {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				return reply(t, r)
			}
			must(env.Agent.Effect(ctx, policy.SinkMemory, put(ada, "diet", memory.Private, "ada: vegetarian")))
			must(env.Agent.Effect(ctx, policy.SinkMemory, put(ada, "office", memory.Shared, "acme: Utrecht")))

			for name, run := range map[string]string{"bob of acme": bob, "ada of globex": globexAda, "tenant acme.ada": tricky} {
				if m := must(env.Agent.Effect(ctx, policy.SinkMemory, keyReq("get", run, "diet", memory.Private))); *m.Found {
					t.Errorf("%s read ada's private memory: %+v", name, m)
				}
				if m := must(env.Agent.Effect(ctx, policy.SinkMemory, keyReq("delete", run, "diet", memory.Private))); *m.Existed {
					t.Errorf("%s deleted ada's private memory", name)
				}
				if _, err := env.Agent.Effect(ctx, policy.SinkMemory, put(run, "diet", memory.Private, name)); err != nil {
					t.Fatal(err)
				}
			}
			if m := must(env.Agent.Effect(ctx, policy.SinkMemory, keyReq("get", bob, "office", memory.Shared))); !*m.Found || string(m.Value) != `"acme: Utrecht"` {
				t.Errorf("bob does not see acme's shared memory: %+v", m)
			}
			for name, run := range map[string]string{"ada of globex": globexAda, "tenant acme.ada": tricky} {
				if m := must(env.Agent.Effect(ctx, policy.SinkMemory, keyReq("get", run, "office", memory.Shared))); *m.Found {
					t.Errorf("%s read acme's shared memory: %+v", name, m)
				}
				if _, err := env.Agent.Effect(ctx, policy.SinkMemory, put(run, "office", memory.Shared, name)); err != nil {
					t.Fatal(err)
				}
			}
			// Private and shared of one name are two memories.
			if m := must(env.Agent.Effect(ctx, policy.SinkMemory, keyReq("get", ada, "office", memory.Private))); *m.Found {
				t.Errorf("shared memory read as private: %+v", m)
			}
			if m := must(env.Agent.Effect(ctx, policy.SinkMemory, keyReq("get", ada, "diet", ""))); string(m.Value) != `"ada: vegetarian"` || m.Visibility != memory.Private {
				t.Errorf("ada's private memory is now %+v", m)
			}
			if m := must(env.Agent.Effect(ctx, policy.SinkMemory, keyReq("get", ada, "office", memory.Shared))); string(m.Value) != `"acme: Utrecht"` {
				t.Errorf("acme's shared memory is now %+v", m)
			}
			env.Verify(t)
		})
	}
}

func TestBadRequests(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", kvBackend.sinks(t))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	reqs := map[string]broker.EffectRequest{
		"tenant in params":   {Run: run, Action: "put", Params: json.RawMessage(`{"key":"k","value":1,"tenant":"globex"}`)},
		"person in params":   {Run: run, Action: "get", Params: json.RawMessage(`{"key":"k","person":"bob"}`)},
		"owner in params":    {Run: run, Action: "delete", Params: json.RawMessage(`{"key":"k","owner":"bob"}`)},
		"public visibility":  put(run, "k", "public", 1),
		"null value":         {Run: run, Action: "put", Params: json.RawMessage(`{"key":"k","value":null}`)},
		"no value":           {Run: run, Action: "put", Params: json.RawMessage(`{"key":"k"}`)},
		"kind with a space":  {Run: run, Action: "put", Params: json.RawMessage(`{"key":"k","value":1,"kind":"a b"}`)},
		"value over 64 KiB":  put(run, "k", "", strings.Repeat("x", 64<<10)),
		"unknown action":     keyReq("list", run, "k", ""),
		"value in get":       {Run: run, Action: "get", Params: json.RawMessage(`{"key":"k","value":1}`)},
		"a key of 257 bytes": keyReq("get", run, strings.Repeat("k", 257), ""),
	}
	for _, k := range []string{"", ".", "..", "../bob/diet", "a/../b", "/k", "a//b", "a/", "a b", "a.*", "a>", "ü"} {
		reqs["key "+k+" (put)"] = put(run, k, "", 1)
		reqs["key "+k+" (get)"] = keyReq("get", run, k, memory.Shared)
	}
	for name, req := range reqs {
		r, err := env.Agent.Effect(ctx, policy.SinkMemory, req)
		if code(err) != broker.CodeBadRequest || r.Decision != nil {
			t.Errorf("%s: %v, want BAD_REQUEST before any decision", name, err)
		}
	}
	if _, err := env.Agent.Effect(ctx, policy.SinkMemory, broker.EffectRequest{Run: run, Action: "get",
		Person: json.RawMessage(`"bob"`), Params: json.RawMessage(`{"key":"k"}`)}); code(err) != broker.CodeForbiddenField {
		t.Errorf("person in the request: %v, want FORBIDDEN_FIELD", err)
	}
	if got := sinktest.Types(env.Events(t, run)); !slices.Equal(got, []journal.Type{journal.TypeRunOpen}) {
		t.Fatalf("journal = %v", got)
	}
}

// TestRedisDown stops redis-server mid-test: the effect fails as
// store-unavailable with advice for the operator, and work resumes once
// Redis is back on the same port.
func TestRedisDown(t *testing.T) {
	var stop, restart func()
	env := sinktest.Start(t, policy.ModeStrict, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
		var url string
		url, stop, restart = sinktest.StartRedis(t)
		st, err := memory.OpenRedis(sinktest.Ctx(t), memory.RedisConfig{URL: url + "?dial_timeout=1s&max_retries=1"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return []broker.Sink{memory.New(st, memory.Config{})}
	})
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	if _, err := env.Agent.Effect(ctx, policy.SinkMemory, put(run, "before", "", 1)); err != nil {
		t.Fatal(err)
	}

	stop()
	for _, req := range []broker.EffectRequest{put(run, "during", "", 2), keyReq("get", run, "before", ""), keyReq("delete", run, "before", "")} {
		t0 := time.Now()
		r, err := env.Agent.Effect(ctx, policy.SinkMemory, req)
		if code(err) != broker.CodeEffectFailed || r.Outcome == nil || r.Outcome.Status != "failed" || r.Outcome.Error != "store-unavailable" {
			t.Fatalf("%s with Redis down: %+v %v", req.Action, r, err)
		}
		if !r.Decision.Recorded || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Fatalf("decision %+v", r.Decision)
		}
		if msg := r.Error.Message; !strings.Contains(msg, "unavailable") || !strings.Contains(msg, "Operator") || strings.Contains(msg, "redis://") {
			t.Fatalf("message %q does not tell the operator what to do (or leaks the URL)", msg)
		}
		t.Logf("%s with Redis down took %v; the agent reads: %s", req.Action, time.Since(t0).Round(time.Millisecond), r.Error.Message)
		if d := time.Since(t0); d > 10*time.Second {
			t.Fatalf("%s took %v to fail", req.Action, d)
		}
	}

	restart()
	// A fresh Redis without persistence: what was kept before is gone, but
	// work resumes on the same client.
	r, err := env.Agent.Effect(ctx, policy.SinkMemory, put(run, "after", "", 3))
	if err != nil || r.Outcome.Status != "ok" {
		t.Fatalf("put after restart: %+v %v", r, err)
	}
	r, err = env.Agent.Effect(ctx, policy.SinkMemory, keyReq("get", run, "after", ""))
	if err != nil || string(reply(t, r).Value) != "3" {
		t.Fatalf("get after restart: %+v %v", r, err)
	}
	env.Verify(t)
}

func TestOpenRedisUnavailable(t *testing.T) {
	url, stop, _ := sinktest.StartRedis(t)
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := memory.OpenRedis(ctx, memory.RedisConfig{URL: url + "?max_retries=-1"})
	var se *memory.StoreError
	if !errors.Is(err, memory.ErrUnavailable) || !errors.As(err, &se) || se.ErrorType() != "store-unavailable" {
		t.Fatalf("OpenRedis with Redis down: %v", err)
	}
	if _, err := memory.OpenRedis(ctx, memory.RedisConfig{URL: "http://nope"}); err == nil {
		t.Fatal("a non-Redis URL was accepted")
	}
}

// BenchmarkRoundTrip measures an agent's memory put from request to reply
// over loopback NATS: decided, decision and attempt acknowledged by
// JetStream, stored, outcome recorded, answered.
func BenchmarkRoundTrip(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			env := sinktest.Start(b, policy.ModeStrict, "", be.sinks(b))
			run := env.Open(b, broker.OpenWork{Tenant: "acme", Person: "ada"})
			ctx := sinktest.Ctx(b)
			req := put(run, "bench", "", map[string]any{"lang": "nl", "n": 42})
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				r, err := env.Agent.Effect(ctx, policy.SinkMemory, req)
				lat = append(lat, time.Since(t0))
				if err != nil || r.Decision.Outcome != journal.OutcomeAllowed || !r.Decision.Recorded {
					b.Fatalf("%v %+v", err, r)
				}
			}
			b.StopTimer()
			if len(lat) > 0 {
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
			}
		})
	}
}
