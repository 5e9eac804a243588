package contract

import (
	"net/url"
	"strconv"
	"strings"
	"unicode"
)

// Python's f-string conversions, as the tree gives them.
const (
	convNone  = -1
	convStr   = 's'
	convRepr  = 'r'
	convASCII = 'a'
)

// render is str() of v formatted into a string: a string stays what it
// is, a known number becomes its digits, anything else a hole named hint.
func (st *state) render(fr *frame, v value, conv int64, spec bool, hint string) value {
	return overAlts(v, func(a value) value { return st.render1(fr, a, conv, spec, hint) })
}

func (st *state) render1(fr *frame, v value, conv int64, spec bool, hint string) value {
	h := hint
	if h == "" {
		h = hintOf(v)
	}
	plain := (conv == convNone || conv == 0 || conv == convStr) && !spec
	switch x := v.(type) {
	case strv:
		if plain {
			return x
		}
		if x.hasSpan() {
			return span(h)
		}
		return hole(h)
	case cnst:
		if spec && x.k != 'n' && x.k != 'b' {
			return hole(h)
		}
		switch x.k {
		case 'i':
			return lit(x.text)
		case 'b':
			if x.text == "true" {
				return lit("True")
			}
			return lit("False")
		case 'n':
			return lit("None")
		}
		return hole(h)
	case top:
		return span(h)
	case ref:
		if x.o.kind == objInstance {
			st.touch(fr, x)
		}
		return hole(h)
	}
	return hole(h)
}

// concatValues concatenates pieces that are each a string or a union of
// strings: every combination, while there are few.
func concatValues(pieces []value) value {
	results := []strv{lit("")}
	for _, p := range pieces {
		var as []strv
		for _, a := range alts(p) {
			if s, ok := a.(strv); ok {
				as = append(as, s)
			} else {
				as = append(as, hole(hintOf(a)))
			}
		}
		if len(as) == 0 {
			return nil
		}
		if len(results)*len(as) > maxUnion {
			merged := hole(hintOf(p))
			for _, a := range as {
				if a.hasSpan() {
					merged = span(hintOf(p))
				}
			}
			as = []strv{merged}
		}
		next := make([]strv, 0, len(results)*len(as))
		for _, r := range results {
			for _, a := range as {
				next = append(next, concat(r, a))
			}
		}
		results = next
	}
	var out value
	for _, r := range results {
		out = join(out, r)
	}
	return out
}

func (st *state) fstring(fr *frame, n *Node) value {
	var pieces []value
	for _, p := range n.Nodes("values") {
		if p == nil {
			continue
		}
		switch p.Type {
		case "Constant":
			pieces = append(pieces, constValue(p.Const()))
		case "FormattedValue":
			v := st.eval(fr, p.Node("value"))
			if v == nil {
				return nil
			}
			spec := p.Has("format_spec")
			if spec {
				st.eval(fr, p.Node("format_spec"))
				if s, ok := p.Node("format_spec").Nodes("values"), true; ok && len(s) == 0 {
					spec = false
				}
			}
			pieces = append(pieces, st.render(fr, v, p.Int("conversion"), spec, exprName(p.Node("value"))))
		default:
			pieces = append(pieces, st.eval(fr, p))
		}
	}
	return concatValues(pieces)
}

