package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// signBatches is a workload touching every path of Append: several runs
// per batch, duplicates (within a batch and across batches), an invalid
// event and an event too long for a line, between good ones.
func signBatches(t tb) [][]Event {
	var out [][]Event
	n := 0
	for b := range 5 {
		var batch []Event
		for i := range 40 {
			n++
			batch = append(batch, ev(t, fmt.Sprintf("r_%026d", i%7), fmt.Sprint("e", n), TypeDecision, "x", n, decision(OutcomeAllowed)))
		}
		batch = append(batch, batch[3])                                           // duplicate within the batch
		batch = append(batch, Event{ID: "", Run: "r_00000000000000000000000000"}) // invalid
		big := ev(t, "r_00000000000000000000000001", fmt.Sprint("big", b), TypeDecision, "x", n, map[string]string{"pad": strings.Repeat("a", MaxLineBytes)})
		batch = append(batch, big)
		if b > 0 {
			batch = append(batch, out[b-1][0]) // duplicate of an earlier batch
		}
		out = append(out, batch)
	}
	return out
}

func writeSignBatches(t *testing.T, dir string, k *SigningKey, workers int) {
	t.Helper()
	w, err := Open(dir, WriterOptions{Now: clock(), Signer: k, SignWorkers: workers})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, batch := range signBatches(t) {
		_, err := w.Append(batch)
		var evErrs EventErrors
		if err != nil && !errors.As(err, &evErrs) {
			t.Fatal(err)
		}
		if len(evErrs) != 2 || !errors.Is(evErrs[0].Err, ErrInvalidEvent) || !errors.Is(evErrs[1].Err, ErrInvalidEvent) {
			t.Fatalf("want the invalid and the oversized event refused, got %v", err)
		}
	}
}

func readJournalFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == lockFile {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestParallelSigningWritesTheSameBytes: whatever the number of signing
// workers, the journal is byte for byte the one signing each event in
// turn with sealSigned over the unsigned line would give, and it verifies
// with every signature checked.
func TestParallelSigningWritesTheSameBytes(t *testing.T) {
	k := testKey(t, 7)
	plain := t.TempDir()
	writeSignBatches(t, plain, nil, 1)
	// The reference: every unsigned line sealed one by one, in order.
	want := map[string][]byte{}
	for name, b := range readJournalFiles(t, plain) {
		if !strings.HasPrefix(name, runsDir+string(filepath.Separator)) {
			want[name] = b
			continue
		}
		var out []byte
		for line := range bytes.Lines(b) {
			line = bytes.TrimSuffix(line, []byte("\n"))
			h, ok := lookup(line, "hash")
			if !ok {
				t.Fatalf("%s: line without hash", name)
			}
			hash, err := parseString(h)
			if err != nil {
				t.Fatal(err)
			}
			signed, err := sealSigned(line, hash, k)
			if err != nil {
				t.Fatal(err)
			}
			out = append(append(out, signed...), '\n')
		}
		want[name] = out
	}
	keys, err := NewTrustedKeys(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 2, 3, 16} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			dir := t.TempDir()
			writeSignBatches(t, dir, k, workers)
			got := readJournalFiles(t, dir)
			if len(got) != len(want) {
				t.Fatalf("%d files, want %d", len(got), len(want))
			}
			for name, w := range want {
				if !bytes.Equal(got[name], w) {
					t.Errorf("%s differs from the serially sealed journal", name)
				}
			}
			rep, err := Verify(dir, VerifyOptions{Keys: keys, RequireSignatures: true})
			if err != nil || !rep.OK {
				t.Fatalf("verify: %v %+v", err, rep.Findings)
			}
		})
	}
}
