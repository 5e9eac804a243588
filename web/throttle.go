package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Sign-in throttling: failed sign-ins (wrong password, wrong or replayed
// TOTP code) are counted under three keys, each with its own free
// allowance, after which every further failure doubles the wait before
// the next try (1 s, 2 s, 4 s, ... up to the key's cap). Nothing is ever
// locked outright and no key covers everyone: the counts that slow a
// person mistyping are their name at their address, so another user
// behind the same proxy signs in as before. A name tried from many
// addresses (guessing one account) and an address trying many names
// (spraying) are slowed too, with a larger allowance. Failures older than
// throttleWindow are forgotten; a good sign-in clears its name's counts.
// The counts live in the StateStore, so a restart or a second dashboard
// process does not reset them.
type throttleRule struct {
	kind string        // the StateStore key kind
	free int           // failures allowed before waits begin
	max  time.Duration // the longest wait
}

var (
	throttlePair = throttleRule{kind: "fp", free: 5, max: 15 * time.Minute}  // one name at one address
	throttleName = throttleRule{kind: "fn", free: 10, max: 5 * time.Minute}  // one name, any address
	throttleAddr = throttleRule{kind: "fa", free: 30, max: 15 * time.Minute} // one address, any name
)

// throttleWindow is how long a failure counts.
const throttleWindow = 15 * time.Minute

// failRecord is one key's count as stored.
type failRecord struct {
	N     int       `json:"n"`
	Last  time.Time `json:"last"`
	Until time.Time `json:"until"` // no try before
	Exp   time.Time `json:"exp"`
}

// backoff is the wait after the n-th failure under r.
func (r throttleRule) backoff(n int) time.Duration {
	over := n - r.free
	if over <= 0 {
		return 0
	}
	if over > 30 {
		return r.max
	}
	d := time.Duration(math.Pow(2, float64(over-1))) * time.Second
	return min(d, r.max)
}

type throttle struct {
	st  StateStore
	now func() time.Time
}

// attempt names who tries to sign in from where.
type attempt struct{ name, addr string }

func (a attempt) keys() []struct {
	rule throttleRule
	key  string
} {
	return []struct {
		rule throttleRule
		key  string
	}{
		{throttlePair, stateKey(throttlePair.kind, a.name, a.addr)},
		{throttleName, stateKey(throttleName.kind, a.name)},
		{throttleAddr, stateKey(throttleAddr.kind, a.addr)},
	}
}

// wait is how long a must wait before it may try (0: now). A store that
// cannot be read is an error: the caller refuses the sign-in.
func (t *throttle) wait(ctx context.Context, a attempt) (time.Duration, error) {
	now := t.now()
	var longest time.Duration
	for _, k := range a.keys() {
		b, _, err := t.st.Get(ctx, k.key)
		if errors.Is(err, ErrNoState) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrStateStore, err)
		}
		var r failRecord
		if json.Unmarshal(b, &r) != nil {
			continue
		}
		if w := r.Until.Sub(now); w > longest {
			longest = w
		}
	}
	return longest, nil
}

// fail counts one failure of a under every key.
func (t *throttle) fail(ctx context.Context, a attempt) error {
	for _, k := range a.keys() {
		if err := t.count(ctx, k.rule, k.key); err != nil {
			return err
		}
	}
	return nil
}

func (t *throttle) count(ctx context.Context, rule throttleRule, key string) error {
	ttl := throttleWindow + rule.max
	_, err := swap(ctx, t.st, key, ttl, func(b []byte) ([]byte, bool) {
		now := t.now()
		var r failRecord
		_ = json.Unmarshal(b, &r)
		if now.Sub(r.Last) > throttleWindow && !now.Before(r.Until) {
			r.N = 0 // the earlier failures are forgotten
		}
		r.N++
		r.Last, r.Until, r.Exp = now, now.Add(rule.backoff(r.N)), now.Add(ttl)
		nb, _ := json.Marshal(r)
		return nb, true
	})
	return err
}

// swap writes what change makes of key's value (nil when absent) with
// create-if-absent or compare-and-swap, trying again when another
// process wrote in between; change returns false to write nothing, and
// swap then returns false.
func swap(ctx context.Context, st StateStore, key string, ttl time.Duration, change func(old []byte) ([]byte, bool)) (bool, error) {
	for range 16 {
		b, rev, err := st.Get(ctx, key)
		switch {
		case errors.Is(err, ErrNoState):
			b, rev = nil, 0
		case err != nil:
			return false, fmt.Errorf("%w: %w", ErrStateStore, err)
		}
		nb, write := change(b)
		if !write {
			return false, nil
		}
		if rev == 0 {
			_, err = st.Create(ctx, key, nb, ttl)
		} else {
			_, err = st.Update(ctx, key, nb, rev, ttl)
		}
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, ErrStateExists), errors.Is(err, ErrStateChanged), errors.Is(err, ErrNoState):
			continue // another try wrote meanwhile: change on top of it
		default:
			return false, fmt.Errorf("%w: %w", ErrStateStore, err)
		}
	}
	return false, fmt.Errorf("%w: %s kept changing", ErrStateStore, key)
}

// success clears the counts of a's name (at this address and overall);
// the address's own count stays, so spraying from it stays slowed.
func (t *throttle) success(ctx context.Context, a attempt) {
	for _, k := range a.keys()[:2] {
		_ = t.st.Delete(ctx, k.key)
	}
}

// totpUsed remembers, per user, the last step whose code signed in, so a
// code seen once (by someone looking over a shoulder, or a proxy log) is
// refused for the rest of its window, by every dashboard process sharing
// the StateStore and after a restart.
type totpUsed struct {
	st  StateStore
	now func() time.Time
}

type totpRecord struct {
	Step uint64    `json:"step"`
	Exp  time.Time `json:"exp"`
}

// totpKeep is how long a used step is remembered: longer than any code is
// accepted (its step and one either side).
const totpKeep = 5 * time.Minute

// claim records step for user and reports whether it is newer than any
// step that signed user in before. A store error refuses (false, err).
func (u *totpUsed) claim(ctx context.Context, user string, step uint64) (bool, error) {
	return swap(ctx, u.st, stateKey("t", user), totpKeep, func(b []byte) ([]byte, bool) {
		var r totpRecord
		if b != nil && json.Unmarshal(b, &r) == nil && u.now().Before(r.Exp) && step <= r.Step {
			return nil, false
		}
		nb, _ := json.Marshal(totpRecord{Step: step, Exp: u.now().Add(totpKeep)})
		return nb, true
	})
}
