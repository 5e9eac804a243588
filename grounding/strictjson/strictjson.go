// Package strictjson reads JSON the way two different parsers would both
// read it, or refuses it. Where parsers disagree about a document (which of
// two equal keys wins, what an invalid UTF-8 byte or an unpaired surrogate
// escape becomes, how deep a document may nest), a decision taken on one
// parser's reading can be carried out on another's. Gatehouse decides on
// JSON that an application or an agent sends (a work's input, a provider
// call's params and body) and on JSON a provider answers (grounding
// records), so it reads each of them through Scan or Check first.
//
// What is refused, by Check, and reported by Scan:
//
//   - anything that is not exactly one JSON value (RFC 8259), surrounding
//     white space allowed (ErrSyntax);
//   - bytes that are not UTF-8 (ErrInvalidUTF8), and \u escapes of a lone
//     UTF-16 surrogate (ErrSurrogate): some parsers keep them, some
//     replace them with U+FFFD, some fail;
//   - objects nested deeper than MaxDepth (ErrTooDeep);
//   - an object key that appears twice, compared after unescaping
//     (ErrDuplicateKey). With Options.Fold, Scan also reports keys that are
//     equal only after Unicode case folding and NFC ("iban" and "IBAN",
//     "amount" and "amount" with a Kelvin sign), which a parser matching
//     fields without regard to case reads as one field.
//
// The package does no I/O and keeps no state; every function is safe for
// concurrent use.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Errors of Scan and Check. They never carry a value from the document;
// a duplicate key's path is in *DuplicateError.
var (
	ErrSyntax       = errors.New("not one valid JSON value")
	ErrInvalidUTF8  = errors.New("not valid UTF-8")
	ErrSurrogate    = errors.New("a string holds an unpaired UTF-16 surrogate escape")
	ErrTooDeep      = errors.New("nested too deeply")
	ErrDuplicateKey = errors.New("a key appears twice in one object")
)

// MaxDepth is how deeply objects and lists may nest.
const MaxDepth = 512

// Step is one step of the path to a value: an object key (Index -1) or a
// list index.
type Step struct {
	Key   string
	Index int
}

// Duplicate is an object key that appears more than once in one object.
// Path leads to the key's later occurrence; its last step is the key as
// written there.
type Duplicate struct {
	Path []Step
	// Folded is set when the keys are equal only after case folding and
	// NFC, not as written.
	Folded bool
}

// DuplicateError is Check's error for a duplicate key; it wraps
// ErrDuplicateKey.
type DuplicateError struct{ Duplicate }

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("%v: %s", ErrDuplicateKey, PathText(e.Path, "$"))
}

func (e *DuplicateError) Unwrap() error { return ErrDuplicateKey }

// Options configure Scan.
type Options struct {
	// Fold also reports keys equal after Unicode case folding and NFC.
	Fold bool
}

// Check returns nil when data is one valid JSON value that Scan finds
// nothing wrong with and no key repeated exactly; otherwise the first
// problem, wrapping one of the package's errors.
func Check(data []byte) error {
	dups, err := Scan(data, Options{})
	if err != nil {
		return err
	}
	if len(dups) > 0 {
		return &DuplicateError{dups[0]}
	}
	return nil
}

// Scan validates data as one JSON value and returns every duplicate key,
// in document order. An error (ErrSyntax, ErrInvalidUTF8, ErrSurrogate or
// ErrTooDeep, wrapped) means the document cannot be read at all.
func Scan(data []byte, o Options) ([]Duplicate, error) {
	if !utf8.Valid(data) {
		return nil, ErrInvalidUTF8
	}
	if !json.Valid(data) {
		return nil, ErrSyntax
	}
	s := scanner{data: data, fold: o.Fold}
	if err := s.value(0); err != nil {
		return nil, err
	}
	return s.dups, nil
}

// PathText writes a path as root followed by ".key" and "[n]" steps, e.g.
// "request.json.lines[0].iban". Keys are written as they are.
func PathText(p []Step, root string) string {
	var b strings.Builder
	b.WriteString(root)
	for _, st := range p {
		if st.Index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(st.Index))
			b.WriteByte(']')
			continue
		}
		b.WriteByte('.')
		b.WriteString(st.Key)
	}
	return b.String()
}

// FoldKey is the form two keys share when a parser that matches fields
// without regard to case reads them as one: each character's simple
// lower case of its upper case (so "ı" and "İ", which Java's and .NET's
// case-insensitive comparisons take for "i", and "ſ" for "s"), then
// Unicode full case folding and NFC ("ß" and "ss", the Kelvin sign and
// "k"). It errs towards calling keys the same: equal keys are always
// read as one field sent twice. ASCII keys take a fast path with the same
// result.
func FoldKey(k string) string {
	ascii := true
	for i := 0; i < len(k); i++ {
		if k[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(k)
	}
	simple := strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, norm.NFC.String(k))
	return norm.NFC.String(cases.Fold().String(simple))
}

// scanner walks a document json.Valid has accepted. Keys are kept as the
// bytes of the document where they need no unescaping, so a scan
// allocates little beyond the duplicates it reports.
type scanner struct {
	data []byte
	i    int
	fold bool
	path []step
	dups []Duplicate
}

