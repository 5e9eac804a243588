package provider

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// Canonical is a provider call in the one form the sink sends it and every
// rule matches it: computed once in Describe, recorded on the Effect, and
// the URL Perform sends is built from it alone. See the package
// documentation for how each part is made.
type Canonical struct {
	Scheme string // "https" or "http"
	// Host is the base URL's host in lower case (an IDN as its A-label),
	// without the port; Port is the port, explicit or the scheme's.
	Host string
	Port int
	// Method is upper case.
	Method string
	// Path is the path as sent, escaped: the base URL's path, then the
	// call's path resolved (see resolvePath).
	Path string
	// Query is the query; RawQuery its encoding as sent (names sorted,
	// values in the order given).
	Query    url.Values
	RawQuery string
	// Operation is the catalogued operation template (as sent) the path
	// was resolved to, "" when it fits none.
	Operation string
}

// Authority is host[:port] as rules and the journal see it: the port only
// when it is not the scheme's default.
func (c *Canonical) Authority() string {
	h := c.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if c.Port == defaultPort(c.Scheme) {
		return h
	}
	return h + ":" + strconv.Itoa(c.Port)
}

// URL is exactly what is sent.
func (c *Canonical) URL() string {
	u := c.Scheme + "://" + c.Authority() + c.Path
	if c.RawQuery != "" {
		u += "?" + c.RawQuery
	}
	return u
}

func defaultPort(scheme string) int {
	if scheme == "https" {
		return 443
	}
	return 80
}

// ErrAmbiguous is wrapped by every *AmbiguousError.
var ErrAmbiguous = errors.New("ambiguous request")

// AmbiguousError says why a request has no one canonical form. Reason is
// a sentence without the value (paths are recorded, bodies never).
type AmbiguousError struct{ Reason string }

func (e *AmbiguousError) Error() string { return ErrAmbiguous.Error() + ": " + e.Reason }
func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }

func ambiguous(format string, args ...any) error {
	return &AmbiguousError{Reason: fmt.Sprintf(format, args...)}
}

// pathSeg is one segment of a path: as sent (escaped) and decoded.
type pathSeg struct {
	enc, dec string
}

// splitPath checks the syntax of a path (malformed: BAD_REQUEST) and
// splits it into decoded segments, refusing what servers read in
// different ways (ambiguous). A missing leading "/" is added. trailing
// reports a final "/".
func splitPath(p string) (segs []pathSeg, trailing bool, err error) {
	if p == "" {
		return nil, false, bad("path is required")
	}
	if len(p) > 2048 || !utf8.ValidString(p) || strings.IndexFunc(p, unicode.IsControl) >= 0 {
		return nil, false, bad("path must be at most 2048 printable UTF-8 bytes")
	}
	if strings.ContainsAny(p, "?#") {
		return nil, false, bad("path may not contain ? or #; give the query in query")
	}
	switch {
	case strings.ContainsRune(p, '\\'):
		return nil, false, ambiguous("the path holds a backslash, which some servers read as /")
	case strings.ContainsRune(p, ';'):
		return nil, false, ambiguous("the path holds a ';', which some servers strip as a path parameter and others keep")
	}
	body := strings.TrimPrefix(p, "/")
	if body == "" {
		return nil, false, nil
	}
	if strings.HasSuffix(body, "/") {
		trailing, body = true, body[:len(body)-1]
	}
	for raw := range strings.SplitSeq(body, "/") {
		s, err := decodeSegment(raw)
		if err != nil {
			return nil, false, err
		}
		segs = append(segs, s)
	}
	return segs, trailing, nil
}

