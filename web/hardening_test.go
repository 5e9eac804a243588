package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/dashboard"
	"github.com/gatehouse/gatehouse/policy"
)

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/approvals":                  "/approvals",
		"/approvals?state=unknown":    "/approvals?state=unknown",
		"/evidence/acme/alice":        "/evidence/acme/alice",
		"/runs/r_x":                   "/runs/r_x",
		"":                            "/",
		"/":                           "/",
		"//evil.example/":             "/",
		"/\t/evil.example/":           "/",
		"/%09/evil.example/":          "/",
		"/%2F/evil.example":           "/",
		"/%252F%252Fevil.example":     "/",
		`/\evil.example`:              "/",
		"/%5Cevil.example":            "/",
		"https://evil.example/":       "/",
		"evil.example":                "/",
		"/approvals\r\nSet-Cookie: x": "/",
		"/approvals/\u2028":           "/",
		"/login":                      "/", // not a page to go on to
		"/approvals/" + strings.Repeat("a", MaxNext): "/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzSafeNext: whatever is kept is a path on this site that a browser
// resolves to this site.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/approvals", "/%09/evil", "//x", "/\\x", "/approvals/%2e%2e/%2f%2fx"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := safeNext(s)
		if got == "/" {
			return
		}
		base, _ := url.Parse("http://gatehouse.test/")
		u, err := base.Parse(got)
		if err != nil || u.Host != "gatehouse.test" || u.Scheme != "http" {
			t.Fatalf("safeNext(%q) = %q resolves to %v (%v)", s, got, u, err)
		}
		if strings.ContainsAny(got, "\\\t\r\n ") || strings.Contains(got, "//") {
			t.Fatalf("safeNext(%q) = %q", s, got)
		}
	})
}

// The redirect after sign-in never leaves the site, whatever next says.
func TestLoginRedirectStaysOnSite(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	for _, next := range []string{"/\t/evil.example/", "//evil.example", "/%2F%2Fevil.example", "https://evil.example"} {
		tok := c.csrf("/login?next=" + url.QueryEscape(next))
		resp, _ := c.post("/login", url.Values{"_csrf": {tok}, "name": {"rita"}, "password": {pw}, "next": {next}}, false)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/approvals" {
			t.Errorf("next %q: %d Location %q, want /approvals", next, resp.StatusCode, loc)
		}
	}
}

func TestHostGuard(t *testing.T) {
	ev := newEnv(t, true)
	e := New(Config{Status: func() dashboard.Status { return dashboard.Status{} }, Users: ev.users, Hosts: []string{"gatehouse.corp.example"}})
	for _, tc := range []struct {
		host, path string
		code       int
	}{
		{"evil.example", "/login", http.StatusMisdirectedRequest},
		{"evil.example:8080", "/approvals", http.StatusMisdirectedRequest},
		{"evil.example", "/api/session", http.StatusMisdirectedRequest},
		{"evil.example", "/healthz", http.StatusOK},
		{"127.0.0.1:8080", "/login", http.StatusOK},
		{"[::1]:8080", "/login", http.StatusOK},
		{"localhost:8080", "/login", http.StatusOK},
		{"GateHouse.corp.example.", "/login", http.StatusOK},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		req.Host = tc.host
		e.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("Host %s GET %s: %d, want %d", tc.host, tc.path, rec.Code, tc.code)
		}
	}
}

