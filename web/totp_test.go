package web

import (
	"context"
	"encoding/base32"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/dashboard"
	"github.com/gatehouse/gatehouse/policy"
)

// RFC 6238 appendix B, SHA-1 rows: 8-digit codes of the ASCII seed
// "12345678901234567890".
func TestTOTPRFC6238Vectors(t *testing.T) {
	key := []byte("12345678901234567890")
	secret := base32.StdEncoding.EncodeToString(key)
	for _, tc := range []struct {
		unix int64
		want string
	}{
		{59, "94287082"},
		{1111111109, "07081804"},
		{1111111111, "14050471"},
		{1234567890, "89005924"},
		{2000000000, "69279037"},
		{20000000000, "65353130"},
	} {
		at := time.Unix(tc.unix, 0)
		if got := hotp(key, totpStep(at), 8); got != tc.want {
			t.Errorf("T=%d: %s, want %s", tc.unix, got, tc.want)
		}
		// The 6-digit code is the same value mod 10^6.
		six, err := TOTPCode(secret, at)
		if err != nil || six != tc.want[2:] {
			t.Errorf("T=%d: 6-digit %s %v, want %s", tc.unix, six, err, tc.want[2:])
		}
	}
}

func TestTOTPWindow(t *testing.T) {
	secret := NewTOTPSecret()
	now := time.Unix(1_800_000_015, 0)
	for _, d := range []time.Duration{-30 * time.Second, 0, 30 * time.Second} {
		code, _ := TOTPCode(secret, now.Add(d))
		if step, ok := matchTOTP(secret, code, now); !ok || step != totpStep(now.Add(d)) {
			t.Errorf("code of now%+v: %v %d", d, ok, step)
		}
	}
	for _, d := range []time.Duration{-90 * time.Second, 90 * time.Second} {
		code, _ := TOTPCode(secret, now.Add(d))
		if _, ok := matchTOTP(secret, code, now); ok {
			t.Errorf("code of now%+v accepted", d)
		}
	}
	for _, bad := range []string{"", "12345", "1234567", "abcdef"} {
		if _, ok := matchTOTP(secret, bad, now); ok {
			t.Errorf("%q accepted", bad)
		}
	}
	u := TOTPURI("Gatehouse", "rita", secret)
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "otpauth" || p.Host != "totp" || p.Query().Get("secret") != secret || p.Query().Get("issuer") != "Gatehouse" {
		t.Errorf("URI %s: %v", u, err)
	}
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

var pendingField = regexp.MustCompile(`name="pending" value="([^"]+)"`)

// totpEnv is a server with rita (reviewer, password only) and tom
// (reviewer, with TOTP), on a clock the test moves.
func totpEnv(t *testing.T) (*env, *clock, string) {
	t.Helper()
	dir := t.TempDir()
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	ev := &env{svc: approvals(t), users: OpenUsers(filepath.Join(dir, "users.json"))}
	for _, n := range []string{"rita", "tom"} {
		if err := ev.users.Add(User{Name: n, Roles: []Role{RoleReviewer}}, pw); err != nil {
			t.Fatal(err)
		}
	}
	secret := NewTOTPSecret()
	if err := ev.users.SetTOTP("tom", secret); err != nil {
		t.Fatal(err)
	}
	ev.srv = newTestServer(Config{Users: ev.users, Approvals: ev.svc, Now: clk.now})
	t.Cleanup(ev.srv.Close)
	return ev, clk, secret
}

// holdMFA asks for approval under a rule that needs assurance mfa.
func holdMFA(t *testing.T, svc *approval.Service, amount string) *approval.Request {
	t.Helper()
	run := "r_acme_alice"
	d, args, err := approval.Action{Sink: "provider", Action: "call", Run: run, Params: json.RawMessage(`{"amount":"` + amount + `"}`)}.Digest()
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := svc.Request(context.Background(), approval.Hold{Run: run, Effect: "e_" + amount, Tenant: "acme", Person: "alice",
		Sink: "provider", Action: "call", ActionDigest: d, Arguments: args,
		Need: policy.ApprovalNeed{Rule: "approval:big", Roles: []string{"reviewer"}, Assurance: "mfa"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// password posts name and password and returns the code form's pending
// token ("" when the sign-in finished without one).
func (c *client) password(name string) (*http.Response, string) {
	c.t.Helper()
	resp, body := c.post("/login", url.Values{"_csrf": {c.csrf("/login")}, "name": {name}, "password": {pw}}, false)
	if m := pendingField.FindStringSubmatch(body); m != nil {
		return resp, m[1]
	}
	return resp, ""
}

func (c *client) code(pending, code string) (*http.Response, string) {
	c.t.Helper()
	return c.post("/login", url.Values{"_csrf": {c.csrf("/login")}, "pending": {pending}, "code": {code}}, false)
}

func TestTOTPLogin(t *testing.T) {
	ev, clk, secret := totpEnv(t)
	r := holdMFA(t, ev.svc, "900.00")

	// Without TOTP: signed in by the password alone, assurance password,
	// which the mfa rule does not accept.
	rita := ev.client(t)
	if resp, pending := rita.password("rita"); resp.StatusCode != http.StatusSeeOther || pending != "" {
		t.Fatalf("rita's password sign-in: %d pending %q", resp.StatusCode, pending)
	}
	resp, _ := rita.post("/approvals/"+r.ID+"/decide", url.Values{"_csrf": {rita.csrf("/approvals")}, "decision": {"approve"}}, false)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("password session approved an mfa rule: %d", resp.StatusCode)
	}

	// With TOTP: the right password asks for the code; no session yet.
	tom := ev.client(t)
	resp, pending := tom.password("tom")
	if resp.StatusCode != http.StatusOK || pending == "" {
		t.Fatalf("tom's password step: %d, no code form", resp.StatusCode)
	}
	if resp, _ := tom.get("/approvals"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("signed in before the code: %d", resp.StatusCode)
	}
	// A wrong code is refused and the form asks again.
	good, _ := TOTPCode(secret, clk.now())
	wrong := "000000"
	if wrong == good {
		wrong = "000001"
	}
	if resp, body := tom.code(pending, wrong); resp.StatusCode != http.StatusUnauthorized || !pendingField.MatchString(body) {
		t.Fatalf("wrong code: %d\n%s", resp.StatusCode, body)
	}
	// A made-up pending token is no sign-in.
	if resp, _ := tom.code("AAAA", good); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged pending token: %d", resp.StatusCode)
	}
	if resp, body := tom.code(pending, good); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("right code: %d\n%s", resp.StatusCode, body)
	}
	if _, page := tom.get("/approvals"); !strings.Contains(page, r.ID) {
		t.Fatal("tom's queue does not show the request")
	}
	resp, _ = tom.post("/approvals/"+r.ID+"/decide", url.Values{"_csrf": {tom.csrf("/approvals")}, "decision": {"approve"}}, false)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("mfa session approving: %d", resp.StatusCode)
	}
	got, _ := ev.svc.Get(context.Background(), r.ID)
	if got.State != approval.StateApproved || got.Decision.Approver != "tom" || got.Decision.Assurance != AssuranceMFA {
		t.Fatalf("decision: %s %+v", got.State, got.Decision)
	}

	// The same code again, in its window, from another browser: refused,
	// both in two steps and in one.
	eve := ev.client(t)
	_, p2 := eve.password("tom")
	if resp, _ := eve.code(p2, good); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("replayed code: %d", resp.StatusCode)
	}
	resp, _ = eve.post("/login", url.Values{"_csrf": {eve.csrf("/login")}, "name": {"tom"}, "password": {pw}, "code": {good}}, false)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("replayed code in one step: %d", resp.StatusCode)
	}
	// The next step's code signs in.
	clk.add(30 * time.Second)
	next, _ := TOTPCode(secret, clk.now())
	resp, _ = eve.post("/login", url.Values{"_csrf": {eve.csrf("/login")}, "name": {"tom"}, "password": {pw}, "code": {next}}, false)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("next code: %d", resp.StatusCode)
	}
	// A pending sign-in expires.
	late := ev.client(t)
	_, p3 := late.password("tom")
	clk.add(pendingTTL + time.Minute)
	now, _ := TOTPCode(secret, clk.now())
	if resp, _ := late.code(p3, now); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("expired pending sign-in: %d", resp.StatusCode)
	}
}

