package browser_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/policy"
)

// noted is one write the proxy told of, and how many POST /own the site
// had received at that moment.
type noted struct {
	run     string
	target  *url.URL
	arrived int
}

// writeRecorder is the WriteNoter of these tests: it records each write
// and fails when fail is set (the provider sink's record store down).
type writeRecorder struct {
	mu    sync.Mutex
	notes []noted
	fail  bool
}

func (w *writeRecorder) NoteWriteTo(_ context.Context, run *broker.Run, target *url.URL) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notes = append(w.notes, noted{run: run.ID, target: target, arrived: own.count("/own")})
	if w.fail {
		return errors.New("record store down")
	}
	return nil
}

func (w *writeRecorder) seen() []noted {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]noted(nil), w.notes...)
}

// TestWritesNoted: a page's POST to its own site (the ERP's web UI
// changing an IBAN) is noted with the run and its target before the proxy
// sends it; the agent's goto (a GET) is not; when the note fails, the
// POST never reaches the site.
func TestWritesNoted(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	rec := &writeRecorder{}
	pool.NoteWrites(rec)
	t.Cleanup(func() { pool.NoteWrites(nil) })
	run := openRun(t, env)
	own.reset()
	do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/sends.html")})
	if n := rec.seen(); len(n) != 0 {
		t.Fatalf("reads were noted as writes: %+v", n)
	}
	do(t, env, run, browser.ActionClick, map[string]any{"selector": "#own"})
	waitFor(t, "the same-site POST to arrive", func() bool { return own.count("/own") > 0 })
	n := rec.seen()
	if len(n) != 1 || n[0].run != run || n[0].target.Host != hostOf(siteA) || n[0].target.Path != "/own" {
		t.Fatalf("notes = %+v, want one for run %s, %s/own", n, run, hostOf(siteA))
	}
	if n[0].arrived != 0 {
		t.Fatal("the POST reached the site before it was noted")
	}

	// The note cannot be stored: the POST is refused unsent.
	rec.mu.Lock()
	rec.fail = true
	rec.mu.Unlock()
	own.reset()
	do(t, env, run, browser.ActionClick, map[string]any{"selector": "#own"})
	waitFor(t, "the second POST to be noted", func() bool { return len(rec.seen()) == 2 })
	// The click settles once the refused request is answered.
	do(t, env, run, browser.ActionText, map[string]any{"selector": "h1"})
	if c := own.count("/own"); c != 0 {
		t.Fatalf("a POST whose note failed reached the site %d times", c)
	}
	env.Verify(t)
}

// TestWebSocketNoted: a ws:// WebSocket a page opens to its own site (a
// read as far as sends go, piped as a tunnel the proxy does not read) is
// noted as a write to that site before it is connected; when the note
// fails the site never sees the handshake.
func TestWebSocketNoted(t *testing.T) {
	var handshakes atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			handshakes.Add(1)
			webSocket(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><h1 id="t">ui</h1>
<button id="ws" onclick="const ws = new WebSocket(location.origin.replace('http', 'ws') + '/ws'); ws.onopen = () => { ws.send('set iban'); document.getElementById('t').textContent = 'open'; }; ws.onerror = () => { document.getElementById('t').textContent = 'failed'; }">ws</button>`)
	}))
	defer site.Close()
	env := start(t, policy.ModeStrict, "")
	rec := &writeRecorder{}
	pool.NoteWrites(rec)
	t.Cleanup(func() { pool.NoteWrites(nil) })
	run := openRun(t, env)
	state := func() string {
		r := do(t, env, run, browser.ActionText, map[string]any{"selector": "#t"})
		return string(r.Result)
	}
	do(t, env, run, browser.ActionGoto, map[string]any{"url": site.URL + "/"})
	do(t, env, run, browser.ActionClick, map[string]any{"selector": "#ws"})
	waitFor(t, "the WebSocket to open", func() bool { return strings.Contains(state(), "open") })
	n := rec.seen()
	if len(n) != 1 || n[0].run != run || n[0].target.Host != hostOf(site) {
		t.Fatalf("notes = %+v, want one for %s", n, hostOf(site))
	}

	rec.mu.Lock()
	rec.fail = true
	rec.mu.Unlock()
	before := handshakes.Load()
	do(t, env, run, browser.ActionGoto, map[string]any{"url": site.URL + "/"})
	do(t, env, run, browser.ActionClick, map[string]any{"selector": "#ws"})
	waitFor(t, "the WebSocket to fail", func() bool { return strings.Contains(state(), "failed") })
	if len(rec.seen()) != 2 {
		t.Fatalf("notes = %+v, want a second", rec.seen())
	}
	if handshakes.Load() != before {
		t.Fatal("a WebSocket whose note failed reached the site")
	}
}
