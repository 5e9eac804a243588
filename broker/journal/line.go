package journal

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/gatehouse/gatehouse/broker/journal/canon"
)

// MaxLineBytes bounds one journal line, '\n' excluded. The writer refuses
// larger events and Verify reports larger lines as malformed.
const MaxLineBytes = 1 << 20

// maxMembers bounds the top-level members a line may have; v1 lines have
// at most ten.
const maxMembers = 16

// member is one top-level member of a JSON object, located in the line.
type member struct {
	key   []byte // the key as written, without quotes; never escaped
	val   []byte // the raw value
	start int    // offset of the key's opening quote
	end   int    // offset just past the value
}

// obj is a JSON object split into its top-level members.
type obj struct {
	ms [maxMembers]member
	n  int
}

func (o *obj) get(key string) (int, bool) {
	for i := 0; i < o.n; i++ {
		if string(o.ms[i].key) == key {
			return i, true
		}
	}
	return -1, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the offset just past the string starting at b[i]
// (which is '"') and whether it holds a backslash escape.
func skipString(b []byte, i int) (int, bool, error) {
	esc := false
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '\\':
			esc = true
			j++
		case c == '"':
			return j + 1, esc, nil
		case c < 0x20:
			return 0, false, fmt.Errorf("%w: control character in string", ErrMalformed)
		}
	}
	return 0, false, fmt.Errorf("%w: unterminated string", ErrMalformed)
}

// skipValue returns the offset just past the JSON value starting at b[i].
// Containers are matched bracket by bracket; scalars are taken up to the
// next delimiter. Values are not validated here: the canonicaliser does
// that for every member the hash covers.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("%w: missing value", ErrMalformed)
	}
	switch b[i] {
	case '"':
		j, _, err := skipString(b, i)
		return j, err
	case '{', '[':
		var stack []byte
		for j := i; j < len(b); j++ {
			switch c := b[j]; c {
			case '"':
				k, _, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = k - 1
			case '{', '[':
				stack = append(stack, c)
			case '}', ']':
				open := byte('{')
				if c == ']' {
					open = '['
				}
				if len(stack) == 0 || stack[len(stack)-1] != open {
					return 0, fmt.Errorf("%w: mismatched bracket", ErrMalformed)
				}
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("%w: unterminated container", ErrMalformed)
	default:
		j := i
		for j < len(b) && !isSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
			j++
		}
		if j == i {
			return 0, fmt.Errorf("%w: missing value", ErrMalformed)
		}
		return j, nil
	}
}

// eachMember calls fn for each top-level member of b, which must be
// exactly one JSON object with optional surrounding whitespace. Keys must
// be unescaped; fn sees them in order.
func eachMember(b []byte, fn func(key, val []byte, start, end int) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return fmt.Errorf("%w: expected a member name", ErrMalformed)
			}
			ke, esc, err := skipString(b, i)
			if err != nil {
				return err
			}
			if esc {
				return fmt.Errorf("%w: escaped member name", ErrMalformed)
			}
			j := skipSpace(b, ke)
			if j >= len(b) || b[j] != ':' {
				return fmt.Errorf("%w: expected ':'", ErrMalformed)
			}
			j = skipSpace(b, j+1)
			ve, err := skipValue(b, j)
			if err != nil {
				return err
			}
			if err := fn(b[i+1:ke-1], b[j:ve], i, ve); err != nil {
				return err
			}
			i = skipSpace(b, ve)
			if i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			return fmt.Errorf("%w: expected ',' or '}'", ErrMalformed)
		}
	}
	if skipSpace(b, i) != len(b) {
		return fmt.Errorf("%w: data after the object", ErrMalformed)
	}
	return nil
}

// scanObject splits b into its top-level members, which must be unique
// and at most maxMembers.
func scanObject(b []byte, o *obj) error {
	o.n = 0
	return eachMember(b, func(key, val []byte, start, end int) error {
		for k := 0; k < o.n; k++ {
			if bytes.Equal(o.ms[k].key, key) {
				return fmt.Errorf("%w: duplicate member %q", ErrMalformed, key)
			}
		}
		if o.n == maxMembers {
			return fmt.Errorf("%w: too many members", ErrMalformed)
		}
		o.ms[o.n] = member{key: key, val: val, start: start, end: end}
		o.n++
		return nil
	})
}

// lookup returns the value of top-level member key of object b.
func lookup(b []byte, key string) ([]byte, bool) {
	var found []byte
	ok := false
	err := eachMember(b, func(k, v []byte, _, _ int) error {
		if string(k) == key {
			found, ok = v, true
		}
		return nil
	})
	return found, ok && err == nil
}

