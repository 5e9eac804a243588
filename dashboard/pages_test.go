package dashboard

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
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
	ok := approval.Standing{OK: true}
	locked := approval.Standing{NeedRoles: []string{"finance"}}
	f := Filter{State: "waiting", Sort: "oldest", Page: 1}
	q := QueueView{Items: []QueueItem{{Req: request(1, approval.StatePending), Standing: ok}, {Req: destructive, Standing: locked}},
		Matching: 2, Page: 1, Pages: 1, PerPage: 50, Counts: map[string]int{"waiting": 2, "unknown": 1, "decided": 1, "all": 4},
		Filter: f, Options: FilterOptions{Tenants: []string{"acme"}, Rules: []string{"approval:refunds"}, Agents: []string{"invoice-bot"}, Persons: []string{"alice"}},
		Selected: request(1, approval.StatePending).ID, CSRF: "csrf-token-fixture", Now: t0.Add(2 * time.Hour)}
	holder := Holder{Name: "rita", Roles: []string{"reviewer"}, Assurance: "password"}
	pane := DetailView{Req: request(1, approval.StatePending), Standing: ok, Holder: holder, CSRF: "csrf-token-fixture", Now: t0.Add(2 * time.Hour), RunLink: true,
		Earlier: []evidence.DecisionEntry{{Effect: "e_0", Time: t0, Sink: "provider", Action: "call", Label: "bank GET api.bank/accounts", Outcome: "allowed"}}}
	spoof := request(6, approval.StatePending)
	spoof.Arguments = []approval.Argument{{Name: "status", Value: `"pay‮exe.txt"`}, {Name: "params", Value: `{"z":1,"file":"‮gnp.exe","a":[1,2]}`},
		{Name: "memo", Value: `"` + strings.Repeat("long ", 300) + `"`}}
	lockedPane := DetailView{Req: request(7, approval.StatePending), Standing: approval.Standing{NeedRoles: []string{"finance"}, NeedAssurance: "mfa"}, Holder: holder,
		CSRF: "x", Now: t0.Add(time.Hour)}
	unknown := request(4, approval.StateOutcomeUnknown)
	unknown.Claim = &approval.Claim{Effect: "e_4b", Time: t0.Add(3 * time.Minute)}

	for name, c := range map[string]templ.Component{
		"login.html":      LoginPage(LoginView{CSRF: "csrf-token-fixture", Next: "/approvals", Error: "Wrong name or password."}),
		"login-code.html": LoginPage(LoginView{CSRF: "csrf-token-fixture", Next: "/approvals", Pending: "pending-fixture"}),
		"status-operator.html": StatusShell(Nav{User: "olga", CSRF: "csrf-token-fixture", Active: "status", Review: true, Reload: true},
			Status{Mode: "strict", PolicyName: "rules.yaml", PolicyDigest: "sha256:0f", Started: t0, Now: t0.Add(time.Hour)}),
		"setup.html":           SetupPage(SetupView{CSRF: "csrf-token-fixture", Token: "setup-token", Enabled: true}),
		"setup-howto.html":     SetupPage(SetupView{CSRF: "csrf-token-fixture", Enabled: true}),
		"error.html":           ErrorPage(ErrorView{Code: 404, Title: "Not Found", Message: "There is no such tenant."}),
		"approvals.html":       ApprovalsPage(ApprovalsView{Nav: nav("approvals"), Queue: q, Detail: &pane}),
		"approvals-empty.html": ApprovalsPage(ApprovalsView{Nav: nav("approvals"), Queue: QueueView{CSRF: "x", Filter: f, Page: 1, Pages: 1}}),
		"pane-approved.html":   Pane(DetailView{Req: approved, Standing: ok, Holder: holder, CSRF: "x", Now: t0.Add(2 * time.Hour)}),
		"pane-error.html":      DecisionReply(DetailView{Req: request(5, approval.StatePending), Standing: ok, Holder: holder, CSRF: "x", Error: "You may not decide this one.", Now: t0}),
		"pane-spoof.html":      Pane(DetailView{Req: spoof, Standing: ok, Holder: holder, CSRF: "x", Now: t0}),
		"pane-locked.html":     Pane(lockedPane),
		"pane-unknown.html":    Pane(DetailView{Req: unknown, Standing: ok, Holder: holder, CSRF: "x", Now: t0.Add(time.Hour)}),
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

// The approvals page with one page of the list (50 rows, web.PerPage) and
// a request's pane, against 200 rows on one page.
func BenchmarkApprovalsPage(b *testing.B) {
	all := make([]QueueItem, 200)
	for i := range all {
		all[i] = QueueItem{Req: request(i, approval.StatePending), Standing: approval.Standing{OK: true}}
	}
	for _, bc := range []struct {
		name  string
		shown int
	}{{"rows=50", 50}, {"rows=200", 200}} {
		b.Run(bc.name, func(b *testing.B) {
			d := DetailView{Req: all[0].Req, Standing: approval.Standing{OK: true}, CSRF: "x", Now: t0}
			v := ApprovalsView{Nav: nav("approvals"), Detail: &d, Queue: QueueView{Items: all[:bc.shown], Matching: 1000, Page: 1, Pages: 20,
				Filter: Filter{State: "waiting", Sort: "oldest", Page: 1}, Counts: map[string]int{"waiting": 1000}, CSRF: "x", Now: t0}}
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
