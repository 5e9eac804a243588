package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/gowebpki/jcs"
)

// ErrUnknownMode is returned by ParseMode for anything but off, report and
// strict.
var ErrUnknownMode = errors.New("unknown mode")

// ParseMode reads a mode as an operator writes it: "off", "report" or
// "strict", in any case and with surrounding spaces ignored. The empty
// string is ModeReport, the default. Anything else returns an error
// wrapping ErrUnknownMode.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return ModeReport, nil
	case "off":
		return ModeOff, nil
	case "report":
		return ModeReport, nil
	case "strict":
		return ModeStrict, nil
	}
	return "", fmt.Errorf("policy: %w %q (want off, report or strict)", ErrUnknownMode, s)
}

// String returns "refuse", "allow" or "hold".
func (v Verdict) String() string {
	switch v {
	case VerdictRefuse:
		return "refuse"
	case VerdictAllow:
		return "allow"
	case VerdictHold:
		return "hold"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Digest returns "sha256:<hex>" over the RFC 8785 (JCS) canonical JSON of
// the mandate, so the same mandate always has the same digest whoever
// encodes it. ExpiresAt is taken in UTC, and a nil list and an empty one
// are the same. A nil mandate, or one that cannot be encoded (an ExpiresAt
// outside years 0-9999), has the digest "".
func (m *Mandate) Digest() string {
	if m == nil {
		return ""
	}
	c := *m
	c.ExpiresAt = c.ExpiresAt.UTC()
	raw, err := json.Marshal(&c)
	if err != nil {
		return ""
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Input is everything Decide looks at. It is a value: Decide reads it and
// keeps nothing.
type Input struct {
	// Mode is the mode to decide in; "" is ModeReport.
	Mode      Mode
	Authority Authority
	Effect    Effect
	// Now is the time the effect is decided at; mandate expiry is checked
	// against it.
	Now time.Time
	// Approval is the approval the broker found for this exact action, if
	// any; it satisfies an approvals rule or card when its approver's
	// roles and assurance meet the rule's (approvals.go).
	Approval *ApprovalGrant
}

// Policy is a compiled rules file. It is immutable once made and safe for
// concurrent use by any number of goroutines.
//
// The zero Policy, and a nil *Policy, refuse every effect with
// RefusePolicyUnreadable in report and strict mode: a broker that was not
// given a policy fails closed. Use Default for the built-in rules alone.
type Policy struct {
	name    string
	digest  string
	usable  bool
	problem string // why the policy cannot be used, for Unreadable

	rules   section // rules: provider calls
	effects section // effects: every sink
	scopes  []scopeReq
	agents  map[string]*card
	browser browserSection // browser: the browser sink's settings
	// approvals: rules, in file order (approvals.go).
	approvals []approvalRule
}

// emptyDigest is the digest of zero bytes: the policy with no file.
var emptyDigest = func() string {
	sum := sha256.Sum256(nil)
	return "sha256:" + hex.EncodeToString(sum[:])
}()

// Default returns the policy without deployment rules: mandate, built-in
// refusals, and no scopes or agent cards. Its Name is "" and its Digest is
// that of an empty file.
func Default() *Policy {
	return &Policy{digest: emptyDigest, usable: true}
}

// Unreadable returns a policy that refuses every effect (outside mode off)
// with RefusePolicyUnreadable, its reason naming the file and err. A broker
// uses it when Load fails, so it keeps running and refuses. Its Digest is "".
func Unreadable(name string, err error) *Policy {
	problem := "unknown problem"
	if err != nil {
		problem = err.Error()
	}
	return &Policy{name: name, problem: problem}
}

// Name returns the name of the file the policy came from ("" for Default).
func (p *Policy) Name() string {
	if p == nil {
		return ""
	}
	return p.name
}

// Digest returns "sha256:<hex>" of the rules file's bytes, exactly as read;
// for Default the digest of an empty file; "" for a policy that could not
// be read.
func (p *Policy) Digest() string {
	if p == nil {
		return ""
	}
	return p.digest
}

// rule is one compiled deployment rule.
type rule struct {
	name     string
	decision string // as written
	allow    bool   // decision == "allow"; anything else denies
	section  string // "rules" or "effects"
	index    int
	detail   string // the deny reason, built once at load
	m        matcher
}

// tri is an optional boolean match.
type tri uint8

const (
	triAny tri = iota
	triFalse
	triTrue
)

func (t tri) matches(b bool) bool {
	return t == triAny || (t == triTrue) == b
}

// matcher is a compiled match. A nil list is a key that was not written and
// matches everything; a written list is never empty. Methods are upper case.
type matcher struct {
	provider, atom, effect, method, origin []string
	sink, action, agent, host              []string
	target, path                           []glob // doublestar globs, validated
	verified, confined                     tri
}

// glob is a validated doublestar pattern with what was worked out at load:
// the literal text before its first special character, which any match
// must start with, and whether the whole pattern is literal.
type glob struct {
	pattern string
	prefix  string
	literal bool
	// folded is the pattern in lower case, for effects whose paths match
	// ignoring case (Effect.PathFold); nil when lower-casing changes
	// nothing.
	folded *glob
}

func newGlob(pattern string) glob {
	g := newExactGlob(pattern)
	if l := strings.ToLower(pattern); l != pattern {
		f := newExactGlob(l)
		g.folded = &f
	}
	return g
}

func newExactGlob(pattern string) glob {
	i := strings.IndexAny(pattern, `*?[{\`)
	if i < 0 {
		return glob{pattern: pattern, prefix: pattern, literal: true}
	}
	prefix := pattern[:i]
	if strings.HasPrefix(pattern[i:], "**") && strings.HasSuffix(prefix, "/") {
		// "a/**" also matches "a": the slash before ** is optional.
		prefix = prefix[:len(prefix)-1]
	}
	return glob{pattern: pattern, prefix: prefix}
}

// scopeReq is one scopes.require entry.
type scopeReq struct {
	scope  string
	index  int
	m      matcher
	limits []limit
}

type limit struct {
	key  string
	text string   // as written
	max  *big.Rat // read-only after load
}

// card is one agent card.
type card struct {
	name, rule         string
	index              int
	allowedTools       []string
	blockedTools       []string
	requireApproval    []string
	allowedDelegations []string
}