// Failed sign-ins slow that name at that address with a doubling wait;
// another user behind the same address signs in as before, and the wait
// passes.
func TestSignInThrottleIsPerNameAndAddress(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	ev := newEnv(t, true)
	ev.srv.Close()
	ev.srv = newTestServer(Config{Users: ev.users, Approvals: ev.svc, JournalDir: ev.journal, Now: clk.now})
	c := ev.client(t)
	try := func(name, password string) *http.Response {
		tok := c.csrf("/login")
		resp, _ := c.post("/login", url.Values{"_csrf": {tok}, "name": {name}, "password": {password}}, false)
		return resp
	}
	for i := range throttlePair.free + 1 {
		if resp := try("rita", "wrong password!"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, resp.StatusCode)
		}
	}
	resp := try("rita", pw)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("after %d failures the right password: %d Retry-After %q, want 429 and 1", throttlePair.free+1, resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := try("olga", pw); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("another user at the same address: %d", resp.StatusCode)
	}
	clk.add(2 * time.Second)
	if resp := try("rita", "wrong again!!"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after the wait: %d", resp.StatusCode)
	}
	if resp := try("rita", pw); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("the next wait doubles: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	clk.add(3 * time.Second)
	if resp := try("rita", pw); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the right password after the wait: %d", resp.StatusCode)
	}
	// A good sign-in clears the name's counts.
	if resp := try("rita", "wrong password!"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a failure after success: %d", resp.StatusCode)
	}
	if resp := try("rita", pw); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("one failure after a success is not throttled: %d", resp.StatusCode)
	}
	if w := throttlePair.backoff(throttlePair.free + 40); w != throttlePair.max {
		t.Errorf("the wait is capped: %v", w)
	}
}

