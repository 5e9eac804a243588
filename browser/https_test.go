package browser_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/policy"
)

// Two HTTPS sites with self-signed certificates: the page's own (tlsA) and
// another (tlsB, a CDN the page loads a script and an image from, and that
// the page also tries to send to). The pool's proxy verifies them with
// tlsRoots; Chromium is never told to ignore certificate errors.
var (
	tlsA, tlsB *httptest.Server
	tlsOther   = &counter{hits: map[string]int{}}
	tlsOwn     = &counter{hits: map[string]int{}}
	// tokenLeaks counts requests that reached a site still carrying the
	// proxy's one-time token header.
	tokenLeaks atomic.Int32
	// tlsOwnCookie is the cookie the last POST /own on tlsA carried.
	tlsOwnCookie atomic.Pointer[string]
)

// startTLSSites starts tlsA and tlsB and returns the roots that verify
// them.
func startTLSSites() *x509.CertPool {
	tlsB = httptest.NewTLSServer(http.HandlerFunc(tlsOtherSite))
	tlsA = httptest.NewTLSServer(http.HandlerFunc(tlsOwnSite))
	roots := x509.NewCertPool()
	roots.AddCert(tlsA.Certificate())
	roots.AddCert(tlsB.Certificate())
	return roots
}

func stopTLSSites() { tlsA.Close(); tlsB.Close() }

func noteToken(r *http.Request) {
	if r.Header.Get("X-Gatehouse-Decided") != "" {
		tokenLeaks.Add(1)
	}
}

// tlsOtherSite serves a script and an image to anyone and counts every
// request by method and path.
func tlsOtherSite(w http.ResponseWriter, r *http.Request) {
	noteToken(r)
	tlsOther.add(r.Method + " " + r.URL.Path)
	w.Header().Set("Access-Control-Allow-Origin", "*")
	switch r.URL.Path {
	case "/lib.js":
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `document.getElementById('lib').textContent = 'loaded';`)
	case "/logo.svg":
		w.Header().Set("Content-Type", "image/svg+xml")
		fmt.Fprint(w, `<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>`)
	case "/ws":
		webSocket(w, r)
	default:
		fmt.Fprintln(w, "received")
	}
}

func tlsOwnSite(w http.ResponseWriter, r *http.Request) {
	noteToken(r)
	tlsOwn.add(r.Method + " " + r.URL.Path)
	if c, err := r.Cookie("who"); err == nil && r.URL.Path == "/own" {
		tlsOwnCookie.Store(&c.Value)
	}
	switch {
	case r.URL.Path == "/many.html":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, manyPage)
	case strings.HasPrefix(r.URL.Path, "/item/"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, "{}")
	case r.URL.Path == "/shared.js":
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprintf(w, `onconnect = e => { const port = e.ports[0];
  fetch(%q + '/shared', {method: 'POST', mode: 'no-cors', body: 'secret-shared'}).then(() => port.postMessage('sent'), () => port.postMessage('failed')); };`, tlsB.URL)
	default:
		http.SetCookie(w, &http.Cookie{Name: "who", Value: "tls-page", Path: "/", Secure: true})
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, cdnPage, tlsB.URL)
	}
}

// cdnPage loads a script and an image from the other HTTPS site, and sends
// there from the page (fetch) and from a shared worker, and a
// wss:// WebSocket.
const cdnPage = `<!doctype html><h1>cdn</h1><p id="lib">not loaded</p><p id="out"></p>
<script>const B = %q;</script>
<img id="logo" alt="">
<script>document.getElementById('logo').src = B + '/logo.svg';</script>
<script>const s = document.createElement('script'); s.src = B + '/lib.js'; document.body.appendChild(s);</script>
<button id="post" onclick="fetch(B + '/collect', {method: 'POST', mode: 'no-cors', body: 'secret-https-post'}).then(() => out('post sent'), () => out('post failed'))">post</button>
<button id="own" onclick="fetch('/own', {method: 'POST', body: 'secret-own'}).then(() => out('own sent'))">own</button>
<button id="shared" onclick="const w = new SharedWorker('/shared.js'); w.port.onmessage = e => out('shared ' + e.data)">shared</button>
<button id="wss" onclick="const ws = new WebSocket(B.replace('https', 'wss') + '/ws'); ws.onopen = () => { ws.send('secret-wss-frame'); out('wss open'); }; ws.onerror = () => out('wss failed')">wss</button>
<script>function out(s) { document.getElementById('out').textContent = s; }</script>`

func tlsHost(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "https://") }

