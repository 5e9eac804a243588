package journal_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/journal/crashfs"
)

// smallDisk is the operating system's filesystem under root with room
// for budget bytes of file content: a write that would take more fails
// with ENOSPC, as a full disk's does. It tells its room as statfs does.
type smallDisk struct {
	journal.OSFS
	root   string
	budget int64
	mu     sync.Mutex
}

// used is the bytes of every file under root.
func (d *smallDisk) used() int64 {
	var n int64
	_ = filepath.WalkDir(d.root, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func (d *smallDisk) Room(string) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return max(0, d.budget-d.used()), nil
}

func (d *smallDisk) OpenFile(name string, flag int, perm fs.FileMode) (journal.File, error) {
	f, err := d.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &smallFile{File: f, d: d}, nil
}

type smallFile struct {
	journal.File
	d *smallDisk
}

// fits reports whether writing n bytes at off (or at the end, off < 0)
// keeps the disk within its budget.
func (f *smallFile) fits(off int64, n int) bool {
	st, err := f.Stat()
	if err != nil {
		return false
	}
	end := st.Size() + int64(n)
	if off >= 0 {
		end = max(st.Size(), off+int64(n))
	}
	return f.d.used()+end-st.Size() <= f.d.budget
}

func (f *smallFile) Write(p []byte) (int, error) {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if !f.fits(-1, len(p)) {
		return 0, &fs.PathError{Op: "write", Path: "smalldisk", Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

func (f *smallFile) WriteAt(p []byte, off int64) (int, error) {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if !f.fits(off, len(p)) {
		return 0, &fs.PathError{Op: "write", Path: "smalldisk", Err: syscall.ENOSPC}
	}
	return f.File.WriteAt(p, off)
}

// A writer that stops on a full disk leaves its log segment written
// ahead: the zeros after its records take room. Opening the journal
// again must give that room back before it re-applies the lines, or the
// lines can never reach their files and every reopen fails again, however
// long the operator waits (the full-disk fault: the writer never
// recovered once space returned).
func TestRecoveryGivesBackTheLogsRoom(t *testing.T) {
	_, cfs, w := openOnCrashFS(t)
	var batch []journal.Event
	for i := range 200 {
		batch = append(batch, walEvent("r_room", i))
	}
	if _, err := w.Append(batch); err != nil {
		t.Fatal(err)
	}
	cfs.Freeze()
	dst := filepath.Join(t.TempDir(), "after")
	if err := cfs.Crash(dst, crashfs.Keep(nil)); err != nil { // the run file lost every unsynced line
		t.Fatal(err)
	}
	// The disk has no room beyond what the crash left on it.
	disk := &smallDisk{root: dst}
	disk.budget = disk.used()
	segs, _ := filepath.Glob(filepath.Join(dst, "wal", "*.wal"))
	if len(segs) != 1 {
		t.Fatalf("want one log segment after the crash, have %v", segs)
	}
	if fi, err := os.Stat(segs[0]); err != nil || fi.Size() < 1<<20 {
		t.Fatalf("the segment was not written ahead (%v, %v): the test tests nothing", fi, err)
	}

	w2, err := journal.Open(dst, journal.WriterOptions{FS: disk, Logger: quiet})
	if err != nil {
		t.Fatalf("open on a disk whose only room is the log's written-ahead tail: %v", err)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readRun(t, dst, "r_room"); len(got) != len(batch) {
		t.Fatalf("%d events after recovery, %d appended", len(got), len(batch))
	}
	rep, err := journal.Verify(dst, journal.VerifyOptions{})
	if err != nil || !rep.OK {
		t.Fatalf("verify after recovery: %v %+v", err, rep)
	}
}

// On a nearly full disk a new log segment is not written ahead into the
// last of the room: at most a quarter of what is free, else appended to.
func TestTheLogIsNotWrittenAheadIntoTheLastRoom(t *testing.T) {
	root := t.TempDir()
	disk := &smallDisk{root: root, budget: 3 << 20} // a quarter is under the 1 MiB a segment starts at
	w, err := journal.Open(root, journal.WriterOptions{FS: disk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append([]journal.Event{walEvent("r_tight", 0), walEvent("r_tight", 1)}); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(root, "wal", "*.wal"))
	if len(segs) != 1 {
		t.Fatalf("want one log segment, have %v", segs)
	}
	fi, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= 1<<20 {
		t.Fatalf("with %d bytes free the log wrote %d bytes ahead", disk.budget, fi.Size())
	}

	// With room, it is written ahead as before.
	root2 := t.TempDir()
	roomy := &smallDisk{root: root2, budget: 64 << 20}
	w2, err := journal.Open(root2, journal.WriterOptions{FS: roomy, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if _, err := w2.Append([]journal.Event{walEvent("r_roomy", 0)}); err != nil {
		t.Fatal(err)
	}
	segs, _ = filepath.Glob(filepath.Join(root2, "wal", "*.wal"))
	if len(segs) != 1 {
		t.Fatalf("want one log segment, have %v", segs)
	}
	if fi, err := os.Stat(segs[0]); err != nil || fi.Size() < 1<<20 {
		t.Fatalf("with room the log was not written ahead: %v %v", fi, err)
	}
}
