package evidence

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// Export test vectors (FORMAT.md section 9): evidence exports with
// inclusion proofs, made from fixed seeds (the same published test keys
// as broker/journal/testdata/vectors), and tampered copies with the
// findings `verify --export --log-key --witness-key` must produce.
// `go test -run TestExportVectors -update` rewrites testdata/vectors;
// without it the test regenerates them, requires the same bytes, and
// verifies each.

var update = flag.Bool("update", false, "rewrite testdata/vectors")

const (
	xvOrigin  = "vectors.gatehouse.example/log"
	xvWitness = "witness.gatehouse.example"
)

var xvEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// xvManifest is testdata/vectors/vectors.json.
type xvManifest struct {
	Note      string     `json:"note"`
	LogSeed   string     `json:"log_seed_hex"`
	LogVKey   string     `json:"log_verifier_key"`
	WitSeed   string     `json:"witness_seed_hex"`
	WitVKey   string     `json:"witness_verifier_key"`
	Selector  string     `json:"selector"`
	Vectors   []xvVector `json:"vectors"`
	Generated string     `json:"generated_by"`
}

type xvVector struct {
	Name   string   `json:"name"`
	Dir    string   `json:"dir"`
	Expect []string `json:"expect"` // finding kinds, sorted and unique; empty: verifies
	Why    string   `json:"why"`
}