// decodeSegment decodes and re-encodes one segment.
func decodeSegment(raw string) (pathSeg, error) {
	if raw == "" {
		return pathSeg{}, ambiguous("the path has an empty segment (//), which some servers merge and others keep")
	}
	var dec []byte
	if strings.IndexByte(raw, '%') >= 0 {
		dec = make([]byte, 0, len(raw))
		for i := 0; i < len(raw); i++ {
			c := raw[i]
			if c != '%' {
				dec = append(dec, c)
				continue
			}
			if i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2]) {
				return pathSeg{}, ambiguous("the path has a %% that does not start an escape (%%XX)")
			}
			b := unhex(raw[i+1])<<4 | unhex(raw[i+2])
			switch {
			case b == '/' || b == '\\':
				return pathSeg{}, ambiguous("the path has an encoded / or \\ (%%2F, %%5C), which some servers decode into a separator")
			case b == '.':
				return pathSeg{}, ambiguous("the path has an encoded . (%%2E), which some servers decode into a dot segment")
			case b == ';':
				return pathSeg{}, ambiguous("the path has an encoded ; (%%3B), which some servers decode into a path parameter")
			case b == '%':
				return pathSeg{}, ambiguous("the path has an encoded %% (%%25), which servers that decode twice read as another escape")
			case b < 0x20 || b == 0x7f:
				return pathSeg{}, ambiguous("the path has an encoded control character")
			}
			dec = append(dec, b)
			i += 2
		}
	}
	d := raw
	if dec != nil {
		if !utf8.Valid(dec) {
			return pathSeg{}, ambiguous("the path has escapes that are not UTF-8, which servers decode in different ways")
		}
		d = string(dec)
	}
	if d == "." || d == ".." {
		return pathSeg{}, ambiguous("the path has a \".\" or \"..\" segment")
	}
	for _, r := range d {
		if r >= utf8.RuneSelf && unicode.Is(unicode.Cf, r) {
			return pathSeg{}, ambiguous("the path holds an invisible format character (U+%04X), which some servers drop", r)
		}
	}
	if !norm.NFKC.IsNormalString(d) {
		return pathSeg{}, ambiguous("the path holds a character with a compatibility or composed form (fullwidth, a ligature, a decomposed accent), which servers that normalise Unicode read as another path")
	}
	return pathSeg{enc: escapeSegment(d), dec: d}, nil
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// escapeSegment writes a decoded segment the one way it is sent: the
// unreserved characters and $&+,:=@ as they are, every other byte as
// %XX in upper case. It is net/url's own path escaping, so the URL the
// client sends carries exactly these bytes.
func escapeSegment(d string) string {
	n := 0
	for i := 0; i < len(d); i++ {
		if !pathLiteral(d[i]) {
			n++
		}
	}
	if n == 0 {
		return d
	}
	const hexd = "0123456789ABCDEF"
	b := make([]byte, 0, len(d)+2*n)
	for i := 0; i < len(d); i++ {
		c := d[i]
		if pathLiteral(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexd[c>>4], hexd[c&15])
	}
	return string(b)
}

func pathLiteral(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-._~$&+,:=@", c) >= 0
}

// tmplIndex holds the templates of one number of segments: by the folded
// text of a literal first segment, and those whose first segment is a
// placeholder (or that have none), which any path may fit.
type tmplIndex struct {
	byFirst map[string][]*opTemplate
	rest    []*opTemplate
}

func (x *tmplIndex) add(t *opTemplate) {
	if len(t.segs) == 0 || t.segs[0].param {
		x.rest = append(x.rest, t)
		return
	}
	if x.byFirst == nil {
		x.byFirst = map[string][]*opTemplate{}
	}
	x.byFirst[t.segs[0].fold] = append(x.byFirst[t.segs[0].fold], t)
}

// opTemplate is a catalogued operation's template, relative to the base
// path, compiled for resolving paths.
type opTemplate struct {
	text     string // as written in the catalogue
	segs     []tmplSeg
	trailing bool
}

type tmplSeg struct {
	lit   string // as sent; "" for a placeholder
	fold  string // strictjson.FoldKey of the decoded literal
	param bool
}

