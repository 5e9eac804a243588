package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// StateStore keeps what the dashboard must not lose on a restart and must
// share between several dashboard processes behind one address: sessions,
// half-done TOTP sign-ins, sign-in failure counts and the TOTP replay
// guard. serve gives it a JetStream KV bucket (package web/sessionkv) or,
// with --redis-url, Redis (web/sessionredis); without one, Config gets an
// in-memory store for this process alone.
//
// Every value the dashboard writes carries its own expiry and is checked
// against it on read, so a store may keep a value longer than ttl (a KV
// bucket's MaxAge is per bucket), never shorter. Changes are
// create-if-absent and compare-and-swap on the revision read, so two
// processes counting the same failed sign-in both count it.
//
// Keys are made here from hashes (a session's key is the SHA-256 of its
// token), so a copy of the store holds no usable session cookie, and only
// the characters [a-z0-9.] appear in them.
type StateStore interface {
	// Get returns the value and its revision, or ErrNoState.
	Get(ctx context.Context, key string) ([]byte, uint64, error)
	// Create stores val only if key is absent (ErrStateExists).
	Create(ctx context.Context, key string, val []byte, ttl time.Duration) (uint64, error)
	// Update replaces the value only if its revision is still rev
	// (ErrStateChanged; ErrNoState when it is gone).
	Update(ctx context.Context, key string, val []byte, rev uint64, ttl time.Duration) (uint64, error)
	// Delete removes key; an absent key is no error.
	Delete(ctx context.Context, key string) error
}

// The StateStore sentinels. Implementations return them, wrapped or not.
var (
	ErrNoState      = errors.New("web: no such state")
	ErrStateExists  = errors.New("web: state exists")
	ErrStateChanged = errors.New("web: state changed since read")
	// ErrStateStore: the store could not be reached. Sign-in then fails
	// closed: nobody is let in on a session or a throttle it cannot read.
	ErrStateStore = errors.New("web: sign-in state store unavailable")
)

// stateKey is the store key of kind (one letter) for the given parts:
// kind "." and the hex SHA-256 of the parts joined by NUL.
func stateKey(kind string, parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return kind + "." + hex.EncodeToString(h.Sum(nil))
}

// MemoryState is a StateStore in this process's memory: what a restart
// forgets. Safe for concurrent use. Expired entries are dropped as they
// are met and on every 256th write.
type MemoryState struct {
	mu     sync.Mutex
	m      map[string]memEntry
	now    func() time.Time
	writes int
}

type memEntry struct {
	val     []byte
	rev     uint64
	expires time.Time
}

// NewMemoryState returns an empty store on the clock now (nil: time.Now).
func NewMemoryState(now func() time.Time) *MemoryState {
	if now == nil {
		now = time.Now
	}
	return &MemoryState{m: map[string]memEntry{}, now: now}
}

var _ StateStore = (*MemoryState)(nil)

func (s *MemoryState) live(key string) (memEntry, bool) {
	e, ok := s.m[key]
	if ok && s.now().After(e.expires) {
		delete(s.m, key)
		return memEntry{}, false
	}
	return e, ok
}

func (s *MemoryState) sweep() {
	if s.writes++; s.writes%256 != 0 {
		return
	}
	now := s.now()
	for k, e := range s.m {
		if now.After(e.expires) {
			delete(s.m, k)
		}
	}
}

func (s *MemoryState) Get(_ context.Context, key string) ([]byte, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.live(key)
	if !ok {
		return nil, 0, ErrNoState
	}
	return append([]byte(nil), e.val...), e.rev, nil
}

func (s *MemoryState) Create(_ context.Context, key string, val []byte, ttl time.Duration) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.live(key); ok {
		return 0, ErrStateExists
	}
	s.sweep()
	s.m[key] = memEntry{val: append([]byte(nil), val...), rev: 1, expires: s.now().Add(ttl)}
	return 1, nil
}

func (s *MemoryState) Update(_ context.Context, key string, val []byte, rev uint64, ttl time.Duration) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.live(key)
	if !ok {
		return 0, ErrNoState
	}
	if e.rev != rev {
		return 0, ErrStateChanged
	}
	s.sweep()
	s.m[key] = memEntry{val: append([]byte(nil), val...), rev: rev + 1, expires: s.now().Add(ttl)}
	return rev + 1, nil
}

func (s *MemoryState) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
	return nil
}

// Len is how many entries the store holds, expired ones included until
// they are swept (for tests).
func (s *MemoryState) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
