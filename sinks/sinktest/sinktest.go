// Package sinktest runs sinks the way production does, for tests: a real
// embedded NATS with JetStream, a broker serving the sinks over it, the
// journal writer consuming into a temporary journal, and app and agent
// clients with their own credentials: the shared ones (App, Agent) and
// named agents registered on the fly (NamedAgent). Conformance is the one suite every
// sink runs: allowed, refused in report mode (recorded, goes through) and
// in strict mode (refused before it happens), with the journal verified
// and searched for the effect's content after each.
package sinktest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// Env is one running Gatehouse for a test. Everything is stopped by
// t.Cleanup.
type Env struct {
	Dir        string // the test's folder
	JournalDir string
	NS         *embedded.Server
	NC         *nats.Conn // the broker's connection
	Replies    *nats.Conn // the connection the broker answers on
	JS         jetstream.JetStream
	Broker     *broker.Broker
	App        *client.Client // the shared app credential
	Agent      *client.Client // the shared agent credential: runs opened without an agent
	// Identities is the register in force; NamedAgent adds to it.
	Identities *identity.Holder

	mu *sync.Mutex // serialises NamedAgent
}

// SinkFactory builds the sinks under test on env's NATS. It runs before
// the broker starts.
type SinkFactory func(t testing.TB, env *Env) []broker.Sink

// Start runs Gatehouse in mode with the rules file text (none if "").
func Start(t testing.TB, mode policy.Mode, rules string, sinks SinkFactory) *Env {
	t.Helper()
	dir := t.TempDir()
	env := &Env{Dir: dir, JournalDir: filepath.Join(dir, "journal")}
	ns, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, "nats"), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	env.NS = ns
	if env.NC, err = ns.Connect(embedded.RoleBroker); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.NC.Close)
	if env.Replies, err = ns.Connect(embedded.RoleReplies); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Replies.Close)
	env.Identities, env.mu = identity.NewHolder(&identity.Registry{}), &sync.Mutex{}
	env.JS, _ = jetstream.New(env.NC)
	ctx := context.Background()
	if _, err := journal.EnsureStream(ctx, env.JS, 1); err != nil {
		t.Fatal(err)
	}
	runs, err := broker.OpenKVRuns(ctx, env.JS, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runs.Stop)
	pol := policy.Default()
	if rules != "" {
		path := filepath.Join(dir, "rules.yaml")
		if err := os.WriteFile(path, []byte(rules), 0o600); err != nil {
			t.Fatal(err)
		}
		if pol, err = policy.Load(path); err != nil {
			t.Fatal(err)
		}
	}
	var ss []broker.Sink
	if sinks != nil {
		ss = sinks(t, env)
	}
	if env.Broker, err = broker.New(broker.Config{Mode: mode, Identities: env.Identities}, runs, broker.NewRecorder(env.JS, 5*time.Second), pol, ss...); err != nil {
		t.Fatal(err)
	}
	svc, err := broker.Serve(env.Replies, env.Broker, broker.ServiceConfig{})
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

// NamedAgent registers agent name with the declared origin ("" model),
// gives the embedded NATS its credential (a reload, as serve does) and
// returns a client connected with it. Runs it acts on must be opened for
// it (OpenWork.Agent).
func (e *Env) NamedAgent(t testing.TB, name string, origin policy.Origin) *client.Client {
	t.Helper()
	e.mu.Lock()
	reg := *e.Identities.Load()
	reg.Agents = slices.Clone(reg.Agents)
	if _, ok := reg.Agent(name); !ok {
		if err := reg.AddAgent(identity.Agent{Name: name, Origin: origin, Added: time.Now().UTC()}); err != nil {
			e.mu.Unlock()
			t.Fatal(err)
		}
		if err := e.NS.Reload(&reg); err != nil {
			e.mu.Unlock()
			t.Fatal(err)
		}
		e.Identities.Store(&reg)
	}
	e.mu.Unlock()
	c, err := client.DialAgent(e.NS.URL, name, embedded.AgentCredsPath(filepath.Join(e.Dir, "nats"), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// ProposeAs proposes req in process as Gatehouse itself with the given
// origin (broker.Internal), as a sink does for sandboxed code: for tests of
// how a declared origin is decided, on runs opened without an agent.
func (e *Env) ProposeAs(origin policy.Origin, sink policy.Sink, req broker.EffectRequest) *broker.EffectReply {
	b, err := json.Marshal(req)
	if err != nil {
		return &broker.EffectReply{Error: broker.NewErrorBody(err)}
	}
	return e.Broker.Propose(context.Background(), broker.Internal(origin), sink, b)
}

// Effect proposes req as an agent would, with the origin it names: none or
// model over NATS with the shared agent credential (the origin Gatehouse
// establishes for it); any other origin, which Gatehouse establishes only
// for a deployment-declared agent or a sink, in process with that origin
// (ProposeAs). Like client.Effect, err is the reply's error, if any.
func (e *Env) Effect(t testing.TB, sink policy.Sink, req broker.EffectRequest) (*broker.EffectReply, error) {
	t.Helper()
	if req.Origin == "" || req.Origin == policy.OriginModel {
		return e.Agent.Effect(Ctx(t), sink, req)
	}
	r := e.ProposeAs(req.Origin, sink, req)
	if r.Error != nil {
		return r, r.Error
	}
	return r, nil
}

// Ctx returns a context that ends with the test, bounded to a minute.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Open opens work for w and returns the run id.
func (e *Env) Open(t testing.TB, w broker.OpenWork) string {
	t.Helper()
	run, err := e.App.OpenWork(Ctx(t), w)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// Drain waits until the journal writer has written everything recorded
// so far: its consumer's ack floor has reached the journal stream's last
// sequence as it was when Drain was called (a pending count alone can lag
// the stream by a moment).
func (e *Env) Drain(t testing.TB) {
	t.Helper()
	ctx := Ctx(t)
	if err := e.Broker.Flush(ctx); err != nil { // outcomes recorded after their replies
		t.Fatal(err)
	}
	for {
		// Everything the stream holds now acknowledged by the writer (its
		// ack floor at the stream's last sequence, nothing pending).
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

// Verify drains the journal, verifies it and fails the test on any finding.
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

// Events returns run's events from the journal on disk, after a drain.
func (e *Env) Events(t testing.TB, run string) []journal.Event {
	t.Helper()
	e.Drain(t)
	b, err := os.ReadFile(filepath.Join(e.JournalDir, "runs", run+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var evs []journal.Event
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		ev, err := journal.ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// Types lists the events' types.
func Types(evs []journal.Event) []journal.Type {
	out := make([]journal.Type, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// NoContent fails the test if any journal file holds secret.
func (e *Env) NoContent(t testing.TB, secret string) {
	t.Helper()
	e.Drain(t)
	_ = filepath.Walk(e.JournalDir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("%s holds the effect's content %q: the journal records sizes and digests, never content", path, secret)
		}
		return nil
	})
}
