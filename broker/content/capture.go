package content

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Mode says what the broker keeps of what its decisions depended on.
type Mode string

const (
	ModeFull    Mode = "full"    // digests in the chain, content in the store: replayable
	ModeDigests Mode = "digests" // digests in the chain, no content: verifiable, not replayable
	ModeOff     Mode = "off"     // neither
)

// ErrUnknownMode is returned by ParseMode for anything but full, digests
// and off.
var ErrUnknownMode = errors.New("content: unknown capture mode")

// ParseMode reads a capture mode; "" is ModeFull, the default.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return ModeFull, nil
	case ModeFull, ModeDigests, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("%w %q (want full, digests or off)", ErrUnknownMode, s)
}

// policyTouchEvery bounds how often a capture marks its policy's blob used.
const policyTouchEvery = time.Hour

// Capturer is what the broker calls to capture a request (it implements
// broker.ContentSink). Safe for concurrent use.
type Capturer struct {
	store *Store
	mode  Mode

	mu      sync.Mutex
	touched map[string]time.Time // policy digest -> last marked used
}

// NewCapturer captures into s in mode. s may be nil only in ModeDigests
// and ModeOff.
func NewCapturer(s *Store, mode Mode) (*Capturer, error) {
	if mode == "" {
		mode = ModeFull
	}
	if mode == ModeFull && s == nil {
		return nil, errors.New("content: full capture needs a store")
	}
	return &Capturer{store: s, mode: mode, touched: map[string]time.Time{}}, nil
}

// Mode returns the capture mode.
func (c *Capturer) Mode() Mode { return c.mode }

// AddPolicy keeps a rules file's source (in ModeFull) so that replay can
// load the policy by the digest decisions record, and returns that
// digest. Call it whenever the broker's policy changes.
func (c *Capturer) AddPolicy(name string, src []byte) (string, error) {
	if c.mode != ModeFull {
		return DigestOf(src), nil
	}
	d, err := c.store.Put(src, Ref{Kind: KindPolicy, Name: name})
	if err == nil {
		c.mu.Lock()
		c.touched[d] = c.store.now()
		c.mu.Unlock()
	}
	return d, err
}

// Capture encodes r and returns its digest, keeping its bytes first in
// ModeFull. In ModeOff it returns "" and keeps nothing. The policy's blob
// is marked used at most once an hour, so retention counts from the last
// decision made under it.
func (c *Capturer) Capture(_ context.Context, r *Request) (string, error) {
	if c.mode == ModeOff {
		return "", nil
	}
	b, err := r.Encode()
	if err != nil {
		return "", err
	}
	if c.mode == ModeDigests {
		return DigestOf(b), nil
	}
	d, err := c.store.Put(b, Ref{Kind: KindRequest, Run: r.Run, Effect: r.Effect, For: r.ActingFor})
	if err != nil {
		return "", err
	}
	c.touchPolicy(r.PolicyDigest)
	c.touchRecords(r.Grounding)
	return d, nil
}

func (c *Capturer) touchPolicy(d string) {
	if !ValidDigest(d) {
		return
	}
	now := c.store.now()
	c.mu.Lock()
	last, ok := c.touched[d]
	due := !ok || now.Sub(last) >= policyTouchEvery
	if due {
		c.touched[d] = now
	}
	c.mu.Unlock()
	if due {
		_ = c.store.Touch(d) // a policy never added (default rules) has no blob
	}
}
