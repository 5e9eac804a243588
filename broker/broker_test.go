package broker_test

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/gatehouse/gatehouse/sinks/output"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// world is a real Gatehouse (sinktest's harness) serving the output sink.
type world struct {
	*sinktest.Env
	ns    *embedded.Server
	js    jetstream.JetStream
	b     *broker.Broker
	app   *client.Client
	agent *client.Client
}

func start(t testing.TB, mode policy.Mode, rules string) *world {
	t.Helper()
	env := sinktest.Start(t, mode, rules, func(t testing.TB, env *sinktest.Env) []broker.Sink {
		out, err := output.New(context.Background(), env.JS, 1)
		if err != nil {
			t.Fatal(err)
		}
		return []broker.Sink{out}
	})
	return &world{Env: env, ns: env.NS, js: env.JS, b: env.Broker, app: env.App, agent: env.Agent}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// journalEvents reads every event of run from the journal stream, in order.
func (w *world) journalEvents(t *testing.T, run string) []journal.Event {
	t.Helper()
	ctx := ctxT(t)
	if w.b != nil {
		if err := w.b.Flush(ctx); err != nil { // outcomes are recorded after their replies
			t.Fatal(err)
		}
	}
	cons, err := w.js.OrderedConsumer(ctx, subject.JournalStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject.Journal(run)}})
	if err != nil {
		t.Fatal(err)
	}
	var evs []journal.Event
	for {
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			es, err := journal.DecodeMessage(m.Subject(), m.Data())
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, es...)
		}
		if n == 0 {
			return evs
		}
	}
}

func types(evs []journal.Event) []journal.Type {
	var ts []journal.Type
	for _, e := range evs {
		ts = append(ts, e.Type)
	}
	return ts
}

func equalTypes(a []journal.Type, b ...journal.Type) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestOutputAllowedIsRecordedBeforeItHappens(t *testing.T) {
	w := start(t, policy.ModeStrict, "")
	ctx := ctxT(t)
	run, err := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada", Scopes: []string{"reports"}})
	if err != nil {
		t.Fatal(err)
	}
	sub := subscribe(t, w.app.Conn(), subject.Output(subject.Shared, run))
	reply, err := w.agent.Output(ctx, run, "ok", map[string]int{"total": 42})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Decision.Outcome != journal.OutcomeAllowed || !reply.Decision.Recorded {
		t.Fatalf("decision = %+v, want allowed and recorded", reply.Decision)
	}
	if reply.Outcome == nil || reply.Outcome.Status != "ok" || reply.Outcome.Size != int64(len(`{"total":42}`)) {
		t.Fatalf("outcome = %+v", reply.Outcome)
	}
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("output not delivered: %v", err)
	}
	var d output.Delivery
	if err := json.Unmarshal(msg.Data, &d); err != nil || string(d.Result) != `{"total":42}` {
		t.Fatalf("delivery = %s (%v)", msg.Data, err)
	}

	evs := w.journalEvents(t, run)
	if !equalTypes(types(evs), journal.TypeRunOpen, journal.TypeDecision, journal.TypeAttempt, journal.TypeOutcome) {
		t.Fatalf("journal types = %v", types(evs))
	}
	var dec journal.Decision
	if err := json.Unmarshal(evs[1].Data, &dec); err != nil {
		t.Fatal(err)
	}
	if dec.ActingFor != (policy.Principal{Tenant: "acme", Person: "ada"}) || dec.Outcome != journal.OutcomeAllowed || dec.PolicyDigest == "" {
		t.Fatalf("decision event = %+v", dec)
	}
	for _, e := range evs[1:] {
		if e.Effect != reply.Effect {
			t.Fatalf("event %s names effect %q, want %q", e.Type, e.Effect, reply.Effect)
		}
		if strings.Contains(string(e.Data), `"total"`) {
			t.Fatalf("journal event %s carries content: %s", e.Type, e.Data)
		}
	}
}

const denyOutput = `
effects:
  - name: no-outputs
    decision: deny
    match: {sink: output}
`

func TestStrictRefusesBeforeItHappens(t *testing.T) {
	w := start(t, policy.ModeStrict, denyOutput)
	ctx := ctxT(t)
	run, err := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	sub := subscribe(t, w.app.Conn(), subject.Output(subject.Shared, run))
	reply, err := w.agent.Output(ctx, run, "ok", "secret")
	if err != nil {
		t.Fatal(err)
	}
	d := reply.Decision
	if d.Outcome != journal.OutcomeRefused || d.Rule != "no-outputs" || !d.Enforced || reply.Outcome != nil {
		t.Fatalf("reply = %+v %+v", d, reply.Outcome)
	}
	if _, err := sub.NextMsg(300 * time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("a refused output was delivered (err %v)", err)
	}
	if got := types(w.journalEvents(t, run)); !equalTypes(got, journal.TypeRunOpen, journal.TypeDecision) {
		t.Fatalf("journal types = %v, want open and decision only", got)
	}
}

