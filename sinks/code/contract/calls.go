package contract

import (
	"slices"
	"strings"
)

func (st *state) evalCall(fr *frame, n *Node) value {
	callee := st.eval(fr, n.Node("func"))
	if callee == nil {
		return nil
	}
	a := st.evalArgs(fr, n)
	if a == nil {
		return nil
	}
	saved := st.line
	if n.Line > 0 {
		st.line = n.Line
	}
	v := st.call(fr, callee, a, n)
	st.line = saved
	return v
}

// evalArgs evaluates a call's arguments, spreading *args and **kwargs
// whose items are known.
func (st *state) evalArgs(fr *frame, n *Node) *args {
	a := &args{kw: map[string]value{}, kwN: map[string]*Node{}}
	for _, e := range n.Nodes("args") {
		if e != nil && e.Type == "Starred" {
			v := st.eval(fr, e.Node("value"))
			if v == nil {
				return nil
			}
			items, elem := st.iterItems(fr, v)
			if items != nil && a.star == nil {
				for _, it := range items {
					a.pos = append(a.pos, it)
					a.posN = append(a.posN, nil)
				}
				continue
			}
			if elem == nil {
				elem = top{}
			}
			a.star = join(a.star, elem)
			continue
		}
		v := st.eval(fr, e)
		if v == nil {
			return nil
		}
		if a.star != nil { // after a * of unknown length, a position is not known
			a.star = join(a.star, v)
			continue
		}
		a.pos = append(a.pos, v)
		a.posN = append(a.posN, e)
	}
	for _, k := range n.Nodes("keywords") {
		if k == nil {
			continue
		}
		v := st.eval(fr, k.Node("value"))
		if v == nil {
			return nil
		}
		name := k.Str("arg")
		if name != "" {
			a.kw[name] = v
			a.kwN[name] = k.Node("value")
			continue
		}
		st.spreadKwargs(fr, a, v)
	}
	return a
}

// spreadKwargs adds a **mapping to a call's keywords.
func (st *state) spreadKwargs(fr *frame, a *args, v value) {
	if r, ok := v.(ref); ok && r.o.kind == objDict && r.o.exact && r.o.other == nil {
		for _, k := range r.o.order {
			kv, ok := r.o.keyVals[k].(strv)
			t, known := kv.known()
			if !ok || !known {
				a.dstar = join(a.dstar, r.o.keys[k])
				continue
			}
			a.kw[t] = join(a.kw[t], r.o.keys[k])
		}
		return
	}
	switch x := v.(type) {
	case ref:
		if x.o.kind == objDict {
			a.dstar = join(a.dstar, x.o.elem)
			return
		}
		if x.o.kind == objInstance {
			st.escape(fr, x) // f(**obj) calls its keys() and __getitem__
		}
	case data:
		a.dstar = join(a.dstar, data{hint: x.hint})
		return
	}
	a.dstar = join(a.dstar, top{})
}

// call calls callee with a at site (the Call node; nil for a call the
// reader makes itself).
func (st *state) call(fr *frame, callee value, a *args, site *Node) value {
	switch f := callee.(type) {
	case union:
		return overAlts(f, func(alt value) value { return st.call(fr, alt, a, site) })
	case *fn:
		if f.isProperty {
			return nil // a property object is not callable
		}
		return st.callFn(f, nil, a, site)
	case bound:
		if g, ok := f.f.(*fn); ok {
			return st.callFn(g, f.self, a, site)
		}
		return st.call(fr, f.f, &args{pos: append([]value{f.self}, a.pos...), posN: append([]*Node{nil}, a.posN...), kw: a.kw, kwN: a.kwN, star: a.star, dstar: a.dstar}, site)
	case builtin:
		return st.callBuiltin(fr, f, a, site)
	case class:
		return st.instantiate(fr, f.c, a, site)
	case partial:
		pa := &args{pos: append(append([]value{}, f.args...), a.pos...), kw: map[string]value{}, kwN: a.kwN, star: a.star, dstar: a.dstar}
		pa.posN = append(make([]*Node, len(f.args)), a.posN...)
		for k, v := range f.kw {
			pa.kw[k] = v
		}
		for k, v := range a.kw {
			pa.kw[k] = v
		}
		return st.call(fr, f.f, pa, site)
	case top:
		st.problem(ReasonUnknownCallee, "calls a value the reader cannot follow (a function it cannot tell)")
		return top{}
	case data:
		// Plain data called: a method of it, or a function the reader already
		// followed when it was handed away (see escape). What it is given is
		// handed away in turn.
		for _, v := range a.all() {
			st.escape(fr, v)
		}
		return data{hint: f.hint}
	case ref:
		if f.o.kind == objInstance {
			if m := st.classAttr(f.o.cls, "__call__", callee); m != nil {
				return st.call(fr, m, a, site)
			}
		}
		return nil
	}
	return nil // calling a string, a number, a module: TypeError
}

