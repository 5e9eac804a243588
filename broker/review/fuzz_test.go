package review_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/review"
	"github.com/gatehouse/gatehouse/broker/review/reviewtest"
)

// FuzzReview feeds arbitrary run files (untrusted: anyone who can write the
// journal directory controls them) to Review, which must not panic and
// must count what it could not read. (The person timeline over the same
// reader is fuzzed by evidence's FuzzTimeline.)
func FuzzReview(f *testing.F) {
	f.Add([]byte(`{"v":1}` + "\n"))
	f.Add([]byte("not json\n{\n"))
	f.Fuzz(func(t *testing.T, run []byte) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o755); err != nil {
			t.Fatal(err)
		}
		// Name the file after the first line's run, so well-formed seeds
		// reach the decision parsing.
		id := "r_fuzz"
		first, _, _ := strings.Cut(string(run), "\n")
		if ev, err := journal.ParseLine([]byte(first)); err == nil && journal.ValidRunID(ev.Run) {
			id = ev.Run
		}
		if err := os.WriteFile(filepath.Join(dir, "runs", id+".jsonl"), run, 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := review.Review(dir)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Runs != 1 {
			t.Fatalf("runs %d", rep.Runs)
		}
		for _, fd := range rep.Findings {
			if fd.Count < 1 || len(fd.Examples) == 0 {
				t.Fatalf("finding %+v", fd)
			}
		}
	})
}

// TestFuzzSeeds keeps the seed corpus: the fixture journal's run files
// (rewritten with -update).
func TestFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz/FuzzReview")
	}
	dir := reviewtest.Write(t, filepath.Join(t.TempDir(), "journal"))
	files, _ := filepath.Glob(filepath.Join(dir, "runs", "*.jsonl"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		seed := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		name := filepath.Join("testdata", "fuzz", "FuzzReview", "seed-"+strings.TrimSuffix(filepath.Base(p), ".jsonl"))
		if err := os.WriteFile(name, []byte(seed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
