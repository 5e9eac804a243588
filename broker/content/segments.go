package content

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A folder Store appends what it keeps to segment files, one record per
// Put, Touch or reference, instead of creating a file per blob: creating
// files was most of the capture's cost (43% of serve's CPU at 16 agents).
//
//	segments/<16 hex: start time>-<random>.seg
//
// Each Store (each process) appends only to a segment of its own, so
// processes sharing a folder never interleave their writes, and it starts
// a new one past segmentBytes. A record is a header line, and for a put
// the blob's bytes and a '\n':
//
//	{"op":"put","len":N,"digest":...,"kind":...,"run":...,...,"time":...}\n<N bytes>\n
//	{"op":"ref","digest":...,"kind":...,...,"time":...}\n
//	{"op":"touch","digest":...,"time":...}\n
//
// The header of a put or a ref is the Ref (the line index.jsonl used to
// hold); the index of the whole folder is read back from the segments
// when something asks for it (Get, Refs, erasure) and kept up to date by
// reading what was appended since. Erasing a blob punches its bytes out
// of the segment (fallocate PUNCH_HOLE, or zeros written over them and
// fsynced where the filesystem cannot punch), then logs the erasure: the
// bytes are gone from the disk's file, the header (which run and whose)
// stays, as index.jsonl's lines did.

const (
	segmentsDir  = "segments"
	segmentExt   = ".seg"
	segmentBytes = 64 << 20

	opPut   = "put"
	opRef   = "ref"
	opTouch = "touch"

	// dedupeMax bounds the digests a Store remembers having written, to
	// skip writing the same bytes again; a digest forgotten is written
	// again, which is harmless.
	dedupeMax = 4096
)

// header is a segment record's first line.
type header struct {
	Op  string `json:"op"`
	Len int    `json:"len,omitempty"`
	Ref
}

// loc is where a blob's bytes are, and when they were written.
type loc struct {
	seg string // segment path
	off int64  // of the bytes
	n   int
	at  time.Time
}

// blobState is what the index knows of one digest. A copy written before
// an erasure of its digest was punched by it and is not listed.
type blobState struct {
	locs   []loc
	used   time.Time
	legacy string // a file of the sha256/ layout, "" for none
}

// segIndex is the folder's index, read from the segments (and the
// folder layout before them). Guarded by Store.imu.
type segIndex struct {
	blobs    map[string]*blobState
	refs     []Ref
	read     map[string]int64 // segment -> bytes read
	erasures map[string]Erasure
	erasedAt int64 // bytes of erasures.jsonl read
	legacy   bool  // sha256/ and index.jsonl read
}

// segWriter is the segment this Store appends to. Guarded by Store.wmu.
type segWriter struct {
	f    *os.File
	path string
	size int64
}

func (s *Store) put(data []byte, ref Ref) (string, error) {
	d := DigestOf(data)
	now := s.now()
	ref.Digest, ref.Time = d, now.UTC()
	h := header{Op: opPut, Len: len(data), Ref: ref}
	if ref.Kind != KindRequest && s.wrote(d) { // a request names its effect: never the same bytes twice
		h.Op, h.Len = opRef, 0
	}
	if err := s.appendRecord(h, data); err != nil {
		return "", err
	}
	return d, nil
}

// wrote reports whether this Store wrote d's bytes before and they are
// still kept (not erased since, by any process).
func (s *Store) wrote(d string) bool {
	s.wmu.Lock()
	_, ok := s.dedupe[d]
	s.wmu.Unlock()
	if !ok {
		return false
	}
	s.imu.Lock()
	defer s.imu.Unlock()
	if err := s.readErasures(); err != nil {
		return false
	}
	if _, erased := s.idx.erasures[d]; erased {
		s.wmu.Lock()
		delete(s.dedupe, d)
		s.wmu.Unlock()
		return false
	}
	return true
}

func (s *Store) touchSeg(d string) error {
	if !ValidDigest(d) {
		return fmt.Errorf("%w: %q", ErrBadDigest, clip(d))
	}
	if s.wrote(d) {
		// Kept by this Store (a policy, a record it wrote): no need to
		// read the folder's index, which a broker never holds.
		return s.appendRecord(header{Op: opTouch, Ref: Ref{Digest: d, Time: s.now().UTC()}}, nil)
	}
	st, err := s.state(d)
	if err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, d)
	}
	return s.appendRecord(header{Op: opTouch, Ref: Ref{Digest: d, Time: s.now().UTC()}}, nil)
}

