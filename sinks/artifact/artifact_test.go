package artifact_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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
	"github.com/gatehouse/gatehouse/sinks/artifact"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

const secret = "s3cr3t-artifact-content-7f1e"

// backend is one of the two stores, opened on a test's Gatehouse.
type backend struct {
	name string
	open func(t testing.TB, env *sinktest.Env) artifact.Store
	// read looks an artifact up in the store itself, not through the sink.
	read func(t testing.TB, env *sinktest.Env, name string) ([]byte, bool)
}

var backends = []backend{
	{
		name: "object-store",
		open: func(t testing.TB, env *sinktest.Env) artifact.Store {
			s, err := artifact.OpenObjectStore(sinktest.Ctx(t), env.JS, artifact.ObjectStoreConfig{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		read: func(t testing.TB, env *sinktest.Env, name string) ([]byte, bool) {
			obs, err := env.JS.ObjectStore(sinktest.Ctx(t), subject.ArtifactBucket)
			if err != nil {
				t.Fatal(err)
			}
			b, err := obs.GetBytes(sinktest.Ctx(t), name)
			if errors.Is(err, jetstream.ErrObjectNotFound) {
				return nil, false
			}
			if err != nil {
				t.Fatal(err)
			}
			return b, true
		},
	},
	{
		name: "dir",
		open: func(t testing.TB, env *sinktest.Env) artifact.Store {
			s, err := artifact.OpenDir(filepath.Join(env.Dir, "artifacts"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		read: func(t testing.TB, env *sinktest.Env, name string) ([]byte, bool) {
			b, err := os.ReadFile(filepath.Join(env.Dir, "artifacts", filepath.FromSlash(name)))
			if errors.Is(err, os.ErrNotExist) {
				return nil, false
			}
			if err != nil {
				t.Fatal(err)
			}
			return b, true
		},
	},
	{
		name: "redis",
		open: func(t testing.TB, env *sinktest.Env) artifact.Store {
			url, _, _ := sinktest.StartRedis(t)
			s, err := artifact.OpenRedis(context.Background(), artifact.RedisConfig{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			redisURLs[env] = url
			return s
		},
		read: func(t testing.TB, env *sinktest.Env, name string) ([]byte, bool) {
			opt, _ := redis.ParseURL(redisURLs[env])
			rdb := redis.NewClient(opt)
			defer rdb.Close()
			b, err := rdb.HGet(context.Background(), "gatehouse:artifact:"+hex.EncodeToString([]byte(name)), "data").Bytes()
			if errors.Is(err, redis.Nil) {
				return nil, false
			}
			if err != nil {
				t.Fatal(err)
			}
			return b, true
		},
	},
}

// redisURLs remembers the Redis each test environment's store uses, so
// read can look into it directly.
var redisURLs = map[*sinktest.Env]string{}

func factory(be backend, cfg artifact.Config) sinktest.SinkFactory {
	return func(t testing.TB, env *sinktest.Env) []broker.Sink {
		return []broker.Sink{artifact.New(be.open(t, env), cfg)}
	}
}

func params(t testing.TB, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func publish(run, key string, content []byte) broker.EffectRequest {
	p, _ := json.Marshal(artifact.PublishParams{Key: key, Content: content, ContentType: "text/csv"})
	return broker.EffectRequest{Run: run, Action: artifact.ActionPublish, Origin: policy.OriginModel, Params: p}
}

func get(run, key string) broker.EffectRequest {
	p, _ := json.Marshal(artifact.GetParams{Key: key})
	return broker.EffectRequest{Run: run, Action: artifact.ActionGet, Params: p}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func TestConformance(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			content := []byte("id,total\n1," + secret + "\n")
			sinktest.Conformance(t, sinktest.Case{
				Sink:    policy.SinkArtifact,
				Request: func(run string) broker.EffectRequest { return publish(run, "run1/exports/q1.csv", content) },
				// The reference's own example rule.
				Deny:   `{sink: artifact, target: "*/exports/*"}`,
				Secret: secret,
				Sinks:  factory(be, artifact.Config{}),
				Happened: func(t testing.TB, env *sinktest.Env, run string, _ *broker.EffectReply) bool {
					got, ok := be.read(t, env, "acme/run1/exports/q1.csv")
					if ok && string(got) != string(content) {
						t.Fatalf("stored %q, want %q", got, content)
					}
					return ok
				},
			})
		})
	}
}

// events returns the decision and outcome data of each effect of run, in
// order.
func events(t testing.TB, env *sinktest.Env, run string) ([]journal.Decision, []journal.Result) {
	t.Helper()
	var ds []journal.Decision
	var rs []journal.Result
	for _, ev := range env.Events(t, run) {
		switch ev.Type {
		case journal.TypeDecision:
			var d journal.Decision
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		case journal.TypeOutcome:
			var r journal.Result
			if err := json.Unmarshal(ev.Data, &r); err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
	}
	return ds, rs
}

func TestRoundTrip(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			env := sinktest.Start(t, policy.ModeStrict, "", factory(be, artifact.Config{}))
			run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
			content := []byte("a,b\n" + secret + "\n")
			r, err := env.Agent.Effect(sinktest.Ctx(t), policy.SinkArtifact, publish(run, "reports/q1.csv", content))
			if err != nil {
				t.Fatal(err)
			}
			var pr artifact.PublishReply
			if err := json.Unmarshal(r.Result, &pr); err != nil || pr.Digest != sha(content) || pr.Size != int64(len(content)) {
				t.Fatalf("publish reply %s: %v", r.Result, err)
			}
			r, err = env.Agent.Effect(sinktest.Ctx(t), policy.SinkArtifact, get(run, "reports/q1.csv"))
			if err != nil {
				t.Fatal(err)
			}
			var gr artifact.GetReply
			if err := json.Unmarshal(r.Result, &gr); err != nil {
				t.Fatal(err)
			}
			if string(gr.Content) != string(content) || gr.ContentType != "text/csv" || gr.Digest != sha(content) {
				t.Fatalf("get reply = %+v", gr)
			}

			ds, rs := events(t, env, run)
			if len(ds) != 2 || len(rs) != 2 {
				t.Fatalf("journal holds %d decisions and %d outcomes, want 2 and 2", len(ds), len(rs))
			}
			for i, action := range []string{"publish", "get"} {
				if d := ds[i]; d.Action != action || d.Target != "reports/q1.csv" || d.Outcome != journal.OutcomeAllowed {
					t.Fatalf("decision %d = %+v", i, d)
				}
				if o := rs[i]; o.Status != "ok" || o.Size != int64(len(content)) || o.Digest != sha(content) ||
					o.Detail["key"] != "reports/q1.csv" || o.Detail["content_type"] != "text/csv" {
					t.Fatalf("outcome %d = %+v", i, o)
				}
			}
			if ds[0].Digest != sha(content) || ds[0].Size != int64(len(content)) || ds[1].Digest != "" {
				t.Fatalf("decisions record %q/%d and %q", ds[0].Digest, ds[0].Size, ds[1].Digest)
			}
			env.Verify(t)
			env.NoContent(t, secret)
		})
	}
}

// TestGetIsARead: a mandate handing over only reads lets get through and
// refuses publish (outside-mandate) in both modes, before it happens.
func TestGetIsARead(t *testing.T) {
	be := backends[0]
	env := sinktest.Start(t, policy.ModeReport, "", factory(be, artifact.Config{}))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada", Mandate: &policy.Mandate{Effects: []policy.EffectClass{policy.EffectRead}}})
	r, err := env.Agent.Effect(sinktest.Ctx(t), policy.SinkArtifact, publish(run, "x.csv", []byte("1")))
	if err != nil {
		t.Fatal(err)
	}
	if r.Decision.Outcome != journal.OutcomeRefused || r.Decision.Refusal != policy.RefuseOutsideMandate {
		t.Fatalf("publish under a read-only mandate: %+v", r.Decision)
	}
	if _, ok := be.read(t, env, "acme/x.csv"); ok {
		t.Fatal("a refused publish was stored")
	}
	r, err = env.Agent.Effect(sinktest.Ctx(t), policy.SinkArtifact, get(run, "x.csv"))
	if r == nil || r.Decision.Outcome != journal.OutcomeAllowed || r.Outcome == nil || r.Outcome.Error != "not-found" {
		t.Fatalf("get under a read-only mandate: %+v, %v", r, err)
	}
	var eb *broker.ErrorBody
	if !errors.As(err, &eb) || eb.Code != broker.CodeEffectFailed {
		t.Fatalf("get of a missing artifact: %v, want EFFECT_FAILED", err)
	}
	env.Verify(t)
}

func TestTenantIsolation(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			env := sinktest.Start(t, policy.ModeStrict, "", factory(be, artifact.Config{}))
			ctx := sinktest.Ctx(t)
			acme := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
			acmeBob := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "bob"})
			globex := env.Open(t, broker.OpenWork{Tenant: "globex", Person: "ada"})
			// A tenant named like a path trick gets its own hashed folder.
			odd := env.Open(t, broker.OpenWork{Tenant: "..", Person: "eve"})

			if _, err := env.Agent.Effect(ctx, policy.SinkArtifact, publish(acme, "plans/2027.txt", []byte("acme plans"))); err != nil {
				t.Fatal(err)
			}
			for _, run := range []string{globex, odd} {
				r, err := env.Agent.Effect(ctx, policy.SinkArtifact, get(run, "plans/2027.txt"))
				if err == nil || r.Outcome == nil || r.Outcome.Error != "not-found" {
					t.Fatalf("another tenant read acme's artifact: %+v %v", r, err)
				}
			}
			// Overwriting the same key elsewhere leaves acme's untouched.
			for _, run := range []string{globex, odd} {
				if _, err := env.Agent.Effect(ctx, policy.SinkArtifact, publish(run, "plans/2027.txt", []byte("not acme"))); err != nil {
					t.Fatal(err)
				}
			}
			if b, _ := be.read(t, env, "acme/plans/2027.txt"); string(b) != "acme plans" {
				t.Fatalf("acme's artifact is now %q", b)
			}
			if b, _ := be.read(t, env, artifact.TenantDir("..")+"/plans/2027.txt"); string(b) != "not acme" {
				t.Fatalf("tenant \"..\" artifact: %q", b)
			}
			// People of one tenant share its artifacts.
			r, err := env.Agent.Effect(ctx, policy.SinkArtifact, get(acmeBob, "plans/2027.txt"))
			if err != nil {
				t.Fatal(err)
			}
			var gr artifact.GetReply
			_ = json.Unmarshal(r.Result, &gr)
			if string(gr.Content) != "acme plans" {
				t.Fatalf("bob of acme reads %q", gr.Content)
			}
			env.Verify(t)
		})
	}
}