// percent is "format" % args.
func (st *state) percent(fr *frame, s strv, r value, rn *Node) value {
	format, known := s.known()
	if !known {
		return span(hintOf(s))
	}
	var items []value
	var itemNodes []*Node
	var mapping *object
	unknownArity := false
	switch x := r.(type) {
	case tuple:
		items = x.items
		if rn != nil && rn.Type == "Tuple" {
			itemNodes = rn.Nodes("elts")
		}
	case ref:
		if x.o.kind == objDict {
			mapping = x.o
		}
		items, itemNodes = []value{r}, []*Node{rn}
	case seq, data, top, union:
		unknownArity = true
	default:
		items, itemNodes = []value{r}, []*Node{rn}
	}
	next := 0
	take := func() (value, string, bool) {
		if unknownArity {
			return joinElem(r), exprName(rn), true
		}
		if next >= len(items) {
			return nil, "", false
		}
		v := items[next]
		hint := ""
		if next < len(itemNodes) {
			hint = exprName(itemNodes[next])
		}
		next++
		return v, hint, true
	}
	var pieces []value
	var litb strings.Builder
	flush := func() {
		if litb.Len() > 0 {
			pieces = append(pieces, lit(litb.String()))
			litb.Reset()
		}
	}
	rs := []rune(format)
	for i := 0; i < len(rs); i++ {
		if rs[i] != '%' {
			litb.WriteRune(rs[i])
			continue
		}
		i++
		if i >= len(rs) {
			return nil // ValueError: incomplete format
		}
		if rs[i] == '%' {
			litb.WriteRune('%')
			continue
		}
		var v value
		hint := ""
		if rs[i] == '(' {
			end := i
			for end < len(rs) && rs[end] != ')' {
				end++
			}
			if end >= len(rs) {
				return nil
			}
			key := string(rs[i+1 : end])
			hint = key
			i = end + 1
			switch {
			case mapping != nil:
				v = mapping.getKey(lit(key))
				if v == nil {
					return nil // KeyError
				}
			case unknownArity:
				v = joinElem(r)
			default:
				v = data{hint: key}
			}
		}
		decorated := false
		for i < len(rs) && strings.ContainsRune("-+ #0", rs[i]) {
			decorated = true
			i++
		}
		for i < len(rs) && (rs[i] >= '0' && rs[i] <= '9' || rs[i] == '*' || rs[i] == '.') {
			if rs[i] == '*' && v == nil {
				if _, _, ok := take(); !ok {
					return nil
				}
			}
			decorated = true
			i++
		}
		for i < len(rs) && strings.ContainsRune("hlL", rs[i]) {
			i++
		}
		if i >= len(rs) {
			return nil
		}
		conv := rs[i]
		if v == nil {
			var ok bool
			var h string
			v, h, ok = take()
			if !ok {
				return nil // not enough arguments
			}
			hint = h
		}
		flush()
		switch conv {
		case 's':
			pieces = append(pieces, st.render(fr, v, convStr, decorated, hint))
		case 'd', 'i', 'u':
			if c, ok := v.(cnst); ok && c.k == 'i' && !decorated {
				pieces = append(pieces, lit(c.text))
			} else {
				pieces = append(pieces, hole(pick(hint, hintOf(v))))
			}
		default:
			pieces = append(pieces, hole(pick(hint, hintOf(v))))
		}
	}
	flush()
	if !unknownArity && mapping == nil && next < len(items) {
		return nil // TypeError: not all arguments converted
	}
	return concatValues(pieces)
}

