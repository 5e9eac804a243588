package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The writer's log (wal/): the writer's own write-ahead log, not part of
// the record. Each Append writes one record holding every line the batch
// appends to every run file and to the head log, fsyncs it (one fsync per
// batch, whatever the number of runs it touches: the group commit), and
// only then writes the lines to their files, without fsyncing them. The
// run files and the head log are fsynced in the background (every
// SyncInterval, or when a segment fills), after which the log segments
// they hold are removed. Opening a journal re-applies whatever the log
// holds beyond the files, so a crash, a kill -9 or a power cut loses
// nothing an Append returned; a clean Close leaves the log empty.
//
// A segment, wal/<16 hex digits: its number>.wal, is a sequence of
// records:
//
//	u32 length of payload (little endian) | u32 CRC-32C of payload | payload
//	payload: u64 the segment's number | u32 entries | entries
//	entry:   u8 kind (1 run, 2 head) | u16 run id length | run id |
//	         u64 seq of the first line | u32 length of lines | lines
//
// Lines are the exact bytes appended to the file, each ending in '\n'.
// A segment is written in full (zeros) before its first record and reused
// once its lines are in their files (kept in wal/spare/), so a record
// changes neither the segment's size nor its blocks: its fsync is an
// fdatasync that commits no filesystem metadata and so does not also
// flush every run file written since (ext4's ordered mode would). A
// length of 0, a short record, a bad CRC, or a record of another segment
// number (what a reused segment held before) ends a segment. A segment
// is written ahead only within a quarter of the room left on its disk;
// where there is less (a nearly full disk) it is appended to instead, and
// recovery cuts a segment to the end of its records before re-applying
// them, so a log never holds the room its own lines need. Segments start at 1 MiB and double, up to 32 MiB,
// while they fill faster than the sync empties them. Re-applying is
// idempotent: an entry appends to its file only the lines whose seq is
// beyond the file's last complete line.

const (
	walDir   = "wal"
	walSpare = "spare" // wal/spare: segments kept for reuse
	walExt   = ".wal"
	// Segment sizes: the first, and the most (see above).
	walMinSegment = 1 << 20
	walMaxSegment = 32 << 20
	walSpares     = 3 // segments kept for reuse at most
	walHeader     = 8

	walRun  = 1
	walHead = 2
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// walEntry is what one record appends to one file.
type walEntry struct {
	kind  byte
	run   string // the run, for walRun
	first uint64 // seq of the first line: the run's event seq, or the head entry seq
	lines []byte // complete lines, each ending in '\n'
}

// appendRecord appends a framed record of entries to dst.
func appendRecord(dst []byte, n uint64, entries []walEntry) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, walHeader)...)
	dst = binary.LittleEndian.AppendUint64(dst, n)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = append(dst, e.kind)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(e.run)))
		dst = append(dst, e.run...)
		dst = binary.LittleEndian.AppendUint64(dst, e.first)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e.lines)))
		dst = append(dst, e.lines...)
	}
	payload := dst[start+walHeader:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, crc32c))
	return dst
}

// errBadRecord ends a segment's reading: what follows is not a record.
var errBadRecord = errors.New("journal: log: not a record")

// readRecords calls fn for every record of segment seg's bytes, in order,
// and stops at the first that is not whole and intact, or is another
// segment's (the end). It returns the offset just past the last record
// read: what follows is zeros written ahead, or what a reused segment
// held before.
func readRecords(b []byte, seg uint64, fn func(entries []walEntry) error) (int, error) {
	end := 0
	for len(b)-end >= walHeader {
		r := b[end:]
		size := binary.LittleEndian.Uint32(r)
		if size == 0 || uint64(size) > uint64(len(r)-walHeader) {
			return end, nil
		}
		payload := r[walHeader : walHeader+int(size)]
		if crc32.Checksum(payload, crc32c) != binary.LittleEndian.Uint32(r[4:]) {
			return end, nil
		}
		n, entries, err := parseRecord(payload)
		if err != nil {
			return end, err
		}
		if n != seg {
			return end, nil // what a reused segment held before
		}
		if err := fn(entries); err != nil {
			return end, err
		}
		end += walHeader + int(size)
	}
	return end, nil
}

