package browser_test

// These tests drive real Chromium: one Pool (one driver, one browser) for the
// whole test binary, started by TestMain, bound to a forwarder that hands
// each send to the broker of the test running now. Tests in this package
// therefore do not run in parallel. They need Chromium and the driver: run
// `bash .ci/install-deps` first (make test does).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/artifact"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

var (
	pool  *browser.Pool
	fwd   = &forwarder{}
	clock = &testClock{}
	siteA *httptest.Server // the page's own site
	siteB *httptest.Server // the other site; counts what it receives
	other = &counter{hits: map[string]int{}}
	own   = &counter{hits: map[string]int{}}
	// ownCookie is the "who" cookie the last POST /own carried.
	ownCookie atomic.Pointer[string]
	// artifacts is the store screenshots go to, a folder for the binary.
	artifacts   *artifact.DirStore
	artifactDir string
)

// idleTimeout is on the test clock, which only TestIdleTimeout moves; the
// reaper looks every idleTimeout/4 of real time.
const idleTimeout = 400 * time.Millisecond

func TestMain(m *testing.M) {
	clock.t.Store(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	siteB = httptest.NewServer(http.HandlerFunc(otherSite))
	siteA = httptest.NewServer(http.HandlerFunc(ownSite))
	var err error
	if artifactDir, err = os.MkdirTemp("", "gatehouse-browser-artifacts-"); err == nil {
		artifacts, err = artifact.OpenDir(artifactDir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "artifact store:", err)
		os.Exit(1)
	}
	roots := startTLSSites()
	pool = browser.New(browser.Config{IdleTimeout: idleTimeout, ActionTimeout: 10 * time.Second, Now: clock.Now, TLSRoots: roots,
		Artifacts: artifacts, ArtifactName: func(tenant, key string) string { return artifact.TenantDir(tenant) + "/" + key }})
	pool.Bind(fwd)
	code := m.Run()
	if err := pool.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "pool close:", err)
		code = 1
	}
	siteA.Close()
	siteB.Close()
	stopTLSSites()
	_ = artifacts.Close()
	_ = os.RemoveAll(artifactDir)
	os.Exit(code)
}

// forwarder is the Decider the shared pool is bound to: the broker of the
// test that is running.
type forwarder struct {
	mu     sync.Mutex
	env    *sinktest.Env
	opened []string // runs the pool opened itself (the runtime's)
}

func (f *forwarder) set(env *sinktest.Env) { f.mu.Lock(); f.env = env; f.mu.Unlock() }

func (f *forwarder) broker() *broker.Broker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.env.Broker
}

func (f *forwarder) Propose(ctx context.Context, from broker.Caller, sink policy.Sink, data []byte) *broker.EffectReply {
	return f.broker().Propose(ctx, from, sink, data)
}

func (f *forwarder) Mode() policy.Mode { return f.broker().Mode() }

func (f *forwarder) Policy() *policy.Policy { return f.broker().Policy() }

func (f *forwarder) Open(ctx context.Context, from broker.Caller, w *broker.OpenWork) (*broker.Run, error) {
	r, err := f.broker().Open(ctx, from, w)
	if err == nil {
		f.mu.Lock()
		f.opened = append(f.opened, r.ID)
		f.mu.Unlock()
	}
	return r, err
}

type testClock struct{ t atomic.Int64 }

func (c *testClock) Now() time.Time      { return time.Unix(0, c.t.Load()) }
func (c *testClock) Add(d time.Duration) { c.t.Add(int64(d)) }

// counter counts requests by path.
type counter struct {
	mu   sync.Mutex
	hits map[string]int
}

func (c *counter) add(path string)       { c.mu.Lock(); c.hits[path]++; c.mu.Unlock() }
func (c *counter) reset()                { c.mu.Lock(); clear(c.hits); c.mu.Unlock() }
func (c *counter) count(path string) int { c.mu.Lock(); defer c.mu.Unlock(); return c.hits[path] }

func hostOf(s *httptest.Server) string        { return strings.TrimPrefix(s.URL, "http://") }
func pageURL(path string) string              { return siteA.URL + path }
func params(v map[string]any) json.RawMessage { b, _ := json.Marshal(v); return b }

