package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// The attacker suite of the trust boundary (issue 12): the built binary in
// strict mode with the built-in rules (a policy file holding only the agent
// cards the named agents need), attacked with agent credentials, the
// shared one and named ones, and with a tenant-bound application's. Every
// case checks the store itself (journal stream, KV buckets, streams, files,
// what a subscriber received), not only the reply.

// identityAttack is the running serve and the operator's view of its NATS.
type identityAttack struct {
	t    *testing.T
	data string
	s    *server
	nats string // the embedded server's credentials folder
	js   jetstream.JetStream
	op   *nats.Conn
	app  *client.Client // the shared app credential
	// runs: shared (no agent, acme/ada), other (no agent, globex/gus),
	// bob (agent bob, acme/ada), alice (agent alice, globex/gus)
	runs map[string]string
}

func startAttack(t *testing.T) *identityAttack {
	t.Helper()
	return startAttackWith(t, "")
}

// startAttackWith is startAttack with rules appended to the policy file
// and extra flags for serve.
func startAttackWith(t *testing.T, rules string, args ...string) *identityAttack {
	t.Helper()
	data := t.TempDir()
	for _, a := range [][]string{{"agents", "add", "bob"}, {"agents", "add", "alice"}, {"apps", "add", "crm", "--tenant", "acme"}} {
		if r := gh(t, append(a, "--data-dir", data)...); r.code != 0 {
			t.Fatalf("%v: %d %s%s", a, r.code, r.stdout, r.stderr)
		}
	}
	pol := filepath.Join(data, "cards.yaml")
	must(t, os.WriteFile(pol, []byte("agents:\n  - name: bob\n  - name: alice\n  - name: builder\n  - name: dave\n"+rules), 0o600))
	a := &identityAttack{t: t, data: data, s: serve(t, data, append([]string{"--mode", "strict", "--policy", pol}, args...)...), nats: filepath.Join(data, "nats"), runs: map[string]string{}}
	var err error
	a.op, err = nats.Connect(a.s.ep.NATSURL, seedOpt(t, embedded.CredsPath(a.nats, embedded.RoleBroker)))
	must(t, err)
	t.Cleanup(a.op.Close)
	a.js, _ = jetstream.New(a.op)
	a.app, err = client.Dial(a.s.ep.NATSURL, client.App, a.s.ep.AppCreds)
	must(t, err)
	t.Cleanup(a.app.Close)
	for name, w := range map[string]broker.OpenWork{
		"shared": {Tenant: "acme", Person: "ada"}, "other": {Tenant: "globex", Person: "gus"},
		"bob": {Tenant: "acme", Person: "ada", Agent: "bob"}, "alice": {Tenant: "globex", Person: "gus", Agent: "alice"},
	} {
		a.runs[name], err = a.app.OpenWork(a.ctx(), w)
		must(t, err)
	}
	return a
}

func (a *identityAttack) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	a.t.Cleanup(cancel)
	return ctx
}

func seedOpt(t *testing.T, path string) nats.Option {
	t.Helper()
	o, err := nats.NkeyOptionFromSeed(path)
	must(t, err)
	return o
}

// agent connects as agent identity id (subject.Shared or a name) with its
// credential, as the Go client would; raw gives the bare connection too.
func (a *identityAttack) agent(id string) *client.Client {
	a.t.Helper()
	if id == subject.Shared {
		c, err := client.Dial(a.s.ep.NATSURL, client.Agent, a.s.ep.AgentCreds)
		must(a.t, err)
		a.t.Cleanup(c.Close)
		return c
	}
	c, err := client.DialAgent(a.s.ep.NATSURL, id, embedded.AgentCredsPath(a.nats, id))
	must(a.t, err)
	a.t.Cleanup(c.Close)
	return c
}

// decisions reads run's policy.decision events from the journal's run
// file. serve records through its in-process writer (the default
// --journal-durability on one node), and a decision is in the file before
// its reply is sent (only an outcome is recorded after it), so what a
// reply answered is there to read.
func (a *identityAttack) decisions(run string) []journal.Decision {
	a.t.Helper()
	return runFileDecisions(a.t, a.data, run)
}