// appendRecord appends one record with one write.
func (s *Store) appendRecord(h header, data []byte) error {
	line, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	rec := make([]byte, 0, len(line)+len(data)+2)
	rec = append(append(rec, line...), '\n')
	if h.Op == opPut {
		rec = append(append(rec, data...), '\n')
	}
	s.wmu.Lock()
	if s.seg == nil || s.seg.size >= segmentBytes {
		if err := s.newSegment(); err != nil {
			s.wmu.Unlock()
			return err
		}
	}
	seg := s.seg
	if _, err := seg.f.Write(rec); err != nil {
		// A short write leaves a torn record: cut it so the next one
		// starts clean.
		_ = seg.f.Truncate(seg.size)
		s.wmu.Unlock()
		return fmt.Errorf("content: %w", err)
	}
	seg.size += int64(len(rec))
	if h.Op == opPut && h.Kind != KindRequest {
		if len(s.dedupe) >= dedupeMax {
			clear(s.dedupe)
		}
		s.dedupe[h.Digest] = struct{}{}
	}
	s.wmu.Unlock()
	if s.sync {
		if err := seg.f.Sync(); err != nil {
			return fmt.Errorf("content: %w", err)
		}
	}
	return nil
}

// newSegment starts this Store's next segment. Called under wmu.
func (s *Store) newSegment() error {
	dir := filepath.Join(s.dir, segmentsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("content: %w", err)
	}
	name := fmt.Sprintf("%016x-%s%s", s.now().UnixNano(), strings.ToLower(rand.Text()[:8]), segmentExt)
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	if s.seg != nil {
		_ = s.seg.f.Close()
	}
	s.seg = &segWriter{f: f, path: path}
	return nil
}

func (s *Store) closeSegment() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.seg == nil {
		return nil
	}
	err := s.seg.f.Close()
	s.seg = nil
	return err
}

// dropIndex forgets the folder's index (kept only for the erasure's
// erasures), so a long-lived Store does not hold every blob's entry after
// a pass over them (the daily retention). The next question reads it
// again.
func (s *Store) dropIndex() {
	if s.obj != nil {
		return
	}
	s.imu.Lock()
	defer s.imu.Unlock()
	s.idx = segIndex{}
}

