// Package contenttest runs a real Gatehouse for tests of what the journal
// keeps: an embedded NATS with JetStream, a broker serving the output sink
// with a content capturer, the journal writer on a temporary journal, and
// app and agent clients. Everything stops with the test.
package contenttest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
)

// Env is one running Gatehouse.
type Env struct {
	Dir        string // the data dir
	JournalDir string // Dir/journal
	ContentDir string // Dir/content
	Store      *content.Store
	Capturer   *content.Capturer
	Broker     *broker.Broker
	JS         jetstream.JetStream
	App        *client.Client
	Agent      *client.Client
	Approvals  *approval.Service // with Config.Approvals
}

// Rules is a rules file with one deny rule, no-leaks, for outputs whose
// status starts with "leak".
const Rules = `
effects:
  - name: no-leaks
    decision: deny
    match: {sink: output, target: "leak*"}
`

// Start runs Gatehouse in mode, capturing in capture mode, under the rules
// file text (built-in rules if ""). now is the content store's clock (nil
// is time.Now).
func Start(t testing.TB, mode policy.Mode, capture content.Mode, rules string, now func() time.Time) *Env {
	t.Helper()
	return StartWith(t, Config{Mode: mode, Capture: capture, Rules: rules, Now: now})
}

// Config configures StartWith. The zero value runs report mode with full
// capture and the built-in rules, serving the output sink.
type Config struct {
	Mode    policy.Mode
	Capture content.Mode
	Rules   string           // policy rules file text ("" built-in rules)
	Now     func() time.Time // the content store's clock
	// Sinks builds more sinks on env's NATS, after the content store is
	// open (env.Capturer is set) and before the broker starts.
	Sinks func(t testing.TB, env *Env) []broker.Sink
	// Approvals gives the broker an approval service (env.Approvals) on a
	// JetStream KV bucket.
	Approvals bool
}

