// Package crashfs is a filesystem for tests of what survives a crash: a
// journal.FS over a real folder that records every write and fsync, in
// order, and can say what the disk would hold if the machine lost power
// now. Writes go to the real files at once (so the writer reads back
// what it wrote, as with the page cache); a file's durable content is
// what it held at its last Sync, and a folder's durable names those it
// held at its last Sync. Crash writes that durable view into another
// folder, optionally keeping part of what was written since (a disk that
// wrote some pages back on its own), for the test to open, verify and
// compare with what was acknowledged.
//
// It is a test double for the disk only: the writer under test, its log
// and its recovery are the real ones.
package crashfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// OpKind names what an Op did.
type OpKind string

const (
	OpWrite  OpKind = "write"
	OpSync   OpKind = "sync"
	OpCreate OpKind = "create"
	OpRemove OpKind = "remove"
	OpRename OpKind = "rename"
)

// Op is one recorded operation. Path is relative to the FS's root.
type Op struct {
	Seq  int
	Kind OpKind
	Path string
	N    int // bytes written
}

// FS is a journal.FS rooted at a real folder. Safe for concurrent use.
type FS struct {
	root string

	mu      sync.Mutex
	files   map[string][]byte          // path -> durable content (absent: never durable)
	names   map[string]map[string]bool // folder -> durable names
	ops     []Op
	stopped bool // Freeze: no further write reaches the disk
}

var _ journal.FS = (*FS)(nil)

// New returns an FS over root, whose present content counts as durable.
func New(root string) (*FS, error) {
	f := &FS{root: filepath.Clean(root), files: map[string][]byte{}, names: map[string]map[string]bool{}}
	err := filepath.WalkDir(f.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return f.snapshotDir(p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f.files[p] = b
		return nil
	})
	return f, err
}

func (f *FS) snapshotDir(p string) error {
	es, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, e := range es {
		names[e.Name()] = true
	}
	f.names[filepath.Clean(p)] = names
	return nil
}

func (f *FS) rel(p string) string {
	r, err := filepath.Rel(f.root, p)
	if err != nil {
		return p
	}
	return r
}

func (f *FS) record(kind OpKind, path string, n int) {
	f.ops = append(f.ops, Op{Seq: len(f.ops) + 1, Kind: kind, Path: f.rel(path), N: n})
}

// Ops returns the operations recorded so far, in order.
func (f *FS) Ops() []Op {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ops)
}

// ErrFrozen is returned by every write after Freeze.
var ErrFrozen = errors.New("crashfs: frozen (the machine is off)")

// Freeze makes every later write and sync fail, as if power went: what is
// durable stays as it is for Crash to copy.
func (f *FS) Freeze() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
}

func (f *FS) OpenFile(name string, flag int, perm fs.FileMode) (journal.File, error) {
	name = filepath.Clean(name)
	f.mu.Lock()
	stopped := f.stopped
	f.mu.Unlock()
	if stopped && flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE) != 0 {
		return nil, ErrFrozen
	}
	_, statErr := os.Lstat(name)
	file, err := journal.OSFS{}.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		f.mu.Lock()
		f.record(OpCreate, name, 0)
		f.mu.Unlock()
	}
	return &file_{fs: f, name: name, f: file}, nil
}

func (f *FS) MkdirAll(name string, perm fs.FileMode) error {
	if err := os.MkdirAll(name, perm); err != nil {
		return err
	}
	// A folder made here is taken as durable (the writer fsyncs its
	// parents' names only where it matters: runs/ and wal/ exist before
	// the first write into them).
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := filepath.Clean(name); strings.HasPrefix(p, f.root); p = filepath.Dir(p) {
		if _, ok := f.names[p]; !ok {
			f.names[p] = map[string]bool{}
		}
		if parent := filepath.Dir(p); parent != p {
			if n, ok := f.names[parent]; ok {
				n[filepath.Base(p)] = true
			}
		}
		if p == f.root {
			break
		}
	}
	return nil
}