func parseRecord(p []byte) (uint64, []walEntry, error) {
	if len(p) < 12 {
		return 0, nil, errBadRecord
	}
	n := binary.LittleEndian.Uint64(p)
	count := binary.LittleEndian.Uint32(p[8:])
	p = p[12:]
	var entries []walEntry
	for range count {
		if len(p) < 3 {
			return 0, nil, errBadRecord
		}
		e := walEntry{kind: p[0]}
		l := int(binary.LittleEndian.Uint16(p[1:]))
		p = p[3:]
		if len(p) < l+12 {
			return 0, nil, errBadRecord
		}
		e.run = string(p[:l])
		e.first = binary.LittleEndian.Uint64(p[l:])
		ll := int(binary.LittleEndian.Uint32(p[l+8:]))
		p = p[l+12:]
		if len(p) < ll || (e.kind != walRun && e.kind != walHead) || e.kind == walRun && !ValidRunID(e.run) {
			return 0, nil, errBadRecord
		}
		e.lines = p[:ll]
		p = p[ll:]
		entries = append(entries, e)
	}
	return n, entries, nil
}

// eachLine calls fn for each '\n'-terminated line of b, without the '\n'.
func eachLine(b []byte, fn func(line []byte) error) error {
	for len(b) > 0 {
		i := slices.Index(b, '\n')
		if i < 0 {
			return errBadRecord
		}
		if err := fn(b[:i]); err != nil {
			return err
		}
		b = b[i+1:]
	}
	return nil
}

// walSegment is the segment being written. Guarded by Writer.mu.
type walSegment struct {
	name    string
	n       uint64 // its number, in every record
	f       File
	size    int64 // bytes of records written
	cap     int64 // bytes written ahead; 0: appended to
	pending int   // records written and not yet settled
	sealed  bool  // no longer written; f closes when pending is 0
}

// sealedSegment is a segment no longer written, whose lines the next sync
// makes durable in their files, once none of its records is pending.
type sealedSegment struct {
	name string
	cap  int64
	seg  *walSegment // nil for one found on disk at recovery
}

func segmentName(n uint64) string { return fmt.Sprintf("%016x%s", n, walExt) }

// segmentNumber parses a segment's file name.
func segmentNumber(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, walExt)
	if !ok || len(base) != 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(base, 16, 64)
	return n, err == nil
}

