package content

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse/gatehouse/policy"
)

var (
	// ErrNotFound: no blob with that digest is kept (never stored, stored
	// in digests mode, or erased; Erasures tells which).
	ErrNotFound = errors.New("content: not found")
	// ErrChanged: the blob's bytes do not hash to its digest.
	ErrChanged = errors.New("content: blob does not match its digest")
	// ErrBadDigest: not "sha256:" and 64 lowercase hex characters.
	ErrBadDigest = errors.New("content: bad digest")
)

// Kind says what a blob holds.
type Kind string

const (
	KindRequest Kind = "request" // a Request: one effect as proposed and described
	KindPolicy  Kind = "policy"  // a rules file's bytes
	// KindRecord is a provider response body a grounding rule could rely
	// on, as received; it belongs to the person of the run that read it.
	KindRecord Kind = "record"
	// KindGrounding is a grounding rules file's bytes; it belongs to nobody.
	KindGrounding Kind = "grounding"
)

// Ref is one line of index.jsonl: a use of a blob.
type Ref struct {
	Digest string           `json:"digest"`
	Kind   Kind             `json:"kind"`
	Run    string           `json:"run,omitempty"`
	Effect string           `json:"effect,omitempty"`
	For    policy.Principal `json:"acting_for,omitzero"`
	Name   string           `json:"name,omitempty"` // a policy's file name
	Time   time.Time        `json:"time"`
}

// Erasure is one line of erasures.jsonl: a blob removed.
type Erasure struct {
	Digest string           `json:"digest"`
	Kind   Kind             `json:"kind,omitempty"`
	Run    string           `json:"run,omitempty"`
	For    policy.Principal `json:"acting_for,omitzero"`
	Reason string           `json:"reason"` // "person acme/ada", "unused for 30 days"
	Time   time.Time        `json:"time"`
}

// Options tune a Store. The zero value is usable.
type Options struct {
	// Now is the clock for last-use times and erasure; nil is time.Now.
	Now func() time.Time
	// Sync fsyncs the segment after each record. Without it (the default)
	// a record survives a crash of the process but may be lost in a crash
	// of the machine within the kernel's writeback window; replay then
	// reports it as not kept. The journal itself is unaffected.
	Sync bool
}

// Store is a content-addressed store in a folder; see the package doc for
// its layout and segments.go for the records. Safe for concurrent use,
// and shared by processes on one machine. Lock order: imu, then wmu.
type Store struct {
	dir  string
	now  func() time.Time
	sync bool

	wmu    sync.Mutex // guards seg and dedupe
	seg    *segWriter
	dedupe map[string]struct{}

	imu sync.Mutex // guards idx
	idx segIndex

	obj *objStore // set by OpenObjectStore: no folder, see objstore.go
}

const (
	blobDir      = "sha256"      // the layout before segments: read, never written
	indexFile    = "index.jsonl" // likewise
	erasuresFile = "erasures.jsonl"
)

// Open opens (creating it if needed) the content store in dir. Nothing is
// read until something asks (Get, Refs, erasure): a broker that only
// keeps content never reads the folder's index.
func Open(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, segmentsDir), 0o700); err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	s := &Store{dir: dir, now: opts.Now, sync: opts.Sync, dedupe: map[string]struct{}{}}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close closes the segment this Store appends to.
func (s *Store) Close() error {
	if s.obj != nil {
		return nil
	}
	return s.closeSegment()
}

// DigestOf returns "sha256:<hex>" of b.
func DigestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ValidDigest reports whether d is "sha256:" and 64 lowercase hex digits.
func ValidDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Put keeps data under its digest, which it returns, and records ref (its
// Digest and Time are filled in): one record appended to this Store's
// segment, with one write (fsynced first with Options.Sync), before Put
// returns. Bytes this Store already keeps are not written again, only
// referenced (marked used now).
func (s *Store) Put(data []byte, ref Ref) (string, error) {
	if s.obj != nil {
		return s.obj.put(data, ref, s.now())
	}
	return s.put(data, ref)
}

// Touch marks a kept blob used now. It returns ErrNotFound when the blob
// is not kept.
func (s *Store) Touch(d string) error {
	if s.obj != nil {
		return s.obj.touch(d, s.now())
	}
	return s.touchSeg(d)
}

// Get returns the blob of digest d. It returns ErrNotFound when none is
// kept, and the bytes with ErrChanged when they do not hash to d.
func (s *Store) Get(d string) ([]byte, error) {
	if s.obj != nil {
		return s.obj.get(d)
	}
	if !ValidDigest(d) {
		return nil, fmt.Errorf("%w: %q", ErrBadDigest, clip(d))
	}
	return s.getSeg(d)
}

// LastUsed returns when the blob was last written or referenced.
func (s *Store) LastUsed(d string) (time.Time, error) {
	if s.obj != nil {
		return s.obj.lastUsed(d)
	}
	return s.lastUsedSeg(d)
}

// Refs lists every reference to a blob (the header of each put and ref
// record, and index.jsonl's lines from before segments). Records that do
// not parse (a torn write) end their segment's reading.
func (s *Store) Refs() ([]Ref, error) {
	if s.obj != nil {
		return s.obj.refs()
	}
	return s.refsSeg()
}

// Erasures reads the erasure log, by digest (the latest erasure of each).
func (s *Store) Erasures() (map[string]Erasure, error) {
	if s.obj != nil {
		return s.obj.erasures()
	}
	return s.erasuresSeg()
}

func readLines(path string, fn func([]byte)) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fn(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("content: %s: %w", filepath.Base(path), err)
	}
	return nil
}

// Erase removes the blobs of es (each Erasure's Digest, Kind, Run and For
// as known; Time is set): every copy's bytes, then a line per blob in
// erasures.jsonl, fsynced. It returns what it removed; a blob already
// gone is skipped.
func (s *Store) Erase(es []Erasure) ([]Erasure, error) {
	now := s.now().UTC()
	if s.obj != nil {
		return s.obj.erase(es, now)
	}
	return s.eraseSeg(es, now)
}

// blobs calls fn for every kept blob with its digest and last use.
func (s *Store) blobs(fn func(d string, used time.Time)) error {
	if s.obj != nil {
		return s.obj.blobs(fn)
	}
	return s.blobsSeg(fn)
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
