package e2e

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"
)

// freeHTTP is a loopback address free at the time of the call, for a
// serve that must come back on the same address (an open page reconnects
// to where it was loaded from).
func freeHTTP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	must(t, ln.Close())
	return addr
}

// serve is restarted under an open approvals page: the page says at once
// that its live stream is lost, comes back by itself when serve does (the
// session is in JetStream KV), keeps the reason being typed, and the
// decision goes through. Then the session ends (signed out in another
// tab): the page says so, offers to sign in again in a new tab, and once
// that is done it goes on, reason and all, with the new CSRF token.
func TestDashboardSurvivesRestartInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gatehouse serve and Chromium")
	}
	data := t.TempDir()
	pol := filepath.Join(data, "policy.yaml")
	must(t, os.WriteFile(pol, []byte("approvals:\n  - name: payouts\n    match: {sink: output}\n    roles: [reviewer]\n    assurance: password\n"), 0o600))
	if r := ghIn(t, dashPassword+"\n", "users", "add", "rita", "--role", "reviewer", "--data-dir", data, "--password-stdin"); r.code != 0 {
		t.Fatalf("users add: %+v", r)
	}
	addr := freeHTTP(t)
	args := []string{"--mode", "strict", "--policy", pol, "--http", addr}
	srv := serve(t, data, args...)
	run := runID.FindString(gh(t, "work", "open", "--tenant", "acme", "--person", "alice", "--data-dir", data).stdout)
	hold := func(amount string) {
		t.Helper()
		if r := gh(t, "effect", "output", "--run", run, "--status", "ok", "--result", `{"amount":"`+amount+`"}`, "--data-dir", data); r.code != 3 {
			t.Fatalf("effect not held: %+v", r)
		}
	}
	hold("310.00")
	shots := artifactsDir(t, "screenshots")
	v := newViewer(t, srv.ep.HTTP, shots, "desktop")
	v.login("rita")
	v.goTo("/approvals")
	row := v.page.Locator("[data-testid=request-row]", playwright.PageLocatorOptions{HasText: "310.00"})
	must(t, row.Locator("a").Click())
	reason := v.page.Locator("#detail textarea[name=reason]")
	must(t, reason.Fill("typed before the restart"))
	banner := v.page.Locator("#banner")

	srv.stop(t)
	if err := v.page.Locator("#banner[data-kind=lost]").WaitFor(); err != nil {
		t.Fatalf("the page does not say its live stream is lost: %v", err)
	}
	v.shot("restart-lost")
	srv = serve(t, data, args...)
	if err := banner.WaitFor(playwright.LocatorWaitForOptions{State: playwright.WaitForSelectorStateHidden, Timeout: playwright.Float(30000)}); err != nil {
		t.Fatalf("the page did not come back after serve did: %v", err)
	}
	if got, _ := reason.InputValue(); got != "typed before the restart" {
		t.Fatalf("the typed reason is %q after the restart", got)
	}
	// It is live again: a new request appears without a reload.
	hold("320.00")
	must(t, v.page.Locator("[data-testid=request-row]", playwright.PageLocatorOptions{HasText: "320.00"}).WaitFor())
	must(t, v.page.Locator("#detail [data-testid=approve]").Click())
	must(t, v.page.Locator("#detail[data-state=approved]").WaitFor())
	v.shot("restart-approved")

	// The session ends (signed out in another tab of the same browser).
	must(t, v.page.Locator("[data-testid=request-row]", playwright.PageLocatorOptions{HasText: "320.00"}).Locator("a").Click())
	must(t, v.page.Locator("#detail textarea[name=reason]").Fill("typed before the session ended"))
	other, err := v.ctx.NewPage()
	must(t, err)
	_, err = other.Goto(v.base + "/status")
	must(t, err)
	must(t, other.Locator("form.who button").Click())
	// Signed out once the sign-in page is there; closing the tab while
	// its navigation was still under way once waited on Playwright for
	// ever.
	must(t, other.WaitForURL(func(u string) bool { return strings.Contains(u, "/login") }))
	must(t, other.Close())
	if err := v.page.Locator("#banner[data-kind=signed-out]").WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(20000)}); err != nil {
		t.Fatalf("the page does not say the session ended: %v", err)
	}
	v.shot("session-ended")
	signIn, err := v.ctx.ExpectPage(func() error { return v.page.Locator("#banner [data-action=signin]").Click() })
	must(t, err)
	must(t, signIn.Locator("input[name=name]").Fill("rita"))
	must(t, signIn.Locator("input[name=password]").Fill(dashPassword))
	must(t, signIn.Locator("button[type=submit]").Click())
	must(t, signIn.WaitForURL(func(u string) bool { return !strings.Contains(u, "/login") }))
	if err := banner.WaitFor(playwright.LocatorWaitForOptions{State: playwright.WaitForSelectorStateHidden, Timeout: playwright.Float(20000)}); err != nil {
		t.Fatalf("the page did not pick up the new session: %v", err)
	}
	if got, _ := v.page.Locator("#detail textarea[name=reason]").InputValue(); got != "typed before the session ended" {
		t.Fatalf("the typed reason is %q after signing in again", got)
	}
	must(t, v.page.Locator("#detail [data-testid=approve]").Click())
	if err := v.page.Locator("#detail[data-state=approved]").WaitFor(); err != nil {
		t.Fatalf("approving after signing in again (new CSRF token): %v", err)
	}
	// The CLI shows an argument the same way: a bidi override by code point.
	spoof := gh(t, "effect", "output", "--run", run, "--status", "ok", "--result", `{"file":"pay\u202eexe.txt"}`, "--data-dir", data, "--json")
	var held struct {
		Decision struct{ Approval string } `json:"decision"`
	}
	if err := json.Unmarshal([]byte(spoof.stdout), &held); err != nil || held.Decision.Approval == "" {
		t.Fatalf("the spoofing effect was not held: %+v", spoof)
	}
	show := gh(t, "approve", "show", held.Decision.Approval, "--data-dir", data)
	if !strings.Contains(show.stdout, "pay⟨U+202E⟩exe.txt") || strings.ContainsRune(show.stdout, '\u202e') {
		t.Errorf("approve show prints the bidi override as it is:\n%s", show.stdout)
	}
	list := gh(t, "approve", "list", "--data-dir", data)
	if strings.ContainsRune(list.stdout, '\u202e') || !strings.Contains(list.stdout, "⟨U+202E⟩") {
		t.Errorf("approve list:\n%s", list.stdout)
	}
	v.errors = nil // the failed reconnects while serve was down and signed out
	srv.stop(t)
	if r := gh(t, "verify", filepath.Join(data, "journal")); r.code != 0 {
		t.Errorf("verify: %+v", r)
	}
}