// refresh brings the index up to date: the folder layout from before
// segments once, then whatever every segment gained since the last
// refresh, and the erasure log. Called under imu.
func (s *Store) refresh() error {
	if s.idx.blobs == nil {
		s.idx = segIndex{blobs: map[string]*blobState{}, read: map[string]int64{}, erasures: map[string]Erasure{}}
	}
	if !s.idx.legacy {
		if err := s.readLegacy(); err != nil {
			return err
		}
		s.idx.legacy = true
	}
	// Erasures first: a copy written before its digest's erasure is gone.
	if err := s.readErasures(); err != nil {
		return err
	}
	names, err := os.ReadDir(filepath.Join(s.dir, segmentsDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("content: %w", err)
	}
	for _, e := range names {
		if !segmentName(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		if err := s.readSegment(filepath.Join(s.dir, segmentsDir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// readSegment reads the records of path after those read before. A torn
// last record (a write in progress, or cut by a crash) is left for the
// next refresh.
func (s *Store) readSegment(path string) error {
	from := s.idx.read[path]
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() <= from {
		return err
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return fmt.Errorf("content: %w", err)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	off := from
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			break // EOF, or a header longer than the buffer: not a record
		}
		var h header
		if json.Unmarshal(line, &h) != nil || !ValidDigest(h.Digest) || h.Len < 0 {
			break
		}
		next := off + int64(len(line))
		if h.Op == opPut {
			if _, err := r.Discard(h.Len); err != nil {
				break
			}
			if c, err := r.ReadByte(); err != nil || c != '\n' {
				break
			}
			s.note(h, &loc{seg: path, off: next, n: h.Len, at: h.Time})
			next += int64(h.Len) + 1
		} else {
			s.note(h, nil)
		}
		off = next
	}
	s.idx.read[path] = off
	return nil
}

// note takes one record into the index.
func (s *Store) note(h header, at *loc) {
	st := s.idx.blobs[h.Digest]
	if st == nil {
		st = &blobState{}
		s.idx.blobs[h.Digest] = st
	}
	if e, erased := s.idx.erasures[h.Digest]; at != nil && (!erased || at.at.After(e.Time)) {
		st.locs = append(st.locs, *at)
	}
	if h.Time.After(st.used) {
		st.used = h.Time
	}
	if h.Op != opTouch {
		s.idx.refs = append(s.idx.refs, h.Ref)
	}
}

// readErasures reads the erasure log's new lines: a blob erased before
// its latest put is kept (written again), else gone. Called under imu.
func (s *Store) readErasures() error {
	if s.idx.erasures == nil {
		s.idx = segIndex{blobs: map[string]*blobState{}, read: map[string]int64{}, erasures: map[string]Erasure{}}
	}
	f, err := os.Open(filepath.Join(s.dir, erasuresFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(s.idx.erasedAt, io.SeekStart); err != nil {
		return fmt.Errorf("content: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	end := bytes.LastIndexByte(b, '\n') + 1
	for _, line := range bytes.Split(b[:end], []byte("\n")) {
		var e Erasure
		if json.Unmarshal(line, &e) != nil || e.Digest == "" {
			continue
		}
		s.idx.erasures[e.Digest] = e
		if st := s.idx.blobs[e.Digest]; st != nil {
			st.dropBefore(e.Time)
		}
	}
	s.idx.erasedAt += int64(end)
	return nil
}

// readLegacy reads the folder layout from before segments: blobs as
// sha256/ab/cdef... files, whose modification time is their last use, and
// their references in index.jsonl. Called under imu.
func (s *Store) readLegacy() error {
	err := readLines(filepath.Join(s.dir, indexFile), func(line []byte) {
		var r Ref
		if json.Unmarshal(line, &r) == nil && r.Digest != "" {
			s.idx.refs = append(s.idx.refs, r)
		}
	})
	if err != nil {
		return err
	}
	root := filepath.Join(s.dir, blobDir)
	dirs, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	for _, sub := range dirs {
		if !sub.IsDir() || len(sub.Name()) != 2 {
			continue
		}
		files, err := os.ReadDir(filepath.Join(root, sub.Name()))
		if err != nil {
			return fmt.Errorf("content: %w", err)
		}
		for _, f := range files {
			d := "sha256:" + sub.Name() + f.Name()
			if !f.Type().IsRegular() || !ValidDigest(d) {
				continue // temporary files and strays
			}
			info, err := f.Info()
			if err != nil {
				continue // erased meanwhile
			}
			st := s.idx.blobs[d]
			if st == nil {
				st = &blobState{}
				s.idx.blobs[d] = st
			}
			st.legacy = filepath.Join(root, sub.Name(), f.Name())
			if info.ModTime().After(st.used) {
				st.used = info.ModTime()
			}
		}
	}
	return nil
}

// dropBefore forgets the copies written up to t (an erasure's time).
func (st *blobState) dropBefore(t time.Time) {
	st.locs = slices.DeleteFunc(st.locs, func(l loc) bool { return !l.at.After(t) })
}

// kept reports whether st has bytes on disk: a copy in a segment, or its
// file of the old layout (which an erasure removes).
func (st *blobState) kept() bool {
	if st == nil {
		return false
	}
	if len(st.locs) > 0 {
		return true
	}
	if st.legacy == "" {
		return false
	}
	if _, err := os.Lstat(st.legacy); err != nil {
		st.legacy = ""
		return false
	}
	return true
}

// state returns d's index entry after a refresh, nil when d is not kept.
func (s *Store) state(d string) (*blobState, error) {
	s.imu.Lock()
	defer s.imu.Unlock()
	if err := s.refresh(); err != nil {
		return nil, err
	}
	st := s.idx.blobs[d]
	if !st.kept() {
		return nil, nil
	}
	c := *st
	c.locs = slices.Clone(st.locs)
	return &c, nil
}

func (s *Store) getSeg(d string) ([]byte, error) {
	st, err := s.state(d)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, d)
	}
	var changed []byte
	read := func(b []byte) ([]byte, bool) {
		if DigestOf(b) == d {
			return b, true
		}
		if changed == nil && !allZero(b) {
			changed = b
		}
		return nil, false
	}
	for _, l := range st.locs {
		b, err := readAt(l)
		if err != nil {
			continue
		}
		if b, ok := read(b); ok {
			return b, nil
		}
	}
	if st.legacy != "" {
		if b, err := os.ReadFile(st.legacy); err == nil {
			if b, ok := read(b); ok {
				return b, nil
			}
		}
	}
	if changed != nil {
		return changed, fmt.Errorf("%w: %s", ErrChanged, d)
	}
	// Nothing but zeros: punched by an erasure that stopped before it
	// logged itself.
	return nil, fmt.Errorf("%w: %s", ErrNotFound, d)
}

func readAt(l loc) ([]byte, error) {
	f, err := os.Open(l.seg)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, l.n)
	if _, err := f.ReadAt(b, l.off); err != nil {
		return nil, err
	}
	return b, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return len(b) > 0
}

func (s *Store) lastUsedSeg(d string) (time.Time, error) {
	if !ValidDigest(d) {
		return time.Time{}, fmt.Errorf("%w: %q", ErrBadDigest, clip(d))
	}
	st, err := s.state(d)
	if err != nil {
		return time.Time{}, err
	}
	if st == nil {
		return time.Time{}, fmt.Errorf("%w: %s", ErrNotFound, d)
	}
	return st.used, nil
}

func (s *Store) refsSeg() ([]Ref, error) {
	s.imu.Lock()
	defer s.imu.Unlock()
	if err := s.refresh(); err != nil {
		return nil, err
	}
	return slices.Clone(s.idx.refs), nil
}

func (s *Store) erasuresSeg() (map[string]Erasure, error) {
	s.imu.Lock()
	defer s.imu.Unlock()
	if err := s.readErasures(); err != nil {
		return nil, err
	}
	out := make(map[string]Erasure, len(s.idx.erasures))
	for d, e := range s.idx.erasures {
		out[d] = e
	}
	return out, nil
}

func (s *Store) blobsSeg(fn func(d string, used time.Time)) error {
	s.imu.Lock()
	if err := s.refresh(); err != nil {
		s.imu.Unlock()
		return err
	}
	type kv struct {
		d    string
		used time.Time
	}
	var all []kv
	for d, st := range s.idx.blobs {
		if st.kept() {
			all = append(all, kv{d, st.used})
		}
	}
	s.imu.Unlock()
	slices.SortFunc(all, func(a, b kv) int { return strings.Compare(a.d, b.d) })
	for _, b := range all {
		fn(b.d, b.used)
	}
	return nil
}

// eraseSeg removes every copy of each blob of es that is kept: its bytes
// punched out of their segments (and fsynced), a file of the old layout
// removed; then each removal is appended to erasures.jsonl, fsynced.
// Punching first means an erasure cut short leaves zeros, which Get
// reports as not kept, never the bytes under an erasure record.
func (s *Store) eraseSeg(es []Erasure, now time.Time) ([]Erasure, error) {
	var done []Erasure
	var lines []byte
	for _, e := range es {
		if !ValidDigest(e.Digest) {
			return done, fmt.Errorf("%w: %q", ErrBadDigest, clip(e.Digest))
		}
		st, err := s.state(e.Digest)
		if err != nil {
			return done, err
		}
		if st == nil {
			continue // already gone
		}
		for _, l := range st.locs {
			if err := punch(l); err != nil {
				return done, fmt.Errorf("content: erase: %w", err)
			}
		}
		if st.legacy != "" {
			if err := os.Remove(st.legacy); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return done, fmt.Errorf("content: erase: %w", err)
			}
		}
		e.Time = now
		line, _ := json.Marshal(e)
		lines = append(append(lines, line...), '\n')
		done = append(done, e)
	}
	if len(lines) == 0 {
		return done, nil
	}
	if err := appendSynced(filepath.Join(s.dir, erasuresFile), lines); err != nil {
		return done, fmt.Errorf("content: erasure log: %w", err)
	}
	s.imu.Lock()
	for _, e := range done {
		if st := s.idx.blobs[e.Digest]; st != nil {
			st.locs, st.legacy = nil, "" // punched and removed
		}
	}
	s.imu.Unlock()
	s.wmu.Lock()
	for _, e := range done {
		delete(s.dedupe, e.Digest)
	}
	s.wmu.Unlock()
	return done, nil
}

// punch removes a blob's bytes from its segment: a hole where the
// filesystem can punch one, else zeros written over them; fsynced either
// way.
func punch(l loc) error {
	f, err := os.OpenFile(l.seg, os.O_WRONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, l.off, int64(l.n))
	if err != nil {
		// No hole punching here (EOPNOTSUPP): write zeros.
		if _, err := f.WriteAt(make([]byte, l.n), l.off); err != nil {
			return err
		}
	}
	return f.Sync()
}

func appendSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// segmentName reports whether name is a segment's file name.
func segmentName(name string) bool {
	base, ok := strings.CutSuffix(name, segmentExt)
	if !ok || len(base) < 18 || base[16] != '-' {
		return false
	}
	_, err := strconv.ParseUint(base[:16], 16, 64)
	return err == nil
}
