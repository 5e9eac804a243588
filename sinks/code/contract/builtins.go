package contract

import (
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// importModule runs "import a.b [as x]".
func (st *state) importModule(fr *frame, alias *Node, stmt *Node) {
	if alias == nil {
		return
	}
	name, as := alias.Str("name"), alias.Str("asname")
	v := st.moduleValue(name)
	switch {
	case as != "":
		st.setVar(fr, as, v)
	case isTop(v):
		st.setVar(fr, topName(name), v)
	default:
		st.setVar(fr, topName(name), st.moduleValue(topName(name)))
	}
}

func isTop(v value) bool { _, ok := v.(top); return ok }

// moduleValue is the value of an imported module, top (with the reason)
// for one the reader does not follow.
func (st *state) moduleValue(name string) value {
	m, ok := moduleKnown(name)
	if !ok {
		if topName(name) != name {
			if pm, ok := moduleKnown(topName(name)); ok && pm.deny != 0 {
				r, why := denyReason(pm.deny)
				st.problem(r, "imports %s, which %s", name, why)
				return top{}
			}
		}
		st.problem(ReasonUnknownModule, "imports %s, which the reader does not know: it follows only the gatehouse client and a set of standard modules", name)
		return top{}
	}
	if m.deny != 0 {
		r, why := denyReason(m.deny)
		st.problem(r, "imports %s, which %s", name, why)
		return top{}
	}
	return module{name: name}
}

func (st *state) importFrom(fr *frame, n *Node) {
	mod := n.Str("module")
	if n.Int("level") > 0 {
		st.problem(ReasonUnknownModule, "imports from %s%s beside the program, which the reader does not follow", strings.Repeat(".", int(n.Int("level"))), mod)
		for _, a := range n.Nodes("names") {
			st.bindImported(fr, a, top{})
		}
		return
	}
	mv := st.moduleValue(mod)
	for _, a := range n.Nodes("names") {
		if a == nil {
			continue
		}
		name := a.Str("name")
		if name == "*" {
			if mod == "gatehouse" {
				for _, k := range sortedKeys(modules["gatehouse"].attrs) {
					st.setVar(fr, k, st.moduleAttr(mod, k))
				}
				continue
			}
			if !isTop(mv) {
				st.problem(ReasonUnsupported, "from %s import *: the reader follows only names it can see imported", mod)
			}
			continue
		}
		if isTop(mv) {
			st.bindImported(fr, a, top{})
			continue
		}
		st.bindImported(fr, a, st.moduleAttr(mod, name))
	}
}

func (st *state) bindImported(fr *frame, a *Node, v value) {
	if a == nil {
		return
	}
	name := a.Str("asname")
	if name == "" {
		name = a.Str("name")
	}
	if name != "*" && name != "" {
		st.setVar(fr, name, v)
	}
}

// moduleAttr reads an attribute of a module the reader follows.
func (st *state) moduleAttr(mod, attr string) value {
	full := mod + "." + attr
	if isDunder(attr) {
		st.problem(ReasonIntrospection, "reads %s", full)
		return top{}
	}
	switch full {
	case "typing.TYPE_CHECKING":
		return falseV
	case "os.sep":
		return lit("/")
	case "os.linesep":
		return lit("\n")
	case "os.name":
		return lit("posix")
	}
	cat := category(full)
	if _, isMod := modules[full]; isMod && (cat == catModule || cat == 0) {
		return st.moduleValue(full)
	}
	switch cat {
	case 0:
		if mod == "gatehouse" {
			st.problem(ReasonUnknownHelper, "uses %s, which is not part of the gatehouse client (call, get, post, put, patch, delete, head, options, Error, Refused, Response)", full)
		} else {
			st.problem(ReasonUnknownHelper, "uses %s, which the reader does not know to be harmless", full)
		}
		return top{}
	case catValue:
		return data{hint: attr}
	case catModule:
		return st.moduleValue(full)
	case catRaw, catImport, catEval, catIntro:
		r, why := denyReason(cat)
		st.problem(r, "uses %s, which %s", full, why)
		return top{}
	}
	return builtin{name: full}
}

// builtinAttr reads an attribute of a builtin function, class or object.
func (st *state) builtinAttr(fr *frame, b builtin, name string) value {
	switch b.name {
	case "super":
		return st.superAttr(b, name)
	case "type-of":
		st.problem(ReasonIntrospection, "reads %s of a value's type", name)
		return top{}
	case "str", "bytes", "int", "float", "list", "dict", "set", "tuple", "frozenset", "bool":
		switch b.name + "." + name {
		case "dict.fromkeys":
			return builtin{name: "dict.fromkeys"}
		}
		return builtin{name: "unbound:" + b.name + "." + name}
	}
	switch category(b.name) {
	case catClass, catException, catValue:
		return data{hint: name} // attributes and methods of plain value classes
	}
	if isExceptionName(b.name) || strings.HasPrefix(b.name, "gatehouse.") {
		return data{hint: name}
	}
	st.problem(ReasonUnknownHelper, "reads %s of %s, which the reader does not know", name, b.name)
	return top{}
}

// getAttr reads v.name.
func (st *state) getAttr(fr *frame, v value, name string) value {
	if isDunder(name) {
		switch b, ok := v.(builtin); {
		case ok && b.name == "super":
			return st.superAttr(b, name)
		case harmlessDunders[name]:
			return data{hint: strings.Trim(name, "_")} // names and docs: text
		case name == "__class__" && !isModule(v):
			return builtin{name: "type-of"} // what type() gives
		}
		st.problem(ReasonIntrospection, "reads %s of %s", name, describe(v))
		return top{}
	}
	switch x := v.(type) {
	case union:
		return overAlts(x, func(a value) value { return st.getAttr(fr, a, name) })
	case module:
		return st.moduleAttr(x.name, name)
	case builtin:
		return st.builtinAttr(fr, x, name)
	case data:
		return data{hint: name}
	case cnst, slicev:
		return data{hint: name}
	case strv:
		return builtin{name: "str." + name, self: x}
	case tuple, seq:
		return builtin{name: "tuple." + name, self: x}
	case ref:
		switch x.o.kind {
		case objList:
			return builtin{name: "list." + name, self: x}
		case objDict:
			return builtin{name: "dict." + name, self: x}
		case objSet:
			return builtin{name: "set." + name, self: x}
		case objInstance:
			return st.instanceAttr(x.o, name, v)
		}
	case class:
		r := st.classAttr(x.c, name, nil)
		if r == nil && (x.c.exception || x.c.enum) {
			return data{hint: name}
		}
		return r
	case gen:
		switch name {
		case "send", "close", "throw":
			return builtin{name: "generator." + name, self: x}
		}
		st.problem(ReasonIntrospection, "reads %s of a generator", name)
		return top{}
	case top:
		return top{}
	case partial:
		switch name {
		case "func":
			return x.f
		case "args":
			return tuple{items: x.args}
		}
		// keywords is a dict the program may change, and the partial calls with it.
		st.problem(ReasonDynamicAttribute, "reads %s of a functools.partial, which the reader does not follow", name)
		return top{}
	case *fn:
		switch {
		case x.isProperty && (name == "setter" || name == "getter" || name == "deleter"):
			return builtin{name: "property." + name, self: x}
		case name == "cache_clear" || name == "cache_info":
			return builtin{name: "noop"}
		}
	}
	return nil
}

// setAttr writes o.name = v.
func (st *state) setAttr(fr *frame, o value, name string, v value) {
	if isDunder(name) {
		st.problem(ReasonIntrospection, "writes %s of %s", name, describe(o))
		return
	}
	switch x := o.(type) {
	case union:
		for _, a := range x.alts {
			st.setAttr(fr, a, name, v)
		}
	case ref:
		if x.o.kind == objInstance {
			st.setInstanceAttr(fr, x.o, name, v)
		}
	case class:
		slot := x.c.attrs[name]
		st.grow(&slot, v)
		x.c.attrs[name] = slot
	case module:
		st.problem(ReasonDynamicAttribute, "replaces %s.%s, which changes what the reader knows of it", x.name, name)
	case *fn, bound, builtin, partial, gen:
		st.problem(ReasonDynamicAttribute, "sets the attribute %s of %s", name, describe(o))
	case data:
		st.escape(fr, v)
	case top:
		st.problem(ReasonUnknownCallee, "writes into a value the reader cannot follow")
	}
}

// getItem reads c[k].
func (st *state) getItem(fr *frame, c, k value, site *Node) value {
	switch x := c.(type) {
	case union:
		return overAlts(x, func(a value) value { return st.getItem(fr, a, k, site) })
	case tuple:
		if s, ok := k.(slicev); ok {
			if items, ok := sliceItems(x.items, s); ok {
				return tuple{items: items}
			}
			return seq{elem: joinAll(x.items)}
		}
		if i, ok := index(k, len(x.items)); ok {
			if i < 0 {
				return nil // IndexError
			}
			return x.items[i]
		}
		return joinAll(x.items)
	case seq:
		if _, ok := k.(slicev); ok {
			return x
		}
		return x.elem
	case strv:
		t, known := x.known()
		if s, ok := k.(slicev); ok {
			if known {
				r := []rune(t)
				items := make([]value, len(r))
				for i := range r {
					items[i] = lit(string(r[i]))
				}
				if got, ok := sliceItems(items, s); ok {
					var b strings.Builder
					for _, g := range got {
						gt, _ := g.(strv).known()
						b.WriteString(gt)
					}
					return lit(b.String())
				}
			}
			return span(hintOf(x))
		}
		if known {
			r := []rune(t)
			if i, ok := index(k, len(r)); ok {
				if i < 0 {
					return nil
				}
				return lit(string(r[i]))
			}
		}
		return data{hint: "char"}
	case ref:
		switch x.o.kind {
		case objList:
			if _, ok := k.(slicev); ok {
				o := st.alloc(site, objList)
				_, e := x.o.elems()
				st.appendElem(o, e)
				return ref{o}
			}
			items, elem := x.o.elems()
			if items != nil {
				if i, ok := index(k, len(items)); ok {
					if i < 0 {
						return nil
					}
					return items[i]
				}
			}
			return elem
		case objDict:
			st.touch(fr, k)
			return x.o.getKey(k)
		case objInstance:
			if gi := st.classAttr(x.o.cls, "__getitem__", c); gi != nil {
				return st.call(fr, gi, &args{pos: []value{k}, posN: []*Node{nil}}, site)
			}
			if x.o.cls != nil && x.o.cls.namedTuple {
				return st.instanceIter(fr, x.o)
			}
			return nil
		}
		return nil
	case data:
		if s, ok := k.(strv); ok {
			if t, known := s.known(); known && identLike(t) {
				return data{hint: t}
			}
		}
		return data{hint: x.hint}
	case cnst:
		return data{hint: "byte"}
	case top:
		return top{}
	case class, builtin:
		return data{hint: "typing"} // List[int], dict[str, Any]
	}
	return nil
}

// index resolves a known integer subscript against a length: ok with
// i < 0 when out of range (IndexError).
func index(k value, n int) (int, bool) {
	c, ok := k.(cnst)
	if !ok || !c.iok || c.k != 'i' && c.k != 'b' {
		if ok && c.k == 'b' {
			if c.text == "true" {
				return index(intV(1), n)
			}
			return index(intV(0), n)
		}
		return 0, false
	}
	i := c.i
	if i < 0 {
		i += int64(n)
	}
	if i < 0 || i >= int64(n) {
		return -1, true
	}
	return int(i), true
}

func sliceItems(items []value, s slicev) ([]value, bool) {
	bound := func(v value, def int) (int, bool) {
		if c, ok := v.(cnst); ok {
			if c.k == 'n' {
				return def, true
			}
			if c.k == 'i' && c.iok {
				i := c.i
				if i < 0 {
					i += int64(len(items))
				}
				return int(max(0, min(i, int64(len(items))))), true
			}
		}
		return 0, false
	}
	if c, ok := s.step.(cnst); !ok || c.k != 'n' {
		return nil, false
	}
	lo, ok1 := bound(s.lo, 0)
	hi, ok2 := bound(s.hi, len(items))
	if !ok1 || !ok2 {
		return nil, false
	}
	if lo > hi {
		return []value{}, true
	}
	return append([]value{}, items[lo:hi]...), true
}

// setItem writes c[k] = v.
func (st *state) setItem(fr *frame, c, k, v value) {
	switch x := c.(type) {
	case union:
		for _, a := range x.alts {
			st.setItem(fr, a, k, v)
		}
	case ref:
		switch x.o.kind {
		case objList:
			if s, ok := k.(slicev); ok {
				_ = s
				_, e := st.iterItems(fr, v)
				st.appendElem(x.o, e)
				return
			}
			if i, ok := index(k, len(x.o.items)); ok && i >= 0 && x.o.exact && x.o.items != nil {
				st.grow(&x.o.items[i], v)
				st.grow(&x.o.elem, v)
				return
			}
			st.appendElem(x.o, v)
		case objDict:
			st.touch(fr, k)
			st.setKey(x.o, k, v)
		case objInstance:
			if si := st.classAttr(x.o.cls, "__setitem__", c); si != nil {
				st.call(fr, si, &args{pos: []value{k, v}, posN: []*Node{nil, nil}}, nil)
			}
		}
	case data:
		st.escape(fr, v)
	case top:
		st.problem(ReasonUnknownCallee, "writes into a value the reader cannot follow")
	}
}

// callBuiltin calls a builtin function, method or class.
func (st *state) callBuiltin(fr *frame, b builtin, a *args, site *Node) value {
	name := b.name
	switch {
	case strings.HasPrefix(name, "gatehouse."):
		if category(name) == catSpecial {
			return st.gateway(fr, strings.TrimPrefix(name, "gatehouse."), a, site)
		}
	case strings.HasPrefix(name, "str."):
		return st.strMethod(fr, strings.TrimPrefix(name, "str."), b.self, a, site)
	case name == "dict.fromkeys":
		// dict.fromkeys and {}.fromkeys alike (a class method: self is
		// not read).
		o := st.alloc(site, objDict)
		_, keys := st.iterItems(fr, a.arg(0, ""))
		st.setKey(o, data{hint: "key"}, join(a.arg(1, ""), noneV))
		st.grow(&o.keyElem, keys)
		return ref{o}
	case strings.HasPrefix(name, "list.") || strings.HasPrefix(name, "dict.") || strings.HasPrefix(name, "set."):
		return st.containerMethod(fr, name, b.self, a, site)
	case strings.HasPrefix(name, "tuple."):
		return data{hint: "index"}
	case strings.HasPrefix(name, "generator."):
		g, _ := b.self.(gen)
		switch strings.TrimPrefix(name, "generator.") {
		case "send", "__next__":
			for _, v := range a.all() {
				st.escape(fr, v)
			}
			return st.consume(g)
		case "close":
			return noneV
		}
		st.problem(ReasonUnsupported, "uses %s of a generator", strings.TrimPrefix(name, "generator."))
		return top{}
	case strings.HasPrefix(name, "unbound:"):
		if len(a.pos) == 0 {
			return data{hint: "value"}
		}
		m := strings.TrimPrefix(name, "unbound:")
		typ, meth, _ := strings.Cut(m, ".")
		self := a.pos[0]
		rest := &args{pos: a.pos[1:], posN: a.posN[min(1, len(a.posN)):], kw: a.kw, kwN: a.kwN, star: a.star, dstar: a.dstar}
		switch typ {
		case "str":
			return st.call(fr, st.getAttr(fr, self, meth), rest, site)
		case "list", "dict", "set", "tuple":
			return st.call(fr, st.getAttr(fr, self, meth), rest, site)
		}
		st.touch(fr, self)
		return data{hint: meth}
	}
	switch name {
	case "noop":
		return noneV
	case "type-of":
		st.problem(ReasonUnknownCallee, "calls a value's type, a class the reader cannot tell")
		return top{}
	case "dataclass.__init__":
		c, _ := b.arg.(class)
		return st.dataclassInit(fr, b.self, c.c, a)
	case "contextmanager()":
		return builtin{name: "contextmanager-instance", arg: st.call(fr, b.arg, a, site)}
	case "functools.lru_cache()", "functools.wraps()", "dataclasses.dataclass()", "property.setter", "property.getter", "property.deleter":
		if len(a.pos) == 1 {
			return st.decorate(fr, b, a.pos[0], site)
		}
		return top{}
	case "namedtuple._replace":
		if r, ok := b.self.(ref); ok {
			for _, k := range sortedKeys(a.kw) {
				if !slices.Contains(r.o.cls.fields, k) {
					return nil // ValueError: no such field
				}
				st.setInstanceAttr(fr, r.o, k, a.kw[k])
			}
			if a.dstar != nil || len(a.pos) > 0 || a.star != nil {
				for _, f := range r.o.cls.fields {
					st.setInstanceAttr(fr, r.o, f, join(a.dstar, top{}))
				}
			}
		}
		return b.self
	case "namedtuple._asdict":
		o := st.alloc(site, objDict)
		if r, ok := b.self.(ref); ok {
			for _, f := range r.o.cls.fields {
				v := st.instanceAttr(r.o, f, b.self)
				if v == nil {
					v = top{}
				}
				st.setKey(o, lit(f), v)
			}
		}
		return ref{o}
	case "namedtuple.count", "namedtuple.index":
		return data{hint: "index"}
	}
	if v, ok := st.callPythonBuiltin(fr, name, a, site); ok {
		return v
	}
	if v, ok := st.callModuleSpecial(fr, name, a, site); ok {
		return v
	}
	switch category(name) {
	case catPure:
		st.handPure(fr, name, a)
		return data{hint: lastName(name)}
	case catCalls, catClass, catException, catValue:
		for _, v := range a.all() {
			st.escape(fr, v)
		}
		if category(name) == catException {
			return data{hint: "error"}
		}
		return data{hint: lastName(name)}
	case catEval, catImport, catIntro, catRaw:
		r, why := denyReason(category(name))
		st.problem(r, "calls %s, which %s", name, why)
		return top{}
	}
	st.problem(ReasonUnknownHelper, "calls %s, which the reader does not model", name)
	return top{}
}

// handPure hands the arguments of a plain data function to it. Python's
// own builtins call no more than the special methods of what they are
// given (bytes and bytearray iterate it: a generator runs), and logging's
// functions format their positional arguments; anything else a standard
// function is given it may keep, call or call a method of (a predicate,
// quote_via, onerror, a stream's write, a mapping's items): handed away.
func (st *state) handPure(fr *frame, name string, a *args) {
	if _, isBuiltin := builtins[name]; isBuiltin || formatsOnly[name] {
		for _, v := range a.pos {
			st.touch(fr, v)
		}
		if a.star != nil {
			st.touch(fr, a.star)
		}
		if isBuiltin {
			for _, v := range a.kw {
				st.touch(fr, v)
			}
			if a.dstar != nil {
				st.touch(fr, a.dstar)
			}
			return
		}
		for _, k := range sortedKeys(a.kw) {
			st.escape(fr, a.kw[k])
		}
		if a.dstar != nil {
			st.escape(fr, a.dstar)
		}
		return
	}
	for _, v := range a.all() {
		st.escape(fr, v)
	}
}

// formatsOnly are the standard functions that do no more with their
// positional arguments than format them (str, repr, %).
var formatsOnly = map[string]bool{
	"logging.debug": true, "logging.info": true, "logging.warning": true, "logging.warn": true, "logging.error": true,
	"logging.critical": true, "logging.exception": true, "logging.log": true,
}

func lastName(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// callPythonBuiltin models Python's builtin functions.
func (st *state) callPythonBuiltin(fr *frame, name string, a *args, site *Node) (value, bool) {
	arg0 := func() value { return a.arg(0, "") }
	touchAll := func() {
		for _, v := range a.all() {
			st.touch(fr, v)
		}
	}
	switch name {
	case "print":
		for _, v := range a.pos {
			st.touch(fr, v)
		}
		if a.star != nil {
			st.touch(fr, a.star)
		}
		// print writes to file with its write method (and flush): the
		// stream is handed away.
		for _, k := range sortedKeys(a.kw) {
			if k == "file" {
				st.escape(fr, a.kw[k])
			} else {
				st.touch(fr, a.kw[k])
			}
		}
		if a.dstar != nil {
			st.escape(fr, a.dstar)
		}
		return noneV, true
	case "len":
		touchAll()
		switch x := arg0().(type) {
		case tuple:
			return intV(int64(len(x.items))), true
		case strv:
			if t, ok := x.known(); ok {
				return intV(int64(utf8.RuneCountInString(t))), true
			}
		}
		return data{hint: "length"}, true
	case "str":
		if len(a.pos) == 0 && len(a.kw) == 0 && a.exact() {
			return lit(""), true
		}
		if len(a.pos) > 1 || len(a.kw) > 0 {
			return data{hint: "text"}, true
		}
		touchAll()
		return st.render(fr, arg0(), 's', false, exprName(a.node(0, ""))), true
	case "repr", "ascii":
		touchAll()
		return hole(exprName(a.node(0, ""))), true
	case "format":
		touchAll()
		return st.render(fr, arg0(), 0, len(a.pos) > 1, exprName(a.node(0, ""))), true
	case "int":
		touchAll()
		switch x := arg0().(type) {
		case cnst:
			if x.k == 'i' && len(a.pos) == 1 {
				return x, true
			}
			if x.k == 'b' {
				return intV(int64(boolInt(x.text == "true"))), true
			}
		case strv:
			if t, ok := x.known(); ok && len(a.pos) == 1 {
				if v := constValue(&Const{Kind: "int", Text: strings.TrimSpace(t)}); v != nil {
					if c, ok := v.(cnst); ok && c.iok {
						return c, true
					}
				}
			}
		}
		return data{hint: "number"}, true
	case "float":
		touchAll()
		return data{hint: "number"}, true
	case "bool":
		touchAll()
		if len(a.pos) == 0 {
			return falseV, true
		}
		return boolV2(truthy(arg0())), true
	case "hasattr":
		// hasattr reads the attribute: a property runs.
		touchAll()
		attr, ok := a.arg(1, "").(strv)
		text, known := attr.known()
		if !ok || !known {
			st.problem(ReasonDynamicAttribute, "hasattr with an attribute name computed at run time")
			return data{hint: "bool"}, true
		}
		if v := arg0(); v != nil && !isDunder(text) {
			st.getAttr(fr, v, text)
		}
		return data{hint: "bool"}, true
	case "min", "max":
		elem := a.arg(0, "")
		if len(a.pos) == 1 {
			_, elem = st.iterItems(fr, elem)
		} else {
			elem = joinAll(a.pos)
		}
		if key, ok := a.kw["key"]; ok && elem != nil {
			st.call(fr, key, &args{pos: []value{elem}, posN: []*Node{nil}}, site)
		}
		touchAll()
		return join(elem, a.kw["default"]), true
	case "sum":
		for _, v := range a.all() {
			st.iterItems(fr, v)
		}
		return opaque(a.all()...), true
	case "any", "all":
		for _, v := range a.pos {
			st.iterItems(fr, v)
		}
		return data{hint: "bool"}, true
	case "list", "tuple", "set", "frozenset":
		var items []value
		var elem value
		if len(a.pos) > 0 || !a.exact() {
			items, elem = st.iterItems(fr, arg0())
		} else {
			items = []value{}
		}
		switch name {
		case "tuple":
			if items != nil {
				return tuple{items: items}, true
			}
			return seq{elem: elem}, true
		default:
			k := objList
			if name != "list" {
				k = objSet
			}
			o := st.alloc(site, k)
			if items != nil && name == "list" {
				st.setItems(o, items)
			} else {
				st.appendElem(o, join(joinAll(items), elem))
			}
			return ref{o}, true
		}
	case "dict":
		o := st.alloc(site, objDict)
		if len(a.pos) > 0 {
			st.dictFrom(fr, o, arg0())
		}
		for _, k := range sortedKeys(a.kw) {
			st.setKey(o, lit(k), a.kw[k])
		}
		if a.dstar != nil || a.star != nil {
			st.setKey(o, data{hint: "key"}, join(a.dstar, a.star))
		}
		return ref{o}, true
	case "sorted", "reversed":
		items, elem := st.iterItems(fr, arg0())
		if key, ok := a.kw["key"]; ok && elem != nil {
			st.call(fr, key, &args{pos: []value{elem}, posN: []*Node{nil}}, site)
		}
		if name == "reversed" && items != nil {
			r := slices.Clone(items)
			slices.Reverse(r)
			return tuple{items: r}, true
		}
		o := st.alloc(site, objList)
		st.appendElem(o, elem)
		return ref{o}, true
	case "enumerate":
		items, elem := st.iterItems(fr, arg0())
		start := int64(0)
		if c, ok := a.arg(1, "start").(cnst); ok && c.iok {
			start = c.i
		} else if len(a.pos) > 1 || a.kw["start"] != nil {
			items = nil
		}
		if items != nil {
			out := make([]value, len(items))
			for i, it := range items {
				out[i] = tuple{items: []value{intV(start + int64(i)), it}}
			}
			return tuple{items: out}, true
		}
		if elem == nil {
			return tuple{}, true
		}
		return seq{elem: tuple{items: []value{data{hint: "index"}, elem}}}, true
	case "zip":
		var lists [][]value
		var elems []value
		exact := a.exact()
		for _, v := range a.pos {
			items, elem := st.iterItems(fr, v)
			if items == nil || (len(lists) > 0 && len(items) != len(lists[0])) {
				exact = false
			}
			lists = append(lists, items)
			elems = append(elems, elem)
		}
		if exact && len(lists) > 0 {
			out := make([]value, len(lists[0]))
			for i := range out {
				row := make([]value, len(lists))
				for j := range lists {
					row[j] = lists[j][i]
				}
				out[i] = tuple{items: row}
			}
			return tuple{items: out}, true
		}
		if !a.exact() {
			return seq{elem: seq{elem: join(joinAll(elems), a.star)}}, true
		}
		for _, e := range elems {
			if e == nil {
				return tuple{}, true
			}
		}
		return seq{elem: tuple{items: elems}}, true
	case "range":
		var nums []int64
		ok := a.exact()
		for _, v := range a.pos {
			c, isC := v.(cnst)
			if !isC || !c.iok || c.k != 'i' {
				ok = false
				break
			}
			nums = append(nums, c.i)
		}
		if ok && len(nums) >= 1 && len(nums) <= 3 {
			lo, hi, step := int64(0), nums[0], int64(1)
			if len(nums) >= 2 {
				lo, hi = nums[0], nums[1]
			}
			if len(nums) == 3 {
				step = nums[2]
			}
			if step != 0 {
				var items []value
				for i := lo; (step > 0 && i < hi || step < 0 && i > hi) && len(items) <= maxUnroll; i += step {
					items = append(items, intV(i))
				}
				if len(items) <= maxUnroll {
					if items == nil {
						items = []value{}
					}
					return tuple{items: items}, true
				}
			}
		}
		return seq{elem: data{hint: "index"}}, true
	case "map":
		if len(a.pos) < 2 {
			return seq{elem: st.callLate(fr, arg0(), topArgs(), site)}, true
		}
		items, _ := st.iterItems(fr, a.pos[1])
		if len(a.pos) == 2 && items != nil {
			out := make([]value, 0, len(items))
			for _, it := range items {
				r := st.callLate(fr, a.pos[0], &args{pos: []value{it}, posN: []*Node{nil}}, site)
				if r != nil {
					out = append(out, r)
				}
			}
			return tuple{items: out}, true
		}
		ca := &args{}
		for _, v := range a.pos[1:] {
			_, e := st.iterItems(fr, v)
			if e == nil {
				return tuple{}, true
			}
			ca.pos = append(ca.pos, e)
			ca.posN = append(ca.posN, nil)
		}
		if a.star != nil {
			ca.star = top{}
		}
		return seq{elem: st.callLate(fr, a.pos[0], ca, site)}, true
	case "filter":
		_, elem := st.iterItems(fr, a.arg(1, ""))
		if f := arg0(); elem != nil && !isNone(f) {
			st.callLate(fr, f, &args{pos: []value{elem}, posN: []*Node{nil}}, site)
		}
		if elem == nil {
			return tuple{}, true
		}
		return seq{elem: elem}, true
	case "iter":
		if len(a.pos) == 2 {
			return seq{elem: st.callLate(fr, arg0(), &args{}, site)}, true
		}
		items, elem := st.iterItems(fr, arg0())
		if items != nil {
			return tuple{items: items}, true
		}
		if elem == nil {
			return tuple{}, true
		}
		return seq{elem: elem}, true
	case "next":
		_, elem := st.iterItems(fr, arg0())
		if len(a.pos) > 1 {
			return join(elem, a.pos[1]), true
		}
		return elem, true
	case "getattr", "setattr", "delattr":
		attr, ok := a.arg(1, "").(strv)
		text, known := attr.known()
		if !ok || !known {
			st.problem(ReasonDynamicAttribute, "%s with an attribute name computed at run time", name)
			return top{}, true
		}
		switch name {
		case "getattr":
			v := st.getAttr(fr, arg0(), text)
			if len(a.pos) > 2 {
				v = join(v, a.pos[2])
			}
			return v, true
		case "setattr":
			st.setAttr(fr, arg0(), text, a.arg(2, ""))
			return noneV, true
		}
		if _, isInst := arg0().(ref); !isInst {
			st.problem(ReasonDynamicAttribute, "deletes the attribute %s of %s", text, describe(arg0()))
		}
		return noneV, true
	case "type":
		if len(a.pos) == 3 {
			st.problem(ReasonIntrospection, "makes a class with type(name, bases, namespace)")
			return top{}, true
		}
		touchAll()
		return builtin{name: "type-of"}, true // a class the reader cannot follow: calling it is unverified
	case "open":
		return st.open(fr, a), true
	case "super":
		return st.superOf(fr), true
	case "staticmethod", "classmethod", "property":
		f, ok := arg0().(*fn)
		if !ok {
			return top{}, true
		}
		setter, _ := a.arg(1, "fset").(*fn)
		return f.as(name, setter), true
	case "exit", "quit", "sys.exit":
		touchAll()
		return nil, true
	}
	return nil, false
}

func boolV2(t int) value {
	switch t {
	case 1:
		return trueV
	case 0:
		return falseV
	}
	return data{hint: "bool"}
}

func isNone(v value) bool {
	c, ok := v.(cnst)
	return ok && c.k == 'n'
}

// dictFrom fills dict o from a mapping or an iterable of pairs.
func (st *state) dictFrom(fr *frame, o *object, v value) {
	for _, x := range alts(v) {
		if r, ok := x.(ref); ok && r.o.kind == objDict {
			st.mergeDict(fr, o, x)
			continue
		}
		if r, ok := x.(ref); ok && r.o.kind == objInstance {
			// dict(obj) and update(obj) call its keys() and __getitem__
			// when it has keys, else iterate it.
			st.escape(fr, x)
			st.setKey(o, data{hint: "key"}, top{})
		}
		items, elem := st.iterItems(fr, x)
		exact := items != nil
		if !exact {
			if elem == nil {
				continue
			}
			items = []value{elem}
		}
		for _, it := range items {
			if t, ok := it.(tuple); ok && len(t.items) == 2 {
				st.setKey(o, t.items[0], t.items[1])
				continue
			}
			_, e := st.iterItems(fr, it)
			st.setKey(o, data{hint: "key"}, e)
		}
		if !exact {
			st.inexact(o)
		}
	}
}

// open models the builtin open(): reading is harmless; writing is to a
// file named in the code, inside the workspace, that Python would never
// import.
func (st *state) open(fr *frame, a *args) value {
	file := a.arg(0, "file")
	mode := a.arg(1, "mode")
	if _, ok := a.kw["opener"]; ok {
		st.problem(ReasonRawChannel, "open() with an opener, which can open any descriptor")
		return data{hint: "file"}
	}
	m := "r"
	if mode != nil {
		ms, ok := mode.(strv)
		t, known := ms.known()
		if !ok || !known {
			st.problem(ReasonFileWrite, "opens a file with a mode computed at run time")
			return data{hint: "file"}
		}
		m = t
	}
	if c, ok := file.(cnst); ok && c.k == 'i' {
		st.problem(ReasonRawChannel, "opens the descriptor %s directly", c.text)
		return data{hint: "file"}
	}
	if !strings.ContainsAny(m, "wax+") {
		return data{hint: "file"}
	}
	for _, f := range alts(file) {
		s, ok := f.(strv)
		t, known := s.known()
		if !ok || !known {
			st.problem(ReasonFileWrite, "writes a file whose name is computed at run time")
			continue
		}
		st.checkWritePath(t)
	}
	return data{hint: "file"}
}

// checkWritePath checks a file the program writes: inside its workspace,
// and not one Python would import in place of a module.
func (st *state) checkWritePath(p string) {
	switch {
	case p == "":
		return
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~"):
		st.problem(ReasonFileWrite, "writes %s, outside the program's workspace (a path there can be a descriptor's)", clip(p))
		return
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			st.problem(ReasonFileWrite, "writes %s, which leaves the program's workspace", clip(p))
			return
		}
	}
	if stem, ok := importableStem(p); ok && st.moduleName(stem) {
		st.problem(ReasonFileWrite, "writes %s, which Python would import in place of the module %s", clip(p), stem)
	}
}

// importableStem returns the module name a file beside the program
// would be imported as, if it would be.
func importableStem(p string) (string, bool) {
	p = path.Clean(strings.TrimPrefix(p, "./"))
	if p == "." || p == "" {
		return "", false
	}
	if first, _, nested := strings.Cut(p, "/"); nested {
		return first, true // a package directory
	}
	stem, suffix, _ := strings.Cut(p, ".")
	switch {
	case suffix == "py" || suffix == "pyc" || suffix == "pyw" || suffix == "so" || strings.HasSuffix(suffix, ".so") || strings.HasSuffix(suffix, ".py"):
		return stem, true
	}
	return "", false
}

// moduleName reports whether Python may import a module of this name for
// the program: a standard one, one it imports, or one the client does.
func (st *state) moduleName(stem string) bool {
	return st.tree.Stdlib[stem] || st.imported[stem] || stem == "gatehouse" || slices.Contains(clientImports, stem) || modules[stem] != nil
}

// shadowedFiles checks the files written beside the program.
func (st *state) shadowedFiles() {
	for _, f := range st.opts.Files {
		if stem, ok := importableStem(f); ok && st.moduleName(stem) {
			st.problems[Problem{Reason: ReasonShadowedModule, Detail: "the file " + clip(f) + " beside the program would be imported in place of the module " + stem}] = true
		}
	}
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// harmlessDunders are the special attributes a program may read: text.
var harmlessDunders = map[string]bool{"__name__": true, "__qualname__": true, "__module__": true, "__doc__": true}

func isModule(v value) bool { _, ok := v.(module); return ok }
