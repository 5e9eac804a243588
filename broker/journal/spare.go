package journal

import (
	"os"
	"path/filepath"
	"slices"
)

// Spare segments written ahead in the background.
//
// A new segment is written in full (zeros, fsynced) before its first
// record, so that a record's fsync is an fdatasync committing no metadata
// (wal.go). Done when a segment is needed, that write ahead held every
// commit waiting: up to 32 MiB written and fsynced under the writer's
// lock, tens to hundreds of milliseconds on a shared disk, while segments
// grow and whenever no spare of the size they have grown to was left. So
// each time a segment is started, one spare of the size the next will
// need is written ahead by a goroutine of its own, into wal/spare/ under
// a temporary name and renamed to a segment name once complete, and the
// next rollover only renames it (takeSpare). Nothing durable depends on a
// spare: the rename into wal/ and the fsync of wal/ that newSegment does
// are what make a segment part of the log, a spare is removed at the next
// Open (dropSpares) and a temporary file with it. When the preparation
// fails (no room) it leaves nothing, and newSegment writes ahead, or
// appends, as before.

// spareTemp is the name in wal/spare/ of a spare being written ahead; it
// is no segment name, so takeSpare and recovery never see it.
const spareTemp = "ahead.tmp"

// prepareSpare starts writing a spare ahead unless one is being written,
// one of the size the next segment will need is there, Close began, the
// writer failed, or the segment just started found no room to be written
// ahead (a nearly full disk: a spare would take what room is left from
// the log's own records). Called under w.mu.
func (w *Writer) prepareSpare() {
	if w.preparing || w.noPrepare || w.closed || w.failed != nil || (w.wal != nil && w.wal.cap == 0) {
		return
	}
	size := w.segSize
	if len(w.walSealed) > 0 { // the next seal may double it (seal)
		size = min(2*size, walMaxSegment)
	}
	// A number of its own, never a log segment's: the spare's name only
	// has to differ from every other spare's.
	n := w.walNext
	w.walNext++
	w.preparing = true
	w.prepared.Go(func() {
		w.writeSpare(n, size)
		w.mu.Lock()
		w.preparing = false
		w.mu.Unlock()
	})
}

// writeSpare writes a spare of size bytes ahead as wal/spare/<n>.wal,
// unless a spare at least that large is there already.
func (w *Writer) writeSpare(n uint64, size int64) {
	spareDir := filepath.Join(w.dir, walDir, walSpare)
	names, _, err := walSegments(w.fs, spareDir)
	if err != nil {
		return
	}
	if slices.ContainsFunc(names, func(name string) bool {
		fi, err := w.fs.Lstat(filepath.Join(spareDir, name))
		return err == nil && fi.Size() >= size
	}) {
		return
	}
	if err := w.fs.MkdirAll(spareDir, dirMode); err != nil {
		return
	}
	tmp := filepath.Join(spareDir, spareTemp)
	f, err := w.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, fileMode)
	if err != nil {
		return
	}
	err = writeZeros(f, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.fs.Rename(tmp, filepath.Join(spareDir, segmentName(n)))
	}
	if err != nil {
		_ = w.fs.Remove(tmp)
		w.log.Debug("journal: a spare log segment could not be written ahead; the next one will be when it is needed", "err", err)
	}
}
