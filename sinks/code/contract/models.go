package contract

import "strings"

// callModuleSpecial models the standard functions that are neither plain
// data functions nor denied: those that return what they are given, call
// it, or change a list they are given.
func (st *state) callModuleSpecial(fr *frame, name string, a *args, site *Node) (value, bool) {
	arg := a.arg
	elemOf := func(v value) value { _, e := st.iterItems(fr, v); return e }
	newList := func(elem value) value {
		o := st.alloc(site, objList)
		st.appendElem(o, elem)
		return ref{o}
	}
	callWith := func(f value, vs ...value) value {
		ca := &args{pos: vs, posN: make([]*Node, len(vs))}
		return st.call(fr, f, ca, site)
	}
	callLater := func(f value, vs ...value) value { // lazy: at a time the reader cannot tell
		ca := &args{pos: vs, posN: make([]*Node, len(vs))}
		return st.callLate(fr, f, ca, site)
	}
	mutate := func(target, v value) {
		for _, t := range alts(target) {
			if r, ok := t.(ref); ok && r.o.kind != objInstance {
				st.appendElem(r.o, v)
			}
		}
	}
	switch name {
	case "os.path.join", "posixpath.join":
		return pathJoin(a), true
	case "urllib.parse.quote", "urllib.parse.quote_plus", "urllib.parse.quote_from_bytes":
		safe := "/"
		if name != "urllib.parse.quote" {
			safe = ""
		}
		if v, ok := arg(1, "safe").(strv); ok {
			if t, known := v.known(); known {
				safe = t
			} else {
				return hole(exprName(a.node(0, "string"))), true
			}
		}
		if strings.Contains(safe, "/") {
			// quote keeps "/": the value may carry many segments, as any hole may.
			return quote(arg(0, "string"), safe, exprName(a.node(0, "string"))), true
		}
		return quote(arg(0, "string"), safe, exprName(a.node(0, "string"))), true
	case "urllib.parse.urljoin":
		return urljoin(arg(0, "base"), arg(1, "url")), true
	case "sys.exit":
		return nil, true
	case "heapq.heappush", "heapq.heappushpop", "heapq.heapreplace", "bisect.insort", "bisect.insort_left", "bisect.insort_right":
		mutate(arg(0, ""), arg(1, ""))
		if key, ok := a.kw["key"]; ok {
			callWith(key, arg(1, ""))
		}
		if strings.HasPrefix(name, "bisect") || name == "heapq.heappush" {
			return noneV, true
		}
		return join(elemOf(arg(0, "")), arg(1, "")), true
	case "heapq.heappop":
		return elemOf(arg(0, "")), true
	case "heapq.heapify", "random.shuffle":
		for _, t := range alts(arg(0, "")) {
			if r, ok := t.(ref); ok {
				st.inexact(r.o)
			}
		}
		return noneV, true
	case "heapq.nlargest", "heapq.nsmallest":
		e := elemOf(arg(1, ""))
		if key, ok := a.kw["key"]; ok && e != nil {
			callWith(key, e)
		}
		return newList(e), true
	case "heapq.merge":
		var e value
		for _, v := range a.pos {
			e = join(e, elemOf(v))
		}
		if key, ok := a.kw["key"]; ok && e != nil {
			callLater(key, e)
		}
		return seq{elem: join(e, a.star)}, true
	case "random.choice":
		return elemOf(arg(0, "seq")), true
	case "random.choices", "random.sample":
		return newList(elemOf(arg(0, "population"))), true
	case "copy.copy", "copy.deepcopy":
		return arg(0, "x"), true // the same object: what is written to the copy is seen in both, which covers both
	case "enum.unique", "typing.overload", "typing.final", "typing.runtime_checkable", "functools.total_ordering", "abc.abstractmethod", "functools.cache":
		return arg(0, ""), true
	case "enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag", "enum.IntFlag", "typing.NamedTuple", "typing.TypedDict", "collections.namedtuple":
		for _, v := range a.all() {
			st.escape(fr, v) // the members' values and defaults are read back as plain data
		}
		return data{hint: lastName(name)}, true // the functional forms make a class of plain values
	case "typing.cast":
		return arg(1, "val"), true
	case "typing.Protocol", "typing.Generic", "abc.ABC", "abc.ABCMeta":
		return data{hint: "typing"}, true
	case "dataclasses.dataclass":
		if len(a.pos) == 1 {
			return st.dataclass(fr, a.pos[0], nil), true
		}
		return builtin{name: "dataclasses.dataclass()"}, true
	case "dataclasses.field":
		var d value
		if v, ok := a.kw["default"]; ok {
			d = v
		}
		if f, ok := a.kw["default_factory"]; ok {
			d = join(d, callLater(f))
		}
		if d == nil {
			d = top{}
		}
		return builtin{name: "dataclasses.field()", arg: d}, true
	case "collections.OrderedDict":
		v, _ := st.callPythonBuiltin(fr, "dict", a, site)
		return v, true
	case "collections.defaultdict":
		o := st.alloc(site, objDict)
		if len(a.pos) > 0 && !isNone(a.pos[0]) {
			st.grow(&o.other, callLater(a.pos[0]))
			st.grow(&o.elem, o.other)
			st.inexact(o)
		}
		if len(a.pos) > 1 {
			st.dictFrom(fr, o, a.pos[1])
		}
		for _, k := range sortedKeys(a.kw) {
			st.setKey(o, lit(k), a.kw[k])
		}
		return ref{o}, true
	case "collections.deque":
		v, _ := st.callPythonBuiltin(fr, "list", &args{pos: a.pos[:min(1, len(a.pos))], posN: make([]*Node, min(1, len(a.pos))), star: a.star}, site)
		return v, true
	case "functools.partial":
		if len(a.pos) == 0 {
			return top{}, true
		}
		kw := map[string]value{}
		for k, v := range a.kw {
			kw[k] = v
		}
		if !a.exact() {
			st.problem(ReasonArgumentsAtRunTime, "functools.partial with *args or **kwargs built at run time")
			return top{}, true
		}
		return partial{f: a.pos[0], args: append([]value{}, a.pos[1:]...), kw: kw}, true
	case "functools.reduce":
		f, it := arg(0, "function"), arg(1, "iterable")
		e := elemOf(it)
		acc := join(arg(2, "initial"), e)
		if len(a.pos) < 3 {
			acc = e
		}
		for i := 0; i < 4 && e != nil; i++ {
			next := join(acc, callWith(f, acc, e))
			if same(next, acc) {
				break
			}
			acc = next
			if i == 2 {
				acc = widen(acc)
			}
		}
		return acc, true
	case "functools.lru_cache":
		if len(a.pos) == 1 {
			if _, isFn := a.pos[0].(*fn); isFn {
				return a.pos[0], true
			}
		}
		return builtin{name: "functools.lru_cache()"}, true
	case "functools.wraps":
		return builtin{name: "functools.wraps()"}, true
	case "functools.cached_property":
		return st.decorate(fr, builtin{name: "functools.cached_property"}, arg(0, ""), site), true
	case "functools.cmp_to_key":
		st.escape(fr, arg(0, ""))
		return data{hint: "key"}, true
	case "contextlib.contextmanager":
		return builtin{name: "contextmanager()", arg: arg(0, "")}, true
	case "contextlib.suppress":
		return builtin{name: "contextlib.suppress()"}, true
	case "contextlib.nullcontext", "contextlib.closing":
		v := arg(0, "")
		if v == nil {
			v = noneV
		}
		if name == "contextlib.closing" {
			// Leaving the block calls its close(), after whatever the block did.
			callLater(st.getAttr(fr, v, "close"))
		}
		return builtin{name: "contextlib.nullcontext()", arg: v}, true
	case "logging.getLogger":
		return data{hint: "logger"}, true
	case "logging.basicConfig":
		if f, ok := a.kw["filename"]; ok {
			for _, x := range alts(f) {
				s, ok := x.(strv)
				t, known := s.known()
				if !ok || !known {
					st.problem(ReasonFileWrite, "logs to a file whose name is computed at run time")
					continue
				}
				st.checkWritePath(t)
			}
		}
		if _, ok := a.kw["stream"]; ok {
			st.problem(ReasonRawChannel, "logs to a stream the reader does not follow")
		}
		if _, ok := a.kw["handlers"]; ok {
			st.problem(ReasonRawChannel, "logs through handlers the reader does not follow")
		}
		return noneV, true
	}
	if strings.HasPrefix(name, "itertools.") {
		var e value
		for _, v := range a.all() {
			if isCallable(v) {
				continue
			}
			e = join(e, elemOf(v))
		}
		for _, v := range a.all() {
			if isCallable(v) {
				// With as many arguments as it may be given (starmap
				// spreads each item, accumulate gives two): unknown.
				st.callLate(fr, v, &args{star: join(e, top{})}, site)
			}
		}
		if e == nil {
			return tuple{}, true
		}
		return seq{elem: join(e, seq{elem: e})}, true
	}
	return nil, false
}