// StartWith runs Gatehouse as cfg says.
func StartWith(t testing.TB, cfg Config) *Env {
	t.Helper()
	mode, capture, rules, now := cfg.Mode, cfg.Capture, cfg.Rules, cfg.Now
	if mode == "" {
		mode = policy.ModeReport
	}
	if capture == "" {
		capture = content.ModeFull
	}
	dir := t.TempDir()
	env := &Env{Dir: dir, JournalDir: filepath.Join(dir, "journal"), ContentDir: filepath.Join(dir, "content")}
	ns, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, "nats"), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := ns.Connect(embedded.RoleBroker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	env.JS, _ = jetstream.New(nc)
	ctx := context.Background()
	if _, err := journal.EnsureStream(ctx, env.JS, 1); err != nil {
		t.Fatal(err)
	}
	runs, err := broker.OpenKVRuns(ctx, env.JS, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runs.Stop)
	if env.Store, err = content.Open(env.ContentDir, content.Options{Now: now}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Store.Close() })
	if env.Capturer, err = content.NewCapturer(env.Store, capture); err != nil {
		t.Fatal(err)
	}
	pol := policy.Default()
	if rules != "" {
		if pol, err = policy.Parse("rules.yaml", []byte(rules)); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Capturer.AddPolicy("rules.yaml", []byte(rules)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := output.New(ctx, env.JS, 1)
	if err != nil {
		t.Fatal(err)
	}
	var sink broker.ContentSink = env.Capturer
	if capture == content.ModeOff {
		sink = nil
	}
	sinks := []broker.Sink{out}
	if cfg.Sinks != nil {
		sinks = append(sinks, cfg.Sinks(t, env)...)
	}
	rec := broker.NewRecorder(env.JS, 5*time.Second)
	bcfg := broker.Config{Mode: mode, Content: sink}
	if cfg.Approvals {
		st, err := approval.NewKVStore(ctx, env.JS, subject.ApprovalsBucket, 1)
		if err != nil {
			t.Fatal(err)
		}
		env.Approvals = approval.New(st, rec, approval.Config{})
		bcfg.Approvals = env.Approvals
	}
	if env.Broker, err = broker.New(bcfg, runs, rec, pol, sinks...); err != nil {
		t.Fatal(err)
	}
	rc, err := ns.Connect(embedded.RoleReplies)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	svc, err := broker.Serve(rc, env.Broker, broker.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	w, err := journal.Open(env.JournalDir, journal.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = journal.Consume(wctx, env.JS, w, journal.ConsumeOptions{}) }()
	t.Cleanup(func() { stop(); <-done; _ = w.Close() })

	creds := func(r embedded.Role) string { return embedded.CredsPath(filepath.Join(dir, "nats"), r) }
	if env.App, err = client.Dial(ns.URL, client.App, creds(embedded.RoleApp)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.App.Close)
	if env.Agent, err = client.Dial(ns.URL, client.Agent, creds(embedded.RoleAgent)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Agent.Close)
	return env
}

// Ctx is a context bounded to a minute, ending with the test.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Open opens work for tenant/person and returns the run.
func (e *Env) Open(t testing.TB, tenant, person string, scopes ...string) string {
	t.Helper()
	run, err := e.App.OpenWork(Ctx(t), broker.OpenWork{Tenant: tenant, Person: person, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// Output proposes an output effect with status and result and returns
// the reply.
func (e *Env) Output(t testing.TB, run, status string, result any) *broker.EffectReply {
	t.Helper()
	r, err := e.Agent.Output(Ctx(t), run, status, result)
	if err != nil {
		t.Fatal(err)
	}
	if r.Error != nil {
		t.Fatalf("output %s: %+v", status, r.Error)
	}
	return r
}

// Close closes work.
func (e *Env) Close(t testing.TB, run string) {
	t.Helper()
	if err := e.App.CloseWork(Ctx(t), run, "done"); err != nil {
		t.Fatal(err)
	}
}

// Drain waits until the journal writer has written everything recorded.
func (e *Env) Drain(t testing.TB) {
	t.Helper()
	ctx := Ctx(t)
	if err := e.Broker.Flush(ctx); err != nil { // outcomes recorded after their replies
		t.Fatal(err)
	}
	for {
		// Everything the stream holds now acknowledged by the writer, read
		// as gatehouse status reads it: a consumer's pending counts alone
		// can read 0 before it has taken in the last messages, and a run
		// then reads as missing (TestAgentsChangeReplays, once, under load).
		if l, err := broker.ReadJournalLag(ctx, e.JS); err == nil && l.Lag == 0 && l.Pending == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the journal writer did not catch up")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Verify drains and verifies the journal, failing the test on a finding.
func (e *Env) Verify(t testing.TB) *journal.Report {
	t.Helper()
	e.Drain(t)
	rep, err := journal.Verify(e.JournalDir, journal.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("journal does not verify: %v", rep.Findings)
	}
	return rep
}

// EditBlob changes in place, as someone holding the content folder dir
// could, every kept copy of blob d: old replaced by new, which must be as
// long. It returns what puts the bytes back. It fails the test when no
// copy holds old.
func EditBlob(t testing.TB, dir, d, old, new string) (restore func()) {
	t.Helper()
	if len(old) != len(new) {
		t.Fatalf("EditBlob: %q and %q differ in length", old, new)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	var undo []func()
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(b); {
			nl := bytes.IndexByte(b[off:], '\n')
			if nl < 0 {
				break
			}
			var h struct {
				Op     string `json:"op"`
				Len    int    `json:"len"`
				Digest string `json:"digest"`
			}
			if json.Unmarshal(b[off:off+nl], &h) != nil {
				break
			}
			start := off + nl + 1
			off = start
			if h.Op != "put" {
				continue
			}
			off += h.Len + 1
			if h.Digest != d {
				continue
			}
			blob := b[start : start+h.Len]
			i := bytes.Index(blob, []byte(old))
			if i < 0 {
				continue
			}
			f, err := os.OpenFile(seg, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte(new), int64(start+i)); err != nil {
				t.Fatal(err)
			}
			f.Close()
			at := int64(start + i)
			undo = append(undo, func() {
				f, err := os.OpenFile(seg, os.O_WRONLY, 0)
				if err == nil {
					_, _ = f.WriteAt([]byte(old), at)
					f.Close()
				}
			})
		}
	}
	if len(undo) == 0 {
		t.Fatalf("EditBlob: no copy of %s holds %q", d, old)
	}
	return func() {
		for _, u := range undo {
			u()
		}
	}
}
