package content

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	// Sync fsyncs each new blob before it is renamed into place. Without
	// it (the default) a blob survives a crash of the process but may be
	// lost in a crash of the machine within the kernel's writeback window;
	// replay then reports it as not kept. The journal itself is unaffected.
	// It costs about 2 to 5 ms per effect on this project's machine.
	Sync bool
}

// Store is a content-addressed folder; see the package doc for its layout.
// Safe for concurrent use, and shared by processes on one machine.
type Store struct {
	dir  string
	now  func() time.Time
	sync bool

	mu    sync.Mutex // guards index
	index *os.File

	obj *objStore // set by OpenObjectStore: no folder, see objstore.go
}

const (
	blobDir      = "sha256"
	indexFile    = "index.jsonl"
	erasuresFile = "erasures.jsonl"
)

// Open opens (creating it if needed) the content store in dir.
func Open(dir string, opts Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, blobDir), 0o700); err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	idx, err := os.OpenFile(filepath.Join(dir, indexFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	s := &Store{dir: dir, now: opts.Now, sync: opts.Sync, index: idx}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close closes the index file.
func (s *Store) Close() error {
	if s.obj != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index.Close()
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

// path is the blob file of a valid digest.
func (s *Store) path(d string) (string, error) {
	if !ValidDigest(d) {
		return "", fmt.Errorf("%w: %q", ErrBadDigest, clip(d))
	}
	h := d[len("sha256:"):]
	return filepath.Join(s.dir, blobDir, h[:2], h[2:]), nil
}

// Put keeps data under its digest, which it returns, and records ref (its
// Digest and Time are filled in). The blob is in place (written to a
// temporary file and renamed, fsynced first with Options.Sync) before Put
// returns; a blob already kept is not rewritten, only marked used now.
func (s *Store) Put(data []byte, ref Ref) (string, error) {
	if s.obj != nil {
		return s.obj.put(data, ref, s.now())
	}
	d := DigestOf(data)
	p, _ := s.path(d)
	now := s.now()
	if err := os.Chtimes(p, now, now); errors.Is(err, fs.ErrNotExist) {
		if err := s.write(p, data, now); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", fmt.Errorf("content: %w", err)
	}
	ref.Digest, ref.Time = d, now.UTC()
	return d, s.addRef(ref)
}

// Touch marks a kept blob used now. It returns ErrNotFound when the blob
// is not kept.
func (s *Store) Touch(d string) error {
	if s.obj != nil {
		return s.obj.touch(d, s.now())
	}
	p, err := s.path(d)
	if err != nil {
		return err
	}
	now := s.now()
	if err := os.Chtimes(p, now, now); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotFound, d)
	} else if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	return nil
}

func (s *Store) write(p string, data []byte, now time.Time) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("content: %w", err)
	}
	tmp := p + ".tmp-" + rand.Text()[:10]
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	_, err = f.Write(data)
	if err == nil && s.sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(tmp, now, now)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("content: write blob: %w", err)
	}
	return nil
}

func (s *Store) addRef(ref Ref) error {
	line, err := json.Marshal(ref)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.index.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("content: index: %w", err)
	}
	return nil
}

// Get returns the blob of digest d. It returns ErrNotFound when none is
// kept, and the bytes with ErrChanged when they do not hash to d.
func (s *Store) Get(d string) ([]byte, error) {
	if s.obj != nil {
		return s.obj.get(d)
	}
	p, err := s.path(d)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, d)
	}
	if err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	if DigestOf(b) != d {
		return b, fmt.Errorf("%w: %s", ErrChanged, d)
	}
	return b, nil
}

// LastUsed returns when the blob was last written or referenced.
func (s *Store) LastUsed(d string) (time.Time, error) {
	if s.obj != nil {
		return s.obj.lastUsed(d)
	}
	p, err := s.path(d)
	if err != nil {
		return time.Time{}, err
	}
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, fmt.Errorf("%w: %s", ErrNotFound, d)
	} else if err != nil {
		return time.Time{}, fmt.Errorf("content: %w", err)
	}
	return fi.ModTime(), nil
}

// Refs reads the index. Lines that do not parse (a torn write) are
// skipped.
func (s *Store) Refs() ([]Ref, error) {
	if s.obj != nil {
		return s.obj.refs()
	}
	var out []Ref
	err := readLines(filepath.Join(s.dir, indexFile), func(line []byte) {
		var r Ref
		if json.Unmarshal(line, &r) == nil && r.Digest != "" {
			out = append(out, r)
		}
	})
	return out, err
}

// Erasures reads the erasure log, by digest (the latest erasure of each).
func (s *Store) Erasures() (map[string]Erasure, error) {
	if s.obj != nil {
		return s.obj.erasures()
	}
	out := map[string]Erasure{}
	err := readLines(filepath.Join(s.dir, erasuresFile), func(line []byte) {
		var e Erasure
		if json.Unmarshal(line, &e) == nil && e.Digest != "" {
			out[e.Digest] = e
		}
	})
	return out, err
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
// as known; Time is set) and appends each removal to erasures.jsonl,
// fsynced. It returns what it removed; a blob already gone is skipped.
func (s *Store) Erase(es []Erasure) ([]Erasure, error) {
	now := s.now().UTC()
	if s.obj != nil {
		return s.obj.erase(es, now)
	}
	var done []Erasure
	var lines []byte
	for _, e := range es {
		p, err := s.path(e.Digest)
		if err != nil {
			return done, err
		}
		if err := os.Remove(p); errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return done, fmt.Errorf("content: erase: %w", err)
		}
		e.Time = now
		line, _ := json.Marshal(e)
		lines = append(append(lines, line...), '\n')
		done = append(done, e)
	}
	if len(lines) == 0 {
		return done, nil
	}
	f, err := os.OpenFile(filepath.Join(s.dir, erasuresFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return done, fmt.Errorf("content: erasure log: %w", err)
	}
	_, err = f.Write(lines)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return done, fmt.Errorf("content: erasure log: %w", err)
	}
	return done, nil
}

// blobs calls fn for every kept blob with its digest and last use.
func (s *Store) blobs(fn func(d string, used time.Time)) error {
	if s.obj != nil {
		return s.obj.blobs(fn)
	}
	root := filepath.Join(s.dir, blobDir)
	dirs, err := os.ReadDir(root)
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
			fn(d, info.ModTime())
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