// otherSite accepts anything from anywhere (CORS included, so report mode's
// preflights pass) and counts every request that carries data.
func otherSite(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Methods", "POST, PUT")
		w.Header().Set("Access-Control-Allow-Headers", "content-type")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead || strings.HasPrefix(r.URL.Path, "/query") || strings.HasPrefix(r.URL.Path, "/secret/") || r.URL.Path == "/ws" {
		other.add(r.URL.Path)
	}
	if r.URL.Path == "/ws" {
		webSocket(w, r)
		return
	}
	if webrtcSite(w, r) {
		return
	}
	fmt.Fprintln(w, "received")
}

// The page's own site: a page of sends to the other site, a form page, and
// cookie pages.
func ownSite(w http.ResponseWriter, r *http.Request) {
	own.add(r.URL.Path)
	if c, err := r.Cookie("who"); err == nil && r.URL.Path == "/own" {
		ownCookie.Store(&c.Value)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if backstopSite(w, r) || exfilSite(w, r) || webrtcSite(w, r) {
		return
	}
	switch {
	case r.URL.Path == "/sends.html":
		fmt.Fprintf(w, sendsPage, siteB.URL)
	case r.URL.Path == "/worker.js":
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprintf(w, `fetch(%q + "/worker", {method: "POST", mode: "no-cors", body: "from-worker"});`, siteB.URL)
	case r.URL.Path == "/frame.html":
		fmt.Fprintf(w, `<script>fetch(%q + "/iframe", {method: "POST", mode: "no-cors", body: "secret-iframe"});</script>`, siteB.URL)
	case r.URL.Path == "/many.html":
		fmt.Fprint(w, manyPage)
	case strings.HasPrefix(r.URL.Path, "/item/"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, "{}")
	case r.URL.Path == "/form.html":
		fmt.Fprint(w, formPage)
	case r.URL.Path == "/set-cookie":
		http.SetCookie(w, &http.Cookie{Name: "who", Value: r.URL.Query().Get("v"), Path: "/"})
		fmt.Fprint(w, "<p id=out>set</p>")
	case r.URL.Path == "/cookie":
		c, _ := r.Cookie("who")
		v := "none"
		if c != nil {
			v = c.Value
		}
		fmt.Fprintf(w, "<p id=out>%s</p>", v)
	default:
		fmt.Fprint(w, "<h1>page</h1>")
	}
}

// Every send the notes list that a context route saw (the proxy sees them all).
const sendsPage = `<!doctype html><h1>sends</h1>
<script>const B = %q;</script>
<iframe name="sink" style="width:10px;height:10px"></iframe>
<form id="fi" method="post" action="" target="sink"><input name="card" value="4111-secret"></form>
<form id="fp" method="post" action="" target="_blank"><input name="card" value="4111-secret"></form>
<form id="ft" method="post" action=""><input name="card" value="4111-secret"></form>
<a id="ping" href="/landing" ping="">go</a>
<button id="fetch-nocors" onclick="fetch(B+'/fetch-nocors',{method:'POST',mode:'no-cors',body:'secret-nocors'})">1</button>
<button id="fetch-json" onclick="fetch(B+'/fetch-json',{method:'POST',headers:{'Content-Type':'application/json'},body:JSON.stringify({s:'secret-json'})})">2</button>
<button id="beacon" onclick="navigator.sendBeacon(B+'/beacon','secret-beacon')">3</button>
<button id="xhr" onclick="let x=new XMLHttpRequest();x.open('POST',B+'/xhr');x.send('secret-xhr')">4</button>
<button id="keepalive" onclick="fetch(B+'/keepalive',{method:'POST',mode:'no-cors',keepalive:true,body:'secret-keepalive'})">5</button>
<button id="put" onclick="fetch(B+'/put',{method:'PUT',body:'secret-put'})">6</button>
<button id="worker" onclick="new Worker('/worker.js')">7</button>
<button id="form-frame" onclick="document.getElementById('fi').submit()">8</button>
<button id="own" onclick="fetch('/own',{method:'POST',body:'secret-own'})">10</button>
<button id="form-popup" onclick="document.getElementById('fp').submit()">11</button>
<button id="iframe" onclick="let f=document.createElement('iframe');f.src='/frame.html';document.body.appendChild(f)">12</button>
<button id="form-top" onclick="document.getElementById('ft').submit()">9</button>
<script>
document.getElementById('fi').action = B + '/form-frame';
document.getElementById('ft').action = B + '/form-top';
document.getElementById('fp').action = B + '/form-popup';
document.getElementById('ping').ping = B + '/ping';
</script>`

// manyPage makes 200 requests to its own site, then says so.
const manyPage = `<!doctype html><h1>many</h1><script>
Promise.all(Array.from({length: 200}, (_, i) => fetch('/item/' + i).then(r => r.text())))
  .then(() => { const p = document.createElement('p'); p.id = 'done'; p.textContent = 'done'; document.body.appendChild(p); });
</script>`

const formPage = `<!doctype html><h1>form</h1>
<input id="name"><select id="color"><option>red</option><option>green</option></select>
<button id="show" onclick="document.getElementById('out').textContent=document.getElementById('name').value+' '+document.getElementById('color').value">show</button>
<p id="out"></p><p id="keys"></p>
<script>document.getElementById('name').addEventListener('keydown', e => { if (e.key === 'Enter') document.getElementById('keys').textContent = 'enter'; });</script>`

// start runs Gatehouse with the shared pool as its browser sink.
func start(t testing.TB, mode policy.Mode, rules string) *sinktest.Env {
	t.Helper()
	return sinktest.Start(t, mode, rules, func(_ testing.TB, env *sinktest.Env) []broker.Sink {
		fwd.set(env)
		return []broker.Sink{pool}
	})
}

// openRun opens work and closes the run's browser context when the test ends.
func openRun(t testing.TB, env *sinktest.Env) string {
	t.Helper()
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	t.Cleanup(func() { pool.CloseRun(run) })
	return run
}

// do sends one action as the agent and fails the test on any error.
func do(t testing.TB, env *sinktest.Env, run, action string, p map[string]any) *broker.EffectReply {
	t.Helper()
	r := try(t, env, run, action, p)
	if r.Error != nil || r.Decision == nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("%s: reply %+v (error %v)", action, r, r.Error)
	}
	return r
}

