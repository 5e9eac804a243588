// Package reveal shows strings that came from agents, providers or any
// other party a reader must not have to trust, so that what a person reads
// is what the string holds. It is the one display rule of the dashboard's
// pages and of the CLI's human output (approve list and show, evidence,
// effect): both call it on every such string.
//
// What it does:
//   - Characters that change how text looks without being seen are shown
//     by code point, as ⟨U+202E⟩: C0 and C1 controls (ESC too, so no
//     terminal escape sequence reaches a terminal), bidirectional
//     embeddings, overrides, isolates and marks, zero-width and other
//     format characters (Unicode Cf), line and paragraph separators,
//     variation selectors, tag characters, non-characters and the
//     byte-order mark. Bytes that are not UTF-8 are shown as ⟨0xFF⟩.
//   - Line keeps a value on one line (newline and tab are shown as
//     ⟨U+000A⟩, ⟨U+0009⟩); Block keeps newlines and tabs.
//   - Notes says what was made visible, and whether one word mixes scripts
//     (Latin with Cyrillic or Greek letters, as in a spoofed "pаypal"), so
//     a page can flag the value.
//   - JSON pretty-prints a JSON object or array with two-space indents and
//     keys in byte order, numbers exactly as written, and reports a key
//     that occurs twice in one object (a reader sees one, a program may
//     use the other).
//   - Fold splits a long value into what is shown at once and the rest,
//     for a page to offer behind "show all".
//
// Nothing is removed: every character of the input is either shown as it
// is or by its code point, so the shown form never reads as a different
// value and always says how long the real one is.
package reveal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// hidden reports whether r must be shown by code point. keepLines leaves
// '\n' and '\t' as they are.
func hidden(r rune, keepLines bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return !keepLines
	case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f: // C0, DEL, C1
		return true
	case r == 0x2028 || r == 0x2029: // line and paragraph separators
		return true
	case r >= 0xfe00 && r <= 0xfe0f, r >= 0xe0100 && r <= 0xe01ef: // variation selectors
		return true
	case r >= 0xe0000 && r <= 0xe007f: // tags
		return true
	case r >= 0xfdd0 && r <= 0xfdef, r&0xfffe == 0xfffe: // non-characters
		return true
	case r == 0x115f || r == 0x1160 || r == 0x3164 || r == 0xffa0: // Hangul fillers (blank)
		return true
	case r == 0x034f || r == 0x17b4 || r == 0x17b5 || r == 0x180b || r == 0x180c || r == 0x180d || r == 0x180e: // invisible marks
		return true
	case r == 0x2800: // braille blank
		return true
	case unicode.Is(unicode.Cf, r): // format: bidi controls, zero-width, soft hyphen, BOM, ...
		return true
	case unicode.Is(unicode.Co, r): // private use: renders as anything a font likes
		return true
	case unicode.IsSpace(r) && r != ' ': // NBSP and other spaces that look like ' '
		return true
	}
	return false
}

func write(b *strings.Builder, s string, keepLines bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f { // printable ASCII: as it is
			b.WriteByte(c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString("⟨0x")
			hexTo(b, uint32(c), 2)
			b.WriteString("⟩")
		case hidden(r, keepLines):
			b.WriteString("⟨U+")
			hexTo(b, uint32(r), 4)
			b.WriteString("⟩")
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
}

// hexTo writes v in upper-case hex, at least width digits.
func hexTo(b *strings.Builder, v uint32, width int) {
	var buf [8]byte
	i := len(buf)
	for v > 0 || len(buf)-i < width {
		i--
		buf[i] = "0123456789ABCDEF"[v&0xf]
		v >>= 4
	}
	b.Write(buf[i:])
}

// Clean reports whether s needs nothing made visible on one line (Line(s)
// == s) and does not mix scripts within a word.
func Clean(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || hidden(r, false) {
			return false
		}
	}
	return !MixedScripts(s)
}

// Line is s for one line: every hidden character, newline and tab
// included, by its code point.
func Line(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	write(&b, s, false)
	return b.String()
}

// Block is s for a block of text: newlines and tabs kept, every other
// hidden character by its code point.
func Block(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 16)
	write(&b, s, true)
	return b.String()
}

// isPlain: printable ASCII only, the common case, needs no work.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// Short is Line(s) cut to at most max characters of the shown form, with
// "…" at the end when cut.
func Short(s string, max int) string {
	l := Line(s)
	if max <= 1 || utf8.RuneCountInString(l) <= max {
		return l
	}
	return string([]rune(l)[:max-1]) + "…"
}

// Notes lists what Line made visible in s (each kind once, with the first
// code point of that kind) and a mixed-script word; nil when s is clean.
func Notes(s string) []string {
	var out []string
	seen := map[string]bool{}
	note := func(kind string, r rune) {
		if !seen[kind] {
			seen[kind] = true
			out = append(out, fmt.Sprintf("%s (U+%04X)", kind, r))
		}
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == utf8.RuneError && n == 1:
			if !seen["bytes"] {
				seen["bytes"] = true
				out = append(out, "bytes that are not UTF-8")
			}
		case r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c:
			note("bidirectional control", r)
		case r == 0x200b || r == 0x200c || r == 0x200d || r == 0x2060 || r == 0xfeff:
			note("zero-width character", r)
		case r == '\n' || r == '\r' || r == 0x2028 || r == 0x2029:
			note("line break", r)
		case r == 0x1b:
			note("terminal escape", r)
		case hidden(r, false):
			note("invisible or control character", r)
		}
	}
	if MixedScripts(s) {
		out = append(out, "a word mixes Latin with Cyrillic or Greek letters")
	}
	return out
}

