// Package reviewtest writes a small, real journal (through journal.Writer)
// for the tests of review, the dashboard, the web server and e2e: two
// tenants, three people, report-mode decisions that strict mode would
// refuse, and enforced refusals. Imported by tests only.
package reviewtest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// Start is the time of the first event; events are a minute apart and
// runs a day apart, so the chart has several days.
var Start = time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)

// Runs of the fixture journal.
const (
	RunAcmeAlice1 = "r_acme_alice_1"
	RunAcmeAlice2 = "r_acme_alice_2"
	RunAcmeBob    = "r_acme_bob_1"
	RunGlobexCarl = "r_globex_carl_1"
)

type builder struct {
	events []journal.Event
	n      int
	t      time.Time
}

func (b *builder) add(run string, typ journal.Type, effect string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	b.n++
	b.t = b.t.Add(time.Minute)
	b.events = append(b.events, journal.Event{ID: fmt.Sprintf("e%04d", b.n), Run: run, Type: typ, Time: b.t, Effect: effect, Data: raw})
}

func (b *builder) open(run, tenant, person, agent string) principal {
	who := policy.Principal{Tenant: tenant, Person: person}
	b.add(run, journal.TypeRunOpen, "", journal.RunOpen{ActingFor: who, Scopes: []string{}, Agent: agent})
	return principal{b: b, run: run, who: who, agent: agent}
}

type principal struct {
	b     *builder
	run   string
	who   policy.Principal
	agent string
}

// decide records a decision and, when it was allowed, its attempt and
// outcome.
func (p principal) decide(effect string, d journal.Decision) {
	d.ActingFor, d.Agent, d.ScopesChecked, d.PolicyDigest = p.who, p.agent, []string{}, "sha256:fixture"
	if d.Mode == "" {
		d.Mode = policy.ModeReport
	}
	p.b.add(p.run, journal.TypeDecision, effect, d)
	if d.Outcome == journal.OutcomeAllowed {
		p.b.add(p.run, journal.TypeAttempt, effect, journal.Attempt{Sink: d.Sink, Action: d.Action})
		p.b.add(p.run, journal.TypeOutcome, effect, journal.Result{Status: "ok", Size: 12, Digest: "sha256:00"})
	}
}

func would(r policy.Refusal, rule, detail string) []policy.Reason {
	return []policy.Reason{{Refusal: r, Rule: rule, Detail: detail}}
}

// Events returns the fixture's events, unwritten.
func Events() []journal.Event {
	b := &builder{t: Start}
	a := b.open(RunAcmeAlice1, "acme", "alice", "invoice-bot")
	stripe := journal.Decision{Sink: policy.SinkProvider, Action: "call", Origin: policy.OriginShipped, Provider: "stripe",
		Method: "POST", Host: "api.stripe.com", Path: "/v1/refunds", Outcome: journal.OutcomeAllowed,
		Refusal: policy.RefuseMutationWithoutAtom, Rule: string(policy.RefuseMutationWithoutAtom),
		Reasons: would(policy.RefuseMutationWithoutAtom, string(policy.RefuseMutationWithoutAtom), "POST to stripe without an integration that declares its effect")}
	a.decide("f1", stripe)
	a.decide("f2", stripe)
	a.decide("f3", journal.Decision{Sink: policy.SinkOutput, Action: "deliver", Target: "done", Outcome: journal.OutcomeAllowed})
	b.add(RunAcmeAlice1, journal.TypeRunClose, "", journal.RunClose{Status: "done"})

	b.t = b.t.Add(24 * time.Hour)
	a2 := b.open(RunAcmeAlice2, "acme", "alice", "invoice-bot")
	a2.decide("f1", stripe)
	a2.decide("f2", journal.Decision{Sink: policy.SinkCode, Action: "run", Origin: policy.OriginModel, Target: "python3",
		Outcome: journal.OutcomeAllowed, Refusal: policy.RefuseUnconfinedExecution, Rule: string(policy.RefuseUnconfinedExecution),
		Reasons: would(policy.RefuseUnconfinedExecution, string(policy.RefuseUnconfinedExecution), "model code would run unconfined")})
	a2.decide("f3", journal.Decision{Sink: policy.SinkProvider, Action: "call", Origin: policy.OriginShipped, Provider: "stripe",
		Method: "POST", Host: "api.stripe.com", Path: "/v1/payouts", Atom: "payouts", Declared: policy.EffectWrite,
		Outcome: journal.OutcomeRefused, Refusal: policy.RefuseScopeMissing, Rule: "scope:payments.write", Enforced: true,
		Reasons: []policy.Reason{{Refusal: policy.RefuseScopeMissing, Rule: "scope:payments.write", Detail: "alice does not hold payments.write", Enforced: true}}})

	b.t = b.t.Add(24 * time.Hour)
	bob := b.open(RunAcmeBob, "acme", "bob", "")
	bob.decide("f1", journal.Decision{Sink: policy.SinkBrowser, Action: "send", Method: "POST", Host: "forms.example.net",
		Path: "/submit", PageHost: "shop.example.com", Target: "forms.example.net/submit", Outcome: journal.OutcomeAllowed,
		Refusal: policy.RefuseBrowserSendOffSite, Rule: string(policy.RefuseBrowserSendOffSite),
		Reasons: would(policy.RefuseBrowserSendOffSite, string(policy.RefuseBrowserSendOffSite), "a POST from shop.example.com to forms.example.net")})

	carl := b.open(RunGlobexCarl, "globex", "carl", "helper")
	carl.decide("f1", journal.Decision{Sink: policy.SinkOutput, Action: "deliver", Target: "report", Outcome: journal.OutcomeAllowed,
		Refusal: policy.RefuseAgentUnregistered, Rule: "agent:helper",
		Reasons: would(policy.RefuseAgentUnregistered, "agent:helper", "agent helper has no card")})
	return b.events
}

// Write writes the fixture journal into dir (a journal directory that
// need not exist) and returns dir.
func Write(t testing.TB, dir string) string {
	t.Helper()
	w, err := journal.Open(dir, journal.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(Events()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}
