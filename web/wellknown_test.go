package web

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/dashboard"
)

// TestIntegrityRoutes serves did.json and checkpoints of a real journal
// writer and checks what a verifier reads from them.
func TestIntegrityRoutes(t *testing.T) {
	key, _ := journal.NewSigningKey(bytes.Repeat([]byte{4}, 32))
	old, _ := journal.NewSigningKey(bytes.Repeat([]byte{5}, 32))
	w, err := journal.Open(t.TempDir(), journal.WriterOptions{Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cp, err := journal.NewCheckpointer(w, journal.CheckpointConfig{Origin: "web.example/log", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{Status: func() dashboard.Status { return dashboard.Status{} },
		Integrity: &Integrity{AuditKey: key.Public(), PreviousKeys: []ed25519.PublicKey{old.Public()}, Checkpoints: cp}, Hosts: []string{"gatehouse.example"}})
	get := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, nil)
		req.Host = "gatehouse.example:8443"
		e.ServeHTTP(rec, req)
		return rec
	}

	rec := get(http.MethodGet, "/.well-known/did.json")
	var did struct {
		ID                 string
		VerificationMethod []struct {
			ID           string
			Type         string
			PublicKeyJwk map[string]string
		}
		AssertionMethod []string
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &did); err != nil || rec.Code != 200 {
		t.Fatalf("did.json: %d %s", rec.Code, rec.Body)
	}
	if did.ID != "did:web:gatehouse.example%3A8443" || len(did.VerificationMethod) != 2 ||
		did.VerificationMethod[0].ID != did.ID+"#audit-key" || did.AssertionMethod[0] != did.ID+"#audit-key" {
		t.Fatalf("did.json: %+v", did)
	}
	x, _ := base64.RawURLEncoding.DecodeString(did.VerificationMethod[0].PublicKeyJwk["x"])
	if !bytes.Equal(x, key.Public()) || did.VerificationMethod[1].PublicKeyJwk["kid"] != old.KeyID() {
		t.Fatalf("keys in did.json: %+v", did.VerificationMethod)
	}

	if rec := get(http.MethodGet, "/checkpoint"); rec.Code != 404 {
		t.Fatalf("no checkpoint yet: %d", rec.Code)
	}
	for i := range 5 {
		ev := journal.Event{ID: string(rune('a' + i)), Run: "r_web", Type: journal.TypeRunOpen, Time: time.Now(), Data: []byte("{}")}
		if i > 0 {
			ev.Type = journal.TypeOutcome
		}
		if _, err := w.Append([]journal.Event{ev}); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if rec := get(http.MethodPost, "/checkpoint"); rec.Code != 200 {
				t.Fatalf("POST /checkpoint: %d %s", rec.Code, rec.Body)
			}
		}
	}
	first := cp.Latest()
	rec = get(http.MethodGet, "/checkpoint?fresh=1")
	v, _ := journal.NewNoteVerifier(get(http.MethodGet, "/checkpoint/key").Body.String())
	c1, err1 := journal.OpenCheckpoint(first, journal.CheckpointKeys{Log: v})
	c2, err2 := journal.OpenCheckpoint(rec.Body.Bytes(), journal.CheckpointKeys{Log: v})
	if err1 != nil || err2 != nil || c1.Size != 2 || c2.Size != 5 {
		t.Fatalf("checkpoints: %v %v %+v %+v", err1, err2, c1, c2)
	}
	rec = get(http.MethodGet, "/checkpoint/proof?old=2&new=5")
	var proof tlog.TreeProof
	for _, l := range strings.Fields(rec.Body.String()) {
		h, _ := base64.StdEncoding.DecodeString(l)
		proof = append(proof, tlog.Hash(h))
	}
	if err := tlog.CheckTree(proof, 5, c2.Hash, 2, c1.Hash); err != nil {
		t.Fatalf("proof: %v (%s)", err, rec.Body)
	}
	for _, bad := range []string{"/checkpoint/proof?old=0&new=5", "/checkpoint/proof?old=3&new=9", "/checkpoint/proof?old=x"} {
		if rec := get(http.MethodGet, bad); rec.Code != 400 {
			t.Errorf("%s: %d", bad, rec.Code)
		}
	}
}

// TestNoCheckpoints: where nothing signs checkpoints (no signing key),
// every checkpoint endpoint answers 404 saying so, on serve's web server
// before the first user (no CSRF refusal for a curl -X POST) and on the
// writer's handler alike.
func TestNoCheckpoints(t *testing.T) {
	handlers := map[string]http.Handler{
		"web server": New(Config{Status: func() dashboard.Status { return dashboard.Status{} }}),
		"writer":     IntegrityHandler(nil),
		"did only":   IntegrityHandler(&Integrity{AuditKey: make(ed25519.PublicKey, ed25519.PublicKeySize)}),
	}
	for name, h := range handlers {
		for _, c := range []struct{ method, path string }{{http.MethodPost, "/checkpoint"}, {http.MethodGet, "/checkpoint"},
			{http.MethodGet, "/checkpoint/key"}, {http.MethodGet, "/checkpoint/proof?old=1&new=2"}} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(c.method, c.path, nil)
			req.Host = "127.0.0.1:8080"
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusNotFound || rec.Body.String() != NoCheckpoints {
				t.Errorf("%s: %s %s: %d %q", name, c.method, c.path, rec.Code, rec.Body)
			}
		}
	}
}
