package contract

import (
	"strconv"
	"strings"
)

// value is what the reader knows of a Python value at one point of the
// program: an over-approximation of every value it can have there. nil is
// no value at all (the point cannot be reached).
//
// The kinds, from least to most known:
//
//	top      anything, including functions; calling it is unverified
//	data     plain run-time data (text, numbers, JSON, stdlib value objects):
//	         never a function, a module or the gateway; calling it is unverified
//	strv     a string: literal text with holes for what is computed at run time
//	cnst     a known number, bool, None, bytes
//	tuple    a tuple of known length; seq one of unknown length
//	ref      a list, dict, set or instance on the abstract heap
//	fn, bound, builtin, module, class, partial, gen: things that can be called
//	union    one of a few of the above
type value interface{ kind() string }

type (
	top  struct{}
	data struct{ hint string }
	strv struct{ parts []part }
	cnst struct {
		k    byte // 'i' int, 'f' float, 'b' bool, 'n' None, 'y' bytes, 'e' Ellipsis, 'c' complex
		text string
		i    int64
		iok  bool // text is an int that fits i
	}
	tuple struct{ items []value }
	seq   struct{ elem value } // a tuple of unknown length
	ref   struct{ o *object }
	fn    struct {
		def        *Node // FunctionDef or Lambda
		closure    *frame
		defaults   []value
		kwDefaults map[string]value
		name       string
		cls        *classInfo // the class a method was defined in (for super())
		isStatic   bool
		isClass    bool
		isProperty bool
		setter     *fn // a property's setter
	}
	bound struct {
		f    value // fn
		self value
	}
	builtin struct {
		name string
		self value // the receiver of a method, nil for a function
		arg  value // what a factory captured (functools.wraps, contextmanager)
	}
	module  struct{ name string }
	class   struct{ c *classInfo }
	partial struct {
		f    value
		args []value
		kw   map[string]value
	}
	gen struct { // a generator: a function and its frame, the arguments bound; or a generator expression
		f     *fn
		fr    *frame
		comp  *Node // GeneratorExp
		first value // its first iterable, evaluated where it was made
	}
	union struct{ alts []value }
)

func (top) kind() string     { return "top" }
func (data) kind() string    { return "data" }
func (strv) kind() string    { return "str" }
func (cnst) kind() string    { return "const" }
func (tuple) kind() string   { return "tuple" }
func (seq) kind() string     { return "seq" }
func (ref) kind() string     { return "ref" }
func (*fn) kind() string     { return "function" }
func (bound) kind() string   { return "method" }
func (builtin) kind() string { return "builtin" }
func (module) kind() string  { return "module" }
func (class) kind() string   { return "class" }
func (partial) kind() string { return "partial" }
func (gen) kind() string     { return "generator" }
func (union) kind() string   { return "union" }

// part is one piece of a string: literal text, or a hole for text known
// only at run time. A span hole stands for any text, possibly many path
// segments (a string built in a loop, a join of run-time parts); any
// other hole stands for one value formatted in.
type part struct {
	lit  string
	hole bool
	span bool
	hint string // a name for the hole, from the expression it came from
}

var (
	noneV  = cnst{k: 'n', text: "None"}
	trueV  = cnst{k: 'b', text: "true"}
	falseV = cnst{k: 'b', text: "false"}
)

func boolV(b bool) value {
	if b {
		return trueV
	}
	return falseV
}

func intV(i int64) cnst { return cnst{k: 'i', text: strconv.FormatInt(i, 10), i: i, iok: true} }

func lit(s string) strv { return strv{parts: []part{{lit: s}}} }

// hole is a string of one value formatted in.
func hole(hint string) strv { return strv{parts: []part{{hole: true, hint: hint}}} }

// span is a string the reader cannot bound.
func span(hint string) strv { return strv{parts: []part{{hole: true, span: true, hint: hint}}} }

// known returns the string's text when it has no hole.
func (s strv) known() (string, bool) {
	var b strings.Builder
	for _, p := range s.parts {
		if p.hole {
			return "", false
		}
		b.WriteString(p.lit)
	}
	return b.String(), true
}