// runFileDecisions reads run's policy.decision events from the run file
// of the journal under serve's data directory.
func runFileDecisions(t *testing.T, data, run string) []journal.Decision {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "journal", "runs", run+".jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	must(t, err)
	var out []journal.Decision
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev journal.Event
		must(t, json.Unmarshal(line, &ev))
		if ev.Type == journal.TypeDecision {
			var d journal.Decision
			must(t, json.Unmarshal(ev.Data, &d))
			out = append(out, d)
		}
	}
	return out
}

// journalMark counts what run's journal holds that a reply could have
// added: the messages on its journal stream subject (where a broker made
// to publish there would put them) and the decisions in its run file.
// Outcomes are left out: they are recorded after their reply, so one may
// land between two marks without anybody's doing.
func (a *identityAttack) journalMark(run string) uint64 {
	a.t.Helper()
	return a.onSubject(subject.JournalStream, subject.Journal(run)) + uint64(len(a.decisions(run)))
}

// onSubject counts the messages stream holds on subj.
func (a *identityAttack) onSubject(stream, subj string) uint64 {
	a.t.Helper()
	st, err := a.js.Stream(a.ctx(), stream)
	must(a.t, err)
	info, err := st.Info(a.ctx(), jetstream.WithSubjectFilter(subj))
	must(a.t, err)
	return info.State.Subjects[subj]
}

