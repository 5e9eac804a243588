package peer_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
	"github.com/gatehouse/gatehouse/sinks/peer"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

var _ peer.RunOpener = (*broker.Broker)(nil)

// cards registers the agents the tests use; planner may delegate only to
// worker and helper.
const cards = `agents:
  - name: planner
    allowed_delegations: [worker, helper]
  - name: worker
  - name: helper
  - name: stranger
`

// start runs Gatehouse with the peer and output sinks, the peer sink bound
// to the broker as production wiring does.
func start(t testing.TB, mode policy.Mode, rules string) *sinktest.Env {
	t.Helper()
	var ps *peer.Sink
	env := sinktest.Start(t, mode, rules, func(t testing.TB, env *sinktest.Env) []broker.Sink {
		var err error
		if ps, err = peer.New(sinktest.Ctx(t), env.JS, 1); err != nil {
			t.Fatal(err)
		}
		out, err := output.New(sinktest.Ctx(t), env.JS, 1)
		if err != nil {
			t.Fatal(err)
		}
		return []broker.Sink{ps, out}
	})
	ps.Bind(env.Broker)
	return env
}

// receive fetches agent's next peer message through the agent client,
// waiting at most wait; nil when none came.
func receive(t testing.TB, c *client.Client, agent string, wait time.Duration) *broker.PeerMessage {
	t.Helper()
	in, err := c.Peer(agent)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	m, err := in.Next(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	if err != nil {
		t.Fatalf("peer inbox of %s: %v", agent, err)
	}
	return m
}

func TestConformanceSend(t *testing.T) {
	var ps *peer.Sink
	sinktest.Conformance(t, sinktest.Case{
		Sink: policy.SinkPeer,
		Request: func(run string) broker.EffectRequest {
			return broker.EffectRequest{Run: run, Action: "send", Params: json.RawMessage(`{"to":"bob","body":{"secret":"s3cr3t-peer-body"}}`)}
		},
		Deny:   "{sink: peer, action: send, target: bob}",
		Secret: "s3cr3t-peer-body",
		Sinks: func(t testing.TB, env *sinktest.Env) []broker.Sink {
			var err error
			if ps, err = peer.New(sinktest.Ctx(t), env.JS, 1); err != nil {
				t.Fatal(err)
			}
			return []broker.Sink{ps}
		},
		Happened: func(t testing.TB, env *sinktest.Env, run string, _ *broker.EffectReply) bool {
			// bob really receives it, from the stream, through an agent
			// connection: the message outlived the moment it was sent.
			m := receive(t, env.NamedAgent(t, "bob", ""), "bob", 500*time.Millisecond)
			if m == nil {
				return false
			}
			if m.Kind != broker.PeerSend || m.Run != run || m.FromRun != run || !strings.Contains(string(m.Body), "s3cr3t-peer-body") {
				t.Fatalf("bob received %+v", m)
			}
			return true
		},
	})
}

// decision returns the data of run's only (or last) policy.decision.
func decision(t *testing.T, env *sinktest.Env, run string) journal.Decision {
	t.Helper()
	var d journal.Decision
	found := false
	for _, ev := range env.Events(t, run) {
		if ev.Type == journal.TypeDecision {
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("no decision in %s", run)
	}
	return d
}

func runOpen(t *testing.T, env *sinktest.Env, run string) journal.RunOpen {
	t.Helper()
	evs := env.Events(t, run)
	if len(evs) == 0 || evs[0].Type != journal.TypeRunOpen {
		t.Fatalf("journal of %s = %v", run, sinktest.Types(evs))
	}
	var o journal.RunOpen
	if err := json.Unmarshal(evs[0].Data, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func countRuns(t *testing.T, env *sinktest.Env) int {
	t.Helper()
	kv, err := env.JS.KeyValue(sinktest.Ctx(t), subject.RunsBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(sinktest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range keys.Keys() {
		n++
	}
	return n
}

func code(err error) broker.Code {
	var eb *broker.ErrorBody
	if errors.As(err, &eb) {
		return eb.Code
	}
	return ""
}

var ada = broker.OpenWork{
	Tenant: "acme", Person: "ada", Scopes: []string{"invoices.read"}, Agent: "planner",
	Mandate: &policy.Mandate{Systems: []string{"peer", "output"}, Effects: []policy.EffectClass{policy.EffectNotify},
		ExpiresAt: time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)},
}

// A delegation opens a sub-run for the same person, mandate and scopes;
// the recipient is told the sub-run's id and its effects there are decided
// and recorded for that person; a sub-run of it inherits the same way; no
// agent can name or widen whom the work is for.
func TestDelegateEndToEnd(t *testing.T) {
	env := start(t, policy.ModeStrict, cards)
	ctx := sinktest.Ctx(t)
	planner, worker, helper := env.NamedAgent(t, "planner", ""), env.NamedAgent(t, "worker", ""), env.NamedAgent(t, "helper", "")
	parent := env.Open(t, ada)
	rootOpen := runOpen(t, env, parent)

	child, reply, err := planner.Delegate(ctx, parent, "worker", map[string]string{"invoice": "INV-7", "secret": "task-s3cret"})
	if err != nil || reply.Decision.Outcome != journal.OutcomeAllowed || child == "" || child == parent {
		t.Fatalf("delegate: child %q, reply %+v, err %v", child, reply, err)
	}

	// The recipient gets the task with the sub-run's id, and the sender
	// from the parent's record.
	m := receive(t, worker, "worker", 5*time.Second)
	if m == nil || m.Kind != broker.PeerDelegate || m.Run != child || m.FromRun != parent || m.From != "planner" ||
		!strings.Contains(string(m.Task), "task-s3cret") || m.Body != nil {
		t.Fatalf("worker received %+v", m)
	}

	// The sub-run's run.open names its parent and carries the root's
	// authority; only the agent is its own.
	open := runOpen(t, env, child)
	if open.Parent != parent || open.ActingFor != rootOpen.ActingFor || open.MandateDigest != rootOpen.MandateDigest ||
		!reflect.DeepEqual(open.Mandate, rootOpen.Mandate) || !reflect.DeepEqual(open.Scopes, rootOpen.Scopes) || open.Agent != "worker" {
		t.Fatalf("child run.open = %+v, root run.open = %+v", open, rootOpen)
	}

	// The parent's record of the delegation: recipient, digest, sub-run.
	d := decision(t, env, parent)
	if d.Sink != policy.SinkPeer || d.Action != "delegate" || d.Target != "worker" || d.Agent != "planner" || d.Digest == "" {
		t.Fatalf("delegate decision = %+v", d)
	}
	evs := env.Events(t, parent)
	var res journal.Result
	if err := json.Unmarshal(evs[len(evs)-1].Data, &res); err != nil || res.Detail["run"] != child || res.Detail["recipient"] != "worker" {
		t.Fatalf("delegate outcome = %s", evs[len(evs)-1].Data)
	}

	// The worker's effect in the sub-run is decided and recorded for ada,
	// under the root's mandate and scopes.
	if r, err := worker.Output(ctx, child, "ok", map[string]int{"total": 42}); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("worker's output: %+v %v", r, err)
	}
	// The sub-run is the delegate's: neither the delegating agent nor the
	// shared agent credential acts in it, and the refusal is on its record.
	for who, c := range map[string]*client.Client{"planner": planner, "the shared agent": env.Agent} {
		if r, err := c.Output(ctx, child, "ok", 1); code(err) != broker.CodeNotRunAgent || r.Decision.Refusal != broker.RefuseRunOfAnotherAgent {
			t.Fatalf("%s acting in the worker's sub-run: %+v %v", who, r, err)
		}
	}
	if d := decision(t, env, child); d.Refusal != broker.RefuseRunOfAnotherAgent || d.Rule != journal.RuleIdentity || d.Outcome != journal.OutcomeRefused {
		t.Fatalf("the refusal is not on the sub-run's record: %+v", d)
	}
	cd := decision(t, env, child)
	if cd.ActingFor != rootOpen.ActingFor || cd.MandateDigest != rootOpen.MandateDigest || cd.Agent != "worker" || cd.Sink != policy.SinkOutput {
		t.Fatalf("child decision = %+v", cd)
	}

	// The worker cannot act for anyone else, at the request or in params.
	for name, req := range map[string]broker.EffectRequest{
		"tenant":     {Run: child, Action: "deliver", Tenant: json.RawMessage(`"evil"`), Params: json.RawMessage(`{"status":"ok"}`)},
		"acting_for": {Run: child, Action: "deliver", ActingFor: json.RawMessage(`{"tenant":"acme","person":"bob"}`)},
	} {
		if _, err := worker.Effect(ctx, policy.SinkOutput, req); code(err) != broker.CodeForbiddenField {
			t.Errorf("worker naming %s: err = %v, want FORBIDDEN_FIELD", name, err)
		}
	}

	// A delegate request naming whom the work is for, or within what, or
	// anything unknown, is refused and opens nothing.
	before := countRuns(t, env)
	nDecisions := len(env.Events(t, parent))
	for _, tc := range []struct {
		params string
		want   broker.Code
	}{
		{`{"to":"worker","task":1,"tenant":"other"}`, broker.CodeForbiddenField},
		{`{"to":"worker","task":1,"person":"bob"}`, broker.CodeForbiddenField},
		{`{"to":"worker","task":1,"acting_for":{"tenant":"acme","person":"bob"}}`, broker.CodeForbiddenField},
		{`{"to":"worker","task":1,"scopes":["payments.write"]}`, broker.CodeForbiddenField},
		{`{"to":"worker","task":1,"mandate":{"systems":["erp"]}}`, broker.CodeForbiddenField},
		{`{"to":"worker","task":1,"mandate_digest":"sha256:00"}`, broker.CodeForbiddenField},
		{`{"to":"worker","task":1,"agent":"root"}`, broker.CodeForbiddenField},
		{`{"to":"worker","task":1,"parent":"r_00000000000000000000000000"}`, broker.CodeForbiddenField},
		{`{"to":"worker","task":1,"expires_at":"2100-01-01T00:00:00Z"}`, broker.CodeBadRequest},
		{`{"to":"worker.>","task":1}`, broker.CodeBadRequest},
		{`{"to":"worker","body":1}`, broker.CodeBadRequest},
	} {
		_, err := worker.Effect(ctx, policy.SinkPeer, broker.EffectRequest{Run: child, Action: "delegate", Params: json.RawMessage(tc.params)})
		if code(err) != tc.want {
			t.Errorf("delegate %s: err = %v, want %s", tc.params, err, tc.want)
		}
	}
	if _, err := planner.Effect(ctx, policy.SinkPeer, broker.EffectRequest{Run: parent, Action: "delegate",
		Scopes: json.RawMessage(`["payments.write"]`), Params: json.RawMessage(`{"to":"worker"}`)}); code(err) != broker.CodeForbiddenField {
		t.Errorf("delegate with scopes beside params: err = %v, want FORBIDDEN_FIELD", err)
	}
	if n := countRuns(t, env); n != before {
		t.Fatalf("refused delegations opened %d runs", n-before)
	}
	if n := len(env.Events(t, parent)); n != nDecisions {
		t.Fatalf("refused delegations were decided: %d new events", n-nDecisions)
	}

	// A sub-run of the sub-run inherits from the root the same way.
	grand, reply, err := worker.Delegate(ctx, child, "helper", "check totals")
	if err != nil || grand == "" {
		t.Fatalf("delegate from the sub-run: %+v %v", reply, err)
	}
	gopen := runOpen(t, env, grand)
	if gopen.Parent != child || gopen.ActingFor != rootOpen.ActingFor || gopen.MandateDigest != rootOpen.MandateDigest ||
		!reflect.DeepEqual(gopen.Scopes, rootOpen.Scopes) || gopen.Agent != "helper" {
		t.Fatalf("grandchild run.open = %+v", gopen)
	}
	if m := receive(t, helper, "helper", 5*time.Second); m == nil || m.Run != grand || m.FromRun != child || m.From != "worker" {
		t.Fatalf("helper received %+v", m)
	}

	// Closing the work ends its sub-runs too.
	if err := env.App.CloseWork(ctx, parent, "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := helper.Output(ctx, grand, "ok", 1); code(err) != broker.CodeRunClosed {
		t.Fatalf("effect in a sub-run of closed work: err = %v, want RUN_CLOSED", err)
	}

	env.Verify(t)
	env.NoContent(t, "task-s3cret")
}

func TestDelegationNotAllowedByTheCard(t *testing.T) {
	for _, tc := range []struct {
		mode     policy.Mode
		outcome  journal.Outcome
		enforced bool
	}{
		{policy.ModeStrict, journal.OutcomeRefused, true},
		{policy.ModeReport, journal.OutcomeAllowed, false},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			env := start(t, tc.mode, cards)
			ctx := sinktest.Ctx(t)
			parent := env.Open(t, ada)
			before := countRuns(t, env)
			child, reply, err := env.NamedAgent(t, "planner", "").Delegate(ctx, parent, "stranger", "do it")
			if err != nil {
				t.Fatal(err)
			}
			d := reply.Decision
			if d.Outcome != tc.outcome || d.Refusal != policy.RefuseDelegationNotAllowed || d.Rule != "agent:planner" || d.Enforced != tc.enforced || !d.Recorded {
				t.Fatalf("decision = %+v", d)
			}
			rd := decision(t, env, parent)
			if rd.Refusal != policy.RefuseDelegationNotAllowed || rd.Outcome != tc.outcome || rd.Target != "stranger" {
				t.Fatalf("recorded decision = %+v", rd)
			}
			got := receive(t, env.NamedAgent(t, "stranger", ""), "stranger", 500*time.Millisecond)
			if tc.enforced {
				if child != "" || got != nil || countRuns(t, env) != before {
					t.Fatalf("a refused delegation happened: child %q, message %+v", child, got)
				}
			} else if child == "" || got == nil || got.Run != child || countRuns(t, env) != before+1 {
				t.Fatalf("report mode did not delegate: child %q, message %+v", child, got)
			}
			env.Verify(t)
		})
	}
}

// A mandate handed over for other systems does not cover messaging peers,
// in report mode too; and what it says never changes in a sub-run: an
// expired mandate is expired there.
func TestMandate(t *testing.T) {
	t.Run("excludes-peer", func(t *testing.T) {
		env := start(t, policy.ModeReport, cards)
		w := ada
		w.Mandate = &policy.Mandate{Systems: []string{"output"}}
		parent := env.Open(t, w)
		before := countRuns(t, env)
		child, reply, err := env.NamedAgent(t, "planner", "").Delegate(sinktest.Ctx(t), parent, "worker", "x")
		if err != nil {
			t.Fatal(err)
		}
		if d := reply.Decision; d.Outcome != journal.OutcomeRefused || d.Refusal != policy.RefuseOutsideMandate || !d.Enforced || child != "" {
			t.Fatalf("decision = %+v, child %q", d, child)
		}
		if countRuns(t, env) != before || receive(t, env.NamedAgent(t, "worker", ""), "worker", 300*time.Millisecond) != nil {
			t.Fatal("a delegation outside the mandate happened")
		}
	})
	t.Run("expiry-is-inherited", func(t *testing.T) {
		env := start(t, policy.ModeReport, cards)
		w := ada
		expires := time.Now().Add(1500 * time.Millisecond)
		w.Mandate = &policy.Mandate{Systems: []string{"peer", "output"}, ExpiresAt: expires}
		parent := env.Open(t, w)
		child, reply, err := env.NamedAgent(t, "planner", "").Delegate(sinktest.Ctx(t), parent, "worker", "x")
		if err != nil || child == "" {
			t.Fatalf("delegate before expiry: %+v %v", reply, err)
		}
		if open := runOpen(t, env, child); open.Mandate == nil || !open.Mandate.ExpiresAt.Equal(expires) {
			t.Fatalf("child mandate = %+v, want expiry %s", open.Mandate, expires)
		}
		time.Sleep(time.Until(expires) + 50*time.Millisecond)
		r, err := env.NamedAgent(t, "worker", "").Output(sinktest.Ctx(t), child, "ok", 1)
		if err != nil || r.Decision.Outcome != journal.OutcomeRefused || r.Decision.Refusal != policy.RefuseOutsideMandate {
			t.Fatalf("effect in the sub-run after expiry: %+v %v", r, err)
		}
		env.Verify(t)
	})
}

// broadcast reaches every other run of the work; an effects rule denying it
// holds in strict mode and is recorded in report mode.
func TestBroadcast(t *testing.T) {
	rules := cards + `effects:
  - name: no-broadcast-of-results
    decision: deny
    match: {sink: peer, action: broadcast}
`
	for _, tc := range []struct {
		mode      policy.Mode
		delivered bool
	}{{policy.ModeStrict, false}, {policy.ModeReport, true}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			env := start(t, tc.mode, rules)
			ctx := sinktest.Ctx(t)
			agents := map[string]*client.Client{}
			for _, a := range []string{"planner", "worker", "helper"} {
				agents[a] = env.NamedAgent(t, a, "")
			}
			parent := env.Open(t, ada)
			workerRun, _, err := agents["planner"].Delegate(ctx, parent, "worker", "a")
			if err != nil || workerRun == "" {
				t.Fatal(err)
			}
			helperRun, _, err := agents["planner"].Delegate(ctx, parent, "helper", "b")
			if err != nil || helperRun == "" {
				t.Fatal(err)
			}
			// Take the tasks off the inboxes.
			for _, a := range []string{"worker", "helper"} {
				if receive(t, agents[a], a, 5*time.Second) == nil {
					t.Fatalf("%s got no task", a)
				}
			}
			reply, err := agents["worker"].Broadcast(ctx, workerRun, map[string]string{"step": "done", "secret": "bcast-s3cret"})
			if err != nil {
				t.Fatal(err)
			}
			d := reply.Decision
			if d.Rule != "no-broadcast-of-results" || d.Enforced == tc.delivered || !d.Recorded {
				t.Fatalf("decision = %+v", d)
			}
			pm := receive(t, agents["planner"], "planner", 500*time.Millisecond)
			hm := receive(t, agents["helper"], "helper", 500*time.Millisecond)
			wm := receive(t, agents["worker"], "worker", 300*time.Millisecond)
			if wm != nil {
				t.Fatalf("the broadcasting run received its own broadcast: %+v", wm)
			}
			if !tc.delivered {
				if pm != nil || hm != nil {
					t.Fatalf("strict mode let a denied broadcast through: %+v %+v", pm, hm)
				}
				env.Verify(t)
				return
			}
			if pm == nil || pm.Kind != broker.PeerBroadcast || pm.Run != parent || pm.FromRun != workerRun || pm.From != "worker" {
				t.Fatalf("planner received %+v", pm)
			}
			if hm == nil || hm.Kind != broker.PeerBroadcast || hm.Run != helperRun || hm.FromRun != workerRun {
				t.Fatalf("helper received %+v", hm)
			}
			var res struct{ Recipients int }
			if err := json.Unmarshal(reply.Result, &res); err != nil || res.Recipients != 2 {
				t.Fatalf("broadcast reply %s", reply.Result)
			}
			rd := decision(t, env, workerRun)
			if rd.Action != "broadcast" || rd.Target != "*" || rd.Refusal != policy.RefuseDeploymentRule {
				t.Fatalf("recorded decision = %+v", rd)
			}
			env.Verify(t)
			env.NoContent(t, "bcast-s3cret")
		})
	}
}

// Until it is bound to a broker, the sink refuses delegations before they
// are decided, as a wiring fault.
func TestDelegateUnbound(t *testing.T) {
	env := sinktest.Start(t, policy.ModeReport, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
		ps, err := peer.New(sinktest.Ctx(t), env.JS, 1)
		if err != nil {
			t.Fatal(err)
		}
		return []broker.Sink{ps}
	})
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	_, _, err := env.Agent.Delegate(sinktest.Ctx(t), run, "worker", 1)
	if code(err) != broker.CodeInternal {
		t.Fatalf("err = %v, want INTERNAL", err)
	}
	if got := sinktest.Types(env.Events(t, run)); !slices.Equal(got, []journal.Type{journal.TypeRunOpen}) {
		t.Fatalf("journal = %v", got)
	}
}