func TestTOTPSecretNeverListed(t *testing.T) {
	ev, _, _ := totpEnv(t)
	users, err := ev.users.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if u.TOTP != "" || u.Hash != "" {
			t.Errorf("List leaks %s's secrets", u.Name)
		}
		if u.TOTPEnrolled != (u.Name == "tom") {
			t.Errorf("%s: TOTPEnrolled %v", u.Name, u.TOTPEnrolled)
		}
	}
	if err := ev.users.SetTOTP("tom", "not base32!"); err == nil {
		t.Error("a bad secret was stored")
	}
}

// /api/status names the NATS URL and paths: with users it needs an
// operator; health, readiness and metrics stay open.
func TestAPIStatusNeedsOperator(t *testing.T) {
	ev := newEnv(t, true)
	anon := ev.client(t)
	if resp, body := anon.get("/api/status"); resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "Mode") {
		t.Errorf("anonymous /api/status: %d %s", resp.StatusCode, body)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if resp, _ := anon.get(p); resp.StatusCode != http.StatusOK {
			t.Errorf("anonymous %s: %d", p, resp.StatusCode)
		}
	}
	rita := ev.client(t)
	rita.login("rita")
	if resp, _ := rita.get("/api/status"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("reviewer /api/status: %d", resp.StatusCode)
	}
	for _, n := range []string{"olga", "ada"} {
		c := ev.client(t)
		c.login(n)
		if resp, body := c.get("/api/status"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"Mode":"report"`) {
			t.Errorf("%s /api/status: %d %s", n, resp.StatusCode, body)
		}
	}
}

// The status page offers operators a policy reload (POST with CSRF); others
// neither see the button nor may post.
func TestReloadPolicyButton(t *testing.T) {
	dir := t.TempDir()
	users := OpenUsers(filepath.Join(dir, "users.json"))
	for _, u := range []User{{Name: "olga", Roles: []Role{RoleOperator}}, {Name: "rita", Roles: []Role{RoleReviewer}}} {
		if err := users.Add(u, pw); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	reloads, digest := 0, "sha256:old"
	srv := httptest.NewServer(New(Config{Users: users, Status: func() dashboard.Status {
		mu.Lock()
		defer mu.Unlock()
		return dashboard.Status{Mode: "strict", PolicyDigest: digest}
	}, ReloadPolicy: func() error { mu.Lock(); reloads++; digest = "sha256:new"; mu.Unlock(); return nil }}))
	defer srv.Close()
	ev := &env{srv: srv}

	rita := ev.client(t)
	rita.login("rita")
	if _, page := rita.get("/status"); strings.Contains(page, "reload-policy") {
		t.Error("a reviewer sees the reload button")
	}
	if resp, _ := rita.post("/status/reload-policy", url.Values{"_csrf": {rita.csrf("/status")}}, false); resp.StatusCode != http.StatusForbidden {
		t.Errorf("reviewer reload: %d", resp.StatusCode)
	}
	olga := ev.client(t)
	olga.login("olga")
	_, page := olga.get("/status")
	if !strings.Contains(page, `data-testid="reload-policy"`) || !strings.Contains(page, "sha256:old") {
		t.Fatalf("operator's status page:\n%s", page)
	}
	if resp, _ := olga.post("/status/reload-policy", url.Values{}, false); resp.StatusCode != http.StatusForbidden {
		t.Errorf("reload without CSRF: %d", resp.StatusCode)
	}
	resp, _ := olga.post("/status/reload-policy", url.Values{"_csrf": {olga.csrf("/status")}}, false)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/status" {
		t.Fatalf("reload: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, page := olga.get("/status"); !strings.Contains(page, "sha256:new") {
		t.Error("the status page does not show the new digest")
	}
	mu.Lock()
	defer mu.Unlock()
	if reloads != 1 {
		t.Errorf("%d reloads, want 1", reloads)
	}
}