// violates reports whether the server refuses act as a permissions
// violation, on a fresh connection of c's credential and inbox space (the
// violation is the connection's last error by the next flush).
func (a *identityAttack) violates(t *testing.T, seed, inbox string, act func(nc *nats.Conn) error) bool {
	t.Helper()
	nc, err := nats.Connect(a.s.ep.NATSURL, seedOpt(t, seed), nats.CustomInboxPrefix(inbox), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	must(t, err)
	defer nc.Close()
	if err := act(nc); err != nil {
		return errors.Is(err, nats.ErrPermissionViolation)
	}
	_ = nc.Flush()
	return errors.Is(nc.LastError(), nats.ErrPermissionViolation)
}

// seed is the credential file of agent identity id.
func (a *identityAttack) seed(id string) string {
	if id == subject.Shared {
		return a.s.ep.AgentCreds
	}
	return embedded.AgentCredsPath(a.nats, id)
}

func deliverReq(run string) []byte {
	b, _ := json.Marshal(broker.EffectRequest{Run: run, Action: "deliver", Params: json.RawMessage(`{"status":"ok","result":{"n":1}}`)})
	return b
}

func codeOf(err error) broker.Code {
	var eb *broker.ErrorBody
	if errors.As(err, &eb) {
		return eb.Code
	}
	return ""
}

func TestAttackIdentity(t *testing.T) {
	a := startAttack(t)
	shared, bob, alice := a.agent(subject.Shared), a.agent("bob"), a.agent("alice")

	// 1. Origin is Gatehouse's fact.
	t.Run("origin", func(t *testing.T) {
		// Host commands may run as another, unprivileged uid: the folder
		// the marker goes to is open to it.
		mdir, err := os.MkdirTemp("", "gatehouse-attack-")
		must(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(mdir) })
		must(t, os.Chmod(mdir, 0o777))
		marker := filepath.Join(mdir, "ran")
		exec := func(run string, origin policy.Origin) broker.EffectRequest {
			p, _ := json.Marshal(map[string]any{"argv": []string{"/usr/bin/touch", marker}})
			return broker.EffectRequest{Run: run, Action: "exec", Origin: origin, Params: p}
		}
		for _, o := range []policy.Origin{policy.OriginShipped, policy.OriginRuntime, policy.OriginDirect, policy.OriginRegistry} {
			for who, c := range map[string]*client.Client{"shared": shared, "bob": bob} {
				r, err := c.Effect(a.ctx(), policy.SinkProcess, exec(a.runs[who], o))
				if codeOf(err) != broker.CodeOriginNotEstablished || r.Decision.Refusal != broker.RefuseOriginNotEstablished || !r.Decision.Recorded {
					t.Fatalf("%s claiming origin %s: %+v %v", who, o, r, err)
				}
			}
		}
		// Left out, the origin is model: the host command is refused.
		r, err := shared.Effect(a.ctx(), policy.SinkProcess, exec(a.runs["shared"], ""))
		if err != nil || r.Decision.Refusal != policy.RefuseUnconfinedExecution {
			t.Fatalf("host command of the shared agent: %+v %v", r, err)
		}
		if _, err := os.Stat(marker); !os.IsNotExist(err) {
			t.Fatal("a host command ran on a claimed or model origin")
		}
		// A tool the request names is not Gatehouse's either.
		r, err = shared.Effect(a.ctx(), policy.SinkOutput, broker.EffectRequest{Run: a.runs["shared"], Action: "deliver", Tool: "memory.get", Params: json.RawMessage(`{"status":"ok"}`)})
		if codeOf(err) != broker.CodeToolNotEstablished {
			t.Fatalf("claimed tool: %+v %v", r, err)
		}
		// Recorded where a decision is recorded: four claims, one model
		// refusal, one tool claim in the shared run.
		ds := a.decisions(a.runs["shared"])
		var claims, tools int
		for _, d := range ds {
			switch {
			case d.Rule == journal.RuleIdentity && d.Refusal == broker.RefuseOriginNotEstablished && d.Origin == policy.OriginModel && d.Sink == policy.SinkProcess:
				claims++
			case d.Rule == journal.RuleIdentity && d.Refusal == broker.RefuseToolNotEstablished:
				tools++
			}
		}
		if claims != 4 || tools != 1 || len(ds) != 6 {
			t.Fatalf("the shared run's journal holds %d decisions (%d origin claims, %d tool claims): %+v", len(ds), claims, tools, ds)
		}
		// A deployment-owned agent declared shipped, added while serve runs.
		if r := gh(t, "agents", "add", "builder", "--origin", "shipped", "--data-dir", a.data); r.code != 0 {
			t.Fatalf("agents add builder: %+v", r)
		}
		builder := a.waitAgent(t, "builder")
		brun, err := a.app.OpenWork(a.ctx(), broker.OpenWork{Tenant: "acme", Person: "ada", Agent: "builder"})
		must(t, err)
		if r, err := builder.Effect(a.ctx(), policy.SinkProcess, exec(brun, policy.OriginModel)); codeOf(err) != broker.CodeOriginNotEstablished {
			t.Fatalf("builder claiming model: %+v %v", r, err)
		}
		if r, err := builder.Effect(a.ctx(), policy.SinkProcess, exec(brun, "")); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Fatalf("builder's host command: %+v %v", r, err)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Fatal("the declared agent's command did not run")
		}
		if ds := a.decisions(brun); len(ds) != 2 || ds[1].Origin != policy.OriginShipped || ds[1].Agent != "builder" {
			t.Fatalf("builder's decisions: %+v", ds)
		}
	})

	// 2. Identity comes from NATS: no credential can speak as another.
	t.Run("identity-is-the-subject", func(t *testing.T) {
		before := len(a.decisions(a.runs["alice"]))
		for name, tc := range map[string]struct {
			id   string
			subj string
		}{
			"bob as alice":           {"bob", subject.Effect("alice", policy.SinkOutput)},
			"bob as the shared one":  {"bob", subject.Effect(subject.Shared, policy.SinkOutput)},
			"shared as alice":        {subject.Shared, subject.Effect("alice", policy.SinkOutput)},
			"bob opening work":       {"bob", subject.WorkOpen(subject.Shared)},
			"shared closing work":    {subject.Shared, subject.WorkClose(subject.Shared)},
			"bob on the old subject": {"bob", subject.Prefix + ".effect.output"},
		} {
			if !a.violates(t, a.seed(tc.id), subject.AgentInboxOf(tc.id), func(nc *nats.Conn) error {
				return nc.PublishRequest(tc.subj, nc.NewRespInbox(), deliverReq(a.runs["alice"]))
			}) {
				t.Errorf("%s: the server let %s through", name, tc.subj)
			}
		}
		if n := len(a.decisions(a.runs["alice"])); n != before {
			t.Fatalf("alice's run gained %d decisions from other identities", n-before)
		}
	})

	// 3. Replies go only to the requester's own inbox.
	t.Run("replies", func(t *testing.T) {
		memKey := "$KV." + subject.MemoryBucket + ".aW5qZWN0ZWQ"
		runsKV, err := a.js.KeyValue(a.ctx(), subject.RunsBucket)
		must(t, err)
		aliceRun, err := runsKV.Get(a.ctx(), a.runs["alice"])
		must(t, err)
		journalAlice := a.journalMark(a.runs["alice"])
		watchAlice, err := alice.Conn().SubscribeSync(subject.AgentInboxOf("alice") + ".stolen")
		must(t, err)
		watchOutput, err := a.app.Conn().SubscribeSync(subject.Output(subject.Shared, a.runs["other"]))
		must(t, err)
		must(t, alice.Conn().Flush())
		must(t, a.app.Conn().Flush())
		targets := []string{
			subject.Output(subject.Shared, a.runs["other"]), // another run's output
			subject.Peer("alice", a.runs["alice"]),          // another tenant's agent's peer queue
			memKey,                                          // a memory
			"$KV." + subject.RunsBucket + "." + a.runs["alice"],
			"$KV." + broker.WriterHealthBucket + "." + broker.WriterHealthKey,
			subject.Journal(a.runs["alice"]),          // the journal stream's subject
			subject.AgentInboxOf("alice") + ".stolen", // another agent's inbox
			subject.AppInboxOf(subject.Shared) + ".x",
			"$JS.API.STREAM.PURGE." + subject.JournalStream,
		}
		dropped := 0
		for _, id := range []string{subject.Shared, "bob"} {
			c, run := shared, a.runs["shared"]
			if id == "bob" {
				c, run = bob, a.runs["bob"]
			}
			for _, tgt := range targets {
				must(t, c.Conn().PublishRequest(subject.Effect(id, policy.SinkOutput), tgt, deliverReq(run)))
				dropped++
			}
			// The service takes an endpoint's requests in order: once this
			// one is answered, every request above was handled (dropped).
			if r, err := c.Output(a.ctx(), run, "ok", "sync"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
				t.Fatalf("%s's own request: %+v %v", id, r, err)
			}
		}
		// The shared agent cannot be answered on bob's inbox either.
		must(t, shared.Conn().PublishRequest(subject.Effect(subject.Shared, policy.SinkOutput), subject.AgentInboxOf("bob")+".x", deliverReq(a.runs["shared"])))
		dropped++
		if _, err := shared.Output(a.ctx(), a.runs["shared"], "ok", "sync"); err != nil {
			t.Fatal(err)
		}
		must(t, alice.Conn().Flush())
		must(t, a.app.Conn().Flush())

		if m, err := watchAlice.NextMsg(0); !errors.Is(err, nats.ErrTimeout) {
			t.Errorf("alice's inbox received %v %v", m, err)
		}
		if m, err := watchOutput.NextMsg(0); !errors.Is(err, nats.ErrTimeout) {
			t.Errorf("another run's output subject received %v %v", m, err)
		}
		if n := a.onSubject(subject.OutputStream, subject.Output(subject.Shared, a.runs["other"])); n != 0 {
			t.Errorf("the outputs stream holds %d messages for a run nobody delivered to", n)
		}
		if n := a.onSubject(subject.PeerStream, subject.Peer("alice", a.runs["alice"])); n != 0 {
			t.Errorf("alice's peer queue holds %d messages", n)
		}
		mem, err := a.js.KeyValue(a.ctx(), subject.MemoryBucket)
		must(t, err)
		if _, err := mem.Get(a.ctx(), "aW5qZWN0ZWQ"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("a memory was written: %v", err)
		}
		if now, err := runsKV.Get(a.ctx(), a.runs["alice"]); err != nil || now.Revision() != aliceRun.Revision() || string(now.Value()) != string(aliceRun.Value()) {
			t.Errorf("alice's run record changed: %v", err)
		}
		if r, err := alice.Output(a.ctx(), a.runs["alice"], "ok", "still works"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Errorf("alice's run stopped working: %+v %v", r, err)
		}
		if health, err := a.js.KeyValue(a.ctx(), broker.WriterHealthBucket); err == nil {
			if hist, err := health.History(a.ctx(), broker.WriterHealthKey); err == nil {
				for _, e := range hist {
					if strings.Contains(string(e.Value()), `"decision"`) {
						t.Errorf("the writer health key holds a reply: %s", e.Value())
					}
				}
			}
		}
		if n := a.journalMark(a.runs["alice"]); n != journalAlice+1 { // alice's own output
			t.Errorf("alice's journal holds %d messages and decisions, want %d", n, journalAlice+1)
		}
		if got := metric(t, a.s.ep.HTTP, broker.RepliesRefusedMetric, `class="agent"`); got < float64(dropped) {
			t.Errorf("%s{class=agent} = %v, want at least %d", broker.RepliesRefusedMetric, got, dropped)
		}
	})

	// 4. Runs are bound to their agent; the shared credential reaches no
	// named agent's subjects.
	t.Run("runs-are-bound", func(t *testing.T) {
		for _, tc := range []struct {
			who string
			c   *client.Client
			run string
		}{{"bob", bob, "alice"}, {"shared", shared, "bob"}, {"bob", bob, "shared"}, {"alice", alice, "other"}} {
			before := a.onSubject(subject.OutputStream, subject.Output(subject.Shared, a.runs[tc.run]))
			r, err := tc.c.Output(a.ctx(), a.runs[tc.run], "ok", "not mine")
			if codeOf(err) != broker.CodeNotRunAgent || r.Decision.Refusal != broker.RefuseRunOfAnotherAgent {
				t.Fatalf("%s on the %s run: %+v %v", tc.who, tc.run, r, err)
			}
			ds := a.decisions(a.runs[tc.run])
			if last := ds[len(ds)-1]; last.Refusal != broker.RefuseRunOfAnotherAgent || last.Rule != journal.RuleIdentity || !last.Enforced {
				t.Fatalf("the refusal is not on the %s run's record: %+v", tc.run, last)
			}
			if n := a.onSubject(subject.OutputStream, subject.Output(subject.Shared, a.runs[tc.run])); n != before {
				t.Fatalf("%s delivered into the %s run", tc.who, tc.run)
			}
		}
		// A peer message to bob waits for bob alone.
		if r, err := alice.Send(a.ctx(), a.runs["alice"], "bob", "for bob only"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Fatalf("alice to bob: %+v %v", r, err)
		}
		if n := a.onSubject(subject.PeerStream, subject.Peer("bob", a.runs["alice"])); n != 1 {
			t.Fatalf("bob's peer queue holds %d", n)
		}
		in, _ := shared.Peer("bob")
		short, cancel := context.WithTimeout(a.ctx(), time.Second)
		m, err := in.Next(short)
		cancel()
		if m != nil || err == nil {
			t.Fatalf("the shared credential fetched bob's message: %+v", m)
		}
		for name, act := range map[string]func(nc *nats.Conn) error{
			"subscribe to bob's inbox": func(nc *nats.Conn) error { _, err := nc.SubscribeSync(subject.AgentInboxOf("bob") + ".>"); return err },
			"subscribe to every agent's inbox": func(nc *nats.Conn) error {
				_, err := nc.SubscribeSync(subject.AgentInbox + ".>")
				return err
			},
			"subscribe to bob's peer subject": func(nc *nats.Conn) error {
				_, err := nc.SubscribeSync(subject.PeerFilter("bob"))
				return err
			},
			"pull bob's consumer": func(nc *nats.Conn) error {
				return nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+subject.PeerStream+"."+subject.PeerConsumer("bob"), nc.NewRespInbox(), []byte(`{"batch":1}`))
			},
			"read bob's consumer": func(nc *nats.Conn) error {
				return nc.PublishRequest("$JS.API.CONSUMER.INFO."+subject.PeerStream+"."+subject.PeerConsumer("bob"), nc.NewRespInbox(), nil)
			},
		} {
			if !a.violates(t, a.seed(subject.Shared), subject.AgentInboxOf(subject.Shared), act) {
				t.Errorf("the shared credential could %s", name)
			}
		}
		if n := a.onSubject(subject.PeerStream, subject.Peer("bob", a.runs["alice"])); n != 1 {
			t.Fatalf("bob's message left the queue: %d", n)
		}
		inb, _ := bob.Peer("bob")
		if m, err := inb.Next(a.ctx()); err != nil || m.From != "alice" || string(m.Body) != `"for bob only"` {
			t.Fatalf("bob's message: %+v %v", m, err)
		}
		// A sub-run accepts only its delegate.
		child, r, err := alice.Delegate(a.ctx(), a.runs["alice"], "bob", "sum it")
		if err != nil || child == "" {
			t.Fatalf("delegate: %+v %v", r, err)
		}
		if r, err := alice.Output(a.ctx(), child, "ok", 1); codeOf(err) != broker.CodeNotRunAgent {
			t.Fatalf("alice in bob's sub-run: %+v %v", r, err)
		}
		if r, err := bob.Output(a.ctx(), child, "ok", 1); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Fatalf("bob in his sub-run: %+v %v", r, err)
		}
		if ds := a.decisions(child); len(ds) != 2 || ds[0].Refusal != broker.RefuseRunOfAnotherAgent || ds[1].Agent != "bob" || ds[1].ActingFor.Tenant != "globex" {
			t.Fatalf("the sub-run's decisions: %+v", ds)
		}
	})

	// Per-agent credentials: added, rotated and removed while serve runs.
	t.Run("credentials", func(t *testing.T) {
		if r := gh(t, "agents", "add", "dave", "--data-dir", a.data); r.code != 0 {
			t.Fatalf("agents add dave: %+v", r)
		}
		if r := gh(t, "agents", "add", "dave", "--data-dir", a.data); r.code != 1 {
			t.Fatalf("adding dave twice: %+v", r)
		}
		dave := a.waitAgent(t, "dave")
		drun, err := a.app.OpenWork(a.ctx(), broker.OpenWork{Tenant: "acme", Person: "ada", Agent: "dave"})
		must(t, err)
		if r, err := dave.Output(a.ctx(), drun, "ok", 1); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Fatalf("dave: %+v %v", r, err)
		}
		seed := embedded.AgentCredsPath(a.nats, "dave")
		old, err := os.ReadFile(seed)
		must(t, err)
		oldFile := filepath.Join(t.TempDir(), "old.nk")
		must(t, os.WriteFile(oldFile, old, 0o600))
		if r := gh(t, "agents", "rotate", "dave", "--data-dir", a.data); r.code != 0 {
			t.Fatalf("agents rotate: %+v", r)
		}
		a.waitRefused(t, "dave", oldFile)
		dave = a.waitAgent(t, "dave")
		if r, err := dave.Output(a.ctx(), drun, "ok", 2); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Fatalf("dave after rotation: %+v %v", r, err)
		}
		var list []struct {
			Name   string
			Origin policy.Origin
		}
		r := gh(t, "agents", "list", "--json", "--data-dir", a.data)
		must(t, json.Unmarshal([]byte(r.stdout), &list))
		names := map[string]policy.Origin{}
		for _, l := range list {
			names[l.Name] = l.Origin
		}
		if names["bob"] != policy.OriginModel || names["builder"] != policy.OriginShipped || names["dave"] != policy.OriginModel {
			t.Fatalf("agents list: %s", r.stdout)
		}
		cur, err := os.ReadFile(seed)
		must(t, err)
		kept := filepath.Join(t.TempDir(), "kept.nk")
		must(t, os.WriteFile(kept, cur, 0o600))
		if r := gh(t, "agents", "remove", "dave", "--data-dir", a.data); r.code != 0 {
			t.Fatalf("agents remove: %+v", r)
		}
		if _, err := os.Stat(seed); !os.IsNotExist(err) {
			t.Fatal("the removed agent's seed is still there")
		}
		// The credential dave held when removed no longer connects, and
		// the server closed the connection it had.
		a.waitRefused(t, "dave", kept)
		if _, err := dave.Output(a.ctx(), drun, "ok", 3); err == nil {
			t.Fatal("the removed agent's connection still proposes")
		}
		if r, err := bob.Output(a.ctx(), a.runs["bob"], "ok", "still here"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Fatalf("bob after dave's removal: %+v %v", r, err)
		}
	})

	// 6. Applications: bound to their tenants and to the runs they open.
	t.Run("applications", func(t *testing.T) {
		crm, err := client.DialApp(a.s.ep.NATSURL, "crm", embedded.AppCredsPath(a.nats, "crm"))
		must(t, err)
		defer crm.Close()
		runsKV, err := a.js.KeyValue(a.ctx(), subject.RunsBucket)
		must(t, err)
		count := func() int {
			keys, err := runsKV.ListKeys(a.ctx())
			must(t, err)
			n := 0
			for range keys.Keys() {
				n++
			}
			return n
		}
		before := count()
		if _, err := crm.OpenWork(a.ctx(), broker.OpenWork{Tenant: "globex", Person: "gus"}); codeOf(err) != broker.CodeTenantNotAllowed {
			t.Fatalf("crm opening for globex: %v", err)
		}
		if n := count(); n != before {
			t.Fatalf("a refused open made %d runs", n-before)
		}
		crmRun, err := crm.OpenWork(a.ctx(), broker.OpenWork{Tenant: "acme", Person: "ada", Agent: "bob"})
		must(t, err)
		for who, tc := range map[string]struct {
			c   *client.Client
			run string
		}{"the shared app": {a.app, crmRun}, "crm": {crm, a.runs["shared"]}} {
			if err := tc.c.CloseWork(a.ctx(), tc.run, "taken"); codeOf(err) != broker.CodeNotRunApp {
				t.Fatalf("%s closing another's run: %v", who, err)
			}
			if e, err := runsKV.Get(a.ctx(), tc.run); err != nil || strings.Contains(string(e.Value()), `"closed":true`) {
				t.Fatalf("%s closed another application's run: %v", who, err)
			}
		}
		// Outputs of crm's runs reach crm alone.
		mine, err := crm.Conn().SubscribeSync(crm.Outputs())
		must(t, err)
		theirs, err := a.app.Conn().SubscribeSync(a.app.Outputs())
		must(t, err)
		must(t, crm.Conn().Flush())
		must(t, a.app.Conn().Flush())
		if r, err := bob.Output(a.ctx(), crmRun, "ok", "for crm"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Fatalf("bob in crm's run: %+v %v", r, err)
		}
		if m, err := mine.NextMsg(10 * time.Second); err != nil || !strings.Contains(string(m.Data), "for crm") {
			t.Fatalf("crm's output: %v", err)
		}
		must(t, a.app.Conn().Flush())
		if m, err := theirs.NextMsg(0); !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("the shared app read crm's output: %s", m.Data)
		}
		for name, act := range map[string]func(nc *nats.Conn) error{
			"propose an effect": func(nc *nats.Conn) error {
				return nc.PublishRequest(subject.Effect(subject.Shared, policy.SinkOutput), nc.NewRespInbox(), deliverReq(crmRun))
			},
			"propose as bob": func(nc *nats.Conn) error {
				return nc.PublishRequest(subject.Effect("bob", policy.SinkOutput), nc.NewRespInbox(), deliverReq(crmRun))
			},
			"read the shared app's outputs": func(nc *nats.Conn) error { _, err := nc.SubscribeSync(subject.OutputsOf(subject.Shared)); return err },
			"read the shared app's replies": func(nc *nats.Conn) error {
				_, err := nc.SubscribeSync(subject.AppInboxOf(subject.Shared) + ".>")
				return err
			},
			"open work as the shared app": func(nc *nats.Conn) error {
				return nc.PublishRequest(subject.WorkOpen(subject.Shared), nc.NewRespInbox(), []byte(`{}`))
			},
			"list approvals across tenants": func(nc *nats.Conn) error {
				return nc.PublishRequest(subject.App("crm", subject.ApprovalListOp), nc.NewRespInbox(), nil)
			},
		} {
			if !a.violates(t, embedded.AppCredsPath(a.nats, "crm"), subject.AppInboxOf("crm"), act) {
				t.Errorf("crm could %s", name)
			}
		}
		if err := crm.CloseWork(a.ctx(), crmRun, "done"); err != nil {
			t.Fatal(err)
		}
	})

	a.s.stop(t)
	log := a.s.out.String()
	if !strings.Contains(log, "request dropped, not answered") || !strings.Contains(log, "caller refused") {
		t.Errorf("serve's log does not tell of the refusals:\n%s", log)
	}
	if v := gh(t, "verify", filepath.Join(a.data, "journal")); v.code != 0 {
		t.Fatalf("verify: %s", v.stdout)
	}
}

// waitAgent connects as agent name once serve has taken its credential
// (the register is re-read when gatehouse agents changes it).
func (a *identityAttack) waitAgent(t *testing.T, name string) *client.Client {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := client.DialAgent(a.s.ep.NATSURL, name, embedded.AgentCredsPath(a.nats, name), nats.MaxReconnects(0))
		if err == nil {
			t.Cleanup(c.Close)
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s never got in: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRefused waits until the server refuses the seed at path.
func (a *identityAttack) waitRefused(t *testing.T, name, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		nc, err := nats.Connect(a.s.ep.NATSURL, seedOpt(t, path), nats.MaxReconnects(0))
		if err != nil {
			return
		}
		nc.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s's old credential still connects", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric reads one sample of name whose labels contain label from a
// /metrics page.
func metric(t *testing.T, base, name, label string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	must(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{[^}]*` + regexp.QuoteMeta(label) + `[^}]*\} (\S+)$`)
	m := re.FindStringSubmatch(b.String())
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}