// TestHTTPSSubresources: inside HTTPS tunnels the proxy decides request by
// request, so in strict mode with no rule a page on one HTTPS site loads
// its script and image from another HTTPS site, while every send to that
// site is refused before it leaves: a fetch and a shared worker's POST,
// inside the tunnel; a wss:// WebSocket there is a refused connect. A send
// to the page's own site is decided once and arrives, with its cookies and
// no header of Gatehouse's. Report mode
// lets the sends out and records what strict would refuse; an allow rule
// for the other site lets them out in strict mode.
func TestHTTPSSubresources(t *testing.T) {
	b := tlsHost(tlsB)
	allowB := fmt.Sprintf("effects:\n  - name: allow-b\n    decision: allow\n    match: {sink: browser, target: %q}\n", b+"/**")
	for _, mode := range []struct {
		name    string
		mode    policy.Mode
		rules   string
		arrives bool
		outcome journal.Outcome
		refusal policy.Refusal
	}{
		{"strict", policy.ModeStrict, "", false, journal.OutcomeRefused, policy.RefuseBrowserSendOffSite},
		{"strict-allowed", policy.ModeStrict, allowB, true, journal.OutcomeAllowed, ""},
		{"report", policy.ModeReport, "", true, journal.OutcomeAllowed, policy.RefuseBrowserSendOffSite},
	} {
		t.Run(mode.name, func(t *testing.T) {
			env := start(t, mode.mode, mode.rules)
			run := openRun(t, env)
			tlsOther.reset()
			tlsOwn.reset()
			tokenLeaks.Store(0)
			tlsOwnCookie.Store(nil)
			do(t, env, run, browser.ActionGoto, map[string]any{"url": tlsA.URL + "/cdn.html"})
			text := func() string {
				r := do(t, env, run, browser.ActionText, map[string]any{"selector": "#lib"})
				var v struct{ Text string }
				json.Unmarshal(r.Result, &v)
				return v.Text
			}
			waitFor(t, "the other site's script to run", func() bool { return text() == "loaded" })
			waitFor(t, "the other site's image", func() bool { return tlsOther.count("GET /logo.svg") > 0 })

			for _, c := range []struct{ button, path, action string }{
				{"post", "/collect", browser.EffectSend},
				{"shared", "/shared", browser.EffectSend},
				{"wss", "/ws", policy.BrowserConnect},
			} {
				do(t, env, run, browser.ActionClick, map[string]any{"selector": "#" + c.button})
				var ds []decided
				waitFor(t, c.button+"'s decision", func() bool {
					ds = nil
					for _, d := range decisions(t, env, run, c.action) {
						if d.Host == b && (c.action == policy.BrowserConnect || d.Path == c.path) {
							ds = append(ds, d)
						}
					}
					return len(ds) > 0
				})
				method := "POST "
				if c.action == policy.BrowserConnect {
					method = "GET "
				}
				if mode.arrives {
					waitFor(t, c.button+" to arrive", func() bool { return tlsOther.count(method+c.path) > 0 })
				} else {
					time.Sleep(150 * time.Millisecond)
					if n := tlsOther.count(method + c.path); n != 0 {
						t.Fatalf("%s: the other site received %d %s%s in strict mode", c.button, n, method, c.path)
					}
				}
				d := ds[0]
				if len(ds) != 1 || d.Outcome != mode.outcome || d.Refusal != mode.refusal || d.PageHost != tlsHost(tlsA) {
					t.Fatalf("%s: decisions = %+v", c.button, ds)
				}
				if c.action == browser.EffectSend && (d.Method != "POST" || d.Size == 0 || !strings.HasPrefix(d.Digest, "sha256:")) {
					t.Fatalf("%s: the send's method, size or digest is missing: %+v", c.button, d)
				}
			}
			do(t, env, run, browser.ActionClick, map[string]any{"selector": "#own"})
			waitFor(t, "the same-site send to arrive", func() bool { return tlsOwn.count("POST /own") > 0 })
			if c := tlsOwnCookie.Load(); c == nil || *c != "tls-page" {
				t.Fatalf("the same-site send carried cookie %v, want the page's", c)
			}
			var own []decided
			for _, d := range decisions(t, env, run, browser.EffectSend) {
				if d.Host == tlsHost(tlsA) {
					own = append(own, d)
				}
			}
			if len(own) != 1 || own[0].Outcome != journal.OutcomeAllowed || own[0].Refusal != "" {
				t.Fatalf("same-site send decisions = %+v, want one, allowed", own)
			}
			// Reads are neither decided nor recorded.
			for _, d := range decisions(t, env, run, browser.EffectNavigate) {
				if d.Host == b {
					t.Fatalf("a read of the other site was decided: %+v", d)
				}
			}
			if n := tokenLeaks.Load(); n != 0 {
				t.Fatalf("%d requests reached a site carrying the proxy's token", n)
			}
			// The wss:// outcome, recorded when the tunnel closes, counts
			// and digests the frame the page sent.
			pool.CloseRun(run)
			if mode.arrives {
				waitFor(t, "the WebSocket's outcome", func() bool {
					for _, ev := range env.Events(t, run) {
						var res journal.Result
						if ev.Type == journal.TypeOutcome && json.Unmarshal(ev.Data, &res) == nil && res.Detail["websocket"] == "true" {
							if res.Detail["frames"] != "1" || res.Size != int64(len("secret-wss-frame")) || res.Detail["path"] != "/ws" || !strings.HasPrefix(res.Digest, "sha256:") {
								t.Fatalf("WebSocket outcome = %+v", res)
							}
							return true
						}
					}
					return false
				})
			}

			env.Verify(t)
			env.NoContent(t, "secret")
		})
	}
}

// TestHTTPSUntrustedSite: the proxy, not Chromium, verifies the sites it
// reaches inside tunnels, so a site whose certificate the deployment's
// roots do not verify is never sent a request: the page gets 502.
func TestHTTPSUntrustedSite(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Int32
	untrusted := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		fmt.Fprint(w, "<h1>untrusted</h1>")
	}))
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake the proxy refuses
	untrusted.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	untrusted.StartTLS()
	defer untrusted.Close()

	env := start(t, policy.ModeStrict, "")
	run := openRun(t, env)
	r := do(t, env, run, browser.ActionGoto, map[string]any{"url": untrusted.URL + "/"})
	var nav struct{ Status int }
	if err := json.Unmarshal(r.Result, &nav); err != nil || nav.Status != http.StatusBadGateway {
		t.Fatalf("goto to a site with an unverified certificate: %s (%v)", r.Result, err)
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("the untrusted site received %d requests", n)
	}
	env.Verify(t)
}