// TestAgentCannotChooseTenant: params are decoded strictly, and the request
// itself refuses whom-for fields.
func TestAgentCannotChooseTenant(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", factory(backends[0], artifact.Config{}))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	for _, p := range []string{
		`{"key":"a.txt","content":"eA==","tenant":"globex"}`,
		`{"key":"a.txt","content":"eA==","person":"bob"}`,
		`{"key":"a.txt","content":"eA==","bucket":"other"}`,
		`{"key":"a.txt","content":"eA==","name":"globex/a.txt"}`,
	} {
		_, err := env.Agent.Effect(ctx, policy.SinkArtifact, broker.EffectRequest{Run: run, Action: "publish", Params: json.RawMessage(p)})
		if code(err) != broker.CodeBadRequest {
			t.Errorf("%s: %v, want BAD_REQUEST", p, err)
		}
	}
	_, err := env.Agent.Effect(ctx, policy.SinkArtifact, broker.EffectRequest{Run: run, Action: "publish",
		Tenant: json.RawMessage(`"globex"`), Params: json.RawMessage(`{"key":"a.txt","content":"eA=="}`)})
	if code(err) != broker.CodeForbiddenField {
		t.Errorf("tenant in the request: %v, want FORBIDDEN_FIELD", err)
	}
}

func code(err error) broker.Code {
	var eb *broker.ErrorBody
	if errors.As(err, &eb) {
		return eb.Code
	}
	return ""
}

