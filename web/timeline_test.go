package web

import (
	"encoding/json"
	"fmt"
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
	mixed := writeMixedRun(t, ev)
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

// The same run's own page (/runs/RUN, linked from the approvals pane and
// policy review) is the one a tenant-bound user could open by its id: it
// must apply the same rule, or the acme auditor and the acme reviewer
// read what the run did for globex there. Users of the whole deployment
// (the admin, an unbound reviewer) still see it whole.
func TestRunPageOfARunThatWorkedForAnotherTenantIsNotShownToATenant(t *testing.T) {
	ev := newEnv(t, true)
	if err := ev.users.Add(User{Name: "rev-acme", Roles: []Role{RoleReviewer}, Tenant: "acme"}, pw); err != nil {
		t.Fatal(err)
	}
	mixed := writeMixedRun(t, ev)
	for _, name := range []string{"aud-acme", "rev-acme"} {
		c := ev.client(t)
		c.login(name)
		resp, page := c.get("/runs/" + mixed)
		if resp.StatusCode != 404 || strings.Contains(page, "globex-payroll") || strings.Contains(page, "bob") {
			t.Errorf("%s: GET /runs/%s: %d, want 404 without globex's decision:\n%s", name, mixed, resp.StatusCode, page)
		}
	}
	for _, name := range []string{"ada", "rita"} {
		c := ev.client(t)
		c.login(name)
		if resp, page := c.get("/runs/" + mixed); resp.StatusCode != 200 || !strings.Contains(page, "globex-payroll") {
			t.Errorf("%s: GET /runs/%s: %d, want the whole run:\n%s", name, mixed, resp.StatusCode, page)
		}
	}
}

// writeMixedRun appends a run opened for acme/alice whose one decision
// acts for globex/bob (target globex-payroll) and returns its id.
func writeMixedRun(t *testing.T, ev *env) string {
	t.Helper()
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
	return mixed
}

// The approvals pane lists the run's earlier decisions: for a reviewer
// bound to acme, a held request of a run that also decided for globex
// must not show that decision there either.
func TestApprovalPaneOfAMixedRunShowsATenantNoOtherTenantsDecision(t *testing.T) {
	ev := newEnv(t, true)
	if err := ev.users.Add(User{Name: "rev-acme", Roles: []Role{RoleReviewer}, Tenant: "acme"}, pw); err != nil {
		t.Fatal(err)
	}
	mixed := writeMixedRun(t, ev)
	r := hold(t, ev.svc, "acme", "alice_mixed", "12.00") // run r_acme_alice_mixed
	if r.Run != mixed {
		t.Fatalf("held on run %s, want %s", r.Run, mixed)
	}
	c := ev.client(t)
	c.login("rev-acme")
	for _, path := range []string{"/approvals/" + r.ID + "/pane", "/approvals/" + r.ID} {
		resp, page := c.get(path)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		if strings.Contains(page, "globex-payroll") {
			t.Errorf("GET %s shows the run's decision for globex to an acme reviewer:\n%s", path, page)
		}
	}
	admin := ev.client(t)
	admin.login("ada")
	if _, page := admin.get("/approvals/" + r.ID + "/pane"); !strings.Contains(page, "globex-payroll") {
		t.Errorf("the admin's pane lost the run's earlier decision:\n%s", page)
	}
}

// The person page's verify badge is about the whole journal: for a user
// bound to a tenant it says whether the journal verified, not how many
// runs and events the whole deployment holds (other tenants' activity,
// which an auditor reloading the page would watch grow). The admin's
// page still gives the figures.
func TestPersonPageGivesATenantNoDeploymentWideCounts(t *testing.T) {
	ev := newEnv(t, true)
	rep, err := journal.Verify(ev.journal, journal.VerifyOptions{})
	if err != nil || !rep.OK {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	whole := fmt.Sprintf("%d runs, %d events", rep.Runs, rep.Events)
	acme := ev.client(t)
	acme.login("aud-acme")
	resp, page := acme.get("/evidence/acme/alice")
	if resp.StatusCode != 200 || !strings.Contains(page, `data-testid="verify"`) || !strings.Contains(page, "no findings") {
		t.Fatalf("GET person: %d\n%s", resp.StatusCode, page)
	}
	if strings.Contains(page, whole) {
		t.Errorf("the acme auditor's page gives the whole journal's %q", whole)
	}
	admin := ev.client(t)
	admin.login("ada")
	if _, page := admin.get("/evidence/acme/alice"); !strings.Contains(page, whole) {
		t.Errorf("the admin's page lost the figures %q", whole)
	}
}
