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
// A segment, wal/<16 hex digits>.wal, is a sequence of records:
//
//	u32 length of payload (little endian) | u32 CRC-32C of payload | payload
//	payload: u64 record number | u32 entries | entries
//	entry:   u8 kind (1 run, 2 head) | u16 run id length | run id |
//	         u64 seq of the first line | u32 length of lines | lines
//
// Lines are the exact bytes appended to the file, each ending in '\n'.
// Space is allocated ahead (fallocate), so a segment ends in zeros: a
// length of 0, a short record or a CRC that does not match ends it.
// Re-applying is idempotent: an entry appends to its file only the lines
// whose seq is beyond the file's last complete line.

const (
	walDir = "wal"
	walExt = ".wal"
	// walChunk is how much space a segment allocates ahead at a time.
	walChunk = 1 << 20
	// walSegmentBytes: a segment past this size asks for a sync, after
	// which the next record starts a new segment.
	walSegmentBytes = 16 << 20
	walHeader       = 8

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

// readRecords calls fn for every record of a segment's bytes, in order,
// and stops at the first that is not whole and intact (the end).
func readRecords(b []byte, fn func(n uint64, entries []walEntry) error) error {
	for len(b) >= walHeader {
		size := binary.LittleEndian.Uint32(b)
		if size == 0 || uint64(size) > uint64(len(b)-walHeader) {
			return nil
		}
		payload := b[walHeader : walHeader+int(size)]
		if crc32.Checksum(payload, crc32c) != binary.LittleEndian.Uint32(b[4:]) {
			return nil
		}
		n, entries, err := parseRecord(payload)
		if err != nil {
			return err
		}
		if err := fn(n, entries); err != nil {
			return err
		}
		b = b[walHeader+int(size):]
	}
	return nil
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

// walSegment is the segment being written.
type walSegment struct {
	name  string
	f     File
	size  int64 // bytes of records written
	alloc int64 // bytes allocated
}

func segmentName(n uint64) string { return fmt.Sprintf("%016x%s", n, walExt) }

// walSegments lists the segments in the log folder, oldest first, with
// the number the next one takes.
func walSegments(fsys FS, dir string) ([]string, uint64, error) {
	entries, err := fsys.ReadDir(filepath.Join(dir, walDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 1, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var names []string
	next := uint64(1)
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), walExt)
		if !ok || len(base) != 16 || !e.Type().IsRegular() {
			continue
		}
		n, err := strconv.ParseUint(base, 16, 64)
		if err != nil {
			continue
		}
		names = append(names, e.Name())
		next = max(next, n+1)
	}
	slices.Sort(names)
	return names, next, nil
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

// logRecord writes one record to the log and makes it durable. It is
// called under w.mu.
func (w *Writer) logRecord(entries []walEntry) error {
	if w.wal == nil {
		if err := w.newSegment(); err != nil {
			return err
		}
	}
	w.recNo++
	w.walBuf = appendRecord(w.walBuf[:0], w.recNo, entries)
	seg := w.wal
	end := seg.size + int64(len(w.walBuf))
	if end > seg.alloc {
		if a, ok := seg.f.(allocator); ok && !w.noAlloc {
			grow := max(walChunk, end-seg.alloc)
			err := a.Allocate(seg.alloc, grow)
			switch {
			case errors.Is(err, errors.ErrUnsupported):
				w.noAlloc = true
			case err != nil:
				return fmt.Errorf("log: allocate: %w", err)
			default:
				seg.alloc += grow
			}
		}
	}
	if _, err := seg.f.WriteAt(w.walBuf, seg.size); err != nil {
		return fmt.Errorf("log: %w", err)
	}
	var err error
	if ds, ok := seg.f.(dataSyncer); ok && end <= seg.alloc {
		err = ds.Datasync() // the size was made durable when it was allocated
	} else {
		err = seg.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	seg.size = end
	if seg.size >= walSegmentBytes {
		w.askSync()
	}
	return nil
}

// newSegment starts a segment and makes its name durable.
func (w *Writer) newSegment() error {
	name := segmentName(w.walNext)
	path := filepath.Join(w.dir, walDir, name)
	f, err := w.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	if err := syncDir(w.fs, filepath.Join(w.dir, walDir)); err != nil {
		f.Close()
		return fmt.Errorf("log: %w", err)
	}
	w.walNext++
	w.wal = &walSegment{name: name, f: f}
	return nil
}

// recoverLog re-applies every record of the log to the files, makes them
// durable and removes the log. It runs in Open, after the head log is
// read and before anything is appended.
func (w *Writer) recoverLog() error {
	if err := w.fs.MkdirAll(filepath.Join(w.dir, walDir), dirMode); err != nil {
		return err
	}
	names, next, err := walSegments(w.fs, w.dir)
	if err != nil {
		return err
	}
	w.walNext = next
	if len(names) == 0 {
		return nil
	}
	applied := 0
	for _, name := range names {
		b, err := readSegment(w.fs, filepath.Join(w.dir, walDir, name))
		if err != nil {
			return err
		}
		err = readRecords(b, func(_ uint64, entries []walEntry) error {
			for _, e := range entries {
				n, err := w.redo(e)
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
	}
	if applied > 0 {
		w.log.Warn("journal: re-applied lines from the writer's log (the last writer stopped without closing)", "lines", applied, "segments", len(names))
	}
	if err := w.syncFiles(w.takeDirty()); err != nil {
		return err
	}
	for _, name := range names {
		if err := w.fs.Remove(filepath.Join(w.dir, walDir, name)); err != nil {
			return err
		}
	}
	// The runs are re-read from their files when next touched.
	w.closeRuns()
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
