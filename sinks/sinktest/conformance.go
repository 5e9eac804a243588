package sinktest

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// Case describes one effect of a sink for Conformance.
type Case struct {
	Sink policy.Sink
	// Work is whom the work is for; zero: tenant acme, person ada.
	Work broker.OpenWork
	// Request builds the agent's request for run; its origin picks how it
	// is proposed (Env.Effect).
	Request func(run string) broker.EffectRequest
	// Deny is an effects: rule matching the request, named "conformance-deny",
	// e.g. `{sink: memory}`; it is written into the rules file as the match.
	Deny string
	// Happened reports whether the effect took place (the file exists, the
	// message arrived, ...), looked up for real, not from the reply.
	Happened func(t testing.TB, env *Env, run string, reply *broker.EffectReply) bool
	// Secret is a string of the request's content that must never reach the
	// journal ("" skips the check).
	Secret string
	// Sinks builds the sinks under test.
	Sinks SinkFactory
}

// Conformance runs c allowed, then refused by a deny rule in report mode
// and in strict mode, checking the reply, whether the effect happened, the
// journal's events, that verify passes and that no content leaked.
func Conformance(t *testing.T, c Case) {
	if c.Work.Tenant == "" {
		c.Work = broker.OpenWork{Tenant: "acme", Person: "ada"}
	}
	deny := "effects:\n  - name: conformance-deny\n    decision: deny\n    match: " + c.Deny + "\n"
	for _, tc := range []struct {
		name     string
		mode     policy.Mode
		rules    string
		outcome  journal.Outcome
		happens  bool
		rule     string
		enforced bool
	}{
		{"allowed", policy.ModeStrict, "", journal.OutcomeAllowed, true, "", false},
		{"report-would-refuse", policy.ModeReport, deny, journal.OutcomeAllowed, true, "conformance-deny", false},
		{"strict-refuses", policy.ModeStrict, deny, journal.OutcomeRefused, false, "conformance-deny", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := Start(t, tc.mode, tc.rules, c.Sinks)
			run := env.Open(t, c.Work)
			reply, err := env.Effect(t, c.Sink, c.Request(run))
			if err != nil {
				t.Fatalf("effect: %v", err)
			}
			d := reply.Decision
			if d.Outcome != tc.outcome || d.Rule != tc.rule || d.Enforced != tc.enforced || !d.Recorded {
				t.Fatalf("decision = %+v, want outcome %s rule %q enforced %v, recorded", d, tc.outcome, tc.rule, tc.enforced)
			}
			if got := c.Happened(t, env, run, reply); got != tc.happens {
				t.Fatalf("effect happened = %v, want %v", got, tc.happens)
			}
			evs := env.Events(t, run)
			want := []journal.Type{journal.TypeRunOpen, journal.TypeDecision}
			if tc.happens {
				want = append(want, journal.TypeAttempt, journal.TypeOutcome)
			}
			if got := Types(evs); !slices.Equal(got, want) {
				t.Fatalf("journal = %v, want %v", got, want)
			}
			var dec journal.Decision
			if err := json.Unmarshal(evs[1].Data, &dec); err != nil {
				t.Fatal(err)
			}
			if dec.Sink != c.Sink || dec.ActingFor.Person != c.Work.Person || dec.Outcome != tc.outcome || dec.Rule != tc.rule {
				t.Fatalf("recorded decision = %+v", dec)
			}
			env.Verify(t)
			if c.Secret != "" {
				env.NoContent(t, c.Secret)
			}
		})
	}
}
