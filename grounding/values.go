package grounding

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"
)

// Kinds of comparison a requirement names with "as".
const (
	KindIBAN   = "iban"
	KindMoney  = "money"
	KindNumber = "number"
	KindEmail  = "email"
	KindText   = "text"
	KindID     = "id"
	KindExact  = "exact"
)

// Errors returned by Compare and AtMost, wrapped with what was wrong but
// never with the value itself.
var (
	// ErrUnknownKind: the kind is not one Compare (or AtMost) knows.
	ErrUnknownKind = errors.New("unknown comparison")
	// ErrInvalidValue: a value cannot be read as the kind asked for (an
	// IBAN whose check digits fail, a float, an email without a domain).
	ErrInvalidValue = errors.New("value cannot be read")
)

// Longest value text the parsers look at; anything longer is invalid. An
// IBAN is at most 34 characters, an email address at most 254.
const (
	maxDecimalLen = 100
	maxEmailLen   = 254
)

// Compare reports whether sent and recorded are the same value of kind.
//
// Values are what a JSON decoder with UseNumber produces (string,
// json.Number, bool, nil, map[string]any, []any) or Go integers; a float64
// or float32 is refused for every kind, since a float has already lost the
// exact value. The kinds:
//
//   - iban: strings in ISO 13616 form. ASCII spaces are removed and letters
//     upper-cased; both sides must then have valid check digits (mod 97),
//     else ErrInvalidValue. Equal when the normalised forms are equal.
//   - money, number: exact decimals, compared by value ("100.0" equals
//     "100.00"). A JSON number or a string; money is plain decimal notation
//     ("-12.50"), number also takes an exponent ("1.5e3", at most 4 digits).
//   - email: one "@"; the local part (NFC, no control, format or special
//     character) is compared byte for byte; the domain must be exactly
//     what IDNA's strict lookup profile makes of it but for ASCII case
//     (each label as its U-label or its A-label), and is compared as its
//     A-label. A domain the mapping would change (a zero-width space or
//     soft hyphen it drops, a fullwidth or upper-case non-ASCII letter it
//     maps), with a deviation character (ß, ς, ZWJ, ZWNJ) or a trailing
//     dot is ErrInvalidValue: the address sent would not be the address
//     compared.
//   - text: strings compared exactly after NFC normalisation, never folded
//     for case or lookalike letters.
//   - id: a non-empty string or a JSON number, compared as exact text (so
//     the number 7 and the string "7" are the same id, 7.0 is not 7).
//   - exact: JSON values of the same type and value; numbers as written.
//
// An error wraps ErrUnknownKind or ErrInvalidValue and never contains
// either value.
func Compare(kind string, sent, recorded any) (equal bool, err error) {
	switch kind {
	case KindIBAN, KindEmail, KindText, KindID:
		a, err := canonical(kind, sent)
		if err != nil {
			return false, err
		}
		b, err := canonical(kind, recorded)
		if err != nil {
			return false, err
		}
		return a == b, nil
	case KindMoney, KindNumber:
		a, err := decimalOf(kind, sent)
		if err != nil {
			return false, err
		}
		b, err := decimalOf(kind, recorded)
		if err != nil {
			return false, err
		}
		return a.Cmp(b) == 0, nil
	case KindExact:
		if err := exactReadable(sent); err != nil {
			return false, err
		}
		if err := exactReadable(recorded); err != nil {
			return false, err
		}
		return exactEqual(sent, recorded), nil
	}
	return false, fmt.Errorf("grounding: %w %q (kinds are iban, money, number, email, text, id and exact)", ErrUnknownKind, kind)
}

// AtMost reports whether sent is no more than limit, both exact decimals
// of kind money or number (read as Compare reads them). Any other kind
// is ErrUnknownKind.
func AtMost(kind string, sent, limit any) (ok bool, err error) {
	c, err := compareDecimals("at_most", kind, sent, limit)
	return c <= 0 && err == nil, err
}

// AtLeast reports whether sent is no less than limit, both exact
// decimals of kind money or number (read as Compare reads them). Any other
// kind is ErrUnknownKind.
func AtLeast(kind string, sent, limit any) (ok bool, err error) {
	c, err := compareDecimals("at_least", kind, sent, limit)
	return c >= 0 && err == nil, err
}

// compareDecimals compares two money or number values: -1, 0 or 1.
func compareDecimals(rel, kind string, a, b any) (int, error) {
	if kind != KindMoney && kind != KindNumber {
		return 0, fmt.Errorf("grounding: %w %q for %s (it takes money or number)", ErrUnknownKind, kind, rel)
	}
	x, err := decimalOf(kind, a)
	if err != nil {
		return 0, err
	}
	y, err := decimalOf(kind, b)
	if err != nil {
		return 0, err
	}
	return x.Cmp(y), nil
}

// decimalText is the text a money or number value was written as ("" for
// a value decimalOf cannot read).
func decimalText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return string(x)
	}
	t, _ := intText(v)
	return t
}

func invalid(kind, why string) error {
	return fmt.Errorf("grounding: %w as %s: %s", ErrInvalidValue, kind, why)
}