// xvJournal writes a signed journal of two tenants (acme: two runs,
// globex: one) into dir; tag changes the recorded targets.
func xvJournal(t *testing.T, dir string, key *journal.SigningKey, tag string) {
	t.Helper()
	n := 0
	w, err := journal.Open(dir, journal.WriterOptions{Signer: key, Now: func() time.Time { n++; return xvEpoch.Add(time.Duration(n) * time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	runs := []struct{ run, tenant, person string }{
		{"r_aaaaaaaaaaaaaaaaaaaaaaaaaa", "acme", "u_123"},
		{"r_bbbbbbbbbbbbbbbbbbbbbbbbbb", "globex", "u_456"},
		{"r_cccccccccccccccccccccccccc", "acme", "u_789"},
	}
	for step := 0; step < 3; step++ {
		for i, r := range runs {
			af := fmt.Sprintf(`{"person":%q,"tenant":%q}`, r.person, r.tenant)
			at := xvEpoch.Add(time.Duration(step*10+i) * time.Second)
			e := func(k int, typ journal.Type, effect, data string) journal.Event {
				return journal.Event{ID: fmt.Sprintf("e_%d_%d", i, k), Run: r.run, Type: typ, Effect: effect, Time: at, Data: json.RawMessage(data)}
			}
			fx := fmt.Sprintf("x_%d", i)
			var batch []journal.Event
			switch step {
			case 0:
				batch = []journal.Event{e(1, journal.TypeRunOpen, "", `{"acting_for":`+af+`,"agent":"clerk","scopes":["reports"]}`)}
			case 1:
				batch = []journal.Event{
					e(2, journal.TypeDecision, fx, `{"acting_for":`+af+`,"action":"deliver","enforced":true,"mode":"strict","outcome":"allowed","policy_digest":"sha256:00","sink":"output","size":0,"target":"`+tag+`"}`),
					e(3, journal.TypeAttempt, fx, `{"action":"deliver","sink":"output"}`),
				}
			case 2:
				batch = []journal.Event{
					e(4, journal.TypeOutcome, fx, `{"digest":"sha256:ab","size":3,"status":"ok"}`),
					e(5, journal.TypeRunClose, "", `{"status":"done"}`),
				}
			}
			if _, err := w.Append(batch); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// xvCheckpoint signs a checkpoint of the journal in dir with the log key,
// cosigned by witKey at the epoch, and stores it as the writer would.
func xvCheckpoint(t *testing.T, dir string, logKey, witKey *journal.SigningKey) []byte {
	t.Helper()
	tree, err := journal.BuildTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := tree.Root(tree.Size())
	cp, err := note.Sign(&note.Note{Text: journal.FormatCheckpoint(xvOrigin, tree.Size(), root)},
		journal.NewLogSigner(xvOrigin, logKey), journal.NewCosigner(xvWitness, witKey, func() time.Time { return xvEpoch }))
	if err != nil {
		t.Fatal(err)
	}
	xvWrite(t, filepath.Join(dir, "checkpoints", "latest"), cp)
	return cp
}

func xvWrite(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func xvRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// xvSeeds are the test keys' seeds, published on purpose: never use them.
var xvLogSeed, xvWitSeed = bytes.Repeat([]byte{0x11}, 32), bytes.Repeat([]byte{0x22}, 32)

func genExportVectors(t *testing.T, out string) {
	logKey, _ := journal.NewSigningKey(xvLogSeed)
	witKey, _ := journal.NewSigningKey(xvWitSeed)
	work := t.TempDir()
	sel := Selector{Tenant: "acme"}
	export := func(name, jdir string) string {
		dst := filepath.Join(out, name)
		if _, err := exportAt(dst, jdir, sel, exportOptions{now: func() time.Time { return xvEpoch.Add(time.Hour) }}); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	copyTo := func(from, name string) string {
		to := filepath.Join(out, name)
		_ = filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(from, p)
			xvWrite(t, filepath.Join(to, rel), xvRead(t, p))
			return nil
		})
		return to
	}
	editProofs := func(dir string, fn func(*journal.Proofs)) {
		p := filepath.Join(dir, "proofs", "proofs.json")
		ps, err := journal.ParseProofs(xvRead(t, p))
		if err != nil {
			t.Fatal(err)
		}
		fn(ps)
		b, _ := json.MarshalIndent(ps, "", "  ")
		xvWrite(t, p, append(b, '\n'))
	}

	genuine := filepath.Join(work, "journal")
	xvJournal(t, genuine, logKey, "ok")
	cpNote := xvCheckpoint(t, genuine, logKey, witKey)
	good := export("export-good", genuine)

	// One proof's audit path changed.
	editProofs(copyTo(good, "export-tampered-proof"), func(ps *journal.Proofs) { ps.Proofs[1].Proof[0][0] ^= 0x01 })

	// The same tree signed under the origin by another key (and cosigned
	// with the real witness key).
	otherKey, _ := journal.NewSigningKey(bytes.Repeat([]byte{0x33}, 32))
	cp, _ := journal.PeekCheckpoint(cpNote)
	forgedCP, err := note.Sign(&note.Note{Text: journal.FormatCheckpoint(cp.Origin, cp.Size, cp.Hash)},
		journal.NewLogSigner(xvOrigin, otherKey), journal.NewCosigner(xvWitness, witKey, func() time.Time { return xvEpoch }))
	if err != nil {
		t.Fatal(err)
	}
	other := copyTo(good, "export-other-log-key")
	xvWrite(t, filepath.Join(other, "proofs", "checkpoint"), forgedCP)
	editProofs(other, func(ps *journal.Proofs) { ps.Checkpoint = string(forgedCP) })

	// The whole journal rewritten with the real key, exported, and given
	// the genuine checkpoint with proofs computed from the rewritten head
	// log (as if its root were the checkpoint's).
	forged := filepath.Join(work, "forged")
	xvJournal(t, forged, logKey, "ko")
	rw := export("export-rewritten", forged)
	head := xvRead(t, filepath.Join(rw, "head.jsonl"))
	tree, _ := journal.BuildTree(rw)
	fake := *cp
	fake.Hash, _ = tree.Root(cp.Size)
	proofs, err := journal.ProveEntries(head, []uint64{1, 3, 4, 6, 7, 9}, &fake)
	if err != nil {
		t.Fatal(err)
	}
	pj, _ := journal.MarshalProofs(cp, proofs)
	xvWrite(t, filepath.Join(rw, "proofs", "proofs.json"), pj)
	xvWrite(t, filepath.Join(rw, "proofs", "checkpoint"), cpNote)

	// An export that carries no proofs at all.
	bare := copyTo(good, "export-no-proofs")
	os.RemoveAll(filepath.Join(bare, "proofs"))

	m := xvManifest{
		Note:     "Evidence export vectors for broker/journal/FORMAT.md section 7. The seeds are test keys, published so the vectors can be regenerated; never use them.",
		LogSeed:  fmt.Sprintf("%x", xvLogSeed),
		LogVKey:  journal.VerifierKey(xvOrigin, logKey.Public(), false),
		WitSeed:  fmt.Sprintf("%x", xvWitSeed),
		WitVKey:  journal.VerifierKey(xvWitness, witKey.Public(), true),
		Selector: "acme/",
		Vectors: []xvVector{
			{Name: "export-good", Dir: "export-good", Expect: []string{}, Why: "tenant acme's export of a signed journal with inclusion proofs of its runs' head entries against the witnessed checkpoint"},
			{Name: "export-tampered-proof", Dir: "export-tampered-proof", Expect: []string{"bad-inclusion-proof"}, Why: "one bit of one proof's audit path flipped"},
			{Name: "export-other-log-key", Dir: "export-other-log-key", Expect: []string{"bad-checkpoint"}, Why: "the checkpoint signed under the log's origin by another key"},
			{Name: "export-rewritten", Dir: "export-rewritten", Expect: []string{"bad-inclusion-proof", "checkpoint-mismatch"}, Why: "the whole journal rewritten consistently with the real key and exported with the genuine checkpoint: neither the head log nor the proofs match it"},
			{Name: "export-no-proofs", Dir: "export-no-proofs", Expect: []string{"proofs-missing"}, Why: "the proofs folder removed, checked with the keys"},
		},
		Generated: "go test ./broker/evidence -run TestExportVectors -update",
	}
	mj, _ := json.MarshalIndent(m, "", "  ")
	xvWrite(t, filepath.Join(out, "vectors.json"), append(mj, '\n'))
}

func xvTree(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(xvRead(t, p))
		}
		return nil
	})
	return out
}

func TestExportVectors(t *testing.T) {
	dir := filepath.Join("testdata", "vectors")
	if *update {
		os.RemoveAll(dir)
		genExportVectors(t, dir)
	} else {
		tmp := t.TempDir()
		genExportVectors(t, tmp)
		got, want := xvTree(t, tmp), xvTree(t, dir)
		for name, b := range got {
			if want[name] != b {
				t.Errorf("%s is not reproduced from the seeds (run go test -run TestExportVectors -update)", name)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d files generated, %d in testdata/vectors", len(got), len(want))
		}
	}
	var m xvManifest
	if err := json.Unmarshal(xvRead(t, filepath.Join(dir, "vectors.json")), &m); err != nil {
		t.Fatal(err)
	}
	// What a third party holds: the two verifier keys.
	lv, err := journal.NewNoteVerifier(m.LogVKey)
	if err != nil {
		t.Fatal(err)
	}
	wv, err := journal.NewNoteVerifier(m.WitVKey)
	if err != nil {
		t.Fatal(err)
	}
	keys := journal.CheckpointKeys{Log: lv, Witnesses: []note.Verifier{wv}}
	for _, v := range m.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			rep, err := VerifyExportWith(filepath.Join(dir, v.Dir), VerifyOptions{Checkpoint: keys})
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, f := range rep.Findings {
				got = append(got, string(f.Kind))
			}
			slices.Sort(got)
			got = slices.Compact(got)
			if !slices.Equal(got, v.Expect) {
				t.Fatalf("findings %v, expected %v: %+v", got, v.Expect, rep.Findings)
			}
		})
	}
}