// Two dashboard processes on one StateStore share sessions and failure
// counts: a session made by one opens pages on the other, and survives
// the first going away (a restart).
func TestSessionsSharedAcrossProcesses(t *testing.T) {
	ev := newEnv(t, true)
	st := NewMemoryState(nil)
	a := newTestServer(Config{Users: ev.users, Approvals: ev.svc, JournalDir: ev.journal, State: st})
	b := newTestServer(Config{Users: ev.users, Approvals: ev.svc, JournalDir: ev.journal, State: st})
	defer b.Close()
	ca := &client{t: t, base: a.URL, hc: newJarClient()}
	ca.login("rita")
	a.Close()
	u, _ := url.Parse(a.URL)
	ub, _ := url.Parse(b.URL)
	cb := &client{t: t, base: b.URL, hc: newJarClient()}
	cb.hc.Jar.SetCookies(ub, ca.hc.Jar.Cookies(u))
	if resp, _ := cb.get("/approvals"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the other process: %d", resp.StatusCode)
	}
	if resp, body := cb.get("/api/session"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"user":"rita"`) {
		t.Fatalf("/api/session: %d %s", resp.StatusCode, body)
	}
	// The stored key is a hash: the cookie's value is nowhere in the store.
	var id string
	for _, ck := range ca.hc.Jar.Cookies(u) {
		if ck.Name == sessionCookie {
			id = ck.Value
		}
	}
	if _, _, err := st.Get(context.Background(), stateKey("s", id)); err != nil {
		t.Fatalf("session not stored under its hash: %v", err)
	}
	if _, _, err := st.Get(context.Background(), id); err == nil {
		t.Fatal("the session token itself is a store key")
	}
	// Signed out on one, signed out on both.
	tok := cb.csrf("/approvals")
	cb.post("/logout", url.Values{"_csrf": {tok}}, false)
	if resp, _ := cb.get("/api/session"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after sign-out: %d", resp.StatusCode)
	}
}

func TestLimits(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	c.login("rita")
	r := hold(t, ev.svc, "acme", "alice", "18.00")
	tok := c.csrf("/approvals")
	long := strings.Repeat("x", MaxReason+1)
	resp, body := c.post("/approvals/"+r.ID+"/decide", url.Values{"_csrf": {tok}, "decision": {"approve"}, "reason": {long}}, true)
	if resp.StatusCode != 200 || !strings.Contains(body, "at most 500 characters") {
		t.Errorf("a 501-character reason: %d", resp.StatusCode)
	}
	if got, _ := ev.svc.Get(context.Background(), r.ID); got.State != approval.StatePending {
		t.Errorf("a refused reason decided: %s", got.State)
	}
	// A signed assertion (or any caller) is held to the same limit.
	if _, err := ev.svc.Decide(context.Background(), r.ID, approval.Decision{Approved: true, Approver: "x", Roles: []string{"reviewer"}, Assurance: "password", Reason: long}); err == nil {
		t.Error("the service took a reason over MaxReason")
	}
	big := url.Values{"_csrf": {tok}, "decision": {"approve"}, "reason": {strings.Repeat("y", maxBodyN)}}
	if resp, _ := c.post("/approvals/"+r.ID+"/decide", big, true); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over %s: %d", MaxBody, resp.StatusCode)
	}
	if _, page := c.get("/approvals?q=" + strings.Repeat("z", MaxSearch+1)); !strings.Contains(page, "at most 200 characters") {
		t.Error("an over-long search is not refused with a message")
	}
	tokL := c.csrf("/login")
	if resp, _ := c.post("/login", url.Values{"_csrf": {tokL}, "name": {"rita"}, "password": {strings.Repeat("p", MaxPassword+1)}}, false); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an over-long password: %d", resp.StatusCode)
	}
}

func TestNoStoreErrorPagesAndCookies(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	c.login("aud-acme")
	for _, p := range []string{"/evidence", "/evidence/acme/alice", "/evidence/acme/export.tar.gz", "/status"} {
		if resp, _ := c.get(p); resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: Cache-Control %q", p, resp.Header.Get("Cache-Control"))
		}
	}
	resp, body := c.get("/evidence/globex/carl")
	if resp.StatusCode != 404 || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, `data-testid="error"`) || !strings.Contains(body, "Sign out") {
		t.Errorf("another tenant's page: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, body = c.get("/api/status")
	if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(body, `{"code":"FORBIDDEN"`) {
		t.Errorf("an API error: %d %s", resp.StatusCode, body)
	}
	// Secure cookies: automatic behind a TLS proxy, always with on.
	hc := newJarClient()
	req, _ := http.NewRequest(http.MethodGet, ev.srv.URL+"/login", nil)
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cks := resp.Cookies(); len(cks) == 0 || !cks[0].Secure {
		t.Errorf("behind TLS the CSRF cookie is not Secure: %+v", cks)
	}
	on := newTestServer(Config{Users: ev.users, CookieSecure: CookieSecureOn})
	defer on.Close()
	resp, err = http.Get(on.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if cks := resp.Cookies(); len(cks) == 0 || !cks[0].Secure {
		t.Errorf("--cookie-secure on: %+v", cks)
	}
	if _, err := ParseCookieSecure("sometimes"); err == nil {
		t.Error("a bad --cookie-secure parsed")
	}
}

// holdFinance holds a payment only finance may approve, at assurance mfa.
func holdFinance(t *testing.T, svc *approval.Service, amount string) *approval.Request {
	t.Helper()
	d, args, err := approval.Action{Sink: "provider", Action: "call", Run: "r_fin", Params: []byte(fmt.Sprintf(`{"amount":%q}`, amount))}.Digest()
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := svc.Request(context.Background(), approval.Hold{Run: "r_fin", Effect: "e_fin" + amount, Tenant: "acme", Person: "alice", Agent: "pay-bot",
		Sink: "provider", Action: "call", ActionDigest: d, Arguments: args,
		Need: policy.ApprovalNeed{Rule: "approval:payments", Roles: []string{"finance"}, Assurance: "password"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A reviewer without the rule's role, and the admin, are not offered
// Approve or Refuse: the pane says which role it needs; one with the role
// is offered both. Reconciling is refused the same way.
func TestActionsOnlyForThoseAllowed(t *testing.T) {
	ev := newEnv(t, true)
	if err := ev.users.Add(User{Name: "fin", Roles: []Role{RoleReviewer, "finance"}}, pw); err != nil {
		t.Fatal(err)
	}
	r := holdFinance(t, ev.svc, "900.00")
	for _, who := range []string{"rita", "ada"} {
		c := ev.client(t)
		c.login(who)
		_, page := c.get("/approvals/" + r.ID)
		if strings.Contains(page, `data-testid="approve"`) || !strings.Contains(page, "needs one of the roles finance") {
			t.Errorf("%s is offered a decision it may not make, or not told why", who)
		}
		if _, list := c.get("/approvals"); !strings.Contains(list, `data-testid="lock"`) {
			t.Errorf("%s's list does not mark the request it may not decide", who)
		}
	}
	c := ev.client(t)
	c.login("fin")
	if _, page := c.get("/approvals/" + r.ID); !strings.Contains(page, `data-testid="approve"`) || strings.Contains(page, `data-testid="why-not"`) {
		t.Error("finance is not offered the decision")
	}
}

func TestFirstRunRootLeadsToSetup(t *testing.T) {
	ev := newEnv(t, false)
	c := ev.client(t)
	resp, _ := c.get("/")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/setup" {
		t.Fatalf("GET / on first run: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := c.get("/login"); resp.Header.Get("Location") != "/setup" {
		t.Errorf("GET /login on first run: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page := c.get("/setup")
	if !strings.Contains(page, `data-testid="setup-howto"`) || !strings.Contains(page, "first run") {
		t.Errorf("the setup page without a token does not say where the link is:\n%s", page)
	}
	// The whole link pasted works as well as the token.
	if _, page := c.get("/setup?token=" + url.QueryEscape("http://127.0.0.1:8080/setup?token="+ev.setupTok)); !strings.Contains(page, "Create admin") {
		t.Error("a pasted setup link is not taken")
	}
	if resp, _ := c.get("/setup?token=wrong"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a wrong token: %d", resp.StatusCode)
	}
}

// The live stream ends when its session does, so the page's reconnect
// meets 401 and says so.
func TestEventStreamEndsWithTheSession(t *testing.T) {
	clk := &fakeClock{t: time.Now()}
	ev := newEnv(t, true)
	ev.srv.Close()
	ev.srv = newTestServer(Config{Users: ev.users, Approvals: ev.svc, JournalDir: ev.journal, Now: clk.now, SessionTTL: time.Hour})
	c := ev.client(t)
	c.login("rita")
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		resp, err := c.hc.Get(ev.srv.URL + "/approvals/events")
		if err != nil {
			return
		}
		defer resp.Body.Close()
		buf := make([]byte, 512)
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				return
			}
		}
	})
	tok := c.csrf("/approvals")
	c.post("/logout", url.Values{"_csrf": {tok}}, false)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the stream outlived its session")
	}
	wg.Wait()
	req, _ := http.NewRequest(http.MethodGet, ev.srv.URL+"/approvals/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("reconnecting without a session: %d, want 401 (not a redirect)", resp.StatusCode)
	}
}

// FuzzQuery: the approvals filter and the Host check take any query and
// any Host without panicking, and what the filter keeps is within the
// limits and its own vocabulary.
func FuzzQuery(f *testing.F) {
	f.Add("state=unknown&tenant=acme&q=8812&page=3&sort=newest", "127.0.0.1:8080")
	f.Add("page=-1&age=7d&q=%E2%80%AE", "[::1]")
	f.Add("tenant="+strings.Repeat("a", 300), "evil.example:80")
	e := New(Config{Status: func() dashboard.Status { return dashboard.Status{} }})
	g := newHostGuard([]string{"gatehouse.example"})
	f.Fuzz(func(t *testing.T, query, host string) {
		_ = g.ok(host)
		req := httptest.NewRequest(http.MethodGet, "/approvals", nil)
		req.URL.RawQuery = query
		c := e.NewContext(req, httptest.NewRecorder())
		fl, _ := filterOf(c)
		if tooLong(fl.Q, MaxSearch) || tooLong(fl.Tenant, MaxFilter) || fl.Page < 1 {
			t.Fatalf("filter %+v from %q", fl, query)
		}
		switch fl.State {
		case "waiting", "unknown", "decided", "all":
		default:
			t.Fatalf("state %q from %q", fl.State, query)
		}
		if _, ok := ages[fl.Age]; !ok {
			t.Fatalf("age %q", fl.Age)
		}
		_ = fl.Query()
	})
}
