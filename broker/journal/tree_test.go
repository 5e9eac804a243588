package journal

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// mth is RFC 6962's Merkle tree hash, written out from the RFC.
func mth(leaves [][]byte) tlog.Hash {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return sha256.Sum256(append([]byte{0}, leaves[0]...))
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	l, r := mth(leaves[:k]), mth(leaves[k:])
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

func TestTreeMatchesRFC6962(t *testing.T) {
	var tr Tree
	var leaves [][]byte
	for n := 1; n <= 40; n++ {
		leaf := []byte(fmt.Sprintf(`{"seq":%d}`, n))
		leaves = append(leaves, leaf)
		tr.Append(leaf)
		root, err := tr.Root(int64(n))
		if err != nil {
			t.Fatal(err)
		}
		if root != mth(leaves) {
			t.Fatalf("size %d: root differs from RFC 6962", n)
		}
	}
	for n := int64(1); n <= 40; n++ {
		rn, _ := tr.Root(n)
		for old := int64(1); old <= n; old++ {
			ro, _ := tr.Root(old)
			p, err := tr.ConsistencyProof(old, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := tlog.CheckTree(p, n, rn, old, ro); err != nil {
				t.Fatalf("consistency %d -> %d: %v", old, n, err)
			}
		}
		for i := int64(0); i < n; i++ {
			p, err := tr.InclusionProof(i, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := tlog.CheckRecord(p, n, rn, i, tlog.RecordHash(leaves[i])); err != nil {
				t.Fatalf("inclusion %d in %d: %v", i, n, err)
			}
		}
	}
	if _, err := tr.ConsistencyProof(0, 3); err == nil {
		t.Fatal("a proof from size 0")
	}
	if _, err := tr.Root(41); err == nil {
		t.Fatal("a root beyond the tree")
	}
}

// TestCheckpointerFollowsWriter: the writer extends the tree on every
// commit, a new checkpointer reads the head log back to the same tree,
// and the latest checkpoint is stored and reloaded.
func TestCheckpointerFollowsWriter(t *testing.T) {
	dir := t.TempDir()
	k := testKey(t, 1)
	w, err := Open(dir, WriterOptions{Now: clock(), Signer: k})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCheckpointer(w, CheckpointConfig{Origin: "test.example/log", Key: k})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Checkpoint(ctx); err != ErrEmptyLog {
		t.Fatalf("empty log: %v", err)
	}
	evs := fixedEvents(t)
	if _, err := w.Append(evs[:3]); err != nil {
		t.Fatal(err)
	}
	first, err := c.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(evs[3:]); err != nil {
		t.Fatal(err)
	}
	second, err := c.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := NewNoteVerifier(c.VerifierKey())
	cp1, err := OpenCheckpoint(first, CheckpointKeys{Log: v})
	if err != nil {
		t.Fatal(err)
	}
	cp2, err := OpenCheckpoint(second, CheckpointKeys{Log: v})
	if err != nil {
		t.Fatal(err)
	}
	built, _ := BuildTree(dir)
	if built.Size() != cp2.Size || cp1.Size >= cp2.Size {
		t.Fatalf("sizes %d, %d; head log %d", cp1.Size, cp2.Size, built.Size())
	}
	if root, _ := built.Root(cp2.Size); root != cp2.Hash {
		t.Fatal("the writer's tree and the head log's differ")
	}
	p, err := c.ConsistencyProof(cp1.Size, cp2.Size)
	if err != nil || tlog.CheckTree(p, cp2.Size, cp2.Hash, cp1.Size, cp1.Hash) != nil {
		t.Fatalf("consistency: %v", err)
	}
	if again, _ := c.Refresh(ctx); string(again) != string(second) {
		t.Fatal("Refresh signed again without growth")
	}
	stored, _ := os.ReadFile(filepath.Join(dir, "checkpoints", "latest"))
	if string(stored) != string(second) {
		t.Fatal("latest not stored")
	}
	w.Close()
	w, _ = Open(dir, WriterOptions{})
	defer w.Close()
	c2, _ := NewCheckpointer(w, CheckpointConfig{Origin: "test.example/log", Key: k})
	if string(c2.Latest()) != string(second) {
		t.Fatal("latest not reloaded")
	}
	// The journal verifies against it, and inclusion proofs hold.
	rep := mustVerify(t, dir, VerifyOptions{Checkpoint: cp2})
	if !rep.OK {
		t.Fatalf("%+v", rep.Findings)
	}
	proofs, err := InclusionProofs(dir, []uint64{1, uint64(cp2.Size)}, cp2)
	if err != nil {
		t.Fatal(err)
	}
	if fs := VerifyInclusion(nil, proofs, cp2); len(fs) != 0 {
		t.Fatalf("%+v", fs)
	}
	proofs[1].Line += " "
	if fs := VerifyInclusion(nil, proofs, cp2); len(fs) != 1 || fs[0].Kind != FindingBadInclusionProof {
		t.Fatalf("changed entry: %+v", fs)
	}
}

// TestExportProofs: proofs written in the export layout verify with only
// the public keys, and fail after any change to the exported head log.
func TestExportProofs(t *testing.T) {
	dir := t.TempDir()
	k := testKey(t, 1)
	writeJournal(t, dir, fixedEvents(t), 3)
	w, _ := Open(dir, WriterOptions{})
	c, err := NewCheckpointer(w, CheckpointConfig{Origin: "export.example/log", Key: k})
	if err != nil {
		t.Fatal(err)
	}
	text, err := c.Checkpoint(context.Background())
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := NewNoteVerifier(c.VerifierKey())
	keys := CheckpointKeys{Log: v}
	cp, _ := OpenCheckpoint(text, keys)
	seqs := []uint64{1, 2, 3}
	proofs, err := InclusionProofs(dir, seqs, cp)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := MarshalProofs(cp, proofs)
	mustWrite(t, filepath.Join(dir, ProofsDir, ProofsFile), b)
	if fs, err := VerifyProofsDir(dir, keys, seqs); err != nil || len(fs) != 0 {
		t.Fatalf("%v %+v", err, fs)
	}
	if fs, _ := VerifyProofsDir(dir, keys, []uint64{1, 2, 3, 4}); len(fs) != 1 || fs[0].Seq != 4 {
		t.Fatalf("missing proof: %+v", fs)
	}
	lines := readLines(t, filepath.Join(dir, headFile))
	lines[1] = append([]byte(nil), lines[1]...)
	lines[1][len(lines[1])-3] ^= 1
	writeLines(t, filepath.Join(dir, headFile), lines)
	if fs, _ := VerifyProofsDir(dir, keys, seqs); len(fs) != 1 || fs[0].Kind != FindingBadInclusionProof || fs[0].Seq != 2 {
		t.Fatalf("changed head entry: %+v", fs)
	}
	other, _ := NewNoteVerifier(VerifierKey("export.example/log", testKey(t, 2).Public(), false))
	if fs, _ := VerifyProofsDir(dir, CheckpointKeys{Log: other}, seqs); len(fs) != 1 || fs[0].Kind != FindingBadCheckpoint {
		t.Fatalf("wrong key: %+v", fs)
	}
}