// onStack reports whether def is being called.
func (st *state) onStack(def *Node) bool { return slices.Contains(st.stack, def) }

// callFn calls a function defined in the program, following its body
// with these arguments (self first for a method).
func (st *state) callFn(f *fn, self value, a *args, site *Node) value {
	def := f.def
	if def.Type == "AsyncFunctionDef" {
		st.problem(ReasonUnsupported, "calls %s, an async function: the reader does not follow asynchronous code", f.name)
		return top{}
	}
	if len(st.stack) >= maxCallDepth {
		st.problem(ReasonTooComplex, "calls nest deeper than %d", maxCallDepth)
		return top{}
	}
	if st.onStack(def) {
		return st.summarize(f, self)
	}
	fr := &frame{vars: map[string]value{}, ctx: st.intern(st.cur, def, site), scope: st.scopeOf(def), parent: f.closure, glob: st.glob, fn: f, self: self, late: st.late > 0}
	if !st.bind(fr, f, self, a) {
		return nil // the arguments do not fit: TypeError
	}
	st.reached[def] = true
	if st.isGen(def) {
		return gen{f: f, fr: fr}
	}
	return st.runBody(fr, f)
}

func (st *state) runBody(fr *frame, f *fn) value {
	st.stack = append(st.stack, f.def)
	saved := st.cur
	st.cur = fr.ctx
	defer func() { st.stack = st.stack[:len(st.stack)-1]; st.cur = saved }()
	if f.def.Type == "Lambda" {
		return st.eval(fr, f.def.Node("body"))
	}
	if st.execBlock(fr, f.def.Nodes("body")) {
		fr.rets = join(fr.rets, noneV)
	}
	return fr.rets
}

// summarize follows a recursive call: the function once more with every
// argument unknown, which covers whatever it is called with; the call's
// result is unknown.
func (st *state) summarize(f *fn, self value) value {
	if st.summing[f.def] {
		return top{}
	}
	st.summing[f.def] = true
	fr := &frame{vars: map[string]value{}, ctx: st.intern(st.cur, f.def, f.def), scope: st.scopeOf(f.def), parent: f.closure, glob: st.glob, fn: f, self: self, late: st.late > 0}
	if self != nil {
		self = top{}
	}
	st.bind(fr, f, self, topArgs())
	if st.isGen(f.def) {
		st.consume(gen{f: f, fr: fr})
	} else {
		st.runBody(fr, f)
	}
	return top{}
}

// isGen reports whether a function definition is a generator's.
func (st *state) isGen(def *Node) bool {
	if v, ok := st.genDefs[def]; ok {
		return v
	}
	found := false
	var walk func(n *Node)
	walk = func(n *Node) {
		if n == nil || found {
			return
		}
		switch n.Type {
		case "Yield", "YieldFrom":
			found = true
			return
		case "FunctionDef", "AsyncFunctionDef", "Lambda", "ClassDef":
			return
		}
		for _, v := range n.fields {
			switch v := v.(type) {
			case *Node:
				walk(v)
			case []any:
				for _, x := range v {
					if c, ok := x.(*Node); ok {
						walk(c)
					}
				}
			}
		}
	}
	if def.Type != "Lambda" {
		for _, s := range def.Nodes("body") {
			walk(s)
		}
	}
	st.genDefs[def] = found
	return found
}

