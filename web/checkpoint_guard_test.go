package web

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/dashboard"
)

// signingJournal is a real journal writer with n events and its
// checkpointer; append adds one more event.
func signingJournal(t *testing.T, n int) (cp *journal.Checkpointer, key *journal.SigningKey, appendOne func()) {
	t.Helper()
	key, _ = journal.NewSigningKey(bytes.Repeat([]byte{6}, 32))
	w, err := journal.Open(t.TempDir(), journal.WriterOptions{Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	i := 0
	appendOne = func() {
		t.Helper()
		ev := journal.Event{ID: "e" + string(rune('a'+i)), Run: "r_guard", Type: journal.TypeOutcome, Time: time.Date(2026, 3, 1, 12, 0, i, 0, time.UTC), Data: []byte("{}")}
		if i == 0 {
			ev.Type = journal.TypeRunOpen
		}
		i++
		if _, err := w.Append([]journal.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		appendOne()
	}
	if cp, err = journal.NewCheckpointer(w, journal.CheckpointConfig{Origin: "guard.example/log", Key: key}); err != nil {
		t.Fatal(err)
	}
	return cp, key, appendOne
}

// checkpointSize is the tree size a checkpoint text states.
func checkpointSize(t *testing.T, cp *journal.Checkpointer, text string) int64 {
	t.Helper()
	v, _ := journal.NewNoteVerifier(cp.VerifierKey())
	c, err := journal.OpenCheckpoint([]byte(text), journal.CheckpointKeys{Log: v})
	if err != nil {
		t.Fatalf("checkpoint %q: %v", text, err)
	}
	return c.Size
}

// With dashboard users, only an operator or admin of the whole deployment
// may have the journal sign a checkpoint (POST /checkpoint, GET
// /checkpoint?fresh=1); what verifiers read stays public.
func TestCheckpointSigningNeedsDeploymentOperator(t *testing.T) {
	cp, key, appendOne := signingJournal(t, 2)
	ev := newEnv(t, true)
	ev.srv.Close()
	ev.srv = newTestServer(Config{Users: ev.users, SetupToken: ev.setupTok, Approvals: ev.svc, JournalDir: ev.journal,
		Integrity: &Integrity{AuditKey: key.Public(), Checkpoints: cp}})
	t.Cleanup(ev.srv.Close)

	anon := ev.client(t)
	tok := anon.csrf("/login")
	if resp, body := anon.post("/checkpoint", url.Values{"_csrf": {tok}}, false); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous POST /checkpoint: %d %s", resp.StatusCode, body)
	}
	if resp, body := anon.get("/checkpoint?fresh=1"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous GET /checkpoint?fresh=1: %d %s", resp.StatusCode, body)
	}
	if cp.Latest() != nil {
		t.Fatalf("a refused request signed: %s", cp.Latest())
	}
	for _, n := range []string{"rita", "aud-acme", "op-globex"} {
		c := ev.client(t)
		c.login(n)
		if resp, body := c.post("/checkpoint", url.Values{"_csrf": {c.csrf("/status")}}, false); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s POST /checkpoint: %d %s", n, resp.StatusCode, body)
		}
		if resp, body := c.get("/checkpoint?fresh=1"); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s GET /checkpoint?fresh=1: %d %s", n, resp.StatusCode, body)
		}
	}
	if cp.Latest() != nil {
		t.Fatalf("a refused request signed: %s", cp.Latest())
	}

	olga := ev.client(t)
	olga.login("olga")
	// An operator's POST still needs the CSRF token.
	if resp, _ := olga.post("/checkpoint", nil, false); resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST /checkpoint without the CSRF token: %d", resp.StatusCode)
	}
	resp, body := olga.post("/checkpoint", url.Values{"_csrf": {olga.csrf("/status")}}, false)
	if resp.StatusCode != http.StatusOK || checkpointSize(t, cp, body) != 2 {
		t.Fatalf("operator POST /checkpoint: %d %s", resp.StatusCode, body)
	}
	appendOne()
	ada := ev.client(t)
	ada.login("ada")
	if resp, body := ada.get("/checkpoint?fresh=1"); resp.StatusCode != http.StatusOK || checkpointSize(t, cp, body) != 3 {
		t.Fatalf("admin GET /checkpoint?fresh=1: %d %s", resp.StatusCode, body)
	}

	// Verifiers need no sign-in.
	for _, p := range []string{"/checkpoint", "/checkpoint/key", "/checkpoint/proof?old=2&new=3", "/.well-known/did.json"} {
		if resp, body := anon.get(p); resp.StatusCode != http.StatusOK {
			t.Errorf("anonymous GET %s: %d %s", p, resp.StatusCode, body)
		}
	}
	if _, body := anon.get("/checkpoint"); checkpointSize(t, cp, body) != 3 {
		t.Errorf("anonymous GET /checkpoint: %s", body)
	}
}