// resolvePath resolves a call's path (relative to the base URL) against
// the provider's catalogued templates and returns it as sent (relative,
// escaped) with the template it was resolved to. A path that fits a
// template (the same number of segments, a trailing "/" aside; literal
// segments equal, ignoring case unless path_case is sensitive;
// placeholders any segment) takes the template's spelling: its literals
// and its trailing "/"; the most specific template wins (a literal
// before a placeholder, from the left). A path that fits none is sent as
// splitPath decoded and re-encoded it. On a case-sensitive provider a
// path that fits a template only ignoring case is ambiguous.
func (p *Provider) resolvePath(raw string) (rel, tmpl string, err error) {
	segs, trailing, err := splitPath(raw)
	if err != nil {
		return "", "", err
	}
	best, foldOnly := p.fit(segs, nil)
	if best == nil && foldOnly != "" {
		return "", "", ambiguous("the path differs from the operation %s only in case, and provider %s says its paths are case-sensitive", foldOnly, p.Name)
	}
	if best == nil {
		if op := p.fitsCut(segs); op != "" {
			return "", "", ambiguous("the path is the operation %s's with a suffix (a format such as .json, a trailing dot, a decoded ? # : or +), white space, or a segment of only white space or dots, which servers that take format suffixes or trim segments route to that operation", op)
		}
	}
	var b strings.Builder
	b.Grow(len(raw) + 1)
	for i, s := range segs {
		b.WriteByte('/')
		if best != nil && !best.segs[i].param {
			b.WriteString(best.segs[i].lit)
		} else {
			b.WriteString(s.enc)
		}
	}
	switch {
	case best != nil:
		trailing, tmpl = best.trailing, best.text
	}
	if trailing || len(segs) == 0 {
		b.WriteByte('/')
	}
	return b.String(), tmpl, nil
}

// pathAs is full, a whole path as sent through another provider of p's
// server, as p would send it: the part under p's base path (compared
// ignoring case unless p's paths are case-sensitive) resolved against
// p's templates (resolvePath). "" when full is not under p's base path or
// p reads it as no one path.
func (p *Provider) pathAs(full string) string {
	n := len(p.basePath)
	if len(full) < n || full[:n] != p.basePath && (p.PathCase == PathCaseSensitive || !strings.EqualFold(full[:n], p.basePath)) ||
		len(full) > n && full[n] != '/' {
		return ""
	}
	rest := full[n:]
	if rest == "" {
		rest = "/"
	}
	rel, _, err := p.resolvePath(rest)
	if err != nil {
		return ""
	}
	return p.basePath + rel
}

// fit returns the most specific template segs fit, and (on a
// case-sensitive provider) a template they fit only ignoring case.
// folded, when given, holds strictjson.FoldKey of each segment.
func (p *Provider) fit(segs []pathSeg, folded []string) (best *opTemplate, foldOnly string) {
	fold := func(i int) string { // lazily, only when a template has literals to compare
		if folded == nil {
			folded = make([]string, len(segs))
			for j, s := range segs {
				folded[j] = strictjson.FoldKey(s.dec)
			}
		}
		return folded[i]
	}
	idx := p.templates[len(segs)]
	if idx == nil {
		return nil, ""
	}
	cands := idx.rest
	if len(segs) > 0 && len(idx.byFirst) > 0 {
		if first := idx.byFirst[fold(0)]; len(first) > 0 {
			cands = append(first[:len(first):len(first)], idx.rest...)
		}
	}
	for _, t := range cands {
		exact, fits := true, true
		for i, ts := range t.segs {
			if ts.param {
				continue
			}
			if ts.lit == segs[i].enc {
				continue
			}
			exact = false
			if ts.fold != fold(i) {
				fits = false
				break
			}
		}
		if !fits {
			continue
		}
		if !exact && p.PathCase == PathCaseSensitive {
			foldOnly = t.text
			continue
		}
		if best == nil || moreSpecific(t, best) {
			best = t
		}
	}
	return best, foldOnly
}