// walSegments lists the segments in a log folder (wal/ or wal/spare/),
// oldest first, with their numbers.
func walSegments(fsys FS, dir string) ([]string, []uint64, error) {
	entries, err := fsys.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, e := range entries {
		if _, ok := segmentNumber(e.Name()); ok && e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	nums := make([]uint64, len(names))
	for i, name := range names {
		nums[i], _ = segmentNumber(name)
	}
	return names, nums, nil
}

// readSegment reads a whole segment.
func readSegment(fsys FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeRecord writes one record to the log, not yet fsynced, and returns
// its segment, which stays open until every record written to it is
// settled (walSegment.pending). It is called under w.mu.
func (w *Writer) writeRecord(entries []walEntry) (seg *walSegment, inPlace bool, err error) {
	need := int64(walHeader + 12)
	for _, e := range entries {
		need += int64(15 + len(e.run) + len(e.lines))
	}
	if seg := w.wal; seg != nil && seg.cap > 0 && seg.size+need > seg.cap {
		w.seal()
	}
	if w.wal == nil {
		if err := w.newSegment(need); err != nil {
			return nil, false, err
		}
	}
	seg = w.wal
	w.walBuf = appendRecord(w.walBuf[:0], seg.n, entries)
	end := seg.size + int64(len(w.walBuf))
	if _, err := seg.f.WriteAt(w.walBuf, seg.size); err != nil {
		return nil, false, fmt.Errorf("log: %w", err)
	}
	seg.size = end
	seg.pending++
	inPlace = end <= seg.cap
	if seg.cap == 0 && seg.size >= walMaxSegment {
		w.seal()
	}
	return seg, inPlace, nil
}

// syncRecord makes a record writeRecord wrote durable: an fdatasync when
// it was written within space written ahead (its blocks and the size were
// made durable before), else an fsync. It needs no lock: several may be
// in flight, each waiting for its own record (and those before it).
func syncRecord(seg *walSegment, inPlace bool) error {
	var err error
	if ds, ok := seg.f.(dataSyncer); ok && inPlace {
		err = ds.Datasync()
	} else {
		err = seg.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	return nil
}

// seal stops writing the current segment because it is full, and asks
// for a sync to empty it. A segment that filled before the sync emptied
// the one before is followed by a larger one.
func (w *Writer) seal() {
	w.sealCurrent()
	if len(w.walSealed) > 1 {
		w.segSize = min(2*w.segSize, walMaxSegment)
	}
	w.askSync()
}

// sealCurrent stops writing the current segment. Its file is closed once
// every record in it is settled.
func (w *Writer) sealCurrent() {
	seg := w.wal
	seg.sealed = true
	if seg.pending == 0 {
		_ = seg.f.Close()
	}
	w.walSealed = append(w.walSealed, sealedSegment{name: seg.name, cap: seg.cap, seg: seg})
	w.wal = nil
}

// newSegment starts segment walNext, of at least need bytes: a spare
// renamed, else a new file written ahead in full (appended to when the
// disk has no room for that); then makes its name durable.
func (w *Writer) newSegment(need int64) error {
	n := w.walNext
	name := segmentName(n)
	logDir := filepath.Join(w.dir, walDir)
	path := filepath.Join(logDir, name)
	size := max(w.segSize, (need+walMinSegment-1)/walMinSegment*walMinSegment)
	f, capacity, err := w.takeSpare(path, need)
	if err == nil && f == nil {
		f, capacity, err = w.writeAhead(path, w.roomFor(logDir, size, need))
	}
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	if err := syncDir(w.fs, logDir); err != nil {
		f.Close()
		return fmt.Errorf("log: %w", err)
	}
	w.walNext++
	w.wal = &walSegment{name: name, n: n, f: f, cap: capacity}
	return nil
}

// takeSpare renames a spare segment of at least need bytes to path and
// opens it; nil when there is none.
func (w *Writer) takeSpare(path string, need int64) (File, int64, error) {
	spareDir := filepath.Join(w.dir, walDir, walSpare)
	names, _, err := walSegments(w.fs, spareDir)
	if err != nil {
		return nil, 0, err
	}
	for _, name := range names {
		fi, err := w.fs.Lstat(filepath.Join(spareDir, name))
		if err != nil || fi.Size() < need {
			continue
		}
		if err := w.fs.Rename(filepath.Join(spareDir, name), path); err != nil {
			return nil, 0, err
		}
		f, err := w.fs.OpenFile(path, os.O_RDWR, fileMode)
		if err != nil {
			return nil, 0, err
		}
		return f, fi.Size(), nil
	}
	return nil, 0, nil
}

// walRoomShare: a segment written ahead takes at most this share of the
// room left on the log's filesystem. On a nearly full disk the zeros of
// a 32 MiB segment would otherwise take the room the run files need for
// the very lines the segment holds.
const walRoomShare = 4

// roomFor returns how much of a new segment to write ahead: size, or less
// when the filesystem (if the FS can tell) has little room; 0 (appended
// to) when even need would take more than its share.
func (w *Writer) roomFor(dir string, size, need int64) int64 {
	fs, ok := w.fs.(roomTeller)
	if !ok {
		return size
	}
	free, err := fs.Room(dir)
	if err != nil {
		return size
	}
	share := free / walRoomShare / walMinSegment * walMinSegment
	if share >= size {
		return size
	}
	if share < need {
		return 0
	}
	return share
}

// writeAhead creates path and writes size zero bytes into it, fsynced;
// where that fails (no room) the file is left empty, to be appended to.
func (w *Writer) writeAhead(path string, size int64) (File, int64, error) {
	f, err := w.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return nil, 0, err
	}
	zeros := make([]byte, min(size, walMinSegment))
	var off int64
	for err == nil && off < size {
		var n int
		n, err = f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off)
		off += int64(n)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		w.log.Warn("journal: no room to write the log ahead; appending to it instead", "err", err)
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, 0, err
		}
		return f, 0, f.Sync()
	}
	return f, size, nil
}