func TestReportRecordsWhatStrictWouldRefuse(t *testing.T) {
	w := start(t, policy.ModeReport, denyOutput)
	ctx := ctxT(t)
	run, _ := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	reply, err := w.agent.Output(ctx, run, "ok", 1)
	if err != nil {
		t.Fatal(err)
	}
	d := reply.Decision
	if d.Outcome != journal.OutcomeAllowed || d.Rule != "no-outputs" || d.Enforced || reply.Outcome == nil {
		t.Fatalf("reply = %+v", d)
	}
	evs := w.journalEvents(t, run)
	var dec journal.Decision
	_ = json.Unmarshal(evs[1].Data, &dec)
	if dec.Rule != "no-outputs" || dec.Enforced || dec.Outcome != journal.OutcomeAllowed {
		t.Fatalf("recorded decision = %+v", dec)
	}
}

func TestMandateIsEnforcedInReportMode(t *testing.T) {
	w := start(t, policy.ModeReport, "")
	ctx := ctxT(t)
	run, err := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada",
		Mandate: &policy.Mandate{Systems: []string{"erp"}}})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := w.agent.Output(ctx, run, "ok", 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := reply.Decision; d.Outcome != journal.OutcomeRefused || d.Refusal != policy.RefuseOutsideMandate || !d.Enforced {
		t.Fatalf("decision = %+v, want outside-mandate enforced", d)
	}
}

func TestAgentCannotNameWhomWorkIsFor(t *testing.T) {
	w := start(t, policy.ModeStrict, "")
	ctx := ctxT(t)
	run, _ := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	for _, field := range []string{"tenant", "person", "acting_for", "mandate", "scopes", "agent"} {
		raw := []byte(`{"run":"` + run + `","action":"deliver","` + field + `":"mallory"}`)
		msg, err := w.agent.Conn().RequestWithContext(ctx, subject.Effect(subject.Shared, policy.SinkOutput), raw)
		if err != nil {
			t.Fatal(err)
		}
		var r broker.EffectReply
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			t.Fatal(err)
		}
		if r.Error == nil || r.Error.Code != broker.CodeForbiddenField {
			t.Fatalf("%s: reply = %s, want FORBIDDEN_FIELD", field, msg.Data)
		}
	}
	if got := types(w.journalEvents(t, run)); !equalTypes(got, journal.TypeRunOpen) {
		t.Fatalf("journal = %v, want only run.open", got)
	}
}

func TestAgentCannotActForAnotherRunsPerson(t *testing.T) {
	w := start(t, policy.ModeStrict, "")
	ctx := ctxT(t)
	// A run id the application never issued: guessing one is refused.
	reply, err := w.agent.Output(ctx, broker.NewRunID(time.Now()), "ok", 1)
	var eb *broker.ErrorBody
	if !errors.As(err, &eb) || eb.Code != broker.CodeUnknownRun || reply.Decision != nil {
		t.Fatalf("err = %v, want UNKNOWN_RUN and no decision", err)
	}
	// Each run carries its own person: an effect on Bob's run is Bob's.
	ada, _ := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	bob, _ := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "globex", Person: "bob"})
	if _, err := w.agent.Output(ctx, bob, "ok", 1); err != nil {
		t.Fatal(err)
	}
	evs := w.journalEvents(t, bob)
	var dec journal.Decision
	_ = json.Unmarshal(evs[1].Data, &dec)
	if dec.ActingFor.Person != "bob" || dec.ActingFor.Tenant != "globex" {
		t.Fatalf("bob's effect recorded for %+v", dec.ActingFor)
	}
	if n := len(w.journalEvents(t, ada)); n != 1 {
		t.Fatalf("ada's run has %d events, want 1", n)
	}
}

func TestRolesAreSeparatedByNATSPermissions(t *testing.T) {
	w := start(t, policy.ModeStrict, "")
	ctx := ctxT(t)
	// An agent cannot open work: its publish is refused by the server.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := w.agent.OpenWork(short, broker.OpenWork{Tenant: "acme", Person: "ada"}); err == nil {
		t.Fatal("an agent opened work")
	}
	// An agent cannot write into the journal stream.
	js, _ := jetstream.New(w.agent.Conn())
	short2, cancel2 := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel2()
	if _, err := js.Publish(short2, subject.Journal("r_forged"), []byte(`{}`)); err == nil {
		t.Fatal("an agent published into the journal stream")
	}
	// An application cannot propose effects.
	run, err := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	short3, cancel3 := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel3()
	if _, err := w.app.Output(short3, run, "ok", 1); err == nil {
		t.Fatal("an application proposed an effect")
	}
	// An agent cannot listen to another role's replies or the outputs.
	for _, subj := range []string{subject.AppInboxOf(subject.Shared) + ".x", subject.Output(subject.Shared, run), subject.JournalAll} {
		errs := make(chan error, 1)
		nc, err := nats.Connect(w.ns.URL, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }),
			mustNkey(t, w, embedded.RoleAgent), nats.CustomInboxPrefix(subject.AgentInboxOf(subject.Shared)))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = nc.SubscribeSync(subj)
		select {
		case err := <-errs:
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Fatalf("subscribe %s: %v", subj, err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("an agent subscribed to %s", subj)
		}
		nc.Close()
	}
}