// MixedScripts reports whether one word of s (letters and digits between
// other characters) has Latin letters and Cyrillic or Greek ones.
func MixedScripts(s string) bool {
	latin, other := false, false
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			latin, other = false, false
			continue
		}
		switch {
		case unicode.Is(unicode.Latin, r):
			latin = true
		case unicode.Is(unicode.Cyrillic, r) || unicode.Is(unicode.Greek, r):
			other = true
		}
		if latin && other {
			return true
		}
	}
	return false
}

// Fold splits the shown form sh into the first lines (at most maxLines
// lines and maxChars characters) and the rest ("" when it all fits).
func Fold(sh string, maxLines, maxChars int) (head, rest string) {
	n, lines := 0, 1
	for i, r := range sh {
		if n >= maxChars || r == '\n' && lines >= maxLines {
			return sh[:i], sh[i:]
		}
		if r == '\n' {
			lines++
		}
		n++
	}
	return sh, ""
}

// JSON pretty-prints raw when it is a JSON object or array: two-space
// indents, keys in byte order, numbers as written, then Block over the
// text, so a string holding a bidi override shows it by code point. dup
// names a key that occurs twice in one object (""), and ok is false when
// raw is not an object or array (show it with Line instead).
func JSON(raw []byte) (pretty string, dup string, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' && raw[0] != '[' || !json.Valid(raw) {
		return "", "", false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	p := printer{dec: dec, b: &b}
	if err := p.value(0); err != nil {
		return "", "", false
	}
	return Block(b.String()), p.dup, true
}

type printer struct {
	dec *json.Decoder
	b   *strings.Builder
	dup string
}

// member is one key and its printed value, for sorting.
type member struct{ key, val string }

func (p *printer) value(depth int) error {
	tok, err := p.dec.Token()
	if err != nil {
		return err
	}
	return p.tokenValue(tok, depth)
}

func (p *printer) tokenValue(tok json.Token, depth int) error {
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return p.object(depth)
		case '[':
			return p.array(depth)
		}
		return fmt.Errorf("reveal: unexpected %v", t)
	case string:
		p.b.WriteString(quote(t))
	case json.Number:
		p.b.WriteString(t.String())
	case bool:
		p.b.WriteString(strconv.FormatBool(t))
	case nil:
		p.b.WriteString("null")
	}
	return nil
}

func (p *printer) object(depth int) error {
	var ms []member
	keys := map[string]bool{}
	for p.dec.More() {
		kt, err := p.dec.Token()
		if err != nil {
			return err
		}
		k, _ := kt.(string)
		if keys[k] && p.dup == "" {
			p.dup = k
		}
		keys[k] = true
		sub := printer{dec: p.dec, b: &strings.Builder{}}
		if err := sub.value(depth + 1); err != nil {
			return err
		}
		if p.dup == "" {
			p.dup = sub.dup
		}
		ms = append(ms, member{k, sub.b.String()})
	}
	if _, err := p.dec.Token(); err != nil { // '}'
		return err
	}
	if len(ms) == 0 {
		p.b.WriteString("{}")
		return nil
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].key < ms[j].key })
	p.b.WriteString("{\n")
	for i, m := range ms {
		indent(p.b, depth+1)
		p.b.WriteString(quote(m.key) + ": " + m.val)
		if i < len(ms)-1 {
			p.b.WriteByte(',')
		}
		p.b.WriteByte('\n')
	}
	indent(p.b, depth)
	p.b.WriteByte('}')
	return nil
}

func (p *printer) array(depth int) error {
	var items []string
	for p.dec.More() {
		sub := printer{dec: p.dec, b: &strings.Builder{}}
		if err := sub.value(depth + 1); err != nil {
			return err
		}
		if p.dup == "" {
			p.dup = sub.dup
		}
		items = append(items, sub.b.String())
	}
	if _, err := p.dec.Token(); err != nil { // ']'
		return err
	}
	if len(items) == 0 {
		p.b.WriteString("[]")
		return nil
	}
	p.b.WriteString("[\n")
	for i, it := range items {
		indent(p.b, depth+1)
		p.b.WriteString(it)
		if i < len(items)-1 {
			p.b.WriteByte(',')
		}
		p.b.WriteByte('\n')
	}
	indent(p.b, depth)
	p.b.WriteByte(']')
	return nil
}

func indent(b *strings.Builder, depth int) {
	for range depth {
		b.WriteString("  ")
	}
}

// quote is a JSON string literal of s without HTML escaping; characters
// Block would reveal stay raw here and are revealed with the rest.
func quote(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// Value is how a page or the CLI shows one argument's value (canonical
// JSON, as approval.Argument holds it): a JSON string as its text (Line),
// an object or array pretty-printed (JSON), anything else as written.
// Kind is "string", "json" or "other".
func Value(v string) (shown, kind, dup string) {
	var s string
	if strings.HasPrefix(v, `"`) && json.Unmarshal([]byte(v), &s) == nil {
		return Block(s), "string", ""
	}
	if p, d, ok := JSON([]byte(v)); ok {
		return p, "json", d
	}
	return Line(v), "other", ""
}

// Fprint writes Line(s) to w: for CLI output of one field.
func Fprint(w io.Writer, s string) { _, _ = io.WriteString(w, Line(s)) }