// recycle keeps a sealed segment as a spare (up to walSpares of them) or
// removes it. Called by a sync once the segment's lines are durable.
func (w *Writer) recycle(s sealedSegment) error {
	path := filepath.Join(w.dir, walDir, s.name)
	if s.cap > 0 {
		spareDir := filepath.Join(w.dir, walDir, walSpare)
		if names, _, err := walSegments(w.fs, spareDir); err == nil && len(names) < walSpares {
			if err := w.fs.MkdirAll(spareDir, dirMode); err == nil {
				if err := w.fs.Rename(path, filepath.Join(spareDir, s.name)); err == nil {
					return nil
				}
			}
		}
	}
	if err := w.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// dropSpares removes the spare segments and their folder.
func (w *Writer) dropSpares() error {
	spareDir := filepath.Join(w.dir, walDir, walSpare)
	names, _, err := walSegments(w.fs, spareDir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := w.fs.Remove(filepath.Join(spareDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := w.fs.Remove(spareDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// recoverLog re-applies every record of the log to the files, makes them
// durable and empties the log. It runs in Open, after the head log is
// read and before anything is appended.
func (w *Writer) recoverLog() error {
	logDir := filepath.Join(w.dir, walDir)
	if err := w.fs.MkdirAll(logDir, dirMode); err != nil {
		return err
	}
	names, nums, err := walSegments(w.fs, logDir)
	if err != nil {
		return err
	}
	_, spares, err := walSegments(w.fs, filepath.Join(logDir, walSpare))
	if err != nil {
		return err
	}
	w.walNext, w.segSize = 1, walMinSegment
	for _, n := range append(slices.Clone(nums), spares...) {
		w.walNext = max(w.walNext, n+1)
	}
	if err := w.dropSpares(); err != nil { // left by a writer that did not close
		return err
	}
	if len(names) == 0 {
		return nil
	}
	applied := 0
	for i, name := range names {
		path := filepath.Join(logDir, name)
		b, err := readSegment(w.fs, path)
		if err != nil {
			return err
		}
		capacity := int64(len(b))
		if cut, err := w.giveBackTail(path, b, nums[i]); err != nil {
			return fmt.Errorf("log %s: %w", name, err)
		} else if cut {
			capacity = 0 // no longer written ahead: removed, not kept, once applied
		}
		_, err = readRecords(b, nums[i], func(entries []walEntry) error {
			for _, e := range entries {
				n, err := w.redo(e)
				if errors.Is(err, ErrCorruptRun) {
					// A run file the writer cannot continue (ErrCorruptRun
					// refuses its events until an operator repairs it): its
					// lines are set aside rather than lost, and the rest of
					// the journal goes on.
					err = w.setAside(e, err)
				}
				if err != nil {
					return err
				}
				applied += n
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("log %s: %w", name, err)
		}
		w.walSealed = append(w.walSealed, sealedSegment{name: name, cap: capacity})
	}
	if applied > 0 {
		w.log.Warn("journal: re-applied lines from the writer's log (the last writer stopped without closing)", "lines", applied, "segments", len(names))
	}
	if err := w.syncFiles(w.takeDirty()); err != nil {
		return err
	}
	// The runs are re-read from their files when next touched.
	w.closeRuns()
	return nil
}

// giveBackTail cuts a segment found at recovery to the end of its
// records, before its lines are re-applied. A segment is written ahead
// (up to walMaxSegment of zeros), and a writer that failed on a full disk
// leaves the room it took there; without this the lines it holds could
// never be written to their files, and every reopen failed again even
// once the disk had room for them. Only zeros, or what a reused segment
// held before, are cut.
func (w *Writer) giveBackTail(path string, b []byte, n uint64) (bool, error) {
	end, err := readRecords(b, n, func([]walEntry) error { return nil })
	if err != nil || end == len(b) {
		return false, err
	}
	f, err := w.fs.OpenFile(path, os.O_RDWR, fileMode)
	if err != nil {
		return false, err
	}
	err = f.Truncate(int64(end))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err == nil, err
}

// walUnapplied holds, per run, lines of the log that could not be
// applied to a corrupt run file: wal/unapplied/<run>.jsonl.
const walUnapplied = "unapplied"

// setAside appends e's lines to wal/unapplied/<run>.jsonl, fsynced, and
// says so in the log.
func (w *Writer) setAside(e walEntry, why error) error {
	dir := filepath.Join(w.dir, walDir, walUnapplied)
	if err := w.fs.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	path := filepath.Join(dir, e.run+runExt)
	f, err := w.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, fileMode)
	if err != nil {
		return err
	}
	_, err = f.Write(e.lines)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(w.fs, dir)
	}
	if err != nil {
		return err
	}
	w.log.Error("journal: lines of the writer's log set aside: their run file cannot be continued; repair it and append them",
		"run", e.run, "file", path, "err", why)
	return nil
}

// redo applies one entry: the lines its file lacks. It returns how many
// it appended.
func (w *Writer) redo(e walEntry) (int, error) {
	var lines [][]byte
	if err := eachLine(e.lines, func(l []byte) error { lines = append(lines, l); return nil }); err != nil {
		return 0, err
	}
	if len(lines) == 0 {
		return 0, nil
	}
	last := e.first + uint64(len(lines)) - 1
	have := w.headSeq
	if e.kind == walRun {
		st, err := w.run(e.run)
		if err != nil {
			return 0, err
		}
		have = st.seq
	}
	if have >= last {
		return 0, nil
	}
	skip := 0
	if have >= e.first {
		skip = int(have - e.first + 1)
	} else if have+1 < e.first {
		// The file lost lines the log no longer holds (removed by hand, or
		// a disk that lost synced data): append what the log has, so
		// nothing acknowledged is lost; verify will report the gap.
		w.log.Error("journal: file is missing lines before those its log holds", "run", e.run, "file_ends_at", have, "log_starts_at", e.first)
	}
	var out []byte
	for _, l := range lines[skip:] {
		out = append(append(out, l...), '\n')
	}
	if e.kind == walHead {
		if _, err := w.head.Write(out); err != nil {
			return 0, fmt.Errorf("head log: %w", err)
		}
		var o obj
		for _, l := range lines[skip:] {
			p, _, err := parseHead(l, &o, nil)
			if err != nil {
				return 0, fmt.Errorf("%w: log entry: %v", ErrCorruptHead, err)
			}
			w.noteHead(p)
		}
		w.headDirty = true
		return len(lines) - skip, nil
	}
	st, _ := w.run(e.run)
	if have+1 < e.first {
		st.seq = e.first - 1 // continue from the log's numbering
	}
	if _, err := st.f.Write(out); err != nil {
		return 0, fmt.Errorf("run %s: %w", st.id, err)
	}
	var o obj
	for _, l := range lines[skip:] {
		if err := st.note(l, &o); err != nil {
			return 0, err
		}
	}
	w.markDirty(st)
	return len(lines) - skip, nil
}