// canonical returns the form of v that equal values of kind share: for
// iban, email, text and id.
func canonical(kind string, v any) (string, error) {
	switch kind {
	case KindIBAN:
		s, ok := v.(string)
		if !ok {
			return "", invalid(kind, "not a string")
		}
		return normalIBAN(s)
	case KindEmail:
		s, ok := v.(string)
		if !ok {
			return "", invalid(kind, "not a string")
		}
		return normalEmail(s)
	case KindText:
		s, ok := v.(string)
		if !ok {
			return "", invalid(kind, "not a string")
		}
		if !utf8.ValidString(s) {
			return "", invalid(kind, "not valid UTF-8")
		}
		return norm.NFC.String(s), nil
	case KindID:
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case json.Number:
			s = string(x)
		default:
			n, ok := intText(v)
			if !ok {
				return "", invalid(kind, "not a string or a JSON number")
			}
			s = n
		}
		if s == "" {
			return "", invalid(kind, "empty")
		}
		return s, nil
	}
	return "", fmt.Errorf("grounding: %w %q", ErrUnknownKind, kind)
}

// intText formats Go integer types; ok is false for anything else.
func intText(v any) (string, bool) {
	switch x := v.(type) {
	case int:
		return strconv.FormatInt(int64(x), 10), true
	case int8:
		return strconv.FormatInt(int64(x), 10), true
	case int16:
		return strconv.FormatInt(int64(x), 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint:
		return strconv.FormatUint(uint64(x), 10), true
	case uint8:
		return strconv.FormatUint(uint64(x), 10), true
	case uint16:
		return strconv.FormatUint(uint64(x), 10), true
	case uint32:
		return strconv.FormatUint(uint64(x), 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	}
	return "", false
}

// normalIBAN returns the electronic form of an IBAN (no spaces, upper
// case) after checking its shape and check digits. The registry's length
// for each country is not checked.
func normalIBAN(s string) (string, error) {
	if len(s) > 64 {
		return "", invalid(KindIBAN, "too long")
	}
	b := make([]byte, 0, 34)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ':
			continue
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			return "", invalid(KindIBAN, "only letters, digits and spaces may appear")
		}
		b = append(b, c)
	}
	if len(b) < 15 || len(b) > 34 {
		return "", invalid(KindIBAN, "an IBAN has 15 to 34 characters")
	}
	if !isUpper(b[0]) || !isUpper(b[1]) || !isDigit(b[2]) || !isDigit(b[3]) {
		return "", invalid(KindIBAN, "an IBAN starts with a country code and two check digits")
	}
	if cd := string(b[2:4]); cd == "00" || cd == "01" || cd == "99" {
		return "", invalid(KindIBAN, "check digits 00, 01 and 99 are never issued")
	}
	if ibanMod97(b) != 1 {
		return "", invalid(KindIBAN, "the check digits do not match")
	}
	return string(b), nil
}

// ibanMod97 computes the ISO 7064 MOD 97-10 remainder of an IBAN in
// electronic form: the first four characters moved to the end, letters as
// 10..35.
func ibanMod97(b []byte) int {
	r := 0
	add := func(c byte) {
		if isDigit(c) {
			r = (r*10 + int(c-'0')) % 97
		} else {
			r = (r*100 + int(c-'A') + 10) % 97
		}
	}
	for _, c := range b[4:] {
		add(c)
	}
	for _, c := range b[:4] {
		add(c)
	}
	return r
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// emailProfile is IDNA's lookup profile (UTS 46 non-transitional
// mapping, RFC 5891 section 5) made strict: STD3 rules, hyphen and joiner
// checks, the Bidi rule and DNS lengths.
var emailProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.ValidateLabels(true),
	idna.StrictDomainName(true),
	idna.VerifyDNSLength(true),
	idna.CheckHyphens(true),
	idna.CheckJoiners(true),
	idna.Transitional(false),
)

// normalEmail returns local@domain with the domain as its lower-case
// A-label form, after checking that the address is exactly what will be
// compared: the domain as written is already what the IDNA lookup
// mapping makes of it, label by label (written as its U-label or its
// A-label), but for ASCII letter case. Anything the mapping would drop or
// change (a zero-width space or a soft hyphen it removes, a fullwidth
// letter or an upper-case non-ASCII letter it maps) makes the address
// invalid rather than equal to the one it maps to, as do the deviation
// characters (ß, final sigma, ZWJ, ZWNJ), which transitional and
// non-transitional resolvers read differently, and a trailing dot.
func normalEmail(s string) (string, error) {
	if len(s) > maxEmailLen || !utf8.ValidString(s) {
		return "", invalid(KindEmail, "too long or not valid UTF-8")
	}
	at := strings.IndexByte(s, '@')
	if at < 0 || strings.IndexByte(s[at+1:], '@') >= 0 {
		return "", invalid(KindEmail, "an address has exactly one @")
	}
	local, domain := s[:at], s[at+1:]
	if local == "" || len(local) > 64 {
		return "", invalid(KindEmail, "the local part is empty or longer than 64 bytes")
	}
	for _, r := range local {
		if r <= ' ' || r == 0x7f || strings.ContainsRune(`"(),:;<>[\]`, r) || unicode.Is(unicode.Cf, r) {
			return "", invalid(KindEmail, "the local part holds a space, a control, format or special character")
		}
	}
	if !norm.NFC.IsNormalString(local) {
		return "", invalid(KindEmail, "the local part is not in Unicode NFC")
	}
	ascii, err := stableDomain(domain)
	if err != nil {
		return "", err
	}
	return local + "@" + ascii, nil
}

