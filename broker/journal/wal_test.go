package journal_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/journal/crashfs"
)

func walEvent(run string, i int) journal.Event {
	typ := journal.TypeDecision
	if i == 0 {
		typ = journal.TypeRunOpen
	}
	data, _ := json.Marshal(map[string]any{"n": i, "outcome": "allowed"})
	return journal.Event{ID: fmt.Sprintf("ev_%s_%d", run, i), Run: run, Type: typ, Effect: fmt.Sprintf("e_%d", i),
		Time: time.Date(2026, 12, 1, 0, 0, i, 0, time.UTC), Data: data}
}

// readRun returns the hashes of run's events in the journal at dir.
func readRun(t testing.TB, dir, run string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "runs", run+".jsonl"))
	if err != nil {
		t.Fatalf("run %s: %v", run, err)
	}
	var hs []string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		e, err := journal.ParseLine([]byte(line))
		if err != nil {
			t.Fatalf("run %s: %v", run, err)
		}
		hs = append(hs, e.Hash)
	}
	return hs
}

var quiet = slog.New(slog.DiscardHandler)

// openOnCrashFS opens a writer on a fresh folder through a crashfs, with
// the background sync out of the way (a test calls Sync itself).
func openOnCrashFS(t testing.TB) (string, *crashfs.FS, *journal.Writer) {
	t.Helper()
	root := t.TempDir()
	cfs, err := crashfs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	w, err := journal.Open(root, journal.WriterOptions{FS: cfs, SyncInterval: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return root, cfs, w
}

// crashAndRecover takes the disk as a power cut leaves it, opens a
// writer on it (which re-applies its log), closes it, and verifies.
func crashAndRecover(t testing.TB, cfs *crashfs.FS, keep crashfs.Keep) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "after")
	if err := cfs.Crash(dst, keep); err != nil {
		t.Fatal(err)
	}
	w, err := journal.Open(dst, journal.WriterOptions{Logger: quiet})
	if err != nil {
		t.Fatalf("open after the crash: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := journal.Verify(dst, journal.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("after the crash the journal does not verify: %v", rep.Findings)
	}
	if names, _ := os.ReadDir(filepath.Join(dst, "wal")); len(names) != 0 {
		t.Fatalf("a clean close left the log: %v", names)
	}
	return dst
}

// Every event Append returned survives a power cut at any point after it,
// whatever part of the unsynced writes the disk kept, and the journal
// verifies after the next Open. Runs are fsynced only in the background,
// so most of them are durable only through the log.
func TestAppendedSurvivesPowerCut(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		_, cfs, w := openOnCrashFS(t)
		runs := []string{"r_a", "r_b", "r_c"}
		acked := map[string][]string{}
		next := map[string]int{}
		batches := rapid.IntRange(1, 8).Draw(rt, "batches")
		syncAt := rapid.IntRange(-1, batches-1).Draw(rt, "sync after batch")
		for b := range batches {
			var batch []journal.Event
			for range rapid.IntRange(1, 5).Draw(rt, "events") {
				run := rapid.SampledFrom(runs).Draw(rt, "run")
				batch = append(batch, walEvent(run, next[run]))
				next[run]++
			}
			written, err := w.Append(batch)
			if err != nil {
				rt.Fatal(err)
			}
			for _, e := range written {
				acked[e.Run] = append(acked[e.Run], e.Hash)
			}
			if b == syncAt {
				if err := w.Sync(); err != nil {
					rt.Fatal(err)
				}
			}
		}
		cfs.Freeze()
		keepAll := rapid.Bool().Draw(rt, "keep random parts")
		var keep crashfs.Keep
		if keepAll {
			keep = func(path string, n int) int { return rapid.IntRange(0, n).Draw(rt, "keep "+path) }
		}
		dst := crashAndRecover(t, cfs, keep)
		for run, want := range acked {
			got := readRun(t, dst, run)
			if len(got) != len(want) {
				rt.Fatalf("run %s: %d events after the crash, %d acknowledged", run, len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					rt.Fatalf("run %s event %d: %s, acknowledged %s", run, i+1, got[i], want[i])
				}
			}
		}
	})
}

