package journal

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/edwards25519"
	"golang.org/x/mod/sumdb/note"
)

// The test vectors in testdata/vectors are made from fixed seeds by
// genVectors; `go test -run TestVectors -update` rewrites them. Without
// -update TestVectors regenerates them in a temporary directory and
// requires the same bytes, then verifies every vector and checks the
// finding it must produce. See FORMAT.md.
// (The -update flag is journal_test.go's.)

const (
	vecOrigin  = "vectors.gatehouse.example/log"
	vecWitness = "witness.gatehouse.example"
)

// vecSeeds are the vector keys' seeds. Test keys: never use them.
var vecLogSeed, vecWitnessSeed = bytes.Repeat([]byte{0x11}, 32), bytes.Repeat([]byte{0x22}, 32)

// Manifest is testdata/vectors/vectors.json.
type vecManifest struct {
	Note       string      `json:"note"`
	Origin     string      `json:"origin"`
	LogSeed    string      `json:"log_seed_hex"` // test key: published on purpose
	LogPublic  string      `json:"log_public_key_hex"`
	LogKeyID   string      `json:"log_key_id"`
	LogVKey    string      `json:"log_verifier_key"`
	WitSeed    string      `json:"witness_seed_hex"`
	WitVKey    string      `json:"witness_verifier_key"`
	Checkpoint string      `json:"checkpoint"` // the witnessed checkpoint file
	Vectors    []vecVector `json:"vectors"`
}

type vecVector struct {
	Name              string   `json:"name"`
	Dir               string   `json:"dir"`
	RequireSignatures bool     `json:"require_signatures"`
	Proofs            string   `json:"proofs,omitempty"` // proofs.json checked against the checkpoint
	Expect            []string `json:"expect"`           // finding kinds, sorted; empty: verifies
	Why               string   `json:"why"`
}

// vecEvents is the vectors' journal: two runs, one closed, its data as
// raw JSON so changes to the Go types never change the vectors.
func vecEvents(t tb, person string) []Event {
	const a, b = "r_aaaaaaaaaaaaaaaaaaaaaaaaaa", "r_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	open := `{"acting_for":{"person":"` + person + `","tenant":"acme"},"agent":"clerk","scopes":["invoices:read"]}`
	dec := func(out string) string {
		return `{"acting_for":{"person":"` + person + `","tenant":"acme"},"action":"call","enforced":true,"host":"api.example.com",` +
			`"method":"GET","mode":"strict","outcome":"` + out + `","path":"/invoices/{id}","policy_digest":"sha256:00",` +
			`"provider":"billing","scopes_checked":["invoices:read"],"sink":"provider","size":0}`
	}
	e := func(run, id string, typ Type, effect string, sec int, data string) Event {
		return Event{ID: id, Run: run, Type: typ, Effect: effect, Time: epoch.Add(time.Duration(sec) * time.Second), Data: json.RawMessage(data)}
	}
	return []Event{
		e(a, "e_a1", TypeRunOpen, "", 1, open),
		e(b, "e_b1", TypeRunOpen, "", 2, open),
		e(a, "e_a2", TypeDecision, "x_1", 3, dec("allowed")),
		e(a, "e_a3", TypeAttempt, "x_1", 4, `{"action":"call","sink":"provider"}`),
		e(b, "e_b2", TypeDecision, "x_2", 5, dec("refused")),
		e(a, "e_a4", TypeOutcome, "x_1", 6, `{"detail":{"status_code":"200"},"digest":"sha256:ab","size":120,"status":"ok"}`),
		e(a, "e_a5", TypeRunClose, "", 7, `{"status":"done"}`),
		e(b, "e_b3", TypeDecision, "x_3", 8, dec("held")),
	}
}

