package journal

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"
)

// TestAnyByteChangeCaughtWithKeys: in the signed, witnessed vector
// journal, changing any one byte of any run file or of the head log is
// reported by Verify with the trusted key, signatures required and the
// witnessed checkpoint.
func TestAnyByteChangeCaughtWithKeys(t *testing.T) {
	src := filepath.Join("testdata", "vectors", "good")
	files := []string{headFile, "runs/r_aaaaaaaaaaaaaaaaaaaaaaaaaa.jsonl", "runs/r_bbbbbbbbbbbbbbbbbbbbbbbbbb.jsonl"}
	cpText, err := os.ReadFile(filepath.Join("testdata", "vectors", "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := OpenCheckpoint(cpText, vecKeys(t))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := hex.DecodeString("d04ab232742bb4ab3a1368bd4615e4e6d0224ab71a016baf8520a332c9778737")
	keys, err := NewTrustedKeys(pub)
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		copyTree(t, src, dir)
		file := filepath.Join(dir, rapid.SampledFrom(files).Draw(rt, "file"))
		b, _ := os.ReadFile(file)
		i := rapid.IntRange(0, len(b)-1).Draw(rt, "byte")
		b[i] ^= byte(rapid.IntRange(1, 255).Draw(rt, "xor"))
		if err := os.WriteFile(file, b, 0o644); err != nil {
			rt.Fatal(err)
		}
		rep, err := Verify(dir, VerifyOptions{Keys: keys, RequireSignatures: true, Checkpoint: cp})
		if err != nil {
			rt.Fatal(err)
		}
		if rep.OK {
			rt.Fatalf("byte %d of %s changed, verify found nothing (notes %v)", i, file, rep.Notes)
		}
	})
}
