package witness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/gatehouse/gatehouse/broker/journal"
)

const origin = "gatehouse.test/log"

func key(t testing.TB, b byte) *journal.SigningKey {
	k, err := journal.NewSigningKey(bytes.Repeat([]byte{b}, ed25519.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// events makes n events spread over 3 runs; tag changes their content.
func events(from, n int, tag string) []journal.Event {
	var out []journal.Event
	for i := from; i < from+n; i++ {
		data, _ := json.Marshal(map[string]any{"tag": tag, "i": i})
		typ := journal.TypeRunOpen
		if i >= 3 {
			typ = journal.TypeRunClose
			if i < 3*100 {
				typ = journal.TypeOutcome
			}
		}
		out = append(out, journal.Event{ID: fmt.Sprintf("e_%d", i), Run: fmt.Sprintf("r_%d", i%3), Type: typ, Effect: "x",
			Time: t0.Add(time.Duration(i) * time.Second), Data: data})
	}
	return out
}

type fixture struct {
	logKey, witKey *journal.SigningKey
	wit            *Witness
	srv            *httptest.Server
	client         *Client
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{logKey: key(t, 1), witKey: key(t, 2)}
	var err error
	f.wit, err = New(Config{Name: "witness.test", Key: f.witKey, Dir: t.TempDir(),
		Logs: []string{journal.VerifierKey(origin, f.logKey.Public(), false)}})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(f.wit.Handler())
	t.Cleanup(f.srv.Close)
	f.client = &Client{URL: f.srv.URL}
	return f
}

// journalWith writes batches into a new journal and returns its writer
// and checkpointer, submitting to the fixture's witness.
func (f *fixture) journal(t *testing.T, dir string) (*journal.Writer, *journal.Checkpointer) {
	w, err := journal.Open(dir, journal.WriterOptions{Signer: f.logKey, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	cp, err := journal.NewCheckpointer(w, journal.CheckpointConfig{Origin: origin, Key: f.logKey, Witnesses: []journal.Cosigner{f.client}})
	if err != nil {
		t.Fatal(err)
	}
	return w, cp
}

func (f *fixture) keys(t *testing.T) journal.CheckpointKeys {
	lv, err := journal.NewNoteVerifier(journal.VerifierKey(origin, f.logKey.Public(), false))
	if err != nil {
		t.Fatal(err)
	}
	wv, err := journal.NewNoteVerifier(f.wit.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	return journal.CheckpointKeys{Log: lv, Witnesses: []note.Verifier{wv}}
}

func appendAll(t *testing.T, w *journal.Writer, evs []journal.Event, batch int) {
	for i := 0; i < len(evs); i += batch {
		if _, err := w.Append(evs[i:min(i+batch, len(evs))]); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWitnessCosignsConsistentGrowth(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	w, cpr := f.journal(t, t.TempDir())
	appendAll(t, w, events(0, 10, "a"), 2)
	first, err := cpr.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp1, err := journal.OpenCheckpoint(first, f.keys(t))
	if err != nil {
		t.Fatalf("first checkpoint not witnessed: %v\n%s", err, first)
	}
	appendAll(t, w, events(10, 25, "a"), 3)
	second, err := cpr.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp2, err := journal.OpenCheckpoint(second, f.keys(t))
	if err != nil {
		t.Fatalf("second checkpoint not witnessed: %v\n%s", err, second)
	}
	if cp2.Size <= cp1.Size || len(cp2.Witnesses) != 1 || cp2.Witnesses[0] != "witness.test" {
		t.Fatalf("sizes %d then %d, witnesses %v", cp1.Size, cp2.Size, cp2.Witnesses)
	}
	// The same checkpoint again is cosigned again (idempotent).
	if _, err := cpr.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := (&Client{URL: f.srv.URL}).Latest(ctx, origin)
	if err != nil {
		t.Fatal(err)
	}
	if cp, err := journal.OpenCheckpoint(held, f.keys(t)); err != nil || cp.Size != cp2.Size {
		t.Fatalf("witness latest: %v %v", cp, err)
	}
	// A new checkpointer that does not know the witness's size learns it
	// from the conflict reply.
	w.Close()
	w2, cpr2 := f.journal(t, w.Dir())
	appendAll(t, w2, events(35, 5, "a"), 5)
	third, err := cpr2.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := journal.OpenCheckpoint(third, f.keys(t)); err != nil {
		t.Fatalf("after restart: %v\n%s", err, third)
	}
}

// TestWitnessRefusesForkAndRollback: a second history signed with the
// log's own key (someone holding the folder and the key rewrote the
// journal) is refused, and recorded; so is a smaller checkpoint.
func TestWitnessRefusesForkAndRollback(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	w, cpr := f.journal(t, t.TempDir())
	appendAll(t, w, events(0, 12, "true"), 3)
	honest, err := cpr.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hcp, _ := journal.OpenCheckpoint(honest, f.keys(t))

	// The same number of head entries, other content: a fork of equal size.
	fdir := t.TempDir()
	fw, err := journal.Open(fdir, journal.WriterOptions{Signer: f.logKey, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	appendAll(t, fw, events(0, 12, "forged"), 3)
	tree, err := journal.BuildTree(fdir)
	if err != nil {
		t.Fatal(err)
	}
	if tree.Size() != hcp.Size {
		t.Fatalf("fork has %d entries, honest %d", tree.Size(), hcp.Size)
	}
	root, _ := tree.Root(tree.Size())
	forged, err := note.Sign(&note.Note{Text: journal.FormatCheckpoint(origin, tree.Size(), root)}, journal.NewLogSigner(origin, f.logKey))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.client.AddCheckpoint(ctx, hcp.Size, nil, forged)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "fork") {
		t.Fatalf("equal-size fork: %v", err)
	}
	// A longer forged history with a proof from the honest size.
	appendAll(t, fw, events(12, 9, "forged"), 3)
	tree, _ = journal.BuildTree(fdir)
	root, _ = tree.Root(tree.Size())
	proof, err := tree.ConsistencyProof(hcp.Size, tree.Size())
	if err != nil {
		t.Fatal(err)
	}
	longer, _ := note.Sign(&note.Note{Text: journal.FormatCheckpoint(origin, tree.Size(), root)}, journal.NewLogSigner(origin, f.logKey))
	if _, err := f.client.AddCheckpoint(ctx, hcp.Size, proof, longer); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "422") {
		t.Fatalf("longer fork: %v", err)
	}
	// Rollback: a smaller checkpoint of the honest log.
	small, _ := journal.BuildTree(w.Dir())
	sroot, _ := small.Root(3)
	rolled, _ := note.Sign(&note.Note{Text: journal.FormatCheckpoint(origin, 3, sroot)}, journal.NewLogSigner(origin, f.logKey))
	if _, err := f.wit.AddCheckpoint(hcp.Size, nil, rolled); !errors.Is(err, ErrRollback) {
		t.Fatalf("rollback: %v", err)
	}
	// Not signed by the log: refused before anything else.
	other, _ := note.Sign(&note.Note{Text: journal.FormatCheckpoint(origin, tree.Size(), root)}, journal.NewLogSigner(origin, key(t, 9)))
	if _, err := f.wit.AddCheckpoint(hcp.Size, proof, other); !errors.Is(err, ErrBadLogSignature) {
		t.Fatalf("foreign signature: %v", err)
	}
	// The witness still holds the honest checkpoint, and recorded each refusal.
	held, _ := f.wit.Latest(origin)
	if cp, err := journal.OpenCheckpoint(held, f.keys(t)); err != nil || cp.Hash != hcp.Hash {
		t.Fatalf("witness state changed: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(f.wit.dir, "conflicts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{`"kind":"fork"`, `"kind":"inconsistent"`, `"kind":"rollback"`} {
		if !bytes.Contains(b, []byte(kind)) {
			t.Errorf("conflicts.jsonl lacks %s:\n%s", kind, b)
		}
	}
}

// TestRewriteCaughtAgainstWitnessedCheckpoint: whoever holds the folder
// (and even the log's key) rewrites every event and the head log
// consistently; plain verify passes, verify against the witnessed
// checkpoint does not. A rolled-back journal is caught too.
func TestRewriteCaughtAgainstWitnessedCheckpoint(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	w, cpr := f.journal(t, dir)
	appendAll(t, w, events(0, 15, "true"), 3)
	text, err := cpr.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	cp, err := journal.OpenCheckpoint(text, f.keys(t))
	if err != nil {
		t.Fatal(err)
	}
	trusted, _ := journal.NewTrustedKeys(f.logKey.Public())
	rep, err := journal.Verify(dir, journal.VerifyOptions{Keys: trusted, RequireSignatures: true, Checkpoint: cp})
	if err != nil || !rep.OK {
		t.Fatalf("honest journal: %v %+v", err, rep)
	}

	// The rewrite: a fresh journal with other content, same shape, signed
	// with the real key, moved into place.
	forged := t.TempDir()
	fw, err := journal.Open(forged, journal.WriterOptions{Signer: f.logKey, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, fw, events(0, 15, "forged"), 3)
	fw.Close()
	rep, _ = journal.Verify(forged, journal.VerifyOptions{Keys: trusted, RequireSignatures: true})
	if !rep.OK {
		t.Fatalf("the forgery should pass a plain verify: %+v", rep.Findings)
	}
	rep, _ = journal.Verify(forged, journal.VerifyOptions{Keys: trusted, Checkpoint: cp})
	if rep.OK || rep.Findings[0].Kind != journal.FindingCheckpointMismatch {
		t.Fatalf("rewrite not caught: %+v", rep.Findings)
	}

	// Rolled back: the journal as it was before its last entries.
	rolled := t.TempDir()
	rw, _ := journal.Open(rolled, journal.WriterOptions{Signer: f.logKey, Now: func() time.Time { return t0 }})
	appendAll(t, rw, events(0, 9, "true"), 3)
	rw.Close()
	rep, _ = journal.Verify(rolled, journal.VerifyOptions{Keys: trusted, Checkpoint: cp})
	if rep.OK || rep.Findings[0].Kind != journal.FindingRolledBack {
		t.Fatalf("rollback not caught: %+v", rep.Findings)
	}
}

func TestStatusTable(t *testing.T) {
	for err, want := range map[error]int{
		&ConflictError{Size: 3}:                 http.StatusConflict,
		fmt.Errorf("x: %w", ErrMalformed):       http.StatusBadRequest,
		fmt.Errorf("x: %w", ErrUnknownLog):      http.StatusNotFound,
		fmt.Errorf("x: %w", ErrBadLogSignature): http.StatusForbidden,
		fmt.Errorf("x: %w", ErrFork):            http.StatusConflict,
		fmt.Errorf("x: %w", ErrRollback):        http.StatusBadRequest,
		fmt.Errorf("x: %w", ErrBadProof):        http.StatusUnprocessableEntity,
		errors.New("disk"):                      http.StatusInternalServerError,
	} {
		if got := statusOf(err); got != want {
			t.Errorf("%v: %d, want %d", err, got, want)
		}
	}
}

// TestCheckpointerChecksCosignatures: with witness keys configured, a
// cosignature under another key is not kept; the right one is.
func TestCheckpointerChecksCosignatures(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, c := range []struct {
		key  *journal.SigningKey
		kept bool
	}{{key(t, 7), false}, {f.witKey, true}} {
		w, err := journal.Open(t.TempDir(), journal.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wv, _ := journal.NewNoteVerifier(journal.VerifierKey("witness.test", c.key.Public(), true))
		cpr, err := journal.NewCheckpointer(w, journal.CheckpointConfig{Origin: origin, Key: f.logKey,
			Witnesses: []journal.Cosigner{f.client}, WitnessKeys: []note.Verifier{wv}})
		if err != nil {
			t.Fatal(err)
		}
		appendAll(t, w, events(0, 4, "k"), 4)
		// A fresh witness state per case: another log history would be a fork.
		f.wit.mu.Lock()
		os.RemoveAll(filepath.Join(f.wit.dir, "logs"))
		os.MkdirAll(filepath.Join(f.wit.dir, "logs"), 0o750)
		f.wit.mu.Unlock()
		text, err := cpr.Checkpoint(ctx)
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(text), "— witness.test "); got != c.kept {
			t.Fatalf("cosignature kept: %v, want %v\n%s", got, c.kept, text)
		}
	}
}