var badKeys = []string{
	"", ".", "..", "../x", "a/../../b", "a/..", "/etc/passwd", "/abs", "a//b", "a/", "./a", "a/./b",
	"a\\..\\b", "a b", "a\x00b", "ü.txt", "a:b", "~tmp-1", "a/~b", "..hidden", "x..y",
	strings.Repeat("k", artifact.MaxKeyBytes+1),
}

func TestKeyTraversalRefused(t *testing.T) {
	be := backends[1] // the folder, where a traversal would land on the host
	env := sinktest.Start(t, policy.ModeStrict, "", factory(be, artifact.Config{}))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	for _, k := range badKeys {
		for _, req := range []broker.EffectRequest{publish(run, k, []byte("x")), get(run, k)} {
			r, err := env.Agent.Effect(ctx, policy.SinkArtifact, req)
			if code(err) != broker.CodeBadRequest || r.Decision != nil {
				t.Errorf("%s %q: %v, want BAD_REQUEST before any decision", req.Action, k, err)
			}
		}
	}
	// Nothing was written anywhere: not in the store, not beside it.
	var files []string
	_ = filepath.Walk(env.Dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && !strings.HasPrefix(p, filepath.Join(env.Dir, "nats")) && !strings.HasPrefix(p, env.JournalDir) {
			files = append(files, p)
		}
		return nil
	})
	if len(files) > 0 {
		t.Fatalf("files appeared: %v", files)
	}
	// Every refused request was refused before a decision: only run.open.
	if got := sinktest.Types(env.Events(t, run)); !slices.Equal(got, []journal.Type{journal.TypeRunOpen}) {
		t.Fatalf("journal = %v", got)
	}
}