func pick(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// joinElem is what one item of an argument of unknown arity can be.
func joinElem(v value) value {
	switch x := v.(type) {
	case seq:
		return x.elem
	case tuple:
		return joinAll(x.items)
	case top:
		return top{}
	}
	return data{hint: hintOf(v)}
}

// strFormat is "format".format(*args, **kwargs).
func (st *state) strFormat(fr *frame, s strv, a *args) value {
	format, known := s.known()
	if !known {
		return span(hintOf(s))
	}
	var pieces []value
	var litb strings.Builder
	auto := 0
	rs := []rune(format)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		if c == '}' {
			if i+1 < len(rs) && rs[i+1] == '}' {
				litb.WriteRune('}')
				i++
				continue
			}
			return nil // ValueError
		}
		if c != '{' {
			litb.WriteRune(c)
			continue
		}
		if i+1 < len(rs) && rs[i+1] == '{' {
			litb.WriteRune('{')
			i++
			continue
		}
		depth, end := 1, i+1
		for end < len(rs) && depth > 0 {
			switch rs[end] {
			case '{':
				depth++
			case '}':
				depth--
			}
			end++
		}
		if depth != 0 {
			return nil
		}
		field := string(rs[i+1 : end-1])
		i = end - 1
		spec := false
		conv := int64(convNone)
		if j := strings.IndexByte(field, ':'); j >= 0 {
			spec = j < len(field)-1
			field = field[:j]
		}
		if j := strings.IndexByte(field, '!'); j >= 0 {
			if j+1 < len(field) {
				conv = int64(field[j+1])
			}
			field = field[:j]
		}
		name, rest := field, ""
		if j := strings.IndexAny(field, ".["); j >= 0 {
			name, rest = field[:j], field[j:]
		}
		var v value
		hint := ""
		switch {
		case name == "":
			v, hint = a.arg(auto, ""), exprName(a.node(auto, ""))
			auto++
		case isDigits(name):
			idx, _ := strconv.Atoi(name)
			v, hint = a.arg(idx, ""), exprName(a.node(idx, ""))
		default:
			v, hint = a.kw[name], name
			if v == nil {
				v = a.dstar
			}
		}
		if v == nil {
			return nil // IndexError or KeyError
		}
		for rest != "" && v != nil {
			if rest[0] == '.' {
				k := strings.IndexAny(rest[1:], ".[")
				attr := rest[1:]
				if k >= 0 {
					attr, rest = rest[1:1+k], rest[1+k:]
				} else {
					rest = ""
				}
				v, hint = st.getAttr(fr, v, attr), attr
				continue
			}
			k := strings.IndexByte(rest, ']')
			if k < 0 {
				return nil
			}
			key := rest[1:k]
			rest = rest[k+1:]
			var kv value = lit(key)
			if isDigits(key) {
				n, _ := strconv.ParseInt(key, 10, 64)
				kv = intV(n)
			}
			v, hint = st.getItem(fr, v, kv, nil), key
		}
		if v == nil {
			return nil
		}
		if litb.Len() > 0 {
			pieces = append(pieces, lit(litb.String()))
			litb.Reset()
		}
		pieces = append(pieces, st.render(fr, v, conv, spec, hint))
	}
	if litb.Len() > 0 {
		pieces = append(pieces, lit(litb.String()))
	}
	return concatValues(pieces)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func literalsASCII(s strv) bool {
	for _, p := range s.parts {
		if !p.hole && !isASCII(p.lit) {
			return false
		}
	}
	return true
}

// pyWhitespace is what str.strip() strips by default, for ASCII text.
const pyWhitespace = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"

// strMethod calls a method of a string.
func (st *state) strMethod(fr *frame, name string, self value, a *args, site *Node) value {
	s, ok := self.(strv)
	if !ok {
		return data{hint: name}
	}
	text, known := s.known()
	hint := hintOf(s)
	strArg := func(i int, kw string) (string, bool, bool) { // text, known, given
		v := a.arg(i, kw)
		if v == nil || (i >= len(a.pos) && a.kw[kw] == nil && a.exact()) {
			return "", false, false
		}
		if isNone(v) {
			return "", false, false
		}
		sv, ok := v.(strv)
		if !ok {
			return "", false, true
		}
		t, k := sv.known()
		return t, k, true
	}
	switch name {
	case "format":
		return st.strFormat(fr, s, a)
	case "format_map":
		for _, v := range a.all() {
			st.escape(fr, v)
		}
		return span(hint)
	case "join":
		items, elem := st.iterItems(fr, a.arg(0, "iterable"))
		if items == nil {
			if elem == nil {
				return lit("")
			}
			return span("parts")
		}
		var pieces []value
		for i, it := range items {
			if i > 0 {
				pieces = append(pieces, s)
			}
			pieces = append(pieces, st.render(fr, it, convStr, false, ""))
		}
		if len(pieces) == 0 {
			return lit("")
		}
		return concatValues(pieces)
	case "replace":
		old, oldKnown, _ := strArg(0, "old")
		nv := a.arg(1, "new")
		count := int64(-1)
		if len(a.pos) > 2 {
			c, ok := a.pos[2].(cnst)
			if !ok || !c.iok {
				return span(hint)
			}
			count = c.i
		}
		newS, isStr := nv.(strv)
		if !oldKnown || !isStr {
			if known {
				return hole(hint)
			}
			return span(hint)
		}
		if !known {
			newText, newKnown := newS.known()
			if old != "" && newKnown && !strings.Contains(strings.Join(literals(s), ""), old) && !strings.Contains(old, "/") && !strings.Contains(newText, "/") {
				// The pattern is in no literal and holes stand for one segment: still a hole.
				return s
			}
			return span(hint)
		}
		if newText, ok := newS.known(); ok {
			return lit(strings.Replace(text, old, newText, int(count)))
		}
		if old == "" {
			return span(hint)
		}
		parts := strings.Split(text, old)
		if count >= 0 && int(count) < len(parts)-1 {
			head := parts[:count+1]
			parts = append(head[:len(head):len(head)], strings.Join(parts[count+1:], old))
		}
		var pieces []value
		for i, p := range parts {
			if i > 0 {
				pieces = append(pieces, newS)
			}
			pieces = append(pieces, lit(p))
		}
		return concatValues(pieces)
	case "upper", "lower", "casefold":
		if !literalsASCII(s) {
			if known {
				return hole(hint)
			}
			return span(hint)
		}
		f := strings.ToLower
		if name == "upper" {
			f = strings.ToUpper
		}
		return s.mapLiterals(f)
	case "strip", "lstrip", "rstrip":
		chars, charsKnown, given := strArg(0, "chars")
		if given && !charsKnown {
			return span(hint)
		}
		if !given {
			chars = pyWhitespace
		}
		if !literalsASCII(s) || !isASCII(chars) {
			return span(hint)
		}
		return stripTemplate(s, chars, name != "rstrip", name != "lstrip")
	case "removeprefix", "removesuffix":
		affix, affixKnown, _ := strArg(0, "prefix")
		if !affixKnown {
			return span(hint)
		}
		if known {
			if name == "removeprefix" {
				return lit(strings.TrimPrefix(text, affix))
			}
			return lit(strings.TrimSuffix(text, affix))
		}
		out := strv{parts: append([]part{}, s.parts...)}
		if name == "removeprefix" && !out.parts[0].hole && strings.HasPrefix(out.parts[0].lit, affix) {
			out.parts[0].lit = strings.TrimPrefix(out.parts[0].lit, affix)
			return concat(out)
		}
		if last := len(out.parts) - 1; name == "removesuffix" && !out.parts[last].hole && strings.HasSuffix(out.parts[last].lit, affix) {
			out.parts[last].lit = strings.TrimSuffix(out.parts[last].lit, affix)
			return concat(out)
		}
		return span(hint)
	case "startswith", "endswith":
		affix, affixKnown, _ := strArg(0, "prefix")
		if known && affixKnown && len(a.pos) == 1 {
			if name == "startswith" {
				return boolV(strings.HasPrefix(text, affix))
			}
			return boolV(strings.HasSuffix(text, affix))
		}
		return data{hint: "bool"}
	case "split", "rsplit":
		sep, sepKnown, sepGiven := strArg(0, "sep")
		maxsplit := int64(-1)
		if v := a.arg(1, "maxsplit"); v != nil && (len(a.pos) > 1 || a.kw["maxsplit"] != nil) {
			c, ok := v.(cnst)
			if !ok || !c.iok {
				known = false
			} else {
				maxsplit = c.i
			}
		}
		o := st.alloc(site, objList)
		if known && (sepKnown || !sepGiven) && (sepGiven || isASCII(text)) && maxsplit < 0 && sep != "" || known && !sepGiven && maxsplit < 0 && isASCII(text) {
			var parts []string
			if sepGiven {
				parts = strings.Split(text, sep)
			} else {
				parts = strings.FieldsFunc(text, func(r rune) bool { return strings.ContainsRune(pyWhitespace, r) })
			}
			items := make([]value, len(parts))
			for i, p := range parts {
				items[i] = lit(p)
			}
			st.setItems(o, items)
			return ref{o}
		}
		st.appendElem(o, data{hint: "part"})
		return ref{o}
	case "encode":
		return data{hint: "bytes"}
	case "zfill", "center", "ljust", "rjust", "expandtabs", "title", "capitalize", "swapcase", "translate":
		for _, v := range a.all() {
			st.escape(fr, v) // translate's table is a mapping it reads with __getitem__, or anything with it
		}
		if known {
			return hole(hint)
		}
		return span(hint)
	case "find", "rfind", "index", "rindex", "count", "isdigit", "isalpha", "isalnum", "isspace", "islower",
		"isupper", "isnumeric", "isdecimal", "isidentifier", "isprintable", "istitle", "isascii":
		return data{hint: name}
	case "splitlines", "partition", "rpartition":
		return data{hint: "part"}
	}
	for _, v := range a.all() {
		st.escape(fr, v)
	}
	return data{hint: name}
}

func literals(s strv) []string {
	var out []string
	for _, p := range s.parts {
		if !p.hole {
			out = append(out, p.lit)
		}
	}
	return out
}

// stripTemplate strips chars from the ends of a string whose ends may be
// holes: a hole at an end stays a hole (what it stands for, stripped, is
// still a value), and stripping stops there.
func stripTemplate(s strv, chars string, left, right bool) value {
	parts := append([]part{}, s.parts...)
	if left {
		for len(parts) > 0 && !parts[0].hole {
			parts[0].lit = strings.TrimLeft(parts[0].lit, chars)
			if parts[0].lit != "" || len(parts) == 1 {
				break
			}
			parts = parts[1:]
		}
	}
	if right {
		for len(parts) > 0 && !parts[len(parts)-1].hole {
			last := len(parts) - 1
			parts[last].lit = strings.TrimRight(parts[last].lit, chars)
			if parts[last].lit != "" || len(parts) == 1 {
				break
			}
			parts = parts[:last]
		}
	}
	if len(parts) == 0 {
		return lit("")
	}
	return concat(strv{parts: parts})
}

// pathJoin is os.path.join of strings: a component that is absolute
// starts the path again. A hole stands for one segment, never absolute.
func pathJoin(a *args) value {
	if !a.exact() {
		return span("path")
	}
	var out value = lit("")
	first := true
	for _, v := range a.pos {
		var next value
		for _, o := range alts(out) {
			ostr, _ := o.(strv)
			for _, p := range alts(v) {
				ps, ok := asStr(p, hintOf(p))
				if !ok {
					next = join(next, hole(hintOf(p)))
					continue
				}
				if !ps.parts[0].hole && strings.HasPrefix(ps.parts[0].lit, "/") || first {
					next = join(next, ps)
					continue
				}
				sep := lit("/")
				if last := ostr.parts[len(ostr.parts)-1]; !last.hole && (last.lit == "" || strings.HasSuffix(last.lit, "/")) {
					sep = lit("")
				}
				next = join(next, concat(ostr, sep, ps))
			}
		}
		out = next
		first = false
	}
	return out
}

// quote is urllib.parse.quote of a string: unchanged when every
// character is one quote keeps, else a hole.
func quote(v value, safe string, hint string) value {
	var out value
	for _, a := range alts(v) {
		s, ok := a.(strv)
		if !ok {
			out = join(out, hole(pick(hint, hintOf(a))))
			continue
		}
		t, known := s.known()
		if !known {
			out = join(out, hole(pick(hint, hintOf(s))))
			continue
		}
		keep := true
		for _, r := range t {
			if !(r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_.-~", r) || strings.ContainsRune(safe, r))) {
				keep = false
				break
			}
		}
		if keep {
			out = join(out, s)
		} else {
			out = join(out, hole(pick(hint, "value")))
		}
	}
	return out
}

// urljoin is urllib.parse.urljoin of a base path and a reference, both
// paths: known text is resolved as RFC 3986 does; a reference with holes
// after a known base keeps its holes, unless it could be read as
// anything but a relative path (a scheme, "//", dot segments), which is
// run-time text.
func urljoin(base, ref value) value {
	return overAlts(base, func(b value) value {
		bs, ok := b.(strv)
		bt, known := bs.known()
		if !ok || !known || strings.Contains(bt, ":") || strings.HasPrefix(bt, "//") {
			return data{hint: "url"}
		}
		return overAlts(ref, func(r value) value {
			rs, ok := r.(strv)
			if !ok || len(rs.parts) == 0 {
				return data{hint: "url"}
			}
			if rt, known := rs.known(); known {
				u, err1 := url.Parse(bt)
				v, err2 := url.Parse(rt)
				if err1 != nil || err2 != nil || v.Scheme != "" || v.Host != "" {
					return data{hint: "url"}
				}
				return lit(u.ResolveReference(v).String())
			}
			head := rs.parts[0]
			for _, p := range rs.parts {
				if !p.hole && (strings.Contains(p.lit, ":") || strings.Contains(p.lit, "./") || strings.Contains(p.lit, "/.")) {
					return data{hint: "url"}
				}
			}
			switch {
			case head.hole:
				return data{hint: "url"}
			case strings.HasPrefix(head.lit, "//"):
				return data{hint: "url"}
			case strings.HasPrefix(head.lit, "/"):
				return rs
			}
			dir := bt[:strings.LastIndexByte(bt, '/')+1]
			return concat(lit(dir), rs)
		})
	})
}