func (s strv) hasSpan() bool {
	for _, p := range s.parts {
		if p.span {
			return true
		}
	}
	return false
}

// concat joins strings: adjacent literals merge, and a string with a span
// is a span (it already stands for any text).
func concat(ss ...strv) strv {
	var out []part
	for _, s := range ss {
		for _, p := range s.parts {
			if p.span {
				return span(p.hint)
			}
			if !p.hole && p.lit == "" {
				continue
			}
			if n := len(out); n > 0 && !p.hole && !out[n-1].hole {
				out[n-1].lit += p.lit
				continue
			}
			out = append(out, p)
		}
	}
	if out == nil {
		out = []part{{lit: ""}}
	}
	return strv{parts: out}
}

// mapLiterals applies f to the literal text of s (upper, lower: what
// changes each character alone).
func (s strv) mapLiterals(f func(string) string) strv {
	out := make([]part, len(s.parts))
	for i, p := range s.parts {
		out[i] = p
		if !p.hole {
			out[i].lit = f(p.lit)
		}
	}
	return strv{parts: out}
}

// truthy reports what is known of v's truth: 1 true, 0 false, -1 unknown.
func truthy(v value) int {
	switch v := v.(type) {
	case cnst:
		switch v.k {
		case 'n':
			return 0
		case 'b':
			if v.text == "true" {
				return 1
			}
			return 0
		case 'i':
			if v.iok {
				if v.i == 0 {
					return 0
				}
				return 1
			}
		case 'y':
			if v.text == "" {
				return 0
			}
			return 1
		case 'e':
			return 1
		}
		return -1
	case strv:
		if t, ok := v.known(); ok {
			if t == "" {
				return 0
			}
			return 1
		}
		for _, p := range v.parts {
			if !p.hole && p.lit != "" {
				return 1
			}
		}
		return -1
	case tuple:
		if len(v.items) == 0 {
			return 0
		}
		return 1
	case *fn, bound, builtin, module, class, partial, gen:
		return 1
	case union:
		t := truthy(v.alts[0])
		for _, a := range v.alts[1:] {
			if truthy(a) != t {
				return -1
			}
		}
		return t
	}
	return -1
}

// maxUnion bounds the alternatives a union keeps; past it strings become
// run-time text and anything else top.
const maxUnion = 48

// join is the least value covering both a and b (within the bounds).
func join(a, b value) value {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	if _, ok := a.(top); ok {
		return a
	}
	if _, ok := b.(top); ok {
		return b
	}
	var alts []value
	add := func(v value) {
		for i, x := range alts {
			if same(x, v) {
				alts[i] = v // the later of two equal values: a closure of this pass's frame
				return
			}
			if dx, ok := x.(data); ok {
				if dv, ok := v.(data); ok {
					if dv.hint < dx.hint {
						alts[i] = dv
					}
					return
				}
			}
		}
		alts = append(alts, v)
	}
	for _, v := range []value{a, b} {
		if u, ok := v.(union); ok {
			for _, x := range u.alts {
				add(x)
			}
		} else {
			add(v)
		}
	}
	if len(alts) == 1 {
		return alts[0]
	}
	if len(alts) > maxUnion {
		return widenAll(alts)
	}
	return union{alts: alts}
}

// widenAll is what a union too large becomes.
func widenAll(alts []value) value {
	for _, a := range alts {
		switch a.(type) {
		case strv, data, cnst:
		default:
			return top{}
		}
	}
	return data{hint: "value"}
}

func joinAll(vs []value) value {
	var out value
	for _, v := range vs {
		out = join(out, v)
	}
	return out
}

// alts returns v's alternatives (v itself when it is not a union).
func alts(v value) []value {
	switch v := v.(type) {
	case nil:
		return nil
	case union:
		return v.alts
	}
	return []value{v}
}