// Servers route a path on less than what was sent: a format suffix
// (Rails, Spring's suffix patterns) or an NTFS stream name (":") is cut
// off a segment, trailing dots and white space are trimmed (IIS, and
// .NET's Trim takes every Unicode space), a segment trimming leaves
// nothing of is dropped, code that decodes a path as a form reads "+" as
// a space, and a proxy that decodes before it forwards ends the path at a
// decoded "?" or "#". lenientReadings makes those readings of a decoded
// path, every segment read alike, as one server would.
func lenientReadings(segs []pathSeg) [][]pathSeg {
	dotOrSpace := func(r rune) bool { return r == '.' || unicode.IsSpace(r) }
	cutAt := func(r rune) bool { return r == '.' || r == ':' || r == '+' || unicode.IsSpace(r) }
	read := func(segs []pathSeg, cut bool) []pathSeg {
		out := make([]pathSeg, 0, len(segs))
		for _, s := range segs {
			d := strings.TrimRightFunc(strings.TrimFunc(s.dec, unicode.IsSpace), dotOrSpace)
			if cut {
				if j := strings.IndexFunc(d, cutAt); j > 0 {
					d = d[:j]
				}
			}
			if d == "" {
				continue // trimmed away: an empty segment, which servers merge
			}
			out = append(out, pathSeg{dec: d, enc: escapeSegment(d)})
		}
		return out
	}
	var out [][]pathSeg
	for i, s := range segs {
		if j := strings.IndexAny(s.dec, "?#"); j >= 0 {
			q := append(append([]pathSeg(nil), segs[:i]...), pathSeg{dec: s.dec[:j], enc: escapeSegment(s.dec[:j])})
			out = append(out, read(q, false), read(q, true))
			break
		}
	}
	return append(out, read(segs, false), read(segs, true))
}

// fitsCut returns the template a path that fits none fits in a reading of
// lenientReadings, "" when it fits none there either: "/payments.json",
// "/payments%20", "/%20/payments" or "/payments%3F/x" for the template
// /payments.
func (p *Provider) fitsCut(segs []pathSeg) string {
	for _, r := range lenientReadings(segs) {
		best, foldOnly := p.fit(r, nil)
		if best != nil {
			return best.text
		}
		if foldOnly != "" {
			return foldOnly
		}
	}
	return ""
}

// moreSpecific reports whether a has a literal where b has a placeholder
// at the first segment they differ in kind.
func moreSpecific(a, b *opTemplate) bool {
	for i := range a.segs {
		if a.segs[i].param != b.segs[i].param {
			return !a.segs[i].param
		}
	}
	return false
}

// compileTemplate reads a catalogue template ("/invoices/{id}", with an
// optional trailing "/"): every literal segment must be written as it is
// sent (resolved by the same rules as a call's path, so the catalogue
// cannot hold a spelling a call could not have).
func compileTemplate(t string) (*opTemplate, error) {
	if !strings.HasPrefix(t, "/") {
		return nil, errors.New("must start with /")
	}
	if strings.ContainsAny(t, "?#") {
		return nil, errors.New("may not contain ? or #")
	}
	out := &opTemplate{text: t}
	body := t[1:]
	if body == "" {
		return out, nil
	}
	if strings.HasSuffix(body, "/") {
		out.trailing, body = true, body[:len(body)-1]
	}
	seen := map[string]bool{}
	for seg := range strings.SplitSeq(body, "/") {
		if len(seg) >= 2 && seg[0] == '{' && seg[len(seg)-1] == '}' {
			name := seg[1 : len(seg)-1]
			if checkIdent(name) != nil || seen[name] {
				return nil, fmt.Errorf("placeholder %q must be a unique name of letters, digits, '.', '_' or '-'", seg)
			}
			seen[name] = true
			out.segs = append(out.segs, tmplSeg{param: true})
			continue
		}
		if strings.ContainsAny(seg, "{}") {
			return nil, fmt.Errorf("segment %q: a placeholder is a whole segment, {name}", seg)
		}
		if strings.ContainsAny(seg, ";\\") {
			return nil, fmt.Errorf("segment %q holds a ';' or a backslash, which servers read in different ways", seg)
		}
		s, err := decodeSegment(seg)
		if err != nil {
			return nil, fmt.Errorf("segment %q: %v", seg, err)
		}
		if s.enc != seg {
			return nil, fmt.Errorf("segment %q is not written as it is sent (write %q)", seg, s.enc)
		}
		out.segs = append(out.segs, tmplSeg{lit: s.enc, fold: strictjson.FoldKey(s.dec)})
	}
	return out, nil
}

// shape is a template's segments with placeholders blanked and literals
// folded (or not, on a case-sensitive provider): two templates of one
// shape would resolve the same paths.
func (t *opTemplate) shape(caseSensitive bool) string {
	var b strings.Builder
	for _, s := range t.segs {
		b.WriteByte('/')
		switch {
		case s.param:
			b.WriteString("{}")
		case caseSensitive:
			b.WriteString(s.lit)
		default:
			b.WriteString(s.fold)
		}
	}
	return b.String()
}