// withoutMember appends to dst the object b with member k of o removed.
func withoutMember(dst, b []byte, o *obj, k int) []byte {
	m := o.ms[k]
	from, to := m.start, m.end
	switch {
	case k > 0:
		from = o.ms[k-1].end // drop the comma before it
	case o.n > 1:
		to = o.ms[1].start // drop the comma after it
	}
	dst = append(dst, b[:from]...)
	return append(dst, b[to:]...)
}

// hashWithout returns the journal hash of the object b without member k:
// SHA-256 over its RFC 8785 canonical form. buf is scratch space.
func hashWithout(buf, b []byte, o *obj, k int) ([32]byte, []byte, error) {
	buf = withoutMember(buf[:0], b, o, k)
	if canon.IsCanonical(buf) {
		return sha256.Sum256(buf), buf, nil
	}
	c, err := jcs.Transform(buf)
	if err != nil {
		return [32]byte{}, buf, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return sha256.Sum256(c), buf, nil
}

// parseHex parses a lowercase hex SHA-256 written as a JSON string.
func parseHex(v []byte) ([32]byte, error) {
	var h [32]byte
	if len(v) != 66 || v[0] != '"' || v[65] != '"' {
		return h, fmt.Errorf("%w: not a 64-digit hash", ErrMalformed)
	}
	for _, c := range v[1:65] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return h, fmt.Errorf("%w: hash is not lowercase hex", ErrMalformed)
		}
	}
	_, err := hex.Decode(h[:], v[1:65])
	return h, err
}

// parseString decodes a JSON string value.
func parseString(v []byte) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", fmt.Errorf("%w: not a string", ErrMalformed)
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return s, nil
}

// parseUint decodes a JSON number that must be a plain non-negative integer.
func parseUint(v []byte) (uint64, error) {
	if len(v) == 0 || len(v) > 1 && v[0] == '0' {
		return 0, fmt.Errorf("%w: not a canonical integer", ErrMalformed)
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: not an integer", ErrMalformed)
	}
	return n, nil
}

func parseTime(v []byte) (time.Time, error) {
	var t time.Time
	if err := t.UnmarshalJSON(v); err != nil {
		return t, fmt.Errorf("%w: bad time: %v", ErrMalformed, err)
	}
	return t, nil
}

// parsedLine is an event line as Verify needs it: decoded fields that are
// checked, the hash as written and the hash recomputed from the content.
type parsedLine struct {
	ev       Event // Data aliases the line; Prev and Hash are not set
	hash     [32]byte
	prev     [32]byte
	hasPrev  bool
	computed [32]byte
	sig      []byte // the raw "sig" member, nil when unsigned (see sigline.go)
}

// eventKeys are the members of a v1 event line; effect and sig are optional.
var eventKeys = [...]string{"v", "id", "run", "seq", "type", "time", "effect", "data", "prev", "hash", "sig"}

// parseEvent parses one event line (without its '\n') and recomputes its
// hash. buf is scratch space, returned for reuse.
func parseEvent(line []byte, o *obj, buf []byte) (parsedLine, []byte, error) {
	var p parsedLine
	if err := scanObject(line, o); err != nil {
		return p, buf, err
	}
	for i := 0; i < o.n; i++ {
		known := false
		for _, k := range eventKeys {
			if string(o.ms[i].key) == k {
				known = true
				break
			}
		}
		if !known {
			return p, buf, fmt.Errorf("%w: unknown member %q", ErrMalformed, o.ms[i].key)
		}
	}
	for _, k := range eventKeys {
		if _, ok := o.get(k); !ok && k != "effect" && k != "sig" {
			return p, buf, fmt.Errorf("%w: missing member %q", ErrMalformed, k)
		}
	}
	var err error
	e := &p.ev
	hashIdx, sigIdx := -1, -1
	for i := 0; i < o.n && err == nil; i++ {
		v := o.ms[i].val
		switch string(o.ms[i].key) {
		case "v":
			var n uint64
			if n, err = parseUint(v); err == nil && n != Version {
				err = fmt.Errorf("%w: version %d", ErrMalformed, n)
			}
			e.V = int(n)
		case "id":
			if e.ID, err = parseString(v); err == nil && e.ID == "" {
				err = fmt.Errorf("%w: empty id", ErrMalformed)
			}
		case "run":
			e.Run, err = parseString(v)
		case "seq":
			if e.Seq, err = parseUint(v); err == nil && e.Seq == 0 {
				err = fmt.Errorf("%w: seq 0", ErrMalformed)
			}
		case "type":
			var s string
			if s, err = parseString(v); err == nil {
				e.Type = Type(s)
				if !e.Type.Known() {
					err = fmt.Errorf("%w: unknown type %q", ErrMalformed, s)
				}
			}
		case "time":
			e.Time, err = parseTime(v)
		case "effect":
			e.Effect, err = parseString(v)
		case "data":
			e.Data = v
		case "prev":
			if string(v) == `""` {
				break
			}
			p.prev, err = parseHex(v)
			p.hasPrev = true
		case "hash":
			p.hash, err = parseHex(v)
			hashIdx = i
		case "sig":
			p.sig, sigIdx = v, i
		}
	}
	if err != nil {
		return p, buf, err
	}
	if sigIdx >= 0 {
		p.computed, buf, err = hashWithoutTwo(buf, line, o, hashIdx, sigIdx)
	} else {
		p.computed, buf, err = hashWithout(buf, line, o, hashIdx)
	}
	if err != nil {
		return p, buf, err
	}
	return p, buf, nil
}

