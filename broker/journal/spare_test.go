package journal_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/journal/crashfs"
)

// Starting a segment has the next one written ahead in the background,
// so the rollover that follows only renames a spare: no segment is
// written ahead (zeros, fsynced) while commits wait.
func TestASpareSegmentIsWrittenAheadInTheBackground(t *testing.T) {
	root, cfs, w := openOnCrashFS(t)
	if _, err := w.Append([]journal.Event{walEvent("r_a", 0)}); err != nil { // starts segment 1
		t.Fatal(err)
	}
	w.WaitSpare()
	spares, _ := filepath.Glob(filepath.Join(root, "wal", "spare", "*.wal"))
	if len(spares) != 1 {
		t.Fatalf("no spare written ahead: %v", spares)
	}
	if fi, err := os.Stat(spares[0]); err != nil || fi.Size() < 1<<20 {
		t.Fatalf("spare %s: %v, %d bytes; want a whole segment", spares[0], err, fi.Size())
	}
	if _, err := os.Stat(filepath.Join(root, "wal", "spare", "ahead.tmp")); !os.IsNotExist(err) {
		t.Fatalf("the spare's temporary file is left: %v", err)
	}
	if err := w.Sync(); err != nil { // seals segment 1: the next record starts segment 2
		t.Fatal(err)
	}
	before := len(cfs.Ops())
	if _, err := w.Append([]journal.Event{walEvent("r_a", 1)}); err != nil {
		t.Fatal(err)
	}
	renamed := false
	for _, op := range cfs.Ops()[before:] {
		if strings.HasPrefix(op.Path, "wal/spare/") && op.Kind != crashfs.OpRename {
			continue // the next spare, written ahead in the background
		}
		switch {
		case op.Kind == crashfs.OpRename && strings.HasPrefix(op.Path, "wal/spare/"):
			renamed = true
		case op.Kind == crashfs.OpCreate && strings.HasPrefix(op.Path, "wal/"):
			t.Fatalf("a segment was created while the commit waited: %v", op)
		case op.Kind == crashfs.OpWrite && strings.HasPrefix(op.Path, "wal/") && op.N >= 1<<20:
			t.Fatalf("a segment was written ahead while the commit waited: %v", op)
		}
	}
	if !renamed {
		t.Fatalf("the rollover took no spare: %v", cfs.Ops()[before:])
	}
	w.WaitSpare()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "wal", "spare")); !os.IsNotExist(err) {
		t.Fatalf("Close left the spares: %v", err)
	}
}

// A spare's temporary file left by a writer killed while writing it
// ahead does not stop the journal opening, and goes.
func TestAnUnfinishedSpareIsDroppedAtOpen(t *testing.T) {
	root := t.TempDir()
	w, err := journal.Open(root, journal.WriterOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append([]journal.Event{walEvent("r_a", 0)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	spareDir := filepath.Join(root, "wal", "spare")
	if err := os.MkdirAll(spareDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spareDir, "ahead.tmp"), make([]byte, 4096), 0o640); err != nil {
		t.Fatal(err)
	}
	w, err = journal.Open(root, journal.WriterOptions{Logger: quiet})
	if err != nil {
		t.Fatalf("open with an unfinished spare: %v", err)
	}
	defer w.Close()
	if _, err := os.Stat(filepath.Join(spareDir, "ahead.tmp")); !os.IsNotExist(err) {
		t.Fatalf("the unfinished spare is still there: %v", err)
	}
	if _, err := w.Append([]journal.Event{walEvent("r_a", 1)}); err != nil {
		t.Fatal(err)
	}
}
