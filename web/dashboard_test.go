package web

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/natstest"
	"github.com/gatehouse/gatehouse/broker/review/reviewtest"
	"github.com/gatehouse/gatehouse/dashboard"
	"github.com/gatehouse/gatehouse/policy"
)

// memJournal keeps approval events in memory: a hand-written fake of the
// broker's journal, which is not under test here.
type memJournal struct {
	mu     sync.Mutex
	events []*journal.Event
}

func (j *memJournal) Record(_ context.Context, e *journal.Event) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
	return nil
}

// approvals returns a real approval.Service over JetStream KV on an
// embedded nats-server.
func approvals(t testing.TB, cfg ...approval.Config) *approval.Service {
	t.Helper()
	js := natstest.JetStream(t)
	st, err := approval.NewKVStore(context.Background(), js, "approvals_web_test", 1)
	if err != nil {
		t.Fatal(err)
	}
	var c approval.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	return approval.New(st, &memJournal{}, c)
}

// hold asks for approval of a refund for tenant/person.
func hold(t testing.TB, svc *approval.Service, tenant, person, amount string) *approval.Request {
	t.Helper()
	run := "r_" + tenant + "_" + person
	params := fmt.Sprintf(`{"amount":%q,"currency":"EUR","iban":"DE89370400440532013000"}`, amount)
	d, args, err := approval.Action{Sink: "provider", Action: "call", Run: run, Params: json.RawMessage(params)}.Digest()
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := svc.Request(context.Background(), approval.Hold{Run: run, Effect: "e_" + amount, Tenant: tenant, Person: person,
		Agent: "invoice-bot", Sink: "provider", Action: "call", ActionDigest: d, Arguments: args,
		Checks: []approval.Check{{Change: "refund " + amount + " EUR to DE89…3000", Outcome: "allow", Rule: "grounding:refunds", Records: []string{"r_x/e_read1 sha256:9f2c…"}}},
		Need:   policy.ApprovalNeed{Rule: "approval:refunds", Roles: []string{"reviewer"}, Assurance: "password"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const pw = "correct horse battery"

type env struct {
	srv      *httptest.Server
	svc      *approval.Service
	users    *Users
	journal  string
	setupTok string
}

func newEnv(t *testing.T, withUsers bool) *env {
	t.Helper()
	dir := t.TempDir()
	ev := &env{svc: approvals(t), users: OpenUsers(filepath.Join(dir, "users.json")),
		journal: reviewtest.Write(t, filepath.Join(dir, "journal")), setupTok: NewSetupToken()}
	if withUsers {
		for _, u := range []User{
			{Name: "rita", Roles: []Role{RoleReviewer}},
			{Name: "olga", Roles: []Role{RoleOperator}},
			{Name: "ada", Roles: []Role{RoleAdmin}},
			{Name: "aud-acme", Roles: []Role{RoleAuditor}, Tenant: "acme"},
			{Name: "aud-globex", Roles: []Role{RoleAuditor}, Tenant: "globex"},
			{Name: "rev-globex", Roles: []Role{RoleReviewer}, Tenant: "globex"},
			{Name: "op-globex", Roles: []Role{RoleOperator}, Tenant: "globex"},
			{Name: "alice", Roles: []Role{RoleReviewer}}, // the person the work is for
		} {
			if err := ev.users.Add(u, pw); err != nil {
				t.Fatal(err)
			}
		}
	}
	ev.srv = newTestServer(Config{Users: ev.users, SetupToken: ev.setupTok, Approvals: ev.svc, JournalDir: ev.journal})
	t.Cleanup(ev.srv.Close)
	return ev
}

func newTestServer(cfg Config) *httptest.Server {
	cfg.Status = func() dashboard.Status { return dashboard.Status{Mode: "report"} }
	return httptest.NewServer(New(cfg))
}

func newJarClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// client is a browser-like client: a cookie jar, no redirects followed.
type client struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func (ev *env) client(t *testing.T) *client {
	return &client{t: t, base: ev.srv.URL, hc: newJarClient()}
}

func (c *client) get(path string) (*http.Response, string) {
	c.t.Helper()
	resp, err := c.hc.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfMeta = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// csrf reads the token a page carries.
func (c *client) csrf(path string) string {
	c.t.Helper()
	_, body := c.get(path)
	m := csrfMeta.FindStringSubmatch(body)
	if m == nil {
		c.t.Fatalf("no CSRF token on %s", path)
	}
	return m[1]
}

func (c *client) post(path string, form url.Values, hx bool) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if hx {
		req.Header.Set("HX-Request", "true")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (c *client) login(name string) {
	c.t.Helper()
	tok := c.csrf("/login")
	resp, body := c.post("/login", url.Values{"_csrf": {tok}, "name": {name}, "password": {pw}}, false)
	if resp.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("login %s: %d %s", name, resp.StatusCode, body)
	}
}

func TestWithoutSessionEveryPageSendsToLogin(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	for _, p := range []string{"/approvals", "/review", "/evidence", "/evidence/acme/alice", "/evidence/acme/export.tar.gz", "/status", "/api/review"} {
		resp, _ := c.get(p)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	r := hold(t, ev.svc, "acme", "alice", "10.00")
	tok := c.csrf("/login")
	resp, _ := c.post("/approvals/"+r.ID+"/decide", url.Values{"_csrf": {tok}, "decision": {"approve"}}, false)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("decide without a session: %d", resp.StatusCode)
	}
	if got, _ := ev.svc.Get(context.Background(), r.ID); got.State != approval.StatePending {
		t.Errorf("state %s", got.State)
	}
}

func TestCSRF(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	// Login without and with a wrong token.
	for _, tok := range []string{"", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		c.csrf("/login") // sets the cookie
		resp, _ := c.post("/login", url.Values{"_csrf": {tok}, "name": {"rita"}, "password": {pw}}, false)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("login with CSRF %q: %d", tok, resp.StatusCode)
		}
	}
	c.login("rita")
	r := hold(t, ev.svc, "acme", "alice", "11.00")
	resp, _ := c.post("/approvals/"+r.ID+"/decide", url.Values{"_csrf": {"wrong"}, "decision": {"approve"}}, true)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("decide with a wrong CSRF token: %d", resp.StatusCode)
	}
	// A cross-site Origin is refused even with the right token.
	tok := c.csrf("/approvals")
	req, _ := http.NewRequest(http.MethodPost, ev.srv.URL+"/approvals/"+r.ID+"/decide", strings.NewReader(url.Values{"_csrf": {tok}, "decision": {"approve"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	if resp, err := c.hc.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site decide: %v %v", resp.StatusCode, err)
	}
	if got, _ := ev.svc.Get(context.Background(), r.ID); got.State != approval.StatePending {
		t.Errorf("state %s after refused requests", got.State)
	}
}

func TestReviewerDecides(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	c.login("rita")
	r := hold(t, ev.svc, "acme", "alice", "12.00")
	_, page := c.get("/approvals")
	for _, want := range []string{r.ID, "DE89370400440532013000", `data-live="/approvals/events"`} {
		if !strings.Contains(page, want) {
			t.Errorf("queue page lacks %q", want)
		}
	}
	_, page = c.get("/approvals/" + r.ID)
	for _, want := range []string{"grounding:refunds", r.ActionDigest, `data-testid="approve"`, "Earlier in this run"} {
		if !strings.Contains(page, want) {
			t.Errorf("the request's page lacks %q", want)
		}
	}
	tok := c.csrf("/approvals")
	// A refusal needs a reason.
	resp, body := c.post("/approvals/"+r.ID+"/decide", url.Values{"_csrf": {tok}, "decision": {"refuse"}}, true)
	if resp.StatusCode != 200 || !strings.Contains(body, "needs a reason") {
		t.Errorf("refuse without reason: %d %s", resp.StatusCode, body)
	}
	resp, body = c.post("/approvals/"+r.ID+"/decide", url.Values{"_csrf": {tok}, "decision": {"approve"}, "reason": {"matches ticket 4411"}}, true)
	if resp.StatusCode != 200 || !strings.Contains(body, `data-state="approved"`) || !strings.Contains(body, "Approved") {
		t.Fatalf("approve: %d %s", resp.StatusCode, body)
	}
	got, _ := ev.svc.Get(context.Background(), r.ID)
	d := got.Decision
	if got.State != approval.StateApproved || d == nil || d.Approver != "rita" || d.Assurance != "password" ||
		d.Authenticated != "dashboard-session" || d.Reason != "matches ticket 4411" || len(d.Roles) != 1 || d.Roles[0] != "reviewer" {
		t.Fatalf("stored decision: %+v %+v", got, d)
	}
	// The first decision stands.
	resp, body = c.post("/approvals/"+r.ID+"/decide", url.Values{"_csrf": {tok}, "decision": {"refuse"}, "reason": {"late"}}, true)
	if !strings.Contains(body, "decided this first") {
		t.Errorf("second decision: %d %s", resp.StatusCode, body)
	}
	resp, _ = c.post("/approvals/"+r.ID+"/decide", url.Values{"_csrf": {tok}, "decision": {"refuse"}, "reason": {"late"}}, false)
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("second decision without htmx: %d", resp.StatusCode)
	}
}

func TestRequesterCannotApprove(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	c.login("alice")
	r := hold(t, ev.svc, "acme", "alice", "13.00")
	tok := c.csrf("/approvals")
	resp, _ := c.post("/approvals/"+r.ID+"/decide", url.Values{"_csrf": {tok}, "decision": {"approve"}}, false)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("the person the work is for approving: %d", resp.StatusCode)
	}
}

func TestTenantBoundUsersSeeOnlyTheirTenant(t *testing.T) {
	ev := newEnv(t, true)
	acme := ev.client(t)
	acme.login("aud-acme")
	for p, code := range map[string]int{
		"/evidence/acme/alice":           200,
		"/evidence/acme/export.tar.gz":   200,
		"/evidence/globex/carl":          404,
		"/evidence/globex/export.tar.gz": 404,
		"/evidence/globex/alice":         404,
		"/review":                        403,
		"/approvals":                     403,
	} {
		if resp, _ := acme.get(p); resp.StatusCode != code {
			t.Errorf("acme auditor GET %s: %d, want %d", p, resp.StatusCode, code)
		}
	}
	_, idx := acme.get("/evidence")
	if !strings.Contains(idx, "alice") || strings.Contains(idx, "globex") || strings.Contains(idx, "carl") {
		t.Errorf("acme's evidence index shows another tenant:\n%s", idx)
	}
	_, person := acme.get("/evidence/acme/alice")
	for _, want := range []string{reviewtest.RunAcmeAlice1, reviewtest.RunAcmeAlice2, `data-testid="chart"`, "Journal verified", "mutation-without-atom"} {
		if !strings.Contains(person, want) {
			t.Errorf("person page lacks %q", want)
		}
	}
	if strings.Contains(person, reviewtest.RunAcmeBob) {
		t.Errorf("alice's page shows bob's run")
	}
	// The export holds acme's runs only.
	resp, err := acme.hc.Get(ev.srv.URL + "/evidence/acme/export.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	all := strings.Join(names, " ")
	if !strings.Contains(all, reviewtest.RunAcmeAlice1+".jsonl") || !strings.Contains(all, reviewtest.RunAcmeBob+".jsonl") || strings.Contains(all, reviewtest.RunGlobexCarl) || !strings.Contains(all, "head.jsonl") {
		t.Errorf("acme export holds %v", names)
	}

	// A tenant-bound reviewer sees and decides only their tenant's requests.
	ra := hold(t, ev.svc, "acme", "alice", "14.00")
	rg := hold(t, ev.svc, "globex", "carl", "15.00")
	g := ev.client(t)
	g.login("rev-globex")
	_, page := g.get("/approvals")
	if strings.Contains(page, ra.ID) || !strings.Contains(page, rg.ID) {
		t.Errorf("globex reviewer's queue: acme shown %v, globex shown %v", strings.Contains(page, ra.ID), strings.Contains(page, rg.ID))
	}
	tok := g.csrf("/approvals")
	if resp, _ := g.post("/approvals/"+ra.ID+"/decide", url.Values{"_csrf": {tok}, "decision": {"approve"}}, false); resp.StatusCode != http.StatusNotFound {
		t.Errorf("globex reviewer deciding acme's request: %d", resp.StatusCode)
	}
	// Policy review spans every tenant: a tenant-bound operator may not.
	op := ev.client(t)
	op.login("op-globex")
	if resp, _ := op.get("/review"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("tenant-bound operator on policy review: %d", resp.StatusCode)
	}
	// An admin sees every tenant.
	ad := ev.client(t)
	ad.login("ada")
	if resp, _ := ad.get("/evidence/globex/carl"); resp.StatusCode != 200 {
		t.Errorf("admin: %d", resp.StatusCode)
	}
}

func TestPolicyReviewPage(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	c.login("olga")
	resp, page := c.get("/review")
	if resp.StatusCode != 200 || !strings.Contains(page, "mutation-without-atom") || !strings.Contains(page, "decision: allow") {
		t.Fatalf("review page %d:\n%s", resp.StatusCode, page)
	}
	if resp, _ := c.get("/approvals"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("operator on approvals: %d", resp.StatusCode)
	}
	_, js := c.get("/api/review")
	if !strings.Contains(js, `"refusal":"mutation-without-atom"`) {
		t.Errorf("api/review: %s", js)
	}
}

func TestFirstRunSetup(t *testing.T) {
	ev := newEnv(t, false)
	c := ev.client(t)
	if resp, _ := c.get("/setup?token=nope"); resp.StatusCode != 404 {
		t.Errorf("wrong token: %d", resp.StatusCode)
	}
	tok := c.csrf("/setup?token=" + ev.setupTok)
	if resp, body := c.post("/setup", url.Values{"_csrf": {tok}, "token": {ev.setupTok}, "name": {"root"}, "password": {"short"}}, false); resp.StatusCode != 400 || !strings.Contains(body, "too short") {
		t.Errorf("short password: %d", resp.StatusCode)
	}
	resp, _ := c.post("/setup", url.Values{"_csrf": {tok}, "token": {ev.setupTok}, "name": {"root"}, "password": {pw}}, false)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("setup: %d", resp.StatusCode)
	}
	if resp, _ := c.get("/evidence/globex/carl"); resp.StatusCode != 200 {
		t.Errorf("the new admin is signed in: %d", resp.StatusCode)
	}
	if resp, _ := c.get("/setup?token=" + ev.setupTok); resp.StatusCode != http.StatusNotFound {
		t.Errorf("setup twice: %d", resp.StatusCode)
	}
	if resp, _ := c.get("/setup"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("the setup page after setup: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	users, _ := ev.users.List()
	if len(users) != 1 || users[0].Name != "root" || users[0].Roles[0] != RoleAdmin {
		t.Errorf("users %+v", users)
	}
}

func TestLogout(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	c.login("rita")
	tok := c.csrf("/approvals")
	if resp, _ := c.post("/logout", url.Values{"_csrf": {tok}}, false); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout %d", resp.StatusCode)
	}
	if resp, _ := c.get("/approvals"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after logout: %d", resp.StatusCode)
	}
}

func TestSecurityHeadersAndCookies(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	resp, _ := c.get("/login")
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q", csp)
	}
	for _, ck := range resp.Cookies() {
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
			t.Errorf("cookie %s: %+v", ck.Name, ck)
		}
	}
	tok := c.csrf("/login")
	req, _ := http.NewRequest(http.MethodPost, ev.srv.URL+"/login", strings.NewReader(url.Values{"_csrf": {tok}, "name": {"rita"}, "password": {pw}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookie {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || len(session.Value) != 43 {
		t.Errorf("session cookie %+v", session)
	}
	for _, p := range []string{"/static/htmx-2.0.11.min.js", "/static/htmx-ext-sse-2.2.4.min.js"} {
		if resp, body := c.get(p); resp.StatusCode != 200 || len(body) < 1000 {
			t.Errorf("GET %s: %d", p, resp.StatusCode)
		}
	}
}

// The queue page's SSE stream carries a new request as a "queue" event.
func TestQueueEventsCarryNewRequests(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	c.login("rita")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ev.srv.URL+"/approvals/events", nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, "retry: ") {
		t.Fatalf("first line %q", line)
	}
	if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, ": connected") {
		t.Fatalf("second line %q", line)
	}
	r := hold(t, ev.svc, "acme", "alice", "16.00")
	event, data := "", ""
	changed := false
	for ctx.Err() == nil && !(changed && strings.Contains(data, r.ID)) {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimSpace(line[7:])
			if event == "queue" {
				data = ""
			}
		case strings.HasPrefix(line, "data: ") && event == "queue":
			data += line[6:]
		case strings.HasPrefix(line, "data: ") && event == "changed":
			changed = changed || strings.TrimSpace(line[6:]) == r.ID
		}
	}
	if !strings.Contains(data, `data-testid="request-row"`) || !strings.Contains(data, "16.00") {
		t.Errorf("queue event lacks the new request's row:\n%s", data)
	}
}

// An approved action claimed and never settled becomes outcome_unknown;
// a reviewer reconciles it on the queue page.
func TestReconcileOutcomeUnknown(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ev := newEnv(t, true)
	ev.svc = approvals(t, approval.Config{Now: clock, ClaimTimeout: time.Minute})
	ev.srv.Close()
	ev.srv = newTestServer(Config{Users: ev.users, Approvals: ev.svc, JournalDir: ev.journal})
	ctx := context.Background()
	r := hold(t, ev.svc, "acme", "alice", "17.00")
	if _, err := ev.svc.Decide(ctx, r.ID, approval.Decision{Approved: true, Approver: "ops", Roles: []string{"reviewer"}, Assurance: "password"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ev.svc.Claim(ctx, r.ID, r.Effect); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	if _, err := ev.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := ev.svc.Get(ctx, r.ID); got.State != approval.StateOutcomeUnknown {
		t.Fatalf("state %s", got.State)
	}
	c := ev.client(t)
	c.login("rita")
	_, page := c.get("/approvals?state=unknown&sel=" + r.ID)
	if !strings.Contains(page, "Outcome unknown") || !strings.Contains(page, `data-testid="happened"`) {
		t.Fatalf("queue page lacks the reconcile form:\n%s", page)
	}
	tok := c.csrf("/approvals")
	resp, body := c.post("/approvals/"+r.ID+"/reconcile", url.Values{"_csrf": {tok}, "happened": {"yes"}, "reason": {"refund 17.00 is on the statement"}}, true)
	if resp.StatusCode != 200 || !strings.Contains(body, "Reconciled by rita") {
		t.Fatalf("reconcile: %d %s", resp.StatusCode, body)
	}
	got, _ := ev.svc.Get(ctx, r.ID)
	if got.State != approval.StateReconciled || got.Reconciled == nil || !got.Reconciled.Happened || got.Reconciled.By != "rita" {
		t.Errorf("stored: %+v", got)
	}
	// Reconciling again is refused.
	if resp, _ := c.post("/approvals/"+r.ID+"/reconcile", url.Values{"_csrf": {tok}, "happened": {"no"}, "reason": {"x"}}, false); resp.StatusCode != http.StatusConflict {
		t.Errorf("second reconcile: %d", resp.StatusCode)
	}
}
