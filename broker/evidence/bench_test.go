package evidence_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/journal"
)

// benchJournal writes runs runs per tenant for acme and globex (3 head
// entries each), signed, with a cosigned checkpoint of the whole head log
// when checkpoint is set. It returns the journal dir and the keys.
func benchJournal(b *testing.B, runs int, checkpoint bool) (string, journal.CheckpointKeys) {
	dir := filepath.Join(b.TempDir(), "journal")
	logKey, _ := journal.NewSigningKey(make([]byte, 32))
	witKey, _ := journal.NewSigningKey(append(make([]byte, 31), 1))
	w, err := journal.Open(dir, journal.WriterOptions{Signer: logKey})
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for step := 0; step < 3; step++ {
		var batch []journal.Event
		for i := 0; i < 2*runs; i++ {
			tenant := []string{"acme", "globex"}[i%2]
			run := fmt.Sprintf("r_%s%06d", tenant, i)
			af := fmt.Sprintf(`{"person":"p%d","tenant":%q}`, i, tenant)
			fx := fmt.Sprintf("x_%d", i)
			e := func(k int, typ journal.Type, effect, data string) journal.Event {
				return journal.Event{ID: fmt.Sprintf("e_%d_%d", i, k), Run: run, Type: typ, Effect: effect, Time: at, Data: json.RawMessage(data)}
			}
			switch step {
			case 0:
				batch = append(batch, e(1, journal.TypeRunOpen, "", `{"acting_for":`+af+`,"scopes":[]}`))
			case 1:
				batch = append(batch, e(2, journal.TypeDecision, fx, `{"acting_for":`+af+`,"action":"deliver","enforced":true,"mode":"strict","outcome":"allowed","policy_digest":"sha256:00","sink":"output","size":0}`),
					e(3, journal.TypeAttempt, fx, `{"action":"deliver","sink":"output"}`))
			case 2:
				batch = append(batch, e(4, journal.TypeOutcome, fx, `{"size":3,"status":"ok"}`), e(5, journal.TypeRunClose, "", `{"status":"done"}`))
			}
		}
		if _, err := w.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	lv, _ := journal.NewNoteVerifier(journal.VerifierKey("bench.example/log", logKey.Public(), false))
	wv, _ := journal.NewNoteVerifier(journal.VerifierKey("wit.bench.example", witKey.Public(), true))
	keys := journal.CheckpointKeys{Log: lv, Witnesses: []note.Verifier{wv}}
	if checkpoint {
		tree, err := journal.BuildTree(dir)
		if err != nil {
			b.Fatal(err)
		}
		root, _ := tree.Root(tree.Size())
		cp, err := note.Sign(&note.Note{Text: journal.FormatCheckpoint("bench.example/log", tree.Size(), root)},
			journal.NewLogSigner("bench.example/log", logKey), journal.NewCosigner("wit.bench.example", witKey, nil))
		if err != nil {
			b.Fatal(err)
		}
		os.MkdirAll(filepath.Join(dir, "checkpoints"), 0o700)
		os.WriteFile(filepath.Join(dir, "checkpoints", "latest"), cp, 0o600)
	}
	return dir, keys
}

// BenchmarkExportProofs: making and checking a tenant's export of 1,000
// runs (3,000 of the 6,000 head entries) with inclusion proofs, against
// the same export without them (no checkpoint; verify without keys).
func BenchmarkExportProofs(b *testing.B) {
	const runs = 1000
	for _, proofs := range []bool{false, true} {
		name := map[bool]string{false: "without-proofs", true: "with-proofs"}[proofs]
		dir, keys := benchJournal(b, runs, proofs)
		b.Run("export/"+name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := evidence.Export(filepath.Join(b.TempDir(), fmt.Sprint(i)), dir, evidence.Selector{Tenant: "acme"}); err != nil {
					b.Fatal(err)
				}
			}
		})
		dst := filepath.Join(b.TempDir(), "x")
		if _, err := evidence.Export(dst, dir, evidence.Selector{Tenant: "acme"}); err != nil {
			b.Fatal(err)
		}
		opts := evidence.VerifyOptions{}
		if proofs {
			opts.Checkpoint = keys
		}
		b.Run("verify/"+name, func(b *testing.B) {
			for b.Loop() {
				rep, err := evidence.VerifyExportWith(dst, opts)
				if err != nil || !rep.OK {
					b.Fatalf("%v %+v", err, rep)
				}
			}
			b.ReportMetric(float64(3*runs*b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
