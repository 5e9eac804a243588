// Package paramnames says which request parameters common servers read as
// one field, so that grounding and scope limits never check one copy of a
// field while the provider reads another.
//
// A form or query name is not read the same way everywhere. Rails, Rack,
// PHP and Express's qs read "payment[iban]" as the field iban inside
// payment, and "iban[]" as a list iban; Spring and ASP.NET model binding
// read "payment.iban" as the same nested field, and bind names without
// regard to case; PHP drops leading spaces and turns "." and " " into "_"
// ("remittance.email" is remittance_email); C servers stop a name at a
// NUL byte. Frameworks that merge query and body parameters (Rails,
// Laravel, PHP's $_REQUEST, Spring's @RequestParam) then read a query name
// and a body field of the same reading as one, and which copy wins
// differs. JSON object keys are read literally by every JSON parser, so a
// key is only itself (keys twice inside the body are strictjson's
// concern).
//
// Clashes takes every top-level name a request sends (query names, form
// names, the JSON body's top-level keys) and reports each pair some
// server reads as one field, or one inside the other: one name's reading
// equal to, or a prefix of, the other's, after Unicode case folding and NFC
// (strictjson.FoldKey) of every step. "filter[a]" and "filter[b]" are two
// fields; "iban" and "iban[]", "payment" (a JSON key) and "payment[iban]"
// (a query name), " iban" and "iban", "payment.iban" and "payment[iban]"
// are one.
package paramnames

import (
	"strings"

	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// Name is one top-level parameter name of a request.
type Name struct {
	Key string
	// Literal marks a JSON object key, which is read only as itself.
	Literal bool
}

// Clash is a pair of indexes into the names given to Clashes, A < B.
type Clash struct{ A, B int }

// Clashes returns every pair of names some common server reads as the
// same field or one inside the other, in order of A then B, each pair
// once. Pairs of two Literal names are not reported.
func Clashes(names []Name) []Clash {
	plain := 0
	for _, n := range names {
		if !n.Literal {
			plain++
		}
	}
	if len(names) < 2 || plain == 0 { // two literal names never clash here
		return nil
	}
	readings := make([][]string, len(names))
	exact := map[string][]int{}
	for i, n := range names {
		readings[i] = Readings(n)
		for _, r := range readings[i] {
			if l := exact[r]; len(l) == 0 || l[len(l)-1] != i {
				exact[r] = append(exact[r], i)
			}
		}
	}
	seen := map[Clash]bool{}
	var out []Clash
	for i, rs := range readings {
		for _, r := range rs {
			// r and each of its prefixes (whole steps): another name read
			// exactly so is the same field or holds this one.
			for p := r; ; {
				for _, j := range exact[p] {
					if j == i || names[i].Literal && names[j].Literal {
						continue
					}
					c := Clash{min(i, j), max(i, j)}
					if !seen[c] {
						seen[c] = true
						out = append(out, c)
					}
				}
				k := strings.LastIndexByte(p, sep)
				if k < 0 {
					break
				}
				p = p[:k]
			}
		}
	}
	sortClashes(out)
	return out
}

func sortClashes(cs []Clash) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && (cs[j].A < cs[j-1].A || cs[j].A == cs[j-1].A && cs[j].B < cs[j-1].B); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// sep joins the steps of a reading; no name holds it after folding
// (it is a control character, which callers' names never carry as a
// step: a NUL ends a name below).
const sep = '\x1f'

// Readings returns the field paths servers read a name as, each step
// folded and joined with an internal separator: for a Literal name the
// key alone; for a form or query name its flat reading, its bracket
// reading (Rails, PHP, qs), its dotted reading (Spring, ASP.NET), PHP's
// mangled reading and its reading up to a NUL byte. A step "" (an append,
// "a[]") ends the reading there, so it holds every field under its parent.
func Readings(n Name) []string {
	if n.Literal {
		return []string{strictjson.FoldKey(n.Key)}
	}
	k := n.Key
	var out []string
	add := func(steps []string) {
		var b strings.Builder
		for i, s := range steps {
			if s == "" {
				if i == 0 {
					return // no field at all
				}
				break
			}
			if i > 0 {
				b.WriteByte(sep)
			}
			b.WriteString(strictjson.FoldKey(strings.ReplaceAll(s, string(sep), "")))
		}
		r := b.String()
		for _, o := range out {
			if o == r {
				return
			}
		}
		out = append(out, r)
	}
	add([]string{k})
	add(brackets(k))
	add(strings.FieldsFunc(k, func(r rune) bool { return r == '.' || r == '[' || r == ']' }))
	add(php(k))
	if i := strings.IndexByte(k, 0); i >= 0 {
		add([]string{k[:i]})
		add(brackets(k[:i]))
	}
	return out
}

// brackets reads "a[b][c]" as a, b, c; "a[]" as a, "" (an append); a
// bracket left open ends the reading.
func brackets(k string) []string {
	root, rest, ok := strings.Cut(k, "[")
	steps := []string{root}
	for ok {
		var part string
		part, rest, ok = strings.Cut(rest, "]")
		if !ok {
			break
		}
		steps = append(steps, part)
		if part == "" {
			break
		}
		rest, ok = strings.CutPrefix(rest, "[")
	}
	return steps
}

// php reads a name as PHP registers it: leading spaces dropped, the name
// ends at a NUL, and in the part before the first "[" every " " and "."
// is "_" (as is a "[" that is never closed).
func php(k string) []string {
	k = strings.TrimLeft(k, " ")
	if i := strings.IndexByte(k, 0); i >= 0 {
		k = k[:i]
	}
	root, rest, open := strings.Cut(k, "[")
	if open && !strings.Contains(rest, "]") {
		root, rest, open = root+"_"+rest, "", false
	}
	root = strings.NewReplacer(" ", "_", ".", "_").Replace(root)
	if !open {
		return []string{root}
	}
	return brackets(root + "[" + rest)
}