func mustNkey(t testing.TB, w *world, r embedded.Role) nats.Option {
	t.Helper()
	o, err := nats.NkeyOptionFromSeed(embedded.CredsPath(w.ns.Dir(), r))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestClosedRunRefusesEffects(t *testing.T) {
	w := start(t, policy.ModeReport, "")
	ctx := ctxT(t)
	run, _ := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err := w.app.CloseWork(ctx, run, "done"); err != nil {
		t.Fatal(err)
	}
	_, err := w.agent.Output(ctx, run, "ok", 1)
	var eb *broker.ErrorBody
	if !errors.As(err, &eb) || eb.Code != broker.CodeRunClosed {
		t.Fatalf("err = %v, want RUN_CLOSED", err)
	}
	if got := types(w.journalEvents(t, run)); !equalTypes(got, journal.TypeRunOpen, journal.TypeRunClose) {
		t.Fatalf("journal = %v", got)
	}
}

func TestStrictRefusesWhenTheDecisionCannotBeRecorded(t *testing.T) {
	for _, mode := range []policy.Mode{policy.ModeStrict, policy.ModeReport} {
		t.Run(string(mode), func(t *testing.T) {
			w := start(t, mode, "")
			ctx := ctxT(t)
			run, _ := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
			if err := w.js.DeleteStream(ctx, subject.JournalStream); err != nil {
				t.Fatal(err)
			}
			sub := subscribe(t, w.app.Conn(), subject.Output(subject.Shared, run))
			reply, err := w.agent.Output(ctx, run, "ok", 1)
			if mode == policy.ModeStrict {
				var eb *broker.ErrorBody
				if !errors.As(err, &eb) || eb.Code != broker.CodeJournal || reply.Decision.Outcome != journal.OutcomeRefused {
					t.Fatalf("strict: err = %v, reply = %+v", err, reply)
				}
				if _, err := sub.NextMsg(300 * time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
					t.Fatal("strict mode performed an effect it could not record")
				}
				return
			}
			if err != nil || reply.Decision.Recorded || reply.Outcome == nil {
				t.Fatalf("report: err = %v, reply = %+v", err, reply.Decision)
			}
		})
	}
}

func TestMalformedRequestsGetStableCodes(t *testing.T) {
	w := start(t, policy.ModeStrict, "")
	ctx := ctxT(t)
	run, _ := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	cases := map[string]string{
		"not json":      `{"run":`,
		"unknown field": `{"run":"` + run + `","action":"deliver","colour":"red"}`,
		"bad run":       `{"run":"../../etc","action":"deliver"}`,
		"bad params":    `{"run":"` + run + `","action":"deliver","params":{"status":"ok","extra":1}}`,
		"bad action":    `{"run":"` + run + `","action":"shout"}`,
		"bad origin":    `{"run":"` + run + `","action":"deliver","origin":"heaven"}`,
	}
	for name, body := range cases {
		msg, err := w.agent.Conn().RequestWithContext(ctx, subject.Effect(subject.Shared, policy.SinkOutput), []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if code := msg.Header.Get("Nats-Service-Error-Code"); code != string(broker.CodeBadRequest) {
			t.Fatalf("%s: code %q (%s), want BAD_REQUEST", name, code, msg.Data)
		}
	}
}

// subscribe subscribes and flushes, so the server has the subscription
// before anything is published: a "nothing arrived" check is then honest.
func subscribe(t *testing.T, nc *nats.Conn, subj string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subj)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sub
}

// TestOffModeDecidesAndRecordsNothing: in mode off every effect goes
// through and nothing reaches the journal, not even run.open.
func TestOffModeDecidesAndRecordsNothing(t *testing.T) {
	w := start(t, policy.ModeOff, denyOutput)
	ctx := ctxT(t)
	run, err := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada", Mandate: &policy.Mandate{Systems: []string{"erp"}}})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := w.agent.Output(ctx, run, "ok", 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := reply.Decision; d.Outcome != journal.OutcomeAllowed || d.Recorded || d.Mode != policy.ModeOff || reply.Outcome == nil {
		t.Fatalf("off mode: %+v %+v", d, reply.Outcome)
	}
	if evs := w.journalEvents(t, run); len(evs) != 0 {
		t.Fatalf("off mode recorded %v", types(evs))
	}
}