// genVectors writes every vector into dir.
func genVectors(t *testing.T, dir string) {
	logKey, _ := NewSigningKey(vecLogSeed)
	witKey, _ := NewSigningKey(vecWitnessSeed)
	fixed := func() time.Time { return epoch }
	write := func(sub string, evs []Event, batch int, k *SigningKey) string {
		d := filepath.Join(dir, sub)
		w, err := Open(d, WriterOptions{Now: clock(), Signer: k})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(evs); i += batch {
			if _, err := w.Append(evs[i:min(i+batch, len(evs))]); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
		os.Remove(filepath.Join(d, lockFile))
		return d
	}
	good := write("good", vecEvents(t, "u_123"), 2, logKey)

	// The witnessed checkpoint of good.
	tree, err := BuildTree(good)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := tree.Root(tree.Size())
	cpText, err := note.Sign(&note.Note{Text: FormatCheckpoint(vecOrigin, tree.Size(), root)},
		NewLogSigner(vecOrigin, logKey), NewCosigner(vecWitness, witKey, fixed))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "checkpoint"), cpText)
	cp, err := OpenCheckpoint(cpText, vecKeys(t))
	if err != nil {
		t.Fatal(err)
	}
	seqs := []uint64{}
	for i := int64(1); i <= tree.Size(); i++ {
		seqs = append(seqs, uint64(i))
	}
	proofs, err := InclusionProofs(good, seqs, cp)
	if err != nil {
		t.Fatal(err)
	}
	pj, _ := json.MarshalIndent(Proofs{Checkpoint: string(cpText), Proofs: proofs}, "", "  ")
	mustWrite(t, filepath.Join(dir, "good-proofs.json"), append(pj, '\n'))

	// Tampered copies.
	const runA = "runs/r_aaaaaaaaaaaaaaaaaaaaaaaaaa.jsonl"
	edit := func(sub, file string, fn func([][]byte) [][]byte) {
		copyTree(t, good, filepath.Join(dir, sub))
		p := filepath.Join(dir, sub, file)
		writeLines(t, p, fn(readLines(t, p)))
	}
	edit("edited-event", runA, func(l [][]byte) [][]byte {
		l[1] = bytes.Replace(l[1], []byte(`"api.example.com"`), []byte(`"api.evil.example"`), 1)
		return l
	})
	edit("bad-signature", runA, func(l [][]byte) [][]byte {
		s, _, _ := LineSignature(l[2])
		sig, _ := base64.StdEncoding.DecodeString(s.Sig)
		sig[10] ^= 0x40
		l[2] = bytes.Replace(l[2], []byte(s.Sig), []byte(base64.StdEncoding.EncodeToString(sig)), 1)
		return l
	})
	edit("small-order-r", runA, func(l [][]byte) [][]byte {
		// A signature plain Ed25519 accepts: R = identity, S = k*a.
		p, _, _ := parseEvent(l[3], &obj{}, nil)
		msg := Statement(hex.EncodeToString(p.hash[:]), logKey.KeyID())
		R := edwards25519.NewIdentityPoint().Bytes()
		S := new(edwards25519.Scalar).Multiply(challenge(R, logKey.Public(), msg), scalarOf(vecLogSeed))
		s, _, _ := LineSignature(l[3])
		l[3] = bytes.Replace(l[3], []byte(s.Sig), []byte(base64.StdEncoding.EncodeToString(append(R, S.Bytes()...))), 1)
		return l
	})
	write("unsigned", vecEvents(t, "u_123"), 2, nil)
	// The whole journal rewritten with the real key, head log included,
	// with as many head entries as the true one.
	write("rewritten", vecEvents(t, "u_999"), 2, logKey)
	edit("rolled-back", headFile, func(l [][]byte) [][]byte { return l[:len(l)-1] })
	// An export's proof of a head entry that was changed.
	var bad Proofs
	_ = json.Unmarshal(pj, &bad)
	bad.Proofs[0].Line = strings.Replace(bad.Proofs[0].Line, `"run_seq":1`, `"run_seq":2`, 1)
	bj, _ := json.MarshalIndent(bad, "", "  ")
	mustWrite(t, filepath.Join(dir, "tampered-proofs.json"), append(bj, '\n'))

	m := vecManifest{
		Note:      "Test vectors for FORMAT.md. The seeds are test keys, published so the vectors can be regenerated; never use them.",
		Origin:    vecOrigin,
		LogSeed:   hex.EncodeToString(vecLogSeed),
		LogPublic: hex.EncodeToString(logKey.Public()), LogKeyID: logKey.KeyID(),
		LogVKey: VerifierKey(vecOrigin, logKey.Public(), false),
		WitSeed: hex.EncodeToString(vecWitnessSeed), WitVKey: VerifierKey(vecWitness, witKey.Public(), true),
		Checkpoint: "checkpoint",
		Vectors: []vecVector{
			{Name: "good", Dir: "good", RequireSignatures: true, Proofs: "good-proofs.json", Expect: []string{}, Why: "a signed journal, its witnessed checkpoint and inclusion proofs of every head entry"},
			{Name: "edited-event", Dir: "edited-event", Expect: []string{"edited-event"}, Why: "an event's data changed after it was written; its signature still covers the recorded hash"},
			{Name: "bad-signature", Dir: "bad-signature", Expect: []string{"bad-signature"}, Why: "one bit of an event's signature flipped"},
			{Name: "small-order-r", Dir: "small-order-r", Expect: []string{"bad-signature"}, Why: "a signature with R of small order, which plain Ed25519 accepts and strict verification refuses"},
			{Name: "unsigned", Dir: "unsigned", RequireSignatures: true, Expect: []string{"unsigned-event"}, Why: "no event signed, signatures required"},
			{Name: "rewritten", Dir: "rewritten", RequireSignatures: true, Expect: []string{"checkpoint-mismatch"}, Why: "the whole journal rewritten consistently with the real key: only the witnessed checkpoint catches it"},
			{Name: "rolled-back", Dir: "rolled-back", Expect: []string{"rolled-back"}, Why: "the head log's last entry removed (its run is left with an unregistered event, a note)"},
			{Name: "tampered-proofs", Dir: "good", Proofs: "tampered-proofs.json", Expect: []string{"bad-inclusion-proof"}, Why: "an export's proof carrying a changed head entry"},
		},
	}
	mj, _ := json.MarshalIndent(m, "", "  ")
	mustWrite(t, filepath.Join(dir, "vectors.json"), append(mj, '\n'))
}

