package evidence_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/witness"
)

const (
	proofOrigin  = "proofs.example/log"
	proofWitness = "wit.proofs.example"
)

// witnessedLog is a signed journal of two tenants whose checkpoints a
// real witness (broker/witness over HTTP) cosigns.
type witnessedLog struct {
	dir    string
	logKey *journal.SigningKey
	witKey *journal.SigningKey
	keys   journal.CheckpointKeys // what an auditor holds: public keys only
	w      *journal.Writer
	cp     *journal.Checkpointer
}

var proofRuns = map[string]string{
	"acme/ada":   "r_acmeadaaaaaaaaaaaaaaaaaaaa",
	"acme/bob":   "r_acmebobbbbbbbbbbbbbbbbbbbb",
	"globex/ada": "r_globexadaaaaaaaaaaaaaaaaaa",
	"acme/cy":    "r_acmecyyyyyyyyyyyyyyyyyyyyy", // written after the first checkpoint
}

func seedKey(t *testing.T, b byte) *journal.SigningKey {
	t.Helper()
	k, err := journal.NewSigningKey(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// runEvents are a run's events: open, one allowed effect, close. tag
// changes the recorded target, for rewrites.
func runEvents(who, tag string) [][]journal.Event {
	tenant, person, _ := strings.Cut(who, "/")
	run := proofRuns[who]
	af := fmt.Sprintf(`{"person":%q,"tenant":%q}`, person, tenant)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := func(n int, typ journal.Type, effect, data string) journal.Event {
		return journal.Event{ID: fmt.Sprintf("e_%s_%d", run[2:10], n), Run: run, Type: typ, Effect: effect,
			Time: at.Add(time.Duration(n) * time.Second), Data: json.RawMessage(data)}
	}
	dec := `{"acting_for":` + af + `,"action":"deliver","enforced":true,"mode":"strict","outcome":"allowed",` +
		`"policy_digest":"sha256:00","sink":"output","size":0,"target":"` + tag + `"}`
	return [][]journal.Event{
		{e(1, journal.TypeRunOpen, "", `{"acting_for":`+af+`,"agent":"clerk","scopes":["reports"]}`)},
		{e(2, journal.TypeDecision, "x_"+run[2:10], dec), e(3, journal.TypeAttempt, "x_"+run[2:10], `{"action":"deliver","sink":"output"}`)},
		{e(4, journal.TypeOutcome, "x_"+run[2:10], `{"digest":"sha256:ab","size":3,"status":"ok"}`), e(5, journal.TypeRunClose, "", `{"status":"done"}`)},
	}
}

// writeRuns appends the runs of whos in batches interleaved across runs,
// so each run has several head entries between other runs' entries.
func writeRuns(t *testing.T, w *journal.Writer, tag string, whos ...string) {
	t.Helper()
	for b := 0; b < 3; b++ {
		for _, who := range whos {
			if _, err := w.Append(runEvents(who, tag)[b]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func newWitnessedLog(t *testing.T) *witnessedLog {
	t.Helper()
	l := &witnessedLog{dir: filepath.Join(t.TempDir(), "journal"), logKey: seedKey(t, 0x31), witKey: seedKey(t, 0x32)}
	logVKey := journal.VerifierKey(proofOrigin, l.logKey.Public(), false)
	wit, err := witness.New(witness.Config{Name: proofWitness, Key: l.witKey, Logs: []string{logVKey}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(wit.Handler())
	t.Cleanup(srv.Close)
	if l.w, err = journal.Open(l.dir, journal.WriterOptions{Signer: l.logKey}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.w.Close() })
	writeRuns(t, l.w, "ok", "acme/ada", "acme/bob", "globex/ada")
	lv, _ := journal.NewNoteVerifier(logVKey)
	wv, err := journal.NewNoteVerifier(wit.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	l.keys = journal.CheckpointKeys{Log: lv, Witnesses: []note.Verifier{wv}}
	if l.cp, err = journal.NewCheckpointer(l.w, journal.CheckpointConfig{Origin: proofOrigin, Key: l.logKey,
		Witnesses: []journal.Cosigner{&witness.Client{URL: srv.URL}}, WitnessKeys: []note.Verifier{wv}}); err != nil {
		t.Fatal(err)
	}
	l.checkpoint(t)
	return l
}

func (l *witnessedLog) checkpoint(t *testing.T) []byte {
	t.Helper()
	b, err := l.cp.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "— "+proofWitness+" ") {
		t.Fatalf("checkpoint not cosigned:\n%s", b)
	}
	return b
}

func (l *witnessedLog) export(t *testing.T) (string, *evidence.Manifest) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "acme-evidence")
	sum, err := evidence.Export(dst, l.dir, evidence.Selector{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	return dst, &sum.Manifest
}

func kinds(rep *journal.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, string(f.Kind))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// noteKinds lists the report's notes about proofs.
func noteKinds(rep *journal.Report) []string {
	var out []string
	for _, n := range rep.Notes {
		if n.Kind != journal.NoteSignaturesUnchecked {
			out = append(out, string(n.Kind))
		}
	}
	return out
}

func verifyWith(t *testing.T, dir string, keys journal.CheckpointKeys) *journal.Report {
	t.Helper()
	rep, err := evidence.VerifyExportWith(dir, evidence.VerifyOptions{Checkpoint: keys})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func copyExport(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "copy")
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// headLinesOf returns the head log's lines (with '\n') of the export.
func headLinesOf(t *testing.T, dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "head.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	return lines[:len(lines)-1]
}

func TestExportCarriesProofsThatVerifyWithPublicKeysOnly(t *testing.T) {
	l := newWitnessedLog(t)
	dst, m := l.export(t)
	if m.Proofs != journal.ProofsDir || m.Checkpoint == nil || m.NoProofs != "" {
		t.Fatalf("manifest: %+v", m)
	}
	// Three head entries per run, two acme runs, all before the checkpoint.
	if c := m.Checkpoint; c.Origin != proofOrigin || c.Size != 9 || c.Proved != 6 || len(c.NotCovered) != 0 ||
		!slices.Equal(c.Witnesses, []string{proofWitness}) {
		t.Fatalf("manifest checkpoint: %+v", c)
	}
	for _, f := range []string{"proofs/checkpoint", "proofs/proofs.json"} {
		if _, err := os.Stat(filepath.Join(dst, f)); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "proofs/proofs.json")); strings.Contains(string(b), proofRuns["globex/ada"]) {
		t.Fatal("the proofs carry another tenant's head entry")
	}

	rep := verifyWith(t, dst, l.keys)
	if !rep.OK || rep.Runs != 2 || !slices.Equal(noteKinds(rep), []string{string(journal.NoteProofsChecked)}) {
		t.Fatalf("with keys: %+v", rep)
	}
	// Event signatures too, with the log's public key only.
	trusted, _ := journal.NewTrustedKeys(l.logKey.Public())
	if rep, err := evidence.VerifyExportWith(dst, evidence.VerifyOptions{Checkpoint: l.keys, Keys: trusted, RequireSignatures: true}); err != nil || !rep.OK {
		t.Fatalf("with signatures: %+v %v", rep, err)
	}
	// Without keys: the chains are checked and a note says the proofs
	// were not, and why.
	rep, err := evidence.VerifyExport(dst)
	if err != nil || !rep.OK || !slices.Equal(noteKinds(rep), []string{string(journal.NoteProofsUnchecked)}) ||
		!strings.Contains(fmt.Sprint(rep.Notes), "no log key") {
		t.Fatalf("without keys: %+v %v", rep, err)
	}
	// A quorum of witnesses the checkpoint lacks is a bad checkpoint.
	other, _ := journal.NewNoteVerifier(journal.VerifierKey("other.witness", seedKey(t, 0x33).Public(), true))
	twoWitnesses := l.keys
	twoWitnesses.Witnesses = append(slices.Clone(l.keys.Witnesses), other)
	if got := kinds(verifyWith(t, dst, twoWitnesses)); !slices.Equal(got, []string{"bad-checkpoint"}) {
		t.Fatalf("missing cosignature: %v", got)
	}
	twoWitnesses.Quorum = 1
	if rep := verifyWith(t, dst, twoWitnesses); !rep.OK {
		t.Fatalf("quorum 1 of 2: %+v", rep.Findings)
	}
}

func TestExportProofsCatchTampering(t *testing.T) {
	l := newWitnessedLog(t)
	dst, _ := l.export(t)
	ada := proofRuns["acme/ada"]

	// A later checkpoint, and an export proved against it.
	writeRuns(t, l.w, "later", "acme/cy")
	l.checkpoint(t)
	later, lm := l.export(t)
	if lm.Checkpoint.Size != 12 || lm.Checkpoint.Proved != 9 {
		t.Fatalf("later export: %+v", lm.Checkpoint)
	}
	if rep := verifyWith(t, later, l.keys); !rep.OK {
		t.Fatalf("later export: %+v", rep.Findings)
	}

	otherLog := seedKey(t, 0x34)
	for name, tc := range map[string]struct {
		tamper func(t *testing.T, dir string)
		want   []string // every one must be among the findings
	}{
		"edited head entry": {func(t *testing.T, dir string) {
			lines := headLinesOf(t, dir)
			for i, l := range lines {
				if strings.Contains(l, ada) {
					lines[i] = strings.Replace(l, `"time":"20`, `"time":"19`, 1)
					break
				}
			}
			os.WriteFile(filepath.Join(dir, "head.jsonl"), []byte(strings.Join(lines, "")), 0o600)
		}, []string{"bad-inclusion-proof", "checkpoint-mismatch"}},
		"edited run": {func(t *testing.T, dir string) {
			p := filepath.Join(dir, "runs", ada+".jsonl")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(`"target":"ok"`), []byte(`"target":"ko"`), 1), 0o600)
		}, []string{"edited-event"}},
		"proofs for another checkpoint": {func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(later, "proofs", "proofs.json"))
			os.WriteFile(filepath.Join(dir, "proofs", "proofs.json"), b, 0o600)
		}, []string{"bad-inclusion-proof"}},
		"checkpoint and proofs from a later export": {func(t *testing.T, dir string) {
			for _, f := range []string{"checkpoint", "proofs.json"} {
				b, _ := os.ReadFile(filepath.Join(later, "proofs", f))
				os.WriteFile(filepath.Join(dir, "proofs", f), b, 0o600)
			}
		}, []string{"rolled-back"}},
		"checkpoint signed by another key": {func(t *testing.T, dir string) {
			// The same tree, signed by another log key under the same
			// origin, and even cosigned with the real witness's key.
			b, _ := os.ReadFile(filepath.Join(dir, "proofs", "checkpoint"))
			cp, err := journal.PeekCheckpoint(b)
			if err != nil {
				t.Fatal(err)
			}
			forged, err := note.Sign(&note.Note{Text: journal.FormatCheckpoint(cp.Origin, cp.Size, cp.Hash)},
				journal.NewLogSigner(proofOrigin, otherLog), journal.NewCosigner(proofWitness, l.witKey, nil))
			if err != nil {
				t.Fatal(err)
			}
			rewriteProofsCheckpoint(t, dir, forged)
		}, []string{"bad-checkpoint"}},
		"proofs removed": {func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "proofs"))
		}, []string{"proofs-missing"}},
		"a proof's path changed": {func(t *testing.T, dir string) {
			p := filepath.Join(dir, "proofs", "proofs.json")
			b, _ := os.ReadFile(p)
			ps, _ := journal.ParseProofs(b)
			ps.Proofs[0].Proof[0][0] ^= 1
			nb, _ := json.Marshal(ps)
			os.WriteFile(p, nb, 0o600)
		}, []string{"bad-inclusion-proof"}},
		"a proof left out": {func(t *testing.T, dir string) {
			p := filepath.Join(dir, "proofs", "proofs.json")
			b, _ := os.ReadFile(p)
			ps, _ := journal.ParseProofs(b)
			ps.Proofs = ps.Proofs[1:]
			nb, _ := json.Marshal(ps)
			os.WriteFile(p, nb, 0o600)
		}, []string{"bad-inclusion-proof"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := copyExport(t, dst)
			tc.tamper(t, dir)
			rep := verifyWith(t, dir, l.keys)
			got := kinds(rep)
			for _, k := range tc.want {
				if !slices.Contains(got, k) {
					t.Fatalf("findings %v, want %s among them: %+v", got, k, rep.Findings)
				}
			}
		})
	}

	// An older checkpoint's proofs still hold for a later export: the
	// entries after it are noted as not yet witnessed, not refused.
	dir := copyExport(t, later)
	for _, f := range []string{"checkpoint", "proofs.json"} {
		b, _ := os.ReadFile(filepath.Join(dst, "proofs", f))
		os.WriteFile(filepath.Join(dir, "proofs", f), b, 0o600)
	}
	rep := verifyWith(t, dir, l.keys)
	if !rep.OK || !slices.Contains(noteKinds(rep), string(journal.NoteNotWitnessed)) {
		t.Fatalf("older checkpoint: %+v", rep)
	}
}

