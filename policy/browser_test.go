package policy

import (
	"strconv"
	"strings"
	"testing"
)

// TestBrowserRules: the browser sink's built-in rules, by mode, with and
// without an allow rule and the browser section.
func TestBrowserRules(t *testing.T) {
	const rules = `
effects:
  - name: allow-api
    decision: allow
    match: {sink: browser, target: "api.example.com/**"}
browser:
  max_off_site_query_bytes: 100
`
	p, err := Parse("rules.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	send := func(action, method, host, page string, query int) Effect {
		e := Effect{Sink: SinkBrowser, Action: action, Method: method, Host: host, PageHost: page, Path: "/x", Target: host + "/x"}
		if query > 0 {
			e.Values = map[string]string{BrowserQueryBytes: strconv.Itoa(query)}
		}
		return e
	}
	for _, tt := range []struct {
		name    string
		pol     *Policy
		mode    Mode
		eff     Effect
		verdict Verdict
		refusal Refusal
		allowed string
	}{
		{"same-site post", p, ModeStrict, send(BrowserSend, "POST", "shop.example", "shop.example", 0), VerdictAllow, "", ""},
		{"off-site post", p, ModeStrict, send(BrowserSend, "POST", "evil.example", "shop.example", 0), VerdictRefuse, RefuseBrowserSendOffSite, ""},
		{"off-site post, report", p, ModeReport, send(BrowserSend, "POST", "evil.example", "shop.example", 0), VerdictAllow, RefuseBrowserSendOffSite, ""},
		{"off-site post, allowed", p, ModeStrict, send(BrowserSend, "POST", "api.example.com", "shop.example", 0), VerdictAllow, "", "allow-api"},
		{"off-site get, long query", p, ModeStrict, send(BrowserSend, "GET", "evil.example", "shop.example", 101), VerdictRefuse, RefuseBrowserQueryOffSite, ""},
		{"off-site get, query at the limit", p, ModeStrict, send(BrowserSend, "GET", "evil.example", "shop.example", 100), VerdictAllow, "", ""},
		{"off-site get, default limit", Default(), ModeStrict, send(BrowserSend, "GET", "evil.example", "shop.example", 1000), VerdictAllow, "", ""},
		{"off-site get, over the default", Default(), ModeStrict, send(BrowserSend, "GET", "evil.example", "shop.example", DefaultMaxOffSiteQueryBytes+1), VerdictRefuse, RefuseBrowserQueryOffSite, ""},
		{"same-site get, long query", p, ModeStrict, send(BrowserSend, "GET", "shop.example", "shop.example", 5000), VerdictAllow, "", ""},
		{"off-site get, long query, allowed", p, ModeStrict, send(BrowserSend, "GET", "api.example.com", "shop.example", 5000), VerdictAllow, "", "allow-api"},
		{"connect off-site", p, ModeStrict, send(BrowserConnect, "CONNECT", "evil.example", "shop.example", 0), VerdictRefuse, RefuseBrowserSendOffSite, ""},
		{"connect, allowed", p, ModeStrict, send(BrowserConnect, "CONNECT", "api.example.com", "shop.example", 0), VerdictAllow, "", "allow-api"},
		{"background, strict", p, ModeStrict, Effect{Sink: SinkBrowser, Action: BrowserBackground, Origin: OriginRuntime, Method: "GET", Host: "update.example"}, VerdictRefuse, RefuseBrowserBackground, ""},
		{"background, report", p, ModeReport, Effect{Sink: SinkBrowser, Action: BrowserBackground, Origin: OriginRuntime, Method: "GET", Host: "update.example"}, VerdictRefuse, RefuseBrowserBackground, ""},
		{"no page host", p, ModeStrict, send(BrowserSend, "POST", "shop.example", "", 0), VerdictRefuse, RefuseBrowserSendOffSite, ""},
		{"off-site options with a body", p, ModeStrict, withBody(send(BrowserSend, "OPTIONS", "evil.example", "shop.example", 0), 14), VerdictRefuse, RefuseBrowserSendOffSite, ""},
		{"same-site options with a body", p, ModeStrict, withBody(send(BrowserSend, "OPTIONS", "shop.example", "shop.example", 0), 14), VerdictAllow, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.pol.Decide(Input{Mode: tt.mode, Effect: tt.eff, Now: now})
			if d.Verdict != tt.verdict || d.Refusal != tt.refusal || d.Allowed != tt.allowed {
				t.Fatalf("decision = %+v", d)
			}
		})
	}
}

// TestBrowserScopes: a scope naming a browser target makes reads of it
// scoped, and only those.
func TestBrowserScopes(t *testing.T) {
	p, err := Parse("rules.yaml", []byte(`
scopes:
  require:
    - scope: bank
      match: {sink: browser, target: "bank.example/**"}
    - scope: payments.write
      match: {provider: bank, method: POST}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !p.ScopesNameBrowserTargets() || Default().ScopesNameBrowserTargets() {
		t.Fatal("ScopesNameBrowserTargets")
	}
	read := func(target string) Effect {
		host, path, _ := strings.Cut(target, "/")
		return Effect{Sink: SinkBrowser, Action: "navigate", Method: "GET", Host: host, Path: "/" + path, Target: target}
	}
	if !p.ScopedBrowserRead(read("bank.example/accounts")) || p.ScopedBrowserRead(read("shop.example/x")) {
		t.Fatal("ScopedBrowserRead")
	}
	d := p.Decide(Input{Mode: ModeReport, Effect: read("bank.example/accounts"), Now: now})
	if d.Verdict != VerdictRefuse || d.Refusal != RefuseScopeMissing {
		t.Fatalf("a scoped read without the scope, report mode: %+v", d)
	}
}

// TestBrowserSection: the browser section is read strictly.
func TestBrowserSection(t *testing.T) {
	for _, bad := range []string{
		"browser:\n  max_off_site_query_bytes: -1\n",
		"browser:\n  max_off_site_query_bytes: lots\n",
		"browser:\n  max_query: 10\n",
		"browser: []\n",
	} {
		if _, err := Parse("rules.yaml", []byte(bad)); err == nil {
			t.Errorf("%q loaded", bad)
		}
	}
	p, err := Parse("rules.yaml", []byte("browser:\n  max_off_site_query_bytes: 0\n"))
	if err != nil || p.Browser().MaxOffSiteQueryBytes != 0 {
		t.Fatalf("%v %+v", err, p.Browser())
	}
}

// withBody marks e as carrying a body of n bytes (an OPTIONS can).
func withBody(e Effect, n int) Effect {
	if e.Values == nil {
		e.Values = map[string]string{}
	}
	e.Values[BrowserBodyBytes] = strconv.Itoa(n)
	return e
}
