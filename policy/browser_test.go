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
	named, err := Parse("rules.yaml", []byte("effects:\n  - name: cdn\n    decision: allow\n    match: {sink: browser, target: \"cdn.example/**\"}\nbrowser:\n  off_site_reads: named\n"))
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
		{"off-site get, any query by default", Default(), ModeStrict, send(BrowserSend, "GET", "evil.example", "shop.example", 1), VerdictRefuse, RefuseBrowserQueryOffSite, ""},
		{"off-site get, any query by default, report", Default(), ModeReport, send(BrowserSend, "GET", "evil.example", "shop.example", 1), VerdictAllow, RefuseBrowserQueryOffSite, ""},
		{"off-site get, long path", Default(), ModeStrict, withValue(send(BrowserSend, "GET", "evil.example", "shop.example", 0), BrowserPathBytes, DefaultMaxOffSitePathBytes+1), VerdictRefuse, RefuseBrowserDataOffSite, ""},
		{"off-site get, path at the limit", Default(), ModeStrict, withValue(send(BrowserSend, "GET", "evil.example", "shop.example", 0), BrowserPathBytes, DefaultMaxOffSitePathBytes), VerdictAllow, "", ""},
		{"off-site get, data in the name", Default(), ModeStrict, withValue(send(BrowserSend, "GET", "*.evil.example", "shop.example", 0), BrowserNameBytes, DefaultMaxOffSiteNameBytes+1), VerdictRefuse, RefuseBrowserDataOffSite, ""},
		{"off-site get, headers the page set", Default(), ModeStrict, withValue(send(BrowserSend, "GET", "evil.example", "shop.example", 0), BrowserHeaderBytes, 9), VerdictRefuse, RefuseBrowserDataOffSite, ""},
		{"off-site get, query and headers", Default(), ModeStrict, withValue(send(BrowserSend, "GET", "evil.example", "shop.example", 3), BrowserHeaderBytes, 9), VerdictRefuse, RefuseBrowserQueryOffSite, ""},
		{"off-site get, unreadable size", Default(), ModeStrict, withRaw(send(BrowserSend, "GET", "evil.example", "shop.example", 0), BrowserPathBytes, "lots"), VerdictRefuse, RefuseBrowserDataOffSite, ""},
		{"off-site plain read, reads plain", Default(), ModeStrict, withRaw(send(BrowserSend, "GET", "evil.example", "shop.example", 0), BrowserOffSiteRead, "true"), VerdictAllow, "", ""},
		{"off-site plain read, reads named", named, ModeStrict, withRaw(send(BrowserSend, "GET", "evil.example", "shop.example", 0), BrowserOffSiteRead, "true"), VerdictRefuse, RefuseBrowserDataOffSite, ""},
		{"off-site plain read, reads named, allowed", named, ModeStrict, withRaw(send(BrowserSend, "GET", "cdn.example", "shop.example", 0), BrowserOffSiteRead, "true"), VerdictAllow, "", "cdn"},
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
		"browser:\n  max_off_site_path_bytes: -3\n",
		"browser:\n  max_off_site_name_bytes: x\n",
		"browser:\n  off_site_reads: some\n",
	} {
		if _, err := Parse("rules.yaml", []byte(bad)); err == nil {
			t.Errorf("%q loaded", bad)
		}
	}
	p, err := Parse("rules.yaml", []byte("browser:\n  max_off_site_query_bytes: 64\n  max_off_site_path_bytes: 200\n  max_off_site_name_bytes: 8\n  off_site_reads: named\n"))
	if err != nil || p.Browser() != (BrowserRules{MaxOffSiteQueryBytes: 64, MaxOffSitePathBytes: 200, MaxOffSiteNameBytes: 8, OffSiteReads: OffSiteReadsNamed}) {
		t.Fatalf("%v %+v", err, p.Browser())
	}
	p, err = Parse("rules.yaml", []byte("browser:\n  max_off_site_query_bytes: 10\n"))
	if err != nil || p.Browser().MaxOffSitePathBytes != DefaultMaxOffSitePathBytes || p.Browser().OffSiteReads != OffSiteReadsPlain {
		t.Fatalf("unset keys keep their defaults: %v %+v", err, p.Browser())
	}
	if Default().Browser() != (BrowserRules{MaxOffSiteQueryBytes: 0, MaxOffSitePathBytes: 128, MaxOffSiteNameBytes: 24, OffSiteReads: OffSiteReadsPlain}) {
		t.Fatalf("defaults = %+v", Default().Browser())
	}
}

// TestBrowserTargetAllowed: whether an allow rule with a target lifts the
// off-site refusal, as a preflight asks.
func TestBrowserTargetAllowed(t *testing.T) {
	p, err := Parse("rules.yaml", []byte("effects:\n  - name: api\n    decision: allow\n    match: {sink: browser, target: \"api.example/**\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := func(host string) Effect {
		return Effect{Sink: SinkBrowser, Action: BrowserSend, Method: "PUT", Host: host, PageHost: "shop.example", Path: "/x", Target: host + "/x"}
	}
	if !p.BrowserTargetAllowed(e("api.example")) || p.BrowserTargetAllowed(e("evil.example")) || Default().BrowserTargetAllowed(e("api.example")) || (*Policy)(nil).BrowserTargetAllowed(e("api.example")) {
		t.Fatal("BrowserTargetAllowed")
	}
}

func withValue(e Effect, key string, n int) Effect { return withRaw(e, key, strconv.Itoa(n)) }

func withRaw(e Effect, key, v string) Effect {
	if e.Values == nil {
		e.Values = map[string]string{}
	}
	e.Values[key] = v
	return e
}

// withBody marks e as carrying a body of n bytes (an OPTIONS can).
func withBody(e Effect, n int) Effect {
	if e.Values == nil {
		e.Values = map[string]string{}
	}
	e.Values[BrowserBodyBytes] = strconv.Itoa(n)
	return e
}