// bind binds a call's arguments to the function's parameters in fr. It
// reports false when known arguments do not fit (the call raises).
func (st *state) bind(fr *frame, f *fn, self value, a *args) bool {
	an := f.def.Node("args")
	var posNames, kwOnly []string
	for _, p := range an.Nodes("posonlyargs") {
		posNames = append(posNames, p.Str("arg"))
	}
	posOnly := len(posNames)
	for _, p := range an.Nodes("args") {
		posNames = append(posNames, p.Str("arg"))
	}
	for _, p := range an.Nodes("kwonlyargs") {
		kwOnly = append(kwOnly, p.Str("arg"))
	}
	vararg, kwarg := an.Node("vararg").Str("arg"), an.Node("kwarg").Str("arg")
	pos, posN := a.pos, a.posN
	if self != nil {
		pos = append([]value{self}, pos...)
		posN = append([]*Node{nil}, posN...)
	}
	exact := a.exact()
	vars := fr.vars
	firstDefault := len(posNames) - len(f.defaults)
	var extra []value
	for i, v := range pos {
		if i < len(posNames) {
			vars[posNames[i]] = v
			continue
		}
		if vararg == "" && exact {
			return false
		}
		extra = append(extra, v)
	}
	kwo := st.alloc(an, objDict)
	for _, k := range sortedKeys(a.kw) {
		v := a.kw[k]
		i := slices.Index(posNames, k)
		if i >= posOnly || slices.Contains(kwOnly, k) {
			if _, dup := vars[k]; dup && exact {
				return false
			}
			vars[k] = join(vars[k], v)
			continue
		}
		if kwarg == "" {
			if exact {
				return false
			}
			continue
		}
		st.setKey(kwo, lit(k), v)
	}
	for i, name := range posNames {
		explicit := i < len(pos)
		if explicit {
			continue
		}
		v, named := vars[name]
		if !exact {
			if a.star != nil {
				v = join(v, a.star)
			}
			if a.dstar != nil && i >= posOnly {
				v = join(v, a.dstar)
			}
		}
		if i >= firstDefault && (!named || !exact) {
			v = join(v, f.defaults[i-firstDefault])
		}
		if v == nil {
			if exact {
				return false
			}
			v = top{}
		}
		vars[name] = v
	}
	for _, name := range kwOnly {
		v, named := vars[name]
		if !exact && a.dstar != nil {
			v = join(v, a.dstar)
		}
		if d, ok := f.kwDefaults[name]; ok && (!named || !exact) {
			v = join(v, d)
		}
		if v == nil {
			if exact {
				return false
			}
			v = top{}
		}
		vars[name] = v
	}
	if vararg != "" {
		if a.star == nil {
			vars[vararg] = tuple{items: extra}
		} else {
			vars[vararg] = seq{elem: join(joinAll(extra), a.star)}
		}
	}
	if kwarg != "" {
		if a.dstar != nil {
			st.grow(&kwo.other, a.dstar)
			st.grow(&kwo.elem, a.dstar)
			st.grow(&kwo.keyElem, data{hint: "key"})
			st.inexact(kwo)
		}
		vars[kwarg] = ref{kwo}
	}
	_ = posN
	return true
}

// consume runs a generator to its end and returns the join of what it
// yields (nil when it yields nothing).
func (st *state) consume(g gen) value {
	if g.comp != nil {
		var out value
		cf := st.compFrame(g.fr, g.comp)
		st.compLoop(cf, g.comp.Nodes("generators"), 0, g.first, func() {
			out = join(out, st.eval(cf, g.comp.Node("elt")))
		})
		return out
	}
	if g.f == nil || st.onStack(g.f.def) {
		return top{}
	}
	cf := &frame{vars: cloneVars(g.fr.vars), ctx: g.fr.ctx, scope: g.fr.scope, parent: g.fr.parent, glob: st.glob, gen: true, fn: g.fr.fn, self: g.fr.self, late: st.late > 0}
	st.stack = append(st.stack, g.f.def)
	saved := st.cur
	st.cur = cf.ctx
	st.execBlock(cf, g.f.def.Nodes("body"))
	st.cur = saved
	st.stack = st.stack[:len(st.stack)-1]
	return cf.yield
}

// firstIter evaluates a comprehension's first iterable, which Python
// evaluates where the comprehension is written.
func (st *state) firstIter(fr *frame, n *Node) value {
	gens := n.Nodes("generators")
	if len(gens) == 0 || gens[0] == nil {
		st.problem(ReasonParse, "a comprehension without a for")
		return top{}
	}
	if gens[0].Int("is_async") != 0 {
		st.problem(ReasonUnsupported, "an async comprehension: the reader does not follow asynchronous code")
	}
	return st.eval(fr, gens[0].Node("iter"))
}

