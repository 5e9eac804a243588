package web

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/review/reviewtest"
	"github.com/gatehouse/gatehouse/policy"
)

// A run opened for acme/alice that also decided for globex/bob: the acme
// auditor's page for alice names it as left out (as the export does) and
// never shows what it did for globex.
func TestPersonPageLeavesOutRunsThatWorkedForSomeoneElse(t *testing.T) {
	ev := newEnv(t, true)
	w, err := journal.Open(ev.journal, journal.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := reviewtest.Start.Add(72 * time.Hour)
	data := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	const mixed = "r_acme_alice_mixed"
	if _, err := w.Append([]journal.Event{
		{ID: "m1", Run: mixed, Type: journal.TypeRunOpen, Time: at, Data: data(journal.RunOpen{ActingFor: policy.Principal{Tenant: "acme", Person: "alice"}, Scopes: []string{}})},
		{ID: "m2", Run: mixed, Type: journal.TypeDecision, Time: at.Add(time.Minute), Effect: "f1", Data: data(journal.Decision{
			ActingFor: policy.Principal{Tenant: "globex", Person: "bob"}, Sink: policy.SinkOutput, Action: "deliver", Target: "globex-payroll",
			Outcome: journal.OutcomeAllowed, Mode: policy.ModeReport})},
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	acme := ev.client(t)
	acme.login("aud-acme")
	resp, person := acme.get("/evidence/acme/alice")
	if resp.StatusCode != 200 {
		t.Fatalf("GET person: %d", resp.StatusCode)
	}
	if !strings.Contains(person, `data-testid="left-out"`) || !strings.Contains(person, mixed) || !strings.Contains(person, reviewtest.RunAcmeAlice1) {
		t.Errorf("the left-out run is not named:\n%s", person)
	}
	if strings.Contains(person, "globex-payroll") || strings.Contains(person, "bob") {
		t.Errorf("alice's page shows what the run did for globex:\n%s", person)
	}
}