// ParseLine parses one journal line, with or without its trailing '\n'.
// It checks the line's structure: a JSON object with exactly the v1
// members, unescaped and unique names, version 1, a known type, seq >= 1,
// a non-empty id, hashes as 64 lowercase hex digits, and content that is
// valid for RFC 8785 canonicalisation. It does not check that the hash
// matches the content, nor the chain; Verify does.
func ParseLine(line []byte) (Event, error) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if len(line) > MaxLineBytes {
		return Event{}, fmt.Errorf("%w: line longer than %d bytes", ErrMalformed, MaxLineBytes)
	}
	var o obj
	p, _, err := parseEvent(line, &o, nil)
	if err != nil {
		return Event{}, err
	}
	p.ev.Data = bytes.Clone(p.ev.Data)
	if p.hasPrev {
		p.ev.Prev = hex.EncodeToString(p.prev[:])
	}
	p.ev.Hash = hex.EncodeToString(p.hash[:])
	return p.ev, nil
}

// Known reports whether t is one of the v1 event types.
func (t Type) Known() bool {
	switch t {
	case TypeRunOpen, TypeRunClose, TypeDecision, TypeAttempt, TypeOutcome:
		return true
	}
	return approvalType(t)
}

// HeadEntry is one line of the head log: it registers that run's event
// RunSeq, whose hash is Event, as written. Seq, Prev and Hash chain the
// head log the way events chain a run.
type HeadEntry struct {
	Seq    uint64    `json:"seq"`
	Run    string    `json:"run"`
	RunSeq uint64    `json:"run_seq"`
	Event  string    `json:"event"`
	Time   time.Time `json:"time"`
	Prev   string    `json:"prev"`
	Hash   string    `json:"hash"`
}

var headKeys = [...]string{"seq", "run", "run_seq", "event", "time", "prev", "hash"}

type parsedHead struct {
	h        HeadEntry
	event    [32]byte
	hash     [32]byte
	prev     [32]byte
	hasPrev  bool
	computed [32]byte
}

// parseHead parses one head log line and recomputes its hash.
func parseHead(line []byte, o *obj, buf []byte) (parsedHead, []byte, error) {
	var p parsedHead
	if err := scanObject(line, o); err != nil {
		return p, buf, err
	}
	if o.n != len(headKeys) {
		return p, buf, fmt.Errorf("%w: head entry needs exactly %d members", ErrMalformed, len(headKeys))
	}
	var err error
	hashIdx := -1
	for i := 0; i < o.n && err == nil; i++ {
		v := o.ms[i].val
		switch string(o.ms[i].key) {
		case "seq":
			if p.h.Seq, err = parseUint(v); err == nil && p.h.Seq == 0 {
				err = fmt.Errorf("%w: seq 0", ErrMalformed)
			}
		case "run":
			if p.h.Run, err = parseString(v); err == nil && !ValidRunID(p.h.Run) {
				err = fmt.Errorf("%w: bad run id", ErrMalformed)
			}
		case "run_seq":
			if p.h.RunSeq, err = parseUint(v); err == nil && p.h.RunSeq == 0 {
				err = fmt.Errorf("%w: run_seq 0", ErrMalformed)
			}
		case "event":
			p.event, err = parseHex(v)
		case "time":
			p.h.Time, err = parseTime(v)
		case "prev":
			if string(v) == `""` {
				break
			}
			p.prev, err = parseHex(v)
			p.hasPrev = true
		case "hash":
			p.hash, err = parseHex(v)
			hashIdx = i
		default:
			err = fmt.Errorf("%w: unknown member %q", ErrMalformed, o.ms[i].key)
		}
	}
	if err != nil {
		return p, buf, err
	}
	p.computed, buf, err = hashWithout(buf, line, o, hashIdx)
	if err != nil {
		return p, buf, err
	}
	p.h.Event = hex.EncodeToString(p.event[:])
	p.h.Hash = hex.EncodeToString(p.hash[:])
	if p.hasPrev {
		p.h.Prev = hex.EncodeToString(p.prev[:])
	}
	return p, buf, nil
}

// ValidRunID reports whether id may name a run: 1 to 64 ASCII letters,
// digits, '_' or '-'. Only such ids are ever joined into a path.
func ValidRunID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
