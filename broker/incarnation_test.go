package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
	"github.com/gatehouse/gatehouse/sinks/peer"
)

// reuseWorld is a strict broker with the output and peer sinks on an
// embedded NATS whose users come from an identity register file, edited
// as `gatehouse agents` edits it (the real clock) and put in force as
// serve does on a change: the NATS server's users, then the broker's
// holder. The broker's clock (and its peer sink's) is the real one moved
// by skew, as on another machine.
type reuseWorld struct {
	dir, nats string
	ns        *embedded.Server
	js        jetstream.JetStream
	holder    *identity.Holder
	b         *broker.Broker
	app       *client.Client
}

func startReuseWorld(t *testing.T, skew time.Duration) *reuseWorld {
	t.Helper()
	w := &reuseWorld{dir: t.TempDir()}
	w.nats = filepath.Join(w.dir, "nats")
	reg := &identity.Registry{}
	for _, name := range []string{"alice", "bob"} {
		if err := reg.AddAgent(identity.Agent{Name: name, Added: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Save(identity.Path(w.dir)); err != nil {
		t.Fatal(err)
	}
	ns, err := embedded.Start(embedded.Config{Dir: w.nats, Port: -1, Identities: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	w.ns, w.holder = ns, identity.NewHolder(reg)
	bnc, err := ns.Connect(embedded.RoleBroker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bnc.Close)
	rnc, err := ns.Connect(embedded.RoleReplies)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rnc.Close)
	w.js, _ = jetstream.New(bnc)
	ctx := context.Background()
	if _, err := journal.EnsureStream(ctx, w.js, 1); err != nil {
		t.Fatal(err)
	}
	runs, err := broker.OpenKVRuns(ctx, w.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runs.Stop)
	out, err := output.New(ctx, w.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := peer.New(ctx, w.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Now().Add(skew) }
	ps.SetClock(now)
	w.b, err = broker.New(broker.Config{Mode: policy.ModeStrict, Now: now, Identities: w.holder}, runs,
		broker.NewRecorder(w.js, 5*time.Second), policyWithCards(t, w.dir, "bob", "alice"), out, ps)
	if err != nil {
		t.Fatal(err)
	}
	ps.Bind(w.b)
	svc, err := broker.Serve(rnc, w.b, broker.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	if w.app, err = client.Dial(ns.URL, client.App, embedded.CredsPath(w.nats, embedded.RoleApp)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.app.Close)
	return w
}

// edit changes the register file as the CLI does (its seed files too) and
// puts it in force as serve does.
func (w *reuseWorld) edit(t *testing.T, f func(*identity.Registry) error) {
	t.Helper()
	reg, err := identity.Load(identity.Path(w.dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := f(reg); err != nil {
		t.Fatal(err)
	}
	if err := reg.Save(identity.Path(w.dir)); err != nil {
		t.Fatal(err)
	}
	if reg, err = identity.Load(identity.Path(w.dir)); err != nil {
		t.Fatal(err)
	}
	if err := w.ns.Reload(reg); err != nil {
		t.Fatal(err)
	}
	w.holder.Store(reg)
}

func (w *reuseWorld) agent(t *testing.T, name string) *client.Client {
	t.Helper()
	c, err := client.DialAgent(w.ns.URL, name, embedded.AgentCredsPath(w.nats, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func (w *reuseWorld) open(t *testing.T, agent string) string {
	t.Helper()
	run, err := w.app.OpenWork(ctxT(t), broker.OpenWork{Tenant: "acme", Person: "ada", Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// stored is the run record in the runs bucket.
func (w *reuseWorld) stored(t *testing.T, run string) broker.Run {
	t.Helper()
	kv, err := w.js.KeyValue(ctxT(t), subject.RunsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctxT(t), run)
	if err != nil {
		t.Fatal(err)
	}
	var r broker.Run
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// count is the number of messages the stream holds on subj.
func (w *reuseWorld) count(t *testing.T, stream, subj string) uint64 {
	t.Helper()
	s, err := w.js.Stream(ctxT(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctxT(t), jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subj]
}

// lastDecision is the last policy.decision the journal stream holds for
// run.
func (w *reuseWorld) lastDecision(t *testing.T, run string) journal.Decision {
	t.Helper()
	var d journal.Decision
	for _, ev := range (&world{js: w.js, b: w.b}).journalEvents(t, run) {
		if ev.Type == journal.TypeDecision {
			d = journal.Decision{}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d
}

// codeOf is the code of an error a client returned (the reply's).
func codeOf(err error) broker.Code {
	var eb *broker.ErrorBody
	if errors.As(err, &eb) {
		return eb.Code
	}
	return ""
}

// next asks once for agent's next peer message, waiting up to a second
// for one: a message just stored may not be handed to a fetch that does
// not wait (it failed so under -race).
func next(t *testing.T, c *client.Client, agent string) *broker.PeerNextReply {
	t.Helper()
	msg, err := c.Conn().Request(subject.PeerNext(agent), []byte(`{"wait_ms":1000}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var r broker.PeerNextReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		t.Fatalf("%s: %v", msg.Data, err)
	}
	return &r
}

// TestNameReuseNeedsNoClock: bob is removed and a new agent registered
// as bob, the register written with the real clock, the broker's clock a
// year behind, on time, or a year ahead. Whatever the clocks say, the new
// bob cannot act in the old bob's runs or sub-runs (NOT_RUN_AGENT,
// run-of-another-agent, recorded in that run, nothing delivered), never
// reads what was sent or delegated to the old bob, and works in runs
// opened, delegated and messaged to it since. The time-based check this
// replaced refused the new bob its own runs with the broker behind, and
// handed it the old bob's with the broker ahead.
func TestNameReuseNeedsNoClock(t *testing.T) {
	for name, skew := range map[string]time.Duration{"behind": -365 * 24 * time.Hour, "on-time": 0, "ahead": 365 * 24 * time.Hour} {
		t.Run(name, func(t *testing.T) {
			w := startReuseWorld(t, skew)
			alice, oldBob := w.agent(t, "alice"), w.agent(t, "bob")
			aliceRun, oldRun := w.open(t, "alice"), w.open(t, "bob")
			first := w.holder.AgentRegistration("bob").Incarnation
			if got := w.stored(t, oldRun).Incarnation; got != first || first == "" {
				t.Fatalf("the old run's record has incarnation %q, bob is %q", got, first)
			}
			if r, err := oldBob.Output(ctxT(t), oldRun, "ok", 1); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
				t.Fatalf("the old bob in its run: %+v %v", r, err)
			}
			if r, err := alice.Send(ctxT(t), aliceRun, "bob", "for the old bob"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
				t.Fatalf("alice to the old bob: %+v %v", r, err)
			}
			oldChild, r, err := alice.Delegate(ctxT(t), aliceRun, "bob", "the old bob's task")
			if err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
				t.Fatalf("alice delegating to the old bob: %+v %v", r, err)
			}

			w.edit(t, func(r *identity.Registry) error {
				if err := r.RemoveAgent("bob"); err != nil {
					return err
				}
				return os.Remove(embedded.AgentCredsPath(w.nats, "bob"))
			})
			// Made while no bob is registered: the next bob's.
			between := w.open(t, "bob")
			if r, err := alice.Send(ctxT(t), aliceRun, "bob", "for the next bob"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
				t.Fatalf("alice to the removed name: %+v %v", r, err)
			}
			w.edit(t, func(r *identity.Registry) error {
				if err := r.AddAgent(identity.Agent{Name: "bob", Added: time.Now().UTC()}); err != nil {
					return err
				}
				_, err := embedded.NewSeed(embedded.AgentCredsPath(w.nats, "bob"))
				return err
			})
			second := w.holder.AgentRegistration("bob").Incarnation
			if second == first || second == "" {
				t.Fatalf("the new bob's incarnation %q, the old one's %q", second, first)
			}
			bob := w.agent(t, "bob")

			for _, run := range []string{oldRun, oldChild} {
				before := w.count(t, subject.OutputStream, subject.Output(subject.Shared, run))
				r, err := bob.Output(ctxT(t), run, "ok", "the old bob's work")
				if codeOf(err) != broker.CodeNotRunAgent || r == nil || r.Decision.Refusal != broker.RefuseRunOfAnotherAgent {
					t.Fatalf("the new bob in the old bob's run %s: %+v %v", run, r, err)
				}
				if !strings.Contains(r.Error.Message, "open new work") {
					t.Errorf("the refusal does not say what to do: %s", r.Error.Message)
				}
				if n := w.count(t, subject.OutputStream, subject.Output(subject.Shared, run)); n != before {
					t.Fatalf("the new bob delivered into the old bob's run %s", run)
				}
				if d := w.lastDecision(t, run); d.Refusal != broker.RefuseRunOfAnotherAgent || d.Rule != journal.RuleIdentity {
					t.Fatalf("the refusal is not on the old run's record: %+v", d)
				}
				if _, err := bob.Tools(ctxT(t), run); codeOf(err) != broker.CodeNotRunAgent {
					t.Fatalf("the new bob listed the old bob's tools: %v", err)
				}
			}

			// What was sent and delegated to the old bob is taken and
			// dropped; what was sent while the name was free is the new bob's.
			got := next(t, bob, "bob")
			if got.Error != nil || got.Message == nil || !strings.Contains(string(got.Message.Body), "for the next bob") {
				t.Fatalf("the new bob's first message: %+v", got)
			}
			if got.Message.Incarnation != identity.AfterRemoval(first) {
				t.Fatalf("the message sent while bob was removed is stamped %q", got.Message.Incarnation)
			}
			if got := next(t, bob, "bob"); got.Error != nil || got.Message != nil {
				t.Fatalf("the new bob read more: %+v", got.Message)
			}
			for _, run := range []string{aliceRun, oldChild} {
				if n := w.count(t, subject.PeerStream, subject.Peer("bob", run)); n != 0 {
					t.Fatalf("%d messages of the old bob still queued on %s", n, run)
				}
			}

			// Its own: the run opened while bob was removed, runs opened,
			// delegated and messages sent since.
			fresh := w.open(t, "bob")
			if inc := w.stored(t, fresh).Incarnation; inc != second {
				t.Fatalf("the fresh run is stamped %q, bob is %q", inc, second)
			}
			for _, run := range []string{between, fresh} {
				if r, err := bob.Output(ctxT(t), run, "ok", "mine"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
					t.Fatalf("the new bob in its own run %s: %+v %v", run, r, err)
				}
			}
			child, r, err := alice.Delegate(ctxT(t), aliceRun, "bob", "the new bob's task")
			if err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
				t.Fatalf("alice delegating to the new bob: %+v %v", r, err)
			}
			if got := next(t, bob, "bob"); got.Message == nil || got.Message.Run != child || got.Message.Incarnation != second {
				t.Fatalf("the new bob's delegation: %+v", got)
			}
			if r, err := bob.Output(ctxT(t), child, "ok", "done"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
				t.Fatalf("the new bob in its sub-run: %+v %v", r, err)
			}
			// A broadcast of the work reaches both of bob's sub-runs'
			// queues; only the one opened for the new bob is handed over.
			if r, err := alice.Broadcast(ctxT(t), aliceRun, "all"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
				t.Fatalf("broadcast: %+v %v", r, err)
			}
			if got := next(t, bob, "bob"); got.Message == nil || got.Message.Run != child || got.Message.Kind != broker.PeerBroadcast {
				t.Fatalf("the new bob's broadcast: %+v", got)
			}
			if got := next(t, bob, "bob"); got.Message != nil {
				t.Fatalf("the new bob read the old bob's broadcast: %+v", got.Message)
			}
		})
	}
}

// A register written before incarnations keeps working: bob, never
// removed, has no incarnation, and acts in runs opened for it (stamped
// ""); once removed and registered again by the new CLI, those runs are
// not the new bob's.
func TestNameReuseFromAnOldRegister(t *testing.T) {
	w := startReuseWorld(t, 0)
	old := `{"agents": [{"name": "alice", "added": "2026-01-02T03:04:05Z"}, {"name": "bob", "added": "2026-01-02T03:04:05Z"}], "apps": []}`
	if err := os.WriteFile(identity.Path(w.dir), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	w.edit(t, func(*identity.Registry) error { return nil })
	bob := w.agent(t, "bob")
	run := w.open(t, "bob")
	if inc := w.stored(t, run).Incarnation; inc != "" {
		t.Fatalf("a run of an agent without an incarnation is stamped %q", inc)
	}
	if r, err := bob.Output(ctxT(t), run, "ok", 1); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("bob of an old register: %+v %v", r, err)
	}
	w.edit(t, func(r *identity.Registry) error {
		if err := r.RemoveAgent("bob"); err != nil {
			return err
		}
		return r.AddAgent(identity.Agent{Name: "bob", Added: time.Now().UTC()})
	})
	if r, err := w.agent(t, "bob").Output(ctxT(t), run, "ok", 2); codeOf(err) != broker.CodeNotRunAgent || r.Decision.Refusal != broker.RefuseRunOfAnotherAgent {
		t.Fatalf("the new bob in the old register's bob's run: %+v %v", r, err)
	}
}