func TestSizeLimit(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", factory(backends[0], artifact.Config{MaxBytes: 1024}))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	if _, err := env.Agent.Effect(ctx, policy.SinkArtifact, publish(run, "big.bin", make([]byte, 1025))); code(err) != broker.CodeBadRequest {
		t.Fatalf("1025 bytes over a 1024 limit: %v", err)
	}
	if _, err := env.Agent.Effect(ctx, policy.SinkArtifact, publish(run, "ok.bin", make([]byte, 1024))); err != nil {
		t.Fatalf("1024 bytes: %v", err)
	}
	if _, ok := backends[0].read(t, env, "acme/big.bin"); ok {
		t.Fatal("the oversized artifact was stored")
	}
}

// TestGetTooLarge: an artifact larger than a reply can carry fails with
// too-large rather than an answer NATS cannot deliver.
func TestGetTooLarge(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			env := sinktest.Start(t, policy.ModeStrict, "", factory(be, artifact.Config{MaxReadBytes: 100}))
			run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
			ctx := sinktest.Ctx(t)
			if _, err := env.Agent.Effect(ctx, policy.SinkArtifact, publish(run, "b.bin", make([]byte, 101))); err != nil {
				t.Fatal(err)
			}
			r, err := env.Agent.Effect(ctx, policy.SinkArtifact, get(run, "b.bin"))
			if code(err) != broker.CodeEffectFailed || r.Outcome.Error != "too-large" {
				t.Fatalf("get: %+v %v", r, err)
			}
		})
	}
}

// TestDirStoreConfined: a symbolic link planted in the folder, pointing
// outside it, is never written through; files are 0640.
func TestDirStoreConfined(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	s, err := artifact.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := sinktest.Ctx(t)
	if err := os.MkdirAll(filepath.Join(dir, "acme"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "acme", "evil")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "acme/evil/x.txt", "text/plain", []byte("x")); err == nil {
		t.Fatal("wrote through a symbolic link leading outside the folder")
	}
	if err := s.Put(ctx, "acme/ok.txt", "text/plain", []byte("x")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 0 {
		t.Fatalf("outside folder holds %v", entries)
	}
	fi, err := os.Stat(filepath.Join(dir, "acme", "ok.txt"))
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("artifact file: %v %v, want mode 0640", fi.Mode(), err)
	}
	if _, _, err := s.Get(ctx, "acme/evil/x.txt", 1<<20); err == nil {
		t.Fatal("read through a symbolic link leading outside the folder")
	}
	data, ct, err := s.Get(ctx, "acme/ok.txt", 1<<20)
	if err != nil || string(data) != "x" || ct != "text/plain" {
		t.Fatalf("get: %q %q %v", data, ct, err)
	}
	if _, _, err := s.Get(ctx, "acme/missing", 1<<20); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

// BenchmarkRoundTrip measures an agent's 1 KiB publish from request to
// reply over loopback NATS: decided, decision and attempt acknowledged by
// JetStream, stored in the Object Store, outcome recorded, answered.
func BenchmarkRoundTrip(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			env := sinktest.Start(b, policy.ModeStrict, "", factory(be, artifact.Config{}))
			run := env.Open(b, broker.OpenWork{Tenant: "acme", Person: "ada"})
			ctx := sinktest.Ctx(b)
			req := publish(run, "bench/1k.bin", make([]byte, 1024))
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				r, err := env.Agent.Effect(ctx, policy.SinkArtifact, req)
				lat = append(lat, time.Since(t0))
				if err != nil || r.Decision.Outcome != journal.OutcomeAllowed || !r.Decision.Recorded {
					b.Fatalf("%v %+v", err, r)
				}
			}
			b.StopTimer()
			reportPercentiles(b, lat)
		})
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
}