// The fsync of a batch is the log's: one per Append whatever the runs it
// touches, before which none of the batch is in any file's durable
// content; the files are fsynced by Sync.
func TestOneFsyncPerBatch(t *testing.T) {
	root, cfs, w := openOnCrashFS(t)
	if _, err := w.Append([]journal.Event{walEvent("r_x", 0)}); err != nil { // creates the first segment
		t.Fatal(err)
	}
	before := len(cfs.Ops())
	var batch []journal.Event
	for i := range 16 {
		batch = append(batch, walEvent(fmt.Sprintf("r_%02d", i), 0))
	}
	if _, err := w.Append(batch); err != nil {
		t.Fatal(err)
	}
	var syncs, logWrites []crashfs.Op
	sawLogSync := false
	for _, op := range cfs.Ops()[before:] {
		switch {
		case op.Kind == crashfs.OpSync:
			syncs = append(syncs, op)
			sawLogSync = sawLogSync || strings.HasPrefix(op.Path, "wal/")
		case op.Kind == crashfs.OpWrite && strings.HasPrefix(op.Path, "wal/"):
			logWrites = append(logWrites, op)
		case op.Kind == crashfs.OpWrite && !sawLogSync:
			t.Fatalf("%s written before the log was fsynced", op.Path)
		}
	}
	if len(syncs) != 1 || !strings.HasPrefix(syncs[0].Path, "wal/") || len(logWrites) != 1 {
		t.Fatalf("one batch of 16 runs: syncs %v, log writes %v; want one of each, on the log", syncs, logWrites)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if names, _ := filepath.Glob(filepath.Join(root, "wal", "*.wal")); len(names) != 0 {
		t.Fatalf("after Sync the log still holds %v", names)
	}
	if spares, _ := filepath.Glob(filepath.Join(root, "wal", "spare", "*.wal")); len(spares) != 1 {
		t.Fatalf("after Sync the segment is not kept for reuse: %v", spares)
	}
}

// Before any writer re-applies it, verify checks what the log holds as
// if it were in the files: a journal right after a power cut verifies,
// holds every acknowledged event, and says the log was read.
func TestVerifyReadsTheUnappliedLog(t *testing.T) {
	_, cfs, w := openOnCrashFS(t)
	n := 0
	for i := range 3 {
		written, err := w.Append([]journal.Event{walEvent("r_a", i), walEvent("r_b", i)})
		if err != nil {
			t.Fatal(err)
		}
		n += len(written)
		if i == 0 {
			if err := w.Sync(); err != nil { // r_a and r_b exist durably from here
				t.Fatal(err)
			}
		}
	}
	if _, err := w.Append([]journal.Event{walEvent("r_new", 0)}); err != nil { // its file's name is durable only in the log
		t.Fatal(err)
	}
	n++
	cfs.Freeze()
	dst := filepath.Join(t.TempDir(), "after")
	if err := cfs.Crash(dst, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := journal.Verify(dst, journal.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	notes := 0
	for _, no := range rep.Notes {
		if no.Kind == journal.NoteUnappliedLog {
			notes++
		}
	}
	if !rep.OK || rep.Events != n || notes != 4 { // the head log and three runs
		t.Fatalf("verify after the crash: ok %v, %d events (want %d), %d unapplied-log notes: %+v %+v", rep.OK, rep.Events, n, notes, rep.Findings, rep.Notes)
	}
	if _, err := os.Stat(filepath.Join(dst, "runs", "r_new.jsonl")); err == nil {
		t.Fatal("the crash kept a name that was never fsynced")
	}
}

// A run file that cannot be continued does not stop the journal opening:
// the log's lines for it are set aside in wal/unapplied, the other runs'
// are applied.
func TestRecoverySetsAsideACorruptRunsLines(t *testing.T) {
	_, cfs, w := openOnCrashFS(t)
	if _, err := w.Append([]journal.Event{walEvent("r_a", 0), walEvent("r_b", 0)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append([]journal.Event{walEvent("r_a", 1), walEvent("r_b", 1)}); err != nil {
		t.Fatal(err)
	}
	cfs.Freeze()
	dst := filepath.Join(t.TempDir(), "after")
	if err := cfs.Crash(dst, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "runs", "r_a.jsonl"), []byte("not json\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	w2, err := journal.Open(dst, journal.WriterOptions{Logger: quiet})
	if err != nil {
		t.Fatalf("a corrupt run stopped the journal: %v", err)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readRun(t, dst, "r_b"); len(got) != 2 {
		t.Fatalf("r_b has %d events after recovery, want 2", len(got))
	}
	b, err := os.ReadFile(filepath.Join(dst, "wal", "unapplied", "r_a.jsonl"))
	if err != nil || strings.Count(string(b), "\n") != 1 || !strings.Contains(string(b), `"id":"ev_r_a_1"`) {
		t.Fatalf("set aside: %q %v", b, err)
	}
}