func vecKeys(t tb) CheckpointKeys {
	logKey, _ := NewSigningKey(vecLogSeed)
	witKey, _ := NewSigningKey(vecWitnessSeed)
	lv, err := NewNoteVerifier(VerifierKey(vecOrigin, logKey.Public(), false))
	if err != nil {
		t.Fatal(err)
	}
	wv, err := NewNoteVerifier(VerifierKey(vecWitness, witKey.Public(), true))
	if err != nil {
		t.Fatal(err)
	}
	return CheckpointKeys{Log: lv, Witnesses: []note.Verifier{wv}}
}

func mustWrite(t tb, path string, b []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyTree(t tb, from, to string) {
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readTree maps each file under dir to its content.
func readTree(t tb, dir string) map[string]string {
	out := map[string]string{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			b, _ := os.ReadFile(p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

func TestVectors(t *testing.T) {
	dir := filepath.Join("testdata", "vectors")
	if *update {
		os.RemoveAll(dir)
		genVectors(t, dir)
	} else {
		tmp := t.TempDir()
		genVectors(t, tmp)
		got, want := readTree(t, tmp), readTree(t, dir)
		for name, b := range got {
			if want[name] != b {
				t.Errorf("%s is not reproduced from the seeds (run go test -run TestVectors -update)", name)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d files generated, %d in testdata/vectors", len(got), len(want))
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m vecManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	// What a third party does: only the manifest's public keys.
	pub, _ := hex.DecodeString(m.LogPublic)
	trusted, err := NewTrustedKeys(pub)
	if err != nil {
		t.Fatal(err)
	}
	lv, err := NewNoteVerifier(m.LogVKey)
	if err != nil {
		t.Fatal(err)
	}
	wv, err := NewNoteVerifier(m.WitVKey)
	if err != nil {
		t.Fatal(err)
	}
	cpText, _ := os.ReadFile(filepath.Join(dir, m.Checkpoint))
	cp, err := OpenCheckpoint(cpText, CheckpointKeys{Log: lv, Witnesses: []note.Verifier{wv}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range m.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			rep, err := Verify(filepath.Join(dir, v.Dir), VerifyOptions{Keys: trusted, RequireSignatures: v.RequireSignatures, Checkpoint: cp})
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, f := range rep.Findings {
				got = append(got, string(f.Kind))
			}
			if v.Proofs != "" {
				pb, _ := os.ReadFile(filepath.Join(dir, v.Proofs))
				ps, err := ParseProofs(pb)
				if err != nil {
					t.Fatal(err)
				}
				pcp, err := OpenCheckpoint([]byte(ps.Checkpoint), CheckpointKeys{Log: lv, Witnesses: []note.Verifier{wv}})
				if err != nil {
					t.Fatal(err)
				}
				entries := map[uint64][]byte{}
				i := uint64(0)
				_ = ReadHeadLines(filepath.Join(dir, v.Dir), func(line []byte) error {
					i++
					entries[i] = bytes.Clone(line)
					return nil
				})
				for _, f := range VerifyInclusion(entries, ps.Proofs, pcp) {
					got = append(got, string(f.Kind))
				}
			}
			slices.Sort(got)
			got = slices.Compact(got)
			if !slices.Equal(got, v.Expect) && !(len(got) == 0 && len(v.Expect) == 0) {
				t.Fatalf("findings %v, expected %v: %+v", got, v.Expect, rep.Findings)
			}
		})
	}
}