// same reports whether a and b are the same abstract value.
func same(a, b value) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case top:
		_, ok := b.(top)
		return ok
	case data:
		bb, ok := b.(data)
		return ok && a.hint == bb.hint
	case strv:
		bb, ok := b.(strv)
		if !ok || len(a.parts) != len(bb.parts) {
			return false
		}
		for i := range a.parts {
			if a.parts[i] != bb.parts[i] {
				return false
			}
		}
		return true
	case cnst:
		bb, ok := b.(cnst)
		return ok && a.k == bb.k && a.text == bb.text
	case tuple:
		bb, ok := b.(tuple)
		if !ok || len(a.items) != len(bb.items) {
			return false
		}
		for i := range a.items {
			if !same(a.items[i], bb.items[i]) {
				return false
			}
		}
		return true
	case seq:
		bb, ok := b.(seq)
		return ok && same(a.elem, bb.elem)
	case ref:
		bb, ok := b.(ref)
		return ok && a.o == bb.o
	case *fn:
		bb, ok := b.(*fn)
		return ok && (a == bb || (a.def == bb.def && ctxOf(a.closure) == ctxOf(bb.closure) && a.cls == bb.cls &&
			a.isStatic == bb.isStatic && a.isClass == bb.isClass && a.isProperty == bb.isProperty && a.setter == bb.setter &&
			sameList(a.defaults, bb.defaults)))
	case bound:
		bb, ok := b.(bound)
		return ok && same(a.f, bb.f) && same(a.self, bb.self)
	case builtin:
		bb, ok := b.(builtin)
		return ok && a.name == bb.name && same(a.self, bb.self) && same(a.arg, bb.arg)
	case module:
		bb, ok := b.(module)
		return ok && a.name == bb.name
	case class:
		bb, ok := b.(class)
		return ok && a.c == bb.c
	case partial:
		bb, ok := b.(partial)
		if !ok || !same(a.f, bb.f) || !sameList(a.args, bb.args) || len(a.kw) != len(bb.kw) {
			return false
		}
		for k, v := range a.kw {
			if !same(v, bb.kw[k]) {
				return false
			}
		}
		return true
	case gen:
		bb, ok := b.(gen)
		return ok && (a.f == nil) == (bb.f == nil) && (a.f == nil || same(a.f, bb.f)) && ctxOf(a.fr) == ctxOf(bb.fr) &&
			a.comp == bb.comp && same(a.first, bb.first)
	case union:
		bb, ok := b.(union)
		if !ok || len(a.alts) != len(bb.alts) {
			return false
		}
		for _, x := range a.alts {
			found := false
			for _, y := range bb.alts {
				if same(x, y) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	return false
}

func sameList(a, b []value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !same(a[i], b[i]) {
			return false
		}
	}
	return true
}

// widen is what a value that keeps changing around a loop becomes: text
// that cannot be bounded, numbers known only at run time.
func widen(v value) value {
	switch v := v.(type) {
	case strv:
		if _, ok := v.known(); ok && len(v.parts) == 1 {
			return span("loop")
		}
		return span(hintOf(v))
	case cnst:
		if v.k == 'n' || v.k == 'b' {
			return v
		}
		return data{hint: "number"}
	case tuple:
		items := make([]value, len(v.items))
		for i, x := range v.items {
			items[i] = widen(x)
		}
		return seq{elem: joinAll(items)}
	case seq:
		return seq{elem: widen(v.elem)}
	case union:
		var out value
		for _, a := range v.alts {
			out = join(out, widen(a))
		}
		return out
	}
	return v
}

// hintOf names a value for a hole.
func hintOf(v value) string {
	switch v := v.(type) {
	case data:
		return v.hint
	case strv:
		for _, p := range v.parts {
			if p.hole && p.hint != "" {
				return p.hint
			}
		}
	case union:
		for _, a := range v.alts {
			if h := hintOf(a); h != "" {
				return h
			}
		}
	}
	return ""
}

// isCallable reports whether v may be something that runs code when
// called: what the reader must follow when it is handed to a function.
func isCallable(v value) bool {
	switch v := v.(type) {
	case *fn, bound, builtin, class, partial, top:
		return true
	case union:
		for _, a := range v.alts {
			if isCallable(a) {
				return true
			}
		}
	}
	return false
}
