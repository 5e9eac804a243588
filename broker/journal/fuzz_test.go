package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/gatehouse/gatehouse/broker/journal/canon"
)

func FuzzParseLine(f *testing.F) {
	for _, p := range []string{"runs/r_aaaaaaaaaaaaaaaaaaaaaaaaaa.jsonl", "head.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", "golden", p))
		if err != nil {
			f.Fatal(err)
		}
		for _, line := range readLines(f, filepath.Join("testdata", "golden", p)) {
			f.Add(line)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := ParseLine(line)
		if err != nil {
			return
		}
		if e.V != Version || e.Seq == 0 || e.ID == "" || !e.Type.Known() {
			t.Fatalf("accepted an invalid event: %+v", e)
		}
		// What parses hashes; Hash must not fail on a parsed event
		// except for data it cannot re-encode.
		_, _ = Hash(e)
	})
}

func FuzzVerify(f *testing.F) {
	run, _ := os.ReadFile(filepath.Join("testdata", "golden", "runs", "r_aaaaaaaaaaaaaaaaaaaaaaaaaa.jsonl"))
	head, _ := os.ReadFile(filepath.Join("testdata", "golden", "head.jsonl"))
	f.Add(run, head)
	f.Add(run[:len(run)/2], head[:len(head)/3])
	f.Add([]byte("{}\n[]\n\n"), []byte(`{"seq":1}`))
	f.Fuzz(func(t *testing.T, run, head []byte) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, runsDir), 0o750); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, runsDir, "r_aaaaaaaaaaaaaaaaaaaaaaaaaa.jsonl"), run, 0o640)
		os.WriteFile(filepath.Join(dir, headFile), head, 0o640)
		rep, err := Verify(dir, VerifyOptions{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK != (len(rep.Findings) == 0) {
			t.Fatal("OK disagrees with findings")
		}
	})
}

// FuzzCanonical checks the canonical-form fast path against the full
// canonicaliser: whatever it accepts, jcs leaves unchanged.
func FuzzCanonical(f *testing.F) {
	for _, line := range readLines(f, filepath.Join("testdata", "golden", "runs", "r_aaaaaaaaaaaaaaaaaaaaaaaaaa.jsonl")) {
		f.Add(line[:len(line)-1])
	}
	for _, s := range []string{`{"a":-0}`, `{"b":1,"a":2}`, `"\u001f\n"`, `"\u000a"`, `[1e3]`, `{"a":"\/"}`, `"\xed\xa0\x80"`, `9007199254740993`, `{"":1,"a":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !canon.IsCanonical(b) {
			return
		}
		c, err := jcs.Transform(b)
		if err != nil {
			t.Fatalf("fast path accepted %q, jcs rejects it: %v", b, err)
		}
		if !bytes.Equal(c, b) {
			t.Fatalf("fast path accepted %q, jcs makes %q", b, c)
		}
	})
}

// FuzzLogRecords: whatever a log segment holds (torn, reused, tampered
// with), reading it never panics, and what it accepts is whole records
// of that segment that encode back to the same bytes.
func FuzzLogRecords(f *testing.F) {
	good := appendRecord(nil, 7, []walEntry{
		{kind: walRun, run: "r_a", first: 1, lines: []byte("{\"a\":1}\n{\"a\":2}\n")},
		{kind: walHead, first: 3, lines: []byte("{\"h\":1}\n")},
	})
	f.Add(good, uint64(7))
	f.Add(append(bytes.Clone(good), make([]byte, 64)...), uint64(7))
	f.Add(good, uint64(8))
	f.Add(good[:len(good)-3], uint64(7))
	f.Fuzz(func(t *testing.T, b []byte, seg uint64) {
		var again []byte
		end, err := readRecords(b, seg, func(entries []walEntry) error {
			for _, e := range entries {
				if e.kind == walRun && !ValidRunID(e.run) {
					t.Fatalf("accepted run id %q", e.run)
				}
				_ = eachLine(e.lines, func([]byte) error { return nil })
			}
			again = appendRecord(again, seg, entries)
			return nil
		})
		if err == nil && (!bytes.HasPrefix(b, again) || end != len(again)) {
			t.Fatalf("accepted records (said to end at %d of %d) do not encode back to the segment's bytes", end, len(again))
		}
	})
}