// containerMethod calls a method of a list, dict or set.
func (st *state) containerMethod(fr *frame, name string, self value, a *args, site *Node) value {
	r, ok := self.(ref)
	if !ok {
		for _, v := range a.all() {
			st.escape(fr, v) // not a container the reader holds: what it is given is handed away
		}
		return data{hint: "value"}
	}
	o := r.o
	arg := a.arg
	typ, meth, _ := strings.Cut(name, ".")
	elems := func(v value) value { _, e := st.iterItems(fr, v); return e }
	switch typ {
	case "list":
		switch meth {
		case "append":
			st.appendElem(o, arg(0, ""))
			return noneV
		case "extend":
			st.appendElem(o, elems(arg(0, "")))
			return noneV
		case "insert":
			st.appendElem(o, arg(1, ""))
			return noneV
		case "pop":
			_, e := o.elems()
			st.inexact(o)
			return e
		case "remove", "clear", "reverse":
			st.inexact(o)
			return noneV
		case "sort":
			st.inexact(o)
			if key, ok := a.kw["key"]; ok && o.elem != nil {
				st.call(fr, key, &args{pos: []value{o.elem}, posN: []*Node{nil}}, site)
			}
			return noneV
		case "index", "count":
			return data{hint: meth}
		case "copy":
			items, e := o.elems()
			n := st.alloc(site, objList)
			if items != nil {
				st.setItems(n, items)
			} else {
				st.appendElem(n, e)
			}
			return ref{n}
		}
	case "dict":
		switch meth {
		case "get":
			v := o.getKey(arg(0, "key"))
			d := arg(1, "default")
			if len(a.pos) < 2 && a.kw["default"] == nil {
				d = noneV
			}
			if key := dictKey(arg(0, "key")); key == "" || !o.exact || o.keys[key] == nil || o.other != nil {
				v = join(v, d)
			}
			return v
		case "keys":
			if o.exact {
				items, _ := o.elems()
				return tuple{items: items}
			}
			return seq{elem: o.keyElem}
		case "values":
			if o.exact {
				out := make([]value, len(o.order))
				for i, k := range o.order {
					out[i] = o.keys[k]
				}
				return tuple{items: out}
			}
			return seq{elem: o.elem}
		case "items":
			if o.exact {
				out := make([]value, len(o.order))
				for i, k := range o.order {
					out[i] = tuple{items: []value{o.keyVals[k], o.keys[k]}}
				}
				return tuple{items: out}
			}
			return seq{elem: tuple{items: []value{o.keyElem, o.elem}}}
		case "pop":
			v := join(o.getKey(arg(0, "key")), arg(1, "default"))
			st.inexact(o)
			return v
		case "popitem":
			st.inexact(o)
			return tuple{items: []value{o.keyElem, o.elem}}
		case "setdefault":
			d := arg(1, "default")
			if len(a.pos) < 2 {
				d = noneV
			}
			st.setKey(o, arg(0, "key"), d)
			return o.getKey(arg(0, "key"))
		case "update":
			if len(a.pos) > 0 {
				st.dictFrom(fr, o, a.pos[0])
			}
			for _, k := range sortedKeys(a.kw) {
				st.setKey(o, lit(k), a.kw[k])
			}
			if a.dstar != nil || a.star != nil {
				st.setKey(o, data{hint: "key"}, join(a.dstar, a.star))
			}
			return noneV
		case "copy":
			n := st.alloc(site, objDict)
			st.mergeDict(fr, n, self)
			return ref{n}
		case "clear":
			st.inexact(o)
			return noneV
		}
	case "set":
		switch meth {
		case "add":
			st.appendElem(o, arg(0, ""))
			return noneV
		case "update":
			for _, v := range a.pos {
				st.appendElem(o, elems(v))
			}
			return noneV
		case "discard", "remove", "clear", "difference_update", "intersection_update", "symmetric_difference_update":
			st.inexact(o)
			return noneV
		case "pop":
			st.inexact(o)
			return o.elem
		case "union", "intersection", "difference", "symmetric_difference", "copy":
			n := st.alloc(site, objSet)
			st.appendElem(n, o.elem)
			if meth == "union" || meth == "symmetric_difference" {
				for _, v := range a.pos {
					st.appendElem(n, elems(v))
				}
			}
			return ref{n}
		case "issubset", "issuperset", "isdisjoint":
			return data{hint: "bool"}
		}
	}
	return nil // no such method: AttributeError
}
