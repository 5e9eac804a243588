package dashboard

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/a-h/templ"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/review"
	"github.com/gatehouse/gatehouse/broker/review/reviewtest"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func request(i int, st approval.State) approval.Request {
	r := approval.Request{
		ID: fmt.Sprintf("ap_20261130T090000_%016x", i), Run: "r_acme_alice", Effect: fmt.Sprintf("e_%d", i),
		Tenant: "acme", Person: "alice", Agent: "invoice-bot", Sink: "provider", Action: "call",
		ActionDigest: "sha256:5d41402abc4b2a76b9719d911017c592",
		Arguments: []approval.Argument{{Name: "amount", Value: fmt.Sprintf("%d.00", 100+i)}, {Name: "currency", Value: "EUR"},
			{Name: "iban", Value: "DE89370400440532013000"}, {Name: "note", Value: `<script>alert(1)</script>`}},
		Checks: []approval.Check{{Change: "refund to DE89…3000", Outcome: "allow", Rule: "grounding:refunds", Records: []string{"r_x/e_read sha256:9f2c"}}},
		Rule:   "approval:refunds", Roles: []string{"reviewer", "finance"}, Assurance: "password",
		Requested: t0.Add(time.Duration(i) * time.Minute), Updated: t0.Add(time.Duration(i) * time.Minute), State: st,
	}
	return r
}

func nav(active string) Nav {
	return Nav{User: "rita", CSRF: "csrf-token-fixture", Active: active, Approvals: true, Review: true, Evidence: true}
}

func render(t testing.TB, c templ.Component) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestPagesGolden(t *testing.T) {
	dir := reviewtest.Write(t, filepath.Join(t.TempDir(), "journal"))
	rep, err := review.Review(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep.Journal = "/data/journal"
	tl, err := evidence.Timeline(dir, "acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	people, _ := evidence.People(dir, "acme")

	approved := request(3, approval.StateApproved)
	approved.Decision = &approval.Decision{Approved: true, Approver: "rita", Assurance: "password", Reason: "ticket 4411", Time: t0.Add(time.Hour)}
	destructive := request(2, approval.StateReopened)
	destructive.Destructive = true
	q := QueueView{Pending: []approval.Request{request(1, approval.StatePending), destructive}, Total: 2,
		Unknown: []approval.Request{request(4, approval.StateOutcomeUnknown)}, Recent: []approval.Request{approved}, CSRF: "csrf-token-fixture"}

	for name, c := range map[string]templ.Component{
		"login.html":      LoginPage(LoginView{CSRF: "csrf-token-fixture", Next: "/approvals", Error: "Wrong name or password."}),
		"login-code.html": LoginPage(LoginView{CSRF: "csrf-token-fixture", Next: "/approvals", Pending: "pending-fixture"}),
		"status-operator.html": StatusShell(Nav{User: "olga", CSRF: "csrf-token-fixture", Active: "status", Review: true, Reload: true},
			Status{Mode: "strict", PolicyName: "rules.yaml", PolicyDigest: "sha256:0f", Started: t0, Now: t0.Add(time.Hour)}),
		"setup.html":           SetupPage(SetupView{CSRF: "csrf-token-fixture", Token: "setup-token"}),
		"approvals.html":       ApprovalsPage(ApprovalsView{Nav: nav("approvals"), Queue: q}),
		"approvals-empty.html": ApprovalsPage(ApprovalsView{Nav: nav("approvals"), Queue: QueueView{CSRF: "x"}}),
		"card-approved.html":   ApprovalCard(CardView{Req: approved, CSRF: "x"}),
		"card-error.html":      ApprovalCard(CardView{Req: request(5, approval.StatePending), CSRF: "x", Error: "You may not decide this one."}),
		"review.html":          ReviewPage(ReviewView{Nav: nav("review"), Report: rep}),
		"evidence-index.html":  EvidenceIndexPage(EvidenceIndexView{Nav: nav("evidence"), Tenants: []TenantPeople{{Tenant: "acme", People: people}}}),
		"person.html": PersonPage(PersonView{Nav: Nav{User: "aud", Tenant: "acme", CSRF: "x", Evidence: true, Active: "evidence"}, Timeline: tl,
			Verify: VerifyStatus{Checked: true, OK: true, Runs: 4, Events: 20, At: t0}}),
		"person-findings.html": PersonPage(PersonView{Nav: nav("evidence"), Timeline: &evidence.TimelineReport{Tenant: "acme", Person: "zoe"},
			Verify: VerifyStatus{Checked: true, Findings: 3, At: t0}}),
		"person-left-out.html": PersonPage(PersonView{Nav: nav("evidence"), Timeline: &evidence.TimelineReport{Tenant: "acme", Person: "zoe",
			LeftOut: []evidence.LeftOut{{Run: "r_acme_zoe_9", Reason: "it also worked for someone else: decision at event 4 acts for another principal"}}},
			Verify: VerifyStatus{Checked: true, OK: true, Runs: 4, Events: 20, At: t0}}),
	} {
		golden(t, name, render(t, c))
	}
}

// The queue page with 1,000 pending requests, as the handler renders it
// (cut to the oldest 200, web.MaxQueue), against rendering all 1,000.
func BenchmarkApprovalsPage1000(b *testing.B) {
	all := make([]approval.Request, 1000)
	for i := range all {
		all[i] = request(i, approval.StatePending)
	}
	for _, bc := range []struct {
		name  string
		shown int
	}{{"shown=200", 200}, {"shown=1000", 1000}} {
		b.Run(bc.name, func(b *testing.B) {
			v := ApprovalsView{Nav: nav("approvals"), Queue: QueueView{Pending: all[:bc.shown], Total: len(all), CSRF: "x"}}
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := ApprovalsPage(v).Render(context.Background(), &buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "bytes/page")
		})
	}
}
