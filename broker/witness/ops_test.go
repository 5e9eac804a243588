package witness

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"

	"github.com/gatehouse/gatehouse/broker/journal"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOpsEndpoints: the witness answers health and readiness, and its
// metrics count what it cosigned and what it refused, by reason, with
// each log's latest cosigned size, over the real HTTP protocol.
func TestOpsEndpoints(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(f.wit.OpsHandler(prometheus.NewRegistry()))
	t.Cleanup(srv.Close)
	f.client = &Client{URL: srv.URL}
	ctx := context.Background()

	if code, body := get(t, srv.URL+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if code, body := get(t, srv.URL+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d %s", code, body)
	}

	// Two honest checkpoints (the second after a size conflict: a fresh
	// Checkpointer does not know the size the witness holds).
	w, cpr := f.journal(t, t.TempDir())
	appendAll(t, w, events(0, 6, "a"), 2)
	if _, err := cpr.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	appendAll(t, w, events(6, 6, "a"), 2)
	cpr2, err := journal.NewCheckpointer(w, journal.CheckpointConfig{Origin: origin, Key: f.logKey, Witnesses: []journal.Cosigner{f.client}})
	if err != nil {
		t.Fatal(err)
	}
	honest, err := cpr2.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hcp, err := journal.OpenCheckpoint(honest, f.keys(t))
	if err != nil {
		t.Fatalf("second checkpoint not cosigned: %v\n%s", err, honest)
	}

	// Refusals: a rollback, a checkpoint under another key, a malformed body.
	small, _ := journal.BuildTree(w.Dir())
	sroot, _ := small.Root(3)
	rolled, _ := note.Sign(&note.Note{Text: journal.FormatCheckpoint(origin, 3, sroot)}, journal.NewLogSigner(origin, f.logKey))
	if _, err := f.client.AddCheckpoint(ctx, hcp.Size, nil, rolled); err == nil {
		t.Fatal("rollback cosigned")
	}
	other, _ := note.Sign(&note.Note{Text: journal.FormatCheckpoint(origin, 3, sroot)}, journal.NewLogSigner(origin, key(t, 9)))
	if _, err := f.client.AddCheckpoint(ctx, hcp.Size, nil, other); err == nil {
		t.Fatal("foreign checkpoint cosigned")
	}
	if resp, err := http.Post(srv.URL+"/add-checkpoint", "text/plain", strings.NewReader("nonsense")); err == nil {
		resp.Body.Close()
	}

	_, m := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`gatehouse_witness_cosigned_total{origin="` + origin + `"} 2`,
		`gatehouse_witness_refused_total{reason="rollback"} 1`,
		`gatehouse_witness_refused_total{reason="bad_signature"} 1`,
		`gatehouse_witness_refused_total{reason="malformed"} 1`,
		`gatehouse_witness_refused_total{reason="fork"} 0`,
		`gatehouse_witness_size_conflicts_total 1`,
		`gatehouse_witness_checkpoint_size{origin="` + origin + `"} 12`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", m)
	}

	// A state it cannot read makes it not ready.
	if err := os.WriteFile(f.wit.statePath(origin), []byte("garbage\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, srv.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready") {
		t.Fatalf("/readyz with unreadable state: %d %s", code, body)
	}
}