func (f *FS) Remove(name string) error {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return ErrFrozen
	}
	f.record(OpRemove, name, 0)
	f.mu.Unlock()
	return os.Remove(name)
}

// Rename moves a file's name, and its durable content with it (the same
// inode). The new name is durable once its folder is synced; until then a
// crash leaves the old one, as a rename is either done or not.
func (f *FS) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return ErrFrozen
	}
	f.record(OpRename, oldname+" -> "+f.rel(newname), 0)
	if err := os.Rename(oldname, newname); err != nil {
		return err
	}
	if b, ok := f.files[oldname]; ok {
		f.files[newname] = b
	}
	return nil
}

func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }
func (f *FS) Lstat(name string) (fs.FileInfo, error)     { return os.Lstat(name) }
func (f *FS) Lock(name string) (io.Closer, error)        { return journal.OSFS{}.Lock(name) }

// file_ is an open file. It implements neither fdatasync nor fallocate,
// so the writer takes its plain path (append and fsync).
type file_ struct {
	fs   *FS
	name string
	f    journal.File
}

func (h *file_) Read(p []byte) (int, error) { return h.f.Read(p) }

func (h *file_) Write(p []byte) (int, error) {
	if err := h.fs.writing(h.name, len(p)); err != nil {
		return 0, err
	}
	return h.f.Write(p)
}

func (h *file_) WriteAt(p []byte, off int64) (int, error) {
	if err := h.fs.writing(h.name, len(p)); err != nil {
		return 0, err
	}
	return h.f.WriteAt(p, off)
}

func (h *file_) Truncate(size int64) error {
	if err := h.fs.writing(h.name, 0); err != nil {
		return err
	}
	return h.f.Truncate(size)
}

func (h *file_) Stat() (fs.FileInfo, error) { return h.f.Stat() }
func (h *file_) Close() error               { return h.f.Close() }

// Sync makes the file's present content durable, or, for a folder, its
// present names.
func (h *file_) Sync() error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.fs.stopped {
		return ErrFrozen
	}
	fi, err := os.Stat(h.name)
	if err != nil {
		return err
	}
	h.fs.record(OpSync, h.name, 0)
	if fi.IsDir() {
		return h.fs.snapshotDir(h.name)
	}
	b, err := os.ReadFile(h.name)
	if err != nil {
		return err
	}
	h.fs.files[h.name] = b
	return nil
}

func (f *FS) writing(name string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return ErrFrozen
	}
	f.record(OpWrite, name, n)
	return nil
}

// Keep says, for a file (relative path) with unsynced bytes after its
// durable content, how many of them the disk happened to write back
// anyway (0 to unsynced). Crash's nil Keep keeps none.
type Keep func(path string, unsynced int) int

// Crash writes into dst (an empty folder) what the disk holds after a
// power cut now: every folder's durable names, each file with its durable
// content and, when its present content extends it, keep's share of the
// rest. A name that is durable but whose file was never synced is empty,
// as a file created and named but never written back is.
func (f *FS) Crash(dst string, keep Keep) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.copyDir(f.root, dst, keep)
}

func (f *FS) copyDir(src, dst string, keep Keep) error {
	if err := os.MkdirAll(dst, 0o750); err != nil {
		return err
	}
	for name := range f.names[src] {
		sp, dp := filepath.Join(src, name), filepath.Join(dst, name)
		if _, ok := f.names[sp]; ok {
			if err := f.copyDir(sp, dp, keep); err != nil {
				return err
			}
			continue
		}
		durable := f.files[sp]
		out := bytes.Clone(durable)
		if now, err := os.ReadFile(sp); err == nil && keep != nil && len(now) > len(durable) && bytes.HasPrefix(now, durable) {
			n := keep(f.rel(sp), len(now)-len(durable))
			out = append(out, now[len(durable):len(durable)+max(0, min(n, len(now)-len(durable)))]...)
		}
		if err := os.WriteFile(dp, out, 0o640); err != nil {
			return fmt.Errorf("crashfs: %w", err)
		}
	}
	return nil
}
