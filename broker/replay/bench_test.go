package replay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/broker/content/contenttest"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/replay"
	"github.com/gatehouse/gatehouse/policy"
)

// largeRun writes, through the real journal writer and content store, one
// run of n decided output effects (every fourth refused by no-leaks), as
// the broker records them, and returns the journal dir, store and run.
func largeRun(b *testing.B, n int) (string, *content.Store, string) {
	b.Helper()
	dir := b.TempDir()
	jdir := filepath.Join(dir, "journal")
	w, err := journal.Open(jdir, journal.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	store, err := content.Open(filepath.Join(dir, "content"), content.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	capt, _ := content.NewCapturer(store, content.ModeFull)
	pol, err := policy.Parse("rules.yaml", []byte(contenttest.Rules))
	if err != nil {
		b.Fatal(err)
	}
	capt.AddPolicy("rules.yaml", []byte(contenttest.Rules))
	run := "r_bench"
	who := policy.Principal{Tenant: "acme", Person: "ada"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := func(i int, typ journal.Type, effect string, data any) journal.Event {
		raw, _ := json.Marshal(data)
		return journal.Event{V: 1, ID: fmt.Sprintf("ev_%d_%s", i, typ), Run: run, Type: typ, Time: now, Effect: effect, Data: raw}
	}
	batch := []journal.Event{ev(0, journal.TypeRunOpen, "", journal.RunOpen{ActingFor: who, Scopes: []string{"reports"}})}
	auth := policy.Authority{For: who, Scopes: []string{"reports"}}
	for i := range n {
		target := "ok"
		if i%4 == 3 {
			target = "leak-" + fmt.Sprint(i)
		}
		e := policy.Effect{Sink: policy.SinkOutput, Action: "deliver", Origin: policy.OriginDirect, Target: target}
		d := pol.Decide(policy.Input{Mode: policy.ModeReport, Authority: auth, Effect: e, Now: now})
		effect := fmt.Sprintf("e_%d", i)
		digest, err := capt.Capture(context.Background(), &content.Request{Run: run, Effect: effect, ActingFor: who, Sink: e.Sink, Action: e.Action,
			Params: json.RawMessage(`{"status":"` + target + `","result":{"rows":3}}`), Described: content.FromEffect(e),
			PolicyDigest: pol.Digest(), Mode: policy.ModeReport, DecidedAt: now})
		if err != nil {
			b.Fatal(err)
		}
		out := journal.OutcomeAllowed
		if d.Verdict != policy.VerdictAllow {
			out = journal.OutcomeRefused
		}
		batch = append(batch, ev(i+1, journal.TypeDecision, effect, journal.Decision{ActingFor: who, ScopesChecked: []string{},
			PolicyDigest: pol.Digest(), Mode: d.Mode, Sink: e.Sink, Action: e.Action, Origin: e.Origin, Target: e.Target,
			RequestDigest: digest, Outcome: out, Refusal: d.Refusal, Rule: d.Rule, Enforced: d.Enforced, Reasons: d.Reasons}))
		if len(batch) >= 1000 {
			if _, err := w.Append(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := w.Append(batch); err != nil {
		b.Fatal(err)
	}
	return jdir, store, run
}

// BenchmarkReplay replays a run of 10,000 decisions, next to the floor:
// reading and decoding the same run's decisions without replaying them.
func BenchmarkReplay(b *testing.B) {
	const n = 10000
	jdir, store, run := largeRun(b, n)
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			r, err := replay.Run(jdir, run, replay.Options{Content: store})
			if err != nil || r.Status != replay.StatusReproduced || r.Identical != n {
				b.Fatalf("%v %v", r, err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "decisions/s")
	})
	b.Run("read-only", func(b *testing.B) {
		for b.Loop() {
			f, _ := os.Open(filepath.Join(jdir, "runs", run+".jsonl"))
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, journal.MaxLineBytes)
			for sc.Scan() {
				ev, _ := journal.ParseLine(sc.Bytes())
				var d journal.Decision
				_ = json.Unmarshal(ev.Data, &d)
			}
			f.Close()
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "decisions/s")
	})
}

// BenchmarkCapture is the capture's cost per effect in each mode: full
// with each blob fsynced (Options.Sync), full as serve runs it, digests
// only, and off (nothing), in one run.
func BenchmarkCapture(b *testing.B) {
	req := &content.Request{Run: "r_bench", ActingFor: policy.Principal{Tenant: "acme", Person: "ada"}, Sink: policy.SinkOutput,
		Action: "deliver", Params: json.RawMessage(`{"status":"ok","result":{"rows":3,"note":"a typical small output"}}`),
		Described:    content.FromEffect(policy.Effect{Sink: policy.SinkOutput, Action: "deliver", Target: "ok"}),
		PolicyDigest: content.DigestOf(nil), Mode: policy.ModeStrict, DecidedAt: time.Now()}
	for _, c := range []struct {
		name string
		mode content.Mode
		sync bool
	}{{"full-fsync", content.ModeFull, true}, {"full", content.ModeFull, false}, {"digests", content.ModeDigests, false}, {"off", content.ModeOff, false}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := content.Open(b.TempDir(), content.Options{Sync: c.sync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			capt, _ := content.NewCapturer(s, c.mode)
			i := 0
			for b.Loop() {
				i++
				req.Effect = fmt.Sprintf("e_%d", i) // each effect's blob is its own
				if _, err := capt.Capture(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