// Before the first dashboard user exists, signing is open, as it was
// before users.
func TestCheckpointSigningOpenWithoutUsers(t *testing.T) {
	cp, key, _ := signingJournal(t, 1)
	ev := newEnv(t, false)
	ev.srv.Close()
	ev.srv = newTestServer(Config{Users: ev.users, SetupToken: ev.setupTok, Approvals: ev.svc, JournalDir: ev.journal,
		Integrity: &Integrity{AuditKey: key.Public(), Checkpoints: cp}})
	t.Cleanup(ev.srv.Close)
	c := ev.client(t)
	if resp, body := c.get("/checkpoint?fresh=1"); resp.StatusCode != http.StatusOK || checkpointSize(t, cp, body) != 1 {
		t.Fatalf("GET /checkpoint?fresh=1 with no user yet: %d %s", resp.StatusCode, body)
	}
	// As 'gatehouse checkpoint' tells people to: curl -X POST, no token.
	if resp, body := c.post("/checkpoint", nil, false); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /checkpoint with no user yet: %d %s", resp.StatusCode, body)
	}
	// Without Config.Users at all, too (TestIntegrityRoutes covers the rest).
	h := New(Config{Status: func() dashboard.Status { return dashboard.Status{} }, Integrity: &Integrity{Checkpoints: cp}, Hosts: []string{"example.com"}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/checkpoint", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("POST /checkpoint without users: %d %s", rec.Code, rec.Body)
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// The writer's handler signs on demand at most once a second: a POST
// within it answers 429 with Retry-After, fresh=1 serves the latest.
func TestIntegrityHandlerThrottlesSigning(t *testing.T) {
	cp, key, appendOne := signingJournal(t, 1)
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	h := integrityHandler(&Integrity{AuditKey: key.Public(), Checkpoints: cp}, clock.now)
	do := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	if rec := do(http.MethodPost, "/checkpoint"); rec.Code != http.StatusOK || checkpointSize(t, cp, rec.Body.String()) != 1 {
		t.Fatalf("first POST: %d %s", rec.Code, rec.Body)
	}
	appendOne()
	clock.add(400 * time.Millisecond)
	rec := do(http.MethodPost, "/checkpoint")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("second POST within a second: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := do(http.MethodGet, "/checkpoint?fresh=1"); rec.Code != http.StatusOK || checkpointSize(t, cp, rec.Body.String()) != 1 {
		t.Fatalf("throttled fresh=1 should serve the latest (size 1): %d %s", rec.Code, rec.Body)
	}
	// Plain GETs never count.
	for range 3 {
		if rec := do(http.MethodGet, "/checkpoint"); rec.Code != http.StatusOK {
			t.Fatalf("GET /checkpoint: %d", rec.Code)
		}
	}
	clock.add(600 * time.Millisecond)
	if rec := do(http.MethodGet, "/checkpoint?fresh=1"); rec.Code != http.StatusOK || checkpointSize(t, cp, rec.Body.String()) != 2 {
		t.Fatalf("fresh=1 a second later should sign (size 2): %d %s", rec.Code, rec.Body)
	}
	if rec := do(http.MethodPost, "/checkpoint"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("POST right after a fresh signing: %d %s", rec.Code, rec.Body)
	}
	if !strings.HasPrefix(string(cp.Latest()), "guard.example/log\n2\n") {
		t.Fatalf("latest: %s", cp.Latest())
	}
}