type step struct {
	key   []byte
	index int // -1: a key
}

func (s *scanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) error {
	if depth > MaxDepth {
		return ErrTooDeep
	}
	s.ws()
	if s.i >= len(s.data) {
		return ErrSyntax
	}
	switch s.data[s.i] {
	case '{':
		return s.object(depth)
	case '[':
		s.i++
		s.ws()
		if s.i < len(s.data) && s.data[s.i] == ']' {
			s.i++
			return nil
		}
		for n := 0; ; n++ {
			s.path = append(s.path, step{index: n})
			if err := s.value(depth + 1); err != nil {
				return err
			}
			s.path = s.path[:len(s.path)-1]
			s.ws()
			if s.i >= len(s.data) {
				return ErrSyntax
			}
			c := s.data[s.i]
			s.i++
			if c == ']' {
				return nil
			}
		}
	case '"':
		_, err := s.str()
		return err
	default:
		for s.i < len(s.data) && !strings.ContainsRune(",]} \t\n\r", rune(s.data[s.i])) {
			s.i++
		}
		return nil
	}
}

// smallObject is how many keys an object holds before its keys are kept
// in sets rather than compared one by one.
const smallObject = 16

func (s *scanner) object(depth int) error {
	s.i++ // {
	var keys [][]byte
	var seen, seenFold map[string]bool // for a large object
	for {
		s.ws()
		if s.i >= len(s.data) {
			return ErrSyntax
		}
		switch s.data[s.i] {
		case '}':
			s.i++
			return nil
		case ',':
			s.i++
			continue
		}
		k, err := s.str()
		if err != nil {
			return err
		}
		s.ws()
		s.i++ // :
		s.path = append(s.path, step{key: k, index: -1})
		if err := s.value(depth + 1); err != nil {
			return err
		}
		if seen == nil {
			for _, prev := range keys {
				if bytes.Equal(prev, k) {
					s.dup(false)
					break
				}
				if s.fold && foldEqual(prev, k) {
					s.dup(true)
					break
				}
			}
			keys = append(keys, k)
			if len(keys) > smallObject {
				seen, seenFold = map[string]bool{}, map[string]bool{}
				for _, prev := range keys {
					seen[string(prev)] = true
					if s.fold {
						seenFold[FoldKey(string(prev))] = true
					}
				}
			}
		} else {
			var f string
			if s.fold {
				f = FoldKey(string(k))
			}
			switch {
			case seen[string(k)]:
				s.dup(false)
			case s.fold && seenFold[f]:
				s.dup(true)
			}
			seen[string(k)] = true
			if s.fold {
				seenFold[f] = true
			}
		}
		s.path = s.path[:len(s.path)-1]
	}
}

// foldEqual reports whether two keys are equal after case folding and
// NFC, without allocating for ASCII keys.
func foldEqual(a, b []byte) bool {
	if isASCII(a) && isASCII(b) {
		return bytes.EqualFold(a, b)
	}
	return FoldKey(string(a)) == FoldKey(string(b))
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func (s *scanner) dup(folded bool) {
	p := make([]Step, len(s.path))
	for i, st := range s.path {
		p[i] = Step{Key: string(st.key), Index: st.index}
	}
	s.dups = append(s.dups, Duplicate{Path: p, Folded: folded})
}

// str reads the string at s.i and returns it unescaped (the document's
// own bytes when it has no escape); an escaped lone surrogate is
// ErrSurrogate.
func (s *scanner) str() ([]byte, error) {
	start := s.i
	s.i++ // opening quote
	escaped := false
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '\\':
			escaped = true
			if s.i+1 < len(s.data) && s.data[s.i+1] == 'u' {
				if err := s.unicodeEscape(); err != nil {
					return nil, err
				}
				continue
			}
			s.i += 2
			continue
		case '"':
			s.i++
			raw := s.data[start:s.i]
			if !escaped {
				return raw[1 : len(raw)-1], nil
			}
			var out string
			if err := json.Unmarshal(raw, &out); err != nil {
				return nil, ErrSyntax
			}
			return []byte(out), nil
		}
		s.i++
	}
	return nil, ErrSyntax
}

// unicodeEscape reads \uXXXX (and its low half, for a high surrogate) at
// s.i, refusing a surrogate that is not one half of a pair.
func (s *scanner) unicodeEscape() error {
	r, ok := s.hex4(s.i + 2)
	if !ok {
		return ErrSyntax
	}
	s.i += 6
	switch {
	case utf16.IsSurrogate(r) && r < 0xDC00: // high half: a low half must follow
		if s.i+1 < len(s.data) && s.data[s.i] == '\\' && s.data[s.i+1] == 'u' {
			if lo, ok := s.hex4(s.i + 2); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				s.i += 6
				return nil
			}
		}
		return ErrSurrogate
	case utf16.IsSurrogate(r):
		return ErrSurrogate
	}
	return nil
}

func (s *scanner) hex4(at int) (rune, bool) {
	if at+4 > len(s.data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s.data[at:at+4]), 16, 32)
	return rune(n), err == nil
}