// stableDomain returns the A-label form of a domain that the strict
// lookup profile leaves as written (see normalEmail), else an error.
func stableDomain(domain string) (string, error) {
	if domain == "" {
		return "", invalid(KindEmail, "no domain")
	}
	if strings.ContainsAny(domain, "\u00df\u03c2\u200c\u200d") {
		return "", invalid(KindEmail, "the domain holds a deviation character (\u00df, \u03c2, ZWJ or ZWNJ), which resolvers read in two ways")
	}
	lower := asciiLower(domain)
	ascii, err := emailProfile.ToASCII(lower)
	if err != nil || ascii == "" || strings.HasSuffix(domain, ".") {
		return "", invalid(KindEmail, "the domain is not a valid internationalised domain name")
	}
	written, mapped := strings.Split(lower, "."), strings.Split(ascii, ".")
	if len(written) != len(mapped) {
		return "", invalid(KindEmail, "the domain's labels change under IDNA mapping")
	}
	for i, w := range written {
		if w == mapped[i] {
			continue // ASCII, or the A-label as written
		}
		u, err := emailProfile.ToUnicode(mapped[i])
		if err != nil || u != w {
			return "", invalid(KindEmail, "the domain holds a character IDNA mapping drops or changes, so the address sent is not the address compared")
		}
	}
	return ascii, nil
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// decimalOf reads v as an exact decimal of kind money or number.
func decimalOf(kind string, v any) (*apd.Decimal, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = string(x)
	case float64, float32:
		return nil, invalid(kind, "a floating-point value is not exact; decode JSON with UseNumber")
	default:
		t, ok := intText(v)
		if !ok {
			return nil, invalid(kind, "not a number or a string holding one")
		}
		s = t
	}
	if !decimalSyntax(s, kind == KindNumber) {
		if kind == KindMoney {
			return nil, invalid(kind, "not plain decimal notation (write e.g. 1250.00)")
		}
		return nil, invalid(kind, "not a decimal number")
	}
	d, _, err := apd.NewFromString(s)
	if err != nil {
		return nil, invalid(kind, "not a decimal number")
	}
	return d, nil
}

// decimalSyntax accepts an optional minus, digits, an optional fraction
// of at least one digit, and (when exp) an exponent of at most four
// digits: "12", "-0.50", "1.5e3". No plus sign, no bare ".5" or "5.", no
// Inf or NaN, nothing longer than maxDecimalLen.
func decimalSyntax(s string, exp bool) bool {
	if len(s) == 0 || len(s) > maxDecimalLen {
		return false
	}
	i := 0
	if s[0] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && isDigit(s[i]) {
			i++
			n++
		}
		return n
	}
	if digits() == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if exp && i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if n := digits(); n == 0 || n > 4 {
			return false
		}
	}
	return i == len(s)
}

// exactReadable refuses what exact cannot compare exactly: floats and Go
// types a JSON decoder does not produce.
func exactReadable(v any) error {
	switch x := v.(type) {
	case nil, bool, string, json.Number:
		return nil
	case float64, float32:
		return invalid(KindExact, "a floating-point value is not exact; decode JSON with UseNumber")
	case []any:
		for _, e := range x {
			if err := exactReadable(e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for _, e := range x {
			if err := exactReadable(e); err != nil {
				return err
			}
		}
		return nil
	}
	if _, ok := intText(v); ok {
		return nil
	}
	return invalid(KindExact, "not a JSON value")
}

// exactEqual is JSON value equality: numbers by their text (Go integers
// as their decimal text), objects by key set and values, arrays in order.
func exactEqual(a, b any) bool {
	if na, ok := numberText(a); ok {
		nb, ok := numberText(b)
		return ok && na == nb
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !exactEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !exactEqual(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

func numberText(v any) (string, bool) {
	if n, ok := v.(json.Number); ok {
		return string(n), true
	}
	return intText(v)
}

// inputValue turns a value from Input.Caller into what a JSON decoder with
// UseNumber would have produced. A float64 that holds a whole number
// within ±2^53 becomes that integer; any other float, and any type JSON
// has no form for, is not readable (ok false).
func inputValue(v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool, string, json.Number, map[string]any, []any:
		return v, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) <= 1<<53 {
			return json.Number(strconv.FormatInt(int64(x), 10)), true
		}
		return nil, false
	case float32:
		return inputValue(float64(x))
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, true
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, s := range x {
			out[k] = s
		}
		return out, true
	}
	if t, ok := intText(v); ok {
		return json.Number(t), true
	}
	return nil, false
}