// compExact evaluates a comprehension of one for and no if over items
// known one by one: its items, one by one (nil, false otherwise).
func (st *state) compExact(fr *frame, n *Node, first value) ([]value, bool) {
	gens := n.Nodes("generators")
	if len(gens) != 1 || gens[0] == nil || len(gens[0].Nodes("ifs")) > 0 || n.Type == "DictComp" {
		return nil, false
	}
	items, _ := st.iterItems(fr, first)
	if items == nil {
		return nil, false
	}
	cf := st.compFrame(fr, n)
	out := make([]value, 0, len(items))
	for _, it := range items {
		st.assign(cf, gens[0].Node("target"), it)
		v := st.eval(cf, n.Node("elt"))
		if v == nil {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

func (st *state) comprehension(fr *frame, n *Node) value {
	first := st.firstIter(fr, n)
	if first == nil {
		return nil
	}
	k := objList
	switch n.Type {
	case "SetComp":
		k = objSet
	case "DictComp":
		k = objDict
	}
	o := st.alloc(n, k)
	if items, ok := st.compExact(fr, n, first); ok && k == objList {
		st.setItems(o, items)
		return ref{o}
	}
	st.inexact(o)
	cf := st.compFrame(fr, n)
	st.compLoop(cf, n.Nodes("generators"), 0, first, func() {
		if k == objDict {
			key := st.eval(cf, n.Node("key"))
			val := st.eval(cf, n.Node("value"))
			if key != nil && val != nil {
				st.setKey(o, key, val)
				st.inexact(o)
			}
			return
		}
		if v := st.eval(cf, n.Node("elt")); v != nil {
			st.appendElem(o, v)
		}
	})
	return ref{o}
}

// compFrame is the scope of a comprehension: its targets are its own.
func (st *state) compFrame(fr *frame, n *Node) *frame {
	s := &scopeInfo{locals: map[string]bool{}, globals: map[string]bool{}, nonlocals: map[string]bool{}}
	for _, g := range n.Nodes("generators") {
		targetNames(g.Node("target"), s)
	}
	parent := fr
	for parent != nil && parent.class {
		parent = parent.parent
	}
	if hasWalrus(n) {
		st.problem(ReasonUnsupported, "an assignment expression (:=) inside a comprehension")
	}
	return &frame{vars: map[string]value{}, ctx: st.intern(st.cur, n, nil), scope: s, parent: parent, glob: st.glob, comp: true, late: st.late > 0}
}

func hasWalrus(n *Node) bool {
	s := &scopeInfo{locals: map[string]bool{}}
	walrusTargets(n, s)
	return len(s.locals) > 0
}

// compLoop runs body for every combination of a comprehension's
// generators from the i-th on, iterating it.
func (st *state) compLoop(cf *frame, gens []*Node, i int, it value, body func()) {
	if i >= len(gens) || gens[i] == nil {
		return
	}
	g := gens[i]
	items, elem := st.iterItems(cf, it)
	start := cloneVars(cf.vars)
	var after map[string]value // where the loop variables are left: any item's (closures read them later)
	each := func(item value) {
		cf.vars = cloneVars(start)
		defer func() { after = joinVars(after, cf.vars); cf.vars = after }()
		st.assign(cf, g.Node("target"), item)
		for _, cond := range g.Nodes("ifs") {
			v := st.eval(cf, cond)
			if v == nil || truthy(v) == 0 {
				return
			}
			st.refine(cf, cond, true)
		}
		if i+1 < len(gens) {
			next := st.eval(cf, gens[i+1].Node("iter"))
			if next == nil {
				return
			}
			st.compLoop(cf, gens, i+1, next, body)
			return
		}
		body()
	}
	if items != nil {
		for _, item := range items {
			each(item)
		}
		return
	}
	if elem != nil {
		each(elem)
	}
}

// defineFunction runs a def statement: defaults, annotations and
// decorators are evaluated now, as Python does.
func (st *state) defineFunction(fr *frame, n *Node) value {
	f := st.makeFn(fr, n)
	if f == nil {
		return nil
	}
	if !st.futureAnnotations() {
		if a := n.Node("args"); a != nil {
			for _, field := range []string{"posonlyargs", "args", "kwonlyargs"} {
				for _, p := range a.Nodes(field) {
					if p.Has("annotation") {
						st.eval(fr, p.Node("annotation"))
					}
				}
			}
		}
		if n.Has("returns") {
			st.eval(fr, n.Node("returns"))
		}
	}
	decos := n.Nodes("decorator_list")
	dvals := make([]value, len(decos))
	for i, d := range decos {
		if dvals[i] = st.eval(fr, d); dvals[i] == nil {
			return nil
		}
	}
	var v value = f
	for i := len(decos) - 1; i >= 0; i-- {
		v = st.decorate(fr, dvals[i], v, decos[i])
		if v == nil {
			return nil
		}
	}
	return v
}

func (st *state) defineLambda(fr *frame, n *Node) value {
	f := st.makeFn(fr, n)
	if f == nil {
		return nil
	}
	return f
}

func (st *state) makeFn(fr *frame, n *Node) *fn {
	a := n.Node("args")
	if a == nil {
		st.problem(ReasonParse, "a function without parameters in the tree")
		return nil
	}
	f := &fn{def: n, name: n.Str("name"), kwDefaults: map[string]value{}}
	if n.Type == "Lambda" {
		f.name = "<lambda>"
	}
	for _, d := range a.Nodes("defaults") {
		v := st.eval(fr, d)
		if v == nil {
			return nil
		}
		f.defaults = append(f.defaults, v)
	}
	if len(f.defaults) > len(a.Nodes("posonlyargs"))+len(a.Nodes("args")) {
		st.problem(ReasonParse, "a function with more defaults than parameters")
		return nil
	}
	kwo, kwd := a.Nodes("kwonlyargs"), a.Nodes("kw_defaults")
	for i, d := range kwd {
		if d == nil || i >= len(kwo) {
			continue
		}
		v := st.eval(fr, d)
		if v == nil {
			return nil
		}
		f.kwDefaults[kwo[i].Str("arg")] = v
	}
	closure := fr
	if fr.class {
		f.cls = fr.defining
		closure = fr.parent
	}
	f.closure = closure
	return f
}

// futureAnnotations reports whether the module has
// "from __future__ import annotations" (annotations are then never
// evaluated).
func (st *state) futureAnnotations() bool {
	for _, s := range st.tree.Module.Nodes("body") {
		if s != nil && s.Type == "ImportFrom" && s.Str("module") == "__future__" {
			for _, a := range s.Nodes("names") {
				if a.Str("name") == "annotations" {
					return true
				}
			}
		}
	}
	return false
}

// decorate applies decorator d to f.
func (st *state) decorate(fr *frame, d, f value, site *Node) value {
	if b, ok := d.(builtin); ok {
		g, isFn := f.(*fn)
		switch b.name {
		case "staticmethod", "classmethod", "property", "functools.cached_property":
			if !isFn {
				return f
			}
			return g.as(b.name, nil)
		case "property.setter":
			p, ok := b.self.(*fn)
			if !ok || !isFn {
				return f
			}
			c := *p
			c.setter = g
			return &c
		case "property.getter", "property.deleter":
			return b.self
		case "functools.lru_cache", "functools.cache", "functools.wraps()", "abc.abstractmethod", "typing.overload",
			"typing.final", "functools.total_ordering", "functools.lru_cache()", "dataclasses.dataclass()":
			if b.name == "dataclasses.dataclass()" {
				return st.dataclass(fr, f, b.arg)
			}
			return f
		case "dataclasses.dataclass":
			return st.dataclass(fr, f, nil)
		case "contextlib.contextmanager":
			return builtin{name: "contextmanager()", arg: f}
		}
	}
	return st.call(fr, d, &args{pos: []value{f}, posN: []*Node{nil}, kw: map[string]value{}, kwN: map[string]*Node{}}, site)
}

// escape follows what is handed to code the reader does not see (a
// method of run-time data, a standard function it does not model): any
// function in v could be called there, with anything, so it is followed
// now with unknown arguments, and what it returns is handed away too.
// Values that reach run-time data this way are then covered: calling
// run-time data later needs no following.
func (st *state) escape(fr *frame, v value) {
	st.escapeDepth(fr, v, 0)
}

func (st *state) escapeDepth(fr *frame, v value, depth int) {
	if v == nil {
		return
	}
	if depth > maxEscapeDepth {
		// What lies deeper is handed away too, and the reader would not
		// follow it: it cannot say what that code calls.
		st.problem(ReasonTooComplex, "hands away values nested deeper than %d, which the reader does not follow", maxEscapeDepth)
		return
	}
	switch x := v.(type) {
	case union:
		for _, a := range x.alts {
			st.escapeDepth(fr, a, depth)
		}
	case tuple:
		for _, a := range x.items {
			st.escapeDepth(fr, a, depth+1)
		}
	case seq:
		st.escapeDepth(fr, x.elem, depth+1)
	case ref:
		if st.escaped[x.o] {
			return
		}
		st.escaped[x.o] = true
		st.escapeDepth(fr, x.o.elem, depth+1)
		st.escapeDepth(fr, x.o.keyElem, depth+1)
		st.escapeDepth(fr, x.o.other, depth+1)
		for _, k := range sortedKeys(x.o.attrs) {
			st.escapeDepth(fr, x.o.attrs[k], depth+1)
		}
		if x.o.kind == objInstance {
			st.touch(fr, x)
			// Whoever holds the instance now may call any of its methods
			// (a file's write, a mapping's keys, a closing's close) or read
			// any property: each is followed, as it is seen through the
			// instance. Special methods are the touch's; other dunders
			// cannot be read through run-time data without introspection.
			st.late++
			for _, name := range classNames(x.o.cls) {
				st.escapeDepth(fr, st.classAttr(x.o.cls, name, x), depth+1)
			}
			st.late--
		}
	case module:
		if !moduleInert(x.name) {
			st.problem(ReasonUnknownCallee, "hands the module %s to code the reader does not see, which may call what it holds", x.name)
		}
	case top:
		st.problem(ReasonUnknownCallee, "hands a value the reader cannot follow to code it does not see, which may call it")
	case *fn, bound, builtin, class, partial:
		key := escapeKey(x)
		if st.escaped[key] {
			return
		}
		st.escaped[key] = true
		if c, ok := x.(class); ok {
			// The class's own attributes can be read through it, its static
			// and class methods called.
			st.late++
			for _, name := range classNames(c.c) {
				st.escapeDepth(fr, st.classAttr(c.c, name, nil), depth+1)
			}
			st.late--
		}
		st.late++
		r := st.call(fr, x, topArgs(), nil)
		st.late--
		st.escapeDepth(fr, r, depth+1)
	case gen:
		st.escapeDepth(fr, st.consume(x), depth+1)
	}
}

// maxEscapeDepth bounds how deeply nested a value handed away is followed.
const maxEscapeDepth = 8

// classNames lists the attributes, but special ones, that a class and its
// bases define.
func classNames(c *classInfo) []string {
	return attrNames(c, func(name string, _ value) bool { return !isDunder(name) })
}

// attrNames lists, once each and in order (the class's own first, then
// its bases'), the attributes of a class and its bases that keep says to.
func attrNames(c *classInfo, keep func(name string, v value) bool) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(c *classInfo, depth int)
	walk = func(c *classInfo, depth int) {
		if c == nil || depth > 20 {
			return
		}
		for _, name := range sortedKeys(c.attrs) {
			if !seen[name] && keep(name, c.attrs[name]) {
				seen[name] = true
				out = append(out, name)
			}
		}
		for _, b := range c.bases {
			walk(b, depth+1)
		}
	}
	walk(c, 0)
	return out
}

type fnKey struct {
	def     *Node
	closure *ctx
	self    any
}

func escapeKey(v value) any {
	switch x := v.(type) {
	case *fn:
		return fnKey{def: x.def, closure: ctxOf(x.closure)}
	case bound:
		if f, ok := x.f.(*fn); ok {
			var self any = "?"
			if r, ok := x.self.(ref); ok {
				self = r.o
			}
			return fnKey{def: f.def, closure: ctxOf(f.closure), self: self}
		}
	case builtin:
		var self any = x.name
		if r, ok := x.self.(ref); ok {
			self = r.o
		}
		return fnKey{self: [2]any{x.name, self}}
	case class:
		return x.c
	}
	return fnKey{self: v.kind()}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func isDunder(name string) bool {
	return len(name) > 4 && strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__")
}

// callLate calls f as lazy code would: at a time the reader cannot tell
// (map and filter call it while they are iterated, a defaultdict when a
// key is missing), so names of older frames read as every value they are
// ever bound to.
func (st *state) callLate(fr *frame, f value, a *args, site *Node) value {
	st.late++
	defer func() { st.late-- }()
	return st.call(fr, f, a, site)
}

// as is f made a static method, a class method or a property (with its
// setter) by the builtin of that name.
func (f *fn) as(kind string, setter *fn) *fn {
	c := *f
	switch kind {
	case "staticmethod":
		c.isStatic = true
	case "classmethod":
		c.isClass = true
	default:
		c.isProperty = true
		c.setter = setter
	}
	return &c
}