func try(t testing.TB, env *sinktest.Env, run, action string, p map[string]any) *broker.EffectReply {
	t.Helper()
	req := broker.EffectRequest{Run: run, Action: action}
	if p != nil {
		req.Params = params(p)
	}
	r, err := env.Agent.Effect(sinktest.Ctx(t), policy.SinkBrowser, req)
	if err != nil && r == nil { // a reply with an error is the caller's to check
		t.Fatalf("%s: %v", action, err)
	}
	return r
}

// decided is a recorded decision and the effect it decided.
type decided struct {
	journal.Decision
	Effect string
}

// decisions returns the run's recorded decisions for effect action.
func decisions(t *testing.T, env *sinktest.Env, run, action string) []decided {
	t.Helper()
	var out []decided
	for _, ev := range env.Events(t, run) {
		if ev.Type != journal.TypeDecision {
			continue
		}
		d := decided{Effect: ev.Effect}
		if err := json.Unmarshal(ev.Data, &d.Decision); err != nil {
			t.Fatal(err)
		}
		if d.Action == action {
			out = append(out, d)
		}
	}
	return out
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var sendKinds = []struct{ button, path, method string }{
	{"fetch-nocors", "/fetch-nocors", "POST"},
	{"fetch-json", "/fetch-json", "POST"},
	{"beacon", "/beacon", "POST"},
	{"xhr", "/xhr", "POST"},
	{"keepalive", "/keepalive", "POST"},
	{"put", "/put", "PUT"},
	{"worker", "/worker", "POST"},
	{"form-frame", "/form-frame", "POST"},
	{"form-popup", "/form-popup", "POST"},
	{"iframe", "/iframe", "POST"},
	{"form-top", "/form-top", "POST"},
	{"ping", "/ping", "POST"},
}

// TestSends: a page on site A sends to site B in every way a page can.
// Strict refuses before anything leaves; an allow rule for B's target lets it
// through; report mode lets it through and records what strict would refuse.
func TestSends(t *testing.T) {
	allowB := fmt.Sprintf("effects:\n  - name: allow-b\n    decision: allow\n    match: {sink: browser, target: %q}\n", hostOf(siteB)+"/**")
	for _, mode := range []struct {
		name     string
		mode     policy.Mode
		rules    string
		arrives  bool
		outcome  journal.Outcome
		refusal  policy.Refusal
		enforced bool
		allowed  string
	}{
		{"strict", policy.ModeStrict, "", false, journal.OutcomeRefused, policy.RefuseBrowserSendOffSite, true, ""},
		{"strict-allowed", policy.ModeStrict, allowB, true, journal.OutcomeAllowed, "", false, "allow-b"},
		{"report", policy.ModeReport, "", true, journal.OutcomeAllowed, policy.RefuseBrowserSendOffSite, false, ""},
	} {
		t.Run(mode.name, func(t *testing.T) {
			env := start(t, mode.mode, mode.rules)
			for _, k := range sendKinds {
				t.Run(k.button, func(t *testing.T) {
					other.reset()
					run := openRun(t, env)
					do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/sends.html")})
					do(t, env, run, browser.ActionClick, map[string]any{"selector": "#" + k.button})
					var sends []decided
					waitFor(t, "the send's decision", func() bool {
						sends = decisions(t, env, run, browser.EffectSend)
						return len(sends) > 0
					})
					if mode.arrives {
						waitFor(t, "the send to arrive", func() bool { return other.count(k.path) > 0 })
					} else {
						time.Sleep(150 * time.Millisecond)
						if n := other.count(k.path); n != 0 {
							t.Fatalf("site B received %d %s: strict mode let the send out", n, k.path)
						}
					}
					if len(sends) != 1 {
						t.Fatalf("decisions = %+v, want one send", sends)
					}
					d := sends[0]
					if d.Method != k.method || d.Host != hostOf(siteB) || d.Path != k.path || d.Target != hostOf(siteB)+k.path ||
						d.Outcome != mode.outcome || d.Refusal != mode.refusal || d.Enforced != mode.enforced || d.Allowed != mode.allowed {
						t.Fatalf("decision = %+v", d)
					}
					if k.button != "ping" && (d.Size == 0 || !strings.HasPrefix(d.Digest, "sha256:")) {
						t.Fatalf("the body's size and digest are not recorded: %+v", d)
					}
					if mode.arrives {
						// The page's host is recorded with the outcome (and
						// decided on in strict mode): site A, also for the
						// popup, the iframe and the worker.
						var res journal.Result
						waitFor(t, "the send's outcome", func() bool {
							for _, ev := range env.Events(t, run) {
								res = journal.Result{}
								if ev.Type == journal.TypeOutcome && ev.Effect == d.Effect && json.Unmarshal(ev.Data, &res) == nil {
									return true
								}
							}
							return false
						})
						if res.Detail["page_host"] != hostOf(siteA) || (mode.mode == policy.ModeReport) != (res.Detail["observed"] == "true") {
							t.Fatalf("send outcome = %+v", res)
						}
					}
					env.Verify(t)
					env.NoContent(t, "secret")
				})
			}
		})
	}
}

// TestSameSiteSend: a send to the page's own site is allowed in strict mode.
func TestSameSiteSend(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	run := openRun(t, env)
	own.reset()
	ownCookie.Store(nil)
	do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/set-cookie?v=kept")})
	do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/sends.html")})
	do(t, env, run, browser.ActionClick, map[string]any{"selector": "#own"})
	waitFor(t, "the same-site send to arrive", func() bool { return own.count("/own") > 0 })
	// Released with the proxy's token, the send keeps the page's cookies.
	if c := ownCookie.Load(); c == nil || *c != "kept" {
		t.Fatalf("the released send carried cookie %v, want kept", c)
	}
	sends := decisions(t, env, run, browser.EffectSend)
	if len(sends) != 1 || sends[0].Outcome != journal.OutcomeAllowed || sends[0].Refusal != "" || sends[0].Host != hostOf(siteA) {
		t.Fatalf("same-site send decisions = %+v", sends)
	}
	env.Verify(t)
}

// TestAgentCannotSend: "send" is the pool's alone.
func TestAgentCannotSend(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	run := openRun(t, env)
	r := try(t, env, run, browser.EffectSend, map[string]any{"method": "POST", "url": hostOf(siteB) + "/x", "page_url": hostOf(siteB), "body_size": 0})
	if r.Error == nil || r.Error.Code != broker.CodeBadRequest || r.Decision != nil {
		t.Fatalf("an agent's send: %+v", r)
	}
	if got := decisions(t, env, run, browser.EffectSend); len(got) != 0 {
		t.Fatalf("an agent's send was decided: %+v", got)
	}
	env.Verify(t)
}

// TestActions: goto, fill, select, press, click, text, content, screenshot,
// close, each decided and recorded; no query or filled value in the journal.
func TestActions(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	run := openRun(t, env)
	r := do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/form.html?token=s3cr3t-query")})
	var nav struct {
		URL    string `json:"url"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(r.Result, &nav); err != nil || nav.Status != 200 || !strings.HasSuffix(nav.URL, "/form.html?token=s3cr3t-query") {
		t.Fatalf("goto result %s: %v", r.Result, err)
	}
	do(t, env, run, browser.ActionFill, map[string]any{"selector": "#name", "value": "ada-s3cr3t"})
	do(t, env, run, browser.ActionSelect, map[string]any{"selector": "#color", "values": []string{"green"}})
	do(t, env, run, browser.ActionPress, map[string]any{"selector": "#name", "key": "Enter"})
	do(t, env, run, browser.ActionClick, map[string]any{"selector": "#show"})
	text := func(sel string) string {
		r := do(t, env, run, browser.ActionText, map[string]any{"selector": sel})
		var v struct{ Text string }
		if err := json.Unmarshal(r.Result, &v); err != nil {
			t.Fatal(err)
		}
		return v.Text
	}
	if got := text("#out"); got != "ada-s3cr3t green" {
		t.Fatalf("text = %q", got)
	}
	if got := text("#keys"); got != "enter" {
		t.Fatalf("press: keys = %q", got)
	}
	r = do(t, env, run, browser.ActionContent, nil)
	var c struct{ HTML string }
	if json.Unmarshal(r.Result, &c); !strings.Contains(c.HTML, "<h1>form</h1>") {
		t.Fatalf("content = %.200s", c.HTML)
	}
	if r.Outcome.Size != int64(len(c.HTML)) || !strings.HasPrefix(r.Outcome.Digest, "sha256:") {
		t.Fatalf("content outcome = %+v", r.Outcome)
	}
	r = do(t, env, run, browser.ActionScreenshot, map[string]any{"inline": true})
	var s struct {
		PNG string `json:"png_base64"`
	}
	json.Unmarshal(r.Result, &s)
	if png, err := base64.StdEncoding.DecodeString(s.PNG); err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	// After close the run has no page until its next goto.
	do(t, env, run, browser.ActionClose, nil)
	r = try(t, env, run, browser.ActionText, map[string]any{"selector": "#out"})
	if r.Error == nil || r.Error.Code != broker.CodeEffectFailed || r.Outcome == nil || r.Outcome.Error != "no-page" {
		t.Fatalf("text after close: %+v", r)
	}

	navs := decisions(t, env, run, browser.EffectNavigate)
	a := hostOf(siteA)
	if len(navs) != 1 || navs[0].Method != "GET" || navs[0].Host != a || navs[0].Target != a+"/form.html" || navs[0].Outcome != journal.OutcomeAllowed {
		t.Fatalf("navigate decisions = %+v", navs)
	}
	clicks := decisions(t, env, run, browser.ActionClick)
	if len(clicks) != 1 || clicks[0].Target != a+"/form.html" || clicks[0].Host != a || !strings.HasPrefix(clicks[0].Digest, "sha256:") {
		t.Fatalf("click decisions = %+v", clicks)
	}
	env.Verify(t)
	env.NoContent(t, "s3cr3t")
}

// TestBadRequests: params are decoded strictly; nothing is decided.
func TestBadRequests(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	run := openRun(t, env)
	for _, tc := range []struct {
		action string
		params map[string]any
	}{
		{browser.ActionGoto, map[string]any{"url": "file:///etc/passwd"}},
		{browser.ActionGoto, map[string]any{"url": "javascript:alert(1)"}},
		{browser.ActionGoto, map[string]any{"url": "/relative"}},
		{browser.ActionClick, map[string]any{}},
		{browser.ActionClick, map[string]any{"selector": "#a", "extra": 1}},
		{browser.ActionPress, map[string]any{"selector": "#a"}},
		{"navigate", map[string]any{"url": pageURL("/")}},
		{"evaluate", map[string]any{"script": "1"}},
	} {
		r := try(t, env, run, tc.action, tc.params)
		if r.Error == nil || r.Error.Code != broker.CodeBadRequest || r.Decision != nil {
			t.Errorf("%s %v: %+v", tc.action, tc.params, r)
		}
	}
	env.Verify(t)
}

// TestIsolation: a cookie set in one run's context is absent from another's.
func TestIsolation(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	one, two := openRun(t, env), openRun(t, env)
	do(t, env, one, browser.ActionGoto, map[string]any{"url": pageURL("/set-cookie?v=run-one")})
	text := func(run string) string {
		do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/cookie")})
		r := do(t, env, run, browser.ActionText, map[string]any{"selector": "#out"})
		var v struct{ Text string }
		json.Unmarshal(r.Result, &v)
		return v.Text
	}
	if got := text(one); got != "run-one" {
		t.Fatalf("run one's cookie = %q", got)
	}
	if got := text(two); got != "none" {
		t.Fatalf("run two sees cookie %q from run one", got)
	}
	env.Verify(t)
}

// TestIdleTimeout: a context unused for IdleTimeout is closed.
func TestIdleTimeout(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	run := openRun(t, env)
	do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/form.html")})
	clock.Add(idleTimeout + time.Second)
	time.Sleep(3 * idleTimeout / 4) // at least two looks by the reaper; an action now would count as use
	r := try(t, env, run, browser.ActionText, map[string]any{"selector": "h1"})
	if r.Outcome == nil || r.Outcome.Error != "no-page" {
		t.Fatalf("text after the idle timeout: %+v", r)
	}
	env.Verify(t)
}

// TestUnavailable: without Chromium the sink answers UNAVAILABLE with the
// fix, nothing is decided, and Gatehouse keeps serving.
func TestUnavailable(t *testing.T) {
	p := browser.New(browser.Config{ExecutablePath: "/nonexistent/chromium"})
	t.Cleanup(func() { _ = p.Close() })
	env := sinktest.Start(t, policy.ModeStrict, "", func(testing.TB, *sinktest.Env) []broker.Sink { return []broker.Sink{p} })
	p.Bind(env.Broker)
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	for range 2 {
		r := try(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/")})
		if r.Error == nil || r.Error.Code != broker.CodeUnavailable || r.Decision != nil ||
			!strings.Contains(r.Error.Message, "bash .ci/install-deps") || !strings.Contains(r.Error.Message, "/nonexistent/chromium") {
			t.Fatalf("goto without Chromium: %+v (error %v)", r, r.Error)
		}
	}
	env.Verify(t)
}

// TestConformance: the suite every sink runs, with goto as the effect.
func TestConformance(t *testing.T) {
	sinktest.Conformance(t, sinktest.Case{
		Sink: policy.SinkBrowser,
		Request: func(run string) broker.EffectRequest {
			t.Cleanup(func() { pool.CloseRun(run) })
			return broker.EffectRequest{Run: run, Action: browser.ActionGoto,
				Params: params(map[string]any{"url": pageURL("/conf/" + run + "?q=s3cr3t-query")})}
		},
		Deny:   "{sink: browser}",
		Secret: "s3cr3t-query",
		Sinks: func(_ testing.TB, env *sinktest.Env) []broker.Sink {
			fwd.set(env)
			return []broker.Sink{pool}
		},
		Happened: func(_ testing.TB, _ *sinktest.Env, run string, _ *broker.EffectReply) bool {
			return own.count("/conf/"+run) > 0
		},
	})
}
