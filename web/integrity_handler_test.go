package web

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// reopening is a CheckpointSource whose journal writer is being reopened:
// it has a latest checkpoint and cannot sign or prove until it is back.
type reopening struct{ latest []byte }

func (r reopening) Latest() []byte { return r.latest }
func (reopening) ConsistencyProof(int64, int64) (tlog.TreeProof, error) {
	return nil, fmt.Errorf("%w: reopening", ErrCheckpointsUnavailable)
}
func (reopening) Checkpoint(context.Context) ([]byte, error) {
	return nil, fmt.Errorf("%w: reopening", ErrCheckpointsUnavailable)
}
func (reopening) Refresh(context.Context) ([]byte, error) {
	return nil, fmt.Errorf("%w: reopening", ErrCheckpointsUnavailable)
}
func (reopening) VerifierKey() string { return "log+12345678+AAAA" }

// TestIntegrityHandler: the endpoints alone (gatehouse writer --http):
// POST /checkpoint signs without a CSRF token, and a source that cannot
// sign for now answers 503 (try again), not 500, while GET /checkpoint
// still serves the latest.
func TestIntegrityHandler(t *testing.T) {
	key, _ := journal.NewSigningKey(bytes.Repeat([]byte{4}, 32))
	w, err := journal.Open(t.TempDir(), journal.WriterOptions{Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append([]journal.Event{{ID: "e1", Run: "r1", Type: journal.TypeRunOpen, Time: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), Data: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	cp, err := journal.NewCheckpointer(w, journal.CheckpointConfig{Origin: "writer.example/log", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	do := func(h http.Handler, method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	h := IntegrityHandler(&Integrity{AuditKey: key.Public(), Checkpoints: cp})
	if rec := do(h, http.MethodPost, "/checkpoint"); rec.Code != 200 || !strings.HasPrefix(rec.Body.String(), "writer.example/log\n1\n") {
		t.Fatalf("POST /checkpoint: %d %s", rec.Code, rec.Body)
	}
	if rec := do(h, http.MethodGet, "/.well-known/did.json"); rec.Code != 200 || !strings.Contains(rec.Body.String(), "#audit-key") {
		t.Fatalf("did.json: %d %s", rec.Code, rec.Body)
	}

	h = IntegrityHandler(&Integrity{AuditKey: key.Public(), Checkpoints: reopening{latest: cp.Latest()}})
	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "/checkpoint"}, {http.MethodGet, "/checkpoint?fresh=1"}, {http.MethodGet, "/checkpoint/proof?old=1&new=1"},
	} {
		if rec := do(h, c.method, c.path); rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s %s while reopening: %d %s", c.method, c.path, rec.Code, rec.Body)
		}
	}
	if rec := do(h, http.MethodGet, "/checkpoint"); rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), cp.Latest()) {
		t.Fatalf("GET /checkpoint while reopening: %d %s", rec.Code, rec.Body)
	}
}