// rewriteProofsCheckpoint puts note as the export's checkpoint, in both
// proofs/checkpoint and proofs.json.
func rewriteProofsCheckpoint(t *testing.T, dir string, cpNote []byte) {
	t.Helper()
	p := filepath.Join(dir, "proofs", "proofs.json")
	b, _ := os.ReadFile(p)
	ps, err := journal.ParseProofs(b)
	if err != nil {
		t.Fatal(err)
	}
	ps.Checkpoint = string(cpNote)
	nb, _ := json.Marshal(ps)
	os.WriteFile(p, nb, 0o600)
	os.WriteFile(filepath.Join(dir, "proofs", "checkpoint"), cpNote, 0o600)
}

// TestRewrittenJournalCannotBeExportedAsWitnessed: the whole journal
// rewritten by whoever holds the folder, every event and the head log
// recomputed with the real signing key, is consistent in itself; an export
// of it cannot carry proofs against the witnessed checkpoint.
func TestRewrittenJournalCannotBeExportedAsWitnessed(t *testing.T) {
	l := newWitnessedLog(t)
	genuine, err := journal.LatestCheckpoint(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	forged := filepath.Join(t.TempDir(), "journal")
	w, err := journal.Open(forged, journal.WriterOptions{Signer: l.logKey})
	if err != nil {
		t.Fatal(err)
	}
	writeRuns(t, w, "forged", "acme/ada", "acme/bob", "globex/ada")
	w.Close()
	if rep, err := journal.Verify(forged, journal.VerifyOptions{}); err != nil || !rep.OK {
		t.Fatalf("the forgery is consistent in itself: %+v %v", rep, err)
	}

	// With the witnessed checkpoint beside it, the exporter refuses.
	os.MkdirAll(filepath.Join(forged, "checkpoints"), 0o700)
	os.WriteFile(filepath.Join(forged, "checkpoints", "latest"), genuine, 0o600)
	if _, err := evidence.Export(filepath.Join(t.TempDir(), "x"), forged, evidence.Selector{Tenant: "acme"}); !errors.Is(err, evidence.ErrCheckpoint) ||
		!errors.Is(err, journal.ErrCheckpointMismatch) {
		t.Fatalf("export of a rewritten journal: %v", err)
	}

	// Without it, the export carries no proofs: an auditor with the keys
	// refuses it.
	os.RemoveAll(filepath.Join(forged, "checkpoints"))
	dst := filepath.Join(t.TempDir(), "forged-evidence")
	sum, err := evidence.Export(dst, forged, evidence.Selector{Tenant: "acme"})
	if err != nil || sum.Manifest.NoProofs != evidence.NoCheckpoint {
		t.Fatalf("%+v %v", sum, err)
	}
	if got := kinds(verifyWith(t, dst, l.keys)); !slices.Equal(got, []string{"proofs-missing"}) {
		t.Fatalf("no proofs: %v", got)
	}

	// With proofs made from the forged head log and the genuine
	// checkpoint note beside them, neither the proofs nor the head log
	// hold against it.
	head, _ := os.ReadFile(filepath.Join(dst, "head.jsonl"))
	cp, _ := journal.PeekCheckpoint(genuine)
	tree, _ := journal.BuildTree(dst)
	root, _ := tree.Root(cp.Size)
	fakeCP := *cp
	fakeCP.Hash = root
	var seqs []uint64
	for i := range bytes.Count(head, []byte("\n")) {
		seqs = append(seqs, uint64(i+1))
	}
	proofs, err := journal.ProveEntries(head, seqs, &fakeCP)
	if err != nil {
		t.Fatal(err)
	}
	pj, _ := journal.MarshalProofs(cp, proofs)
	os.MkdirAll(filepath.Join(dst, "proofs"), 0o700)
	os.WriteFile(filepath.Join(dst, "proofs", "proofs.json"), pj, 0o600)
	os.WriteFile(filepath.Join(dst, "proofs", "checkpoint"), genuine, 0o600)
	if got := kinds(verifyWith(t, dst, l.keys)); !slices.Equal(got, []string{"bad-inclusion-proof", "checkpoint-mismatch"}) {
		t.Fatalf("forged proofs: %v", got)
	}
}

func TestExportWithoutCheckpointSaysSo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	w, err := journal.Open(dir, journal.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeRuns(t, w, "ok", "acme/ada", "globex/ada")
	w.Close()
	dst := filepath.Join(t.TempDir(), "x")
	sum, err := evidence.Export(dst, dir, evidence.Selector{Tenant: "acme"})
	if err != nil || sum.Manifest.Proofs != "" || sum.Manifest.NoProofs != evidence.NoCheckpoint || sum.Manifest.Checkpoint != nil {
		t.Fatalf("%+v %v", sum, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "proofs")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("proofs folder without proofs: %v", err)
	}
	rep, err := evidence.VerifyExport(dst)
	if err != nil || !rep.OK || !slices.Equal(noteKinds(rep), []string{string(journal.NoteNoProofs)}) ||
		!strings.Contains(fmt.Sprint(rep.Notes), evidence.NoCheckpoint) {
		t.Fatalf("%+v %v", rep, err)
	}
}

func TestExportNotesEntriesAfterTheCheckpoint(t *testing.T) {
	l := newWitnessedLog(t)
	writeRuns(t, l.w, "later", "acme/cy")
	dst, m := l.export(t)
	if c := m.Checkpoint; c.Size != 9 || c.Proved != 6 || !slices.Equal(c.NotCovered, []uint64{10, 11, 12}) {
		t.Fatalf("manifest checkpoint: %+v", c)
	}
	rep := verifyWith(t, dst, l.keys)
	if !rep.OK || !slices.Equal(noteKinds(rep), []string{string(journal.NoteProofsChecked), string(journal.NoteNotWitnessed)}) {
		t.Fatalf("%+v", rep)
	}
}

func TestArchiveWithProofsUnpacksToAnExportThatVerifies(t *testing.T) {
	l := newWitnessedLog(t)
	var buf bytes.Buffer
	if err := evidence.WriteArchive(&buf, l.dir, evidence.Selector{Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o700)
			continue
		}
		b, _ := io.ReadAll(tr)
		os.WriteFile(p, b, 0o600)
	}
	for _, want := range []string{"acme-evidence/proofs/checkpoint", "acme-evidence/proofs/proofs.json"} {
		if !slices.Contains(names, want) {
			t.Fatalf("archive lacks %s: %v", want, names)
		}
	}
	rep := verifyWith(t, filepath.Join(dir, "acme-evidence"), l.keys)
	if !rep.OK || rep.Runs != 2 {
		t.Fatalf("%+v", rep)
	}
}
