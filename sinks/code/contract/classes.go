package contract

import "strings"

// Classes. A class the program defines is followed like its functions:
// its body runs when the class statement does, its methods are functions,
// an instance is an object on the heap (one per place it is made and
// class) whose attributes are the join of everything written to them.
// Special methods Python calls on its own (__str__ when formatting,
// __eq__ when comparing, __del__ whenever) are followed, with unknown
// arguments, wherever an instance meets such an operation or is handed to
// code the reader does not see (touch). What a class cannot be followed
// through is unverified: a metaclass, a base the reader does not know,
// and the special methods that change what attributes are
// (__getattr__, __setattr__, descriptors, __new__).

type classInfo struct {
	name       string
	node       *Node
	bases      []*classInfo
	exception  bool // derives from an exception class
	enum       bool
	attrs      map[string]value // the class namespace
	fields     []string         // a dataclass's fields, in order
	fieldsDef  map[string]value // their defaults
	dataclass  bool
	namedTuple bool
}

// attributeDunders change how attributes are read or written, or how the
// class itself is made: the reader does not follow a class defining one.
var attributeDunders = map[string]bool{
	"__getattr__": true, "__getattribute__": true, "__setattr__": true, "__delattr__": true,
	"__get__": true, "__set__": true, "__delete__": true, "__set_name__": true, "__init_subclass__": true,
	"__class_getitem__": true, "__new__": true, "__prepare__": true, "__instancecheck__": true,
	"__subclasscheck__": true, "__mro_entries__": true, "__missing__": true, "__getnewargs__": true,
	"__getnewargs_ex__": true, "__dir__": true,
}

func (st *state) defineClass(fr *frame, n *Node) value {
	if len(n.Nodes("keywords")) > 0 {
		st.problem(ReasonUnsupported, "the class %s has a metaclass or class keywords, which the reader does not follow", n.Str("name"))
	}
	ci := st.classes[n]
	if ci == nil {
		ci = &classInfo{name: n.Str("name"), node: n, attrs: map[string]value{}, fieldsDef: map[string]value{}}
		st.classes[n] = ci
		st.heapGrew = true
	}
	for _, bn := range n.Nodes("bases") {
		b := st.eval(fr, bn)
		if b == nil {
			return nil
		}
		for _, a := range alts(b) {
			st.addBase(ci, a)
		}
	}
	decos := n.Nodes("decorator_list")
	dvals := make([]value, len(decos))
	for i, d := range decos {
		if dvals[i] = st.eval(fr, d); dvals[i] == nil {
			return nil
		}
	}
	parent := fr
	if fr.class || fr.scope == nil {
		parent = fr.parent
	}
	cf := &frame{vars: map[string]value{}, ctx: st.intern(st.cur, n, nil), class: true, parent: parent, glob: st.glob, defining: ci, late: st.late > 0}
	if !st.execBlock(cf, n.Nodes("body")) {
		return nil
	}
	for _, name := range sortedKeys(cf.vars) {
		v := cf.vars[name]
		if ci.enum {
			if _, isFn := v.(*fn); !isFn {
				// An Enum member is an object with .name and .value; the
				// value is read back as plain data, so it is handed away.
				st.escape(cf, v)
				v = data{hint: name}
			} else if isSunder(name) {
				// Enum itself calls _missing_, _generate_next_value_ and
				// the like: when, the reader cannot tell.
				st.escape(cf, v)
			}
		}
		slot := ci.attrs[name]
		st.grow(&slot, v)
		ci.attrs[name] = slot
		if attributeDunders[name] {
			st.problem(ReasonUnsupported, "the class %s defines %s, which changes how its attributes behave; the reader does not follow it", ci.name, name)
		}
	}
	var v value = class{ci}
	for i := len(decos) - 1; i >= 0; i-- {
		v = st.decorate(fr, dvals[i], v, decos[i])
		if v == nil {
			return nil
		}
	}
	return v
}

// isSunder reports whether name is _like_this_ (Enum's own hooks).
func isSunder(name string) bool {
	return len(name) > 2 && name[0] == '_' && name[len(name)-1] == '_' && name[1] != '_' && name[len(name)-2] != '_'
}

// addBase records one base of ci.
func (st *state) addBase(ci *classInfo, b value) {
	switch x := b.(type) {
	case class:
		if x.c.namedTuple {
			// Its fields, and what makes and reads them, are the base's.
			// (Checked before the base is found known: problems are
			// found again on every pass, bases are kept.)
			st.problem(ReasonUnsupported, "the class %s derives from the NamedTuple %s, which the reader does not follow", ci.name, x.c.name)
		}
		for _, have := range ci.bases {
			if have == x.c {
				return
			}
		}
		if x.c == ci {
			return
		}
		ci.bases = append(ci.bases, x.c)
		ci.exception = ci.exception || x.c.exception
		ci.enum = ci.enum || x.c.enum
		ci.dataclass = ci.dataclass || x.c.dataclass
		st.heapGrew = true
		return
	case builtin:
		switch {
		case x.name == "object" || x.name == "abc.ABC" || x.name == "typing.Protocol" || x.name == "typing.Generic":
			return
		case isExceptionName(x.name):
			ci.exception = true
			return
		case x.name == "enum.Enum" || x.name == "enum.IntEnum" || x.name == "enum.StrEnum" || x.name == "enum.Flag":
			ci.enum = true
			return
		case x.name == "typing.NamedTuple":
			ci.namedTuple = true
			return
		}
	case data:
		if x.hint == "typing" { // Generic[T], Protocol[T]
			return
		}
	}
	st.problem(ReasonUnsupported, "the class %s derives from %s, which the reader does not follow", ci.name, describe(b))
}

// lookupRaw finds an attribute in a class and its bases (every
// definition a base chain can give, when the class has several bases).
func lookupRaw(c *classInfo, name string, depth int) value {
	if c == nil || depth > 20 {
		return nil
	}
	if v, ok := c.attrs[name]; ok {
		return v
	}
	var out value
	for _, b := range c.bases {
		out = join(out, lookupRaw(b, name, depth+1))
		if out != nil && len(c.bases) == 1 {
			break
		}
	}
	return out
}

// classAttr reads an attribute through a class, bound to self (an
// instance, or nil reading the class itself).
func (st *state) classAttr(c *classInfo, name string, self value) value {
	raw := lookupRaw(c, name, 0)
	if raw == nil {
		if name == "__init__" && (c.dataclass || c.namedTuple) {
			return builtin{name: "dataclass.__init__", self: self, arg: class{c}}
		}
		return nil
	}
	var out value
	for _, a := range alts(raw) {
		f, ok := a.(*fn)
		switch {
		case !ok:
			out = join(out, a)
		case f.isStatic:
			out = join(out, f)
		case f.isClass:
			out = join(out, bound{f: f, self: class{c}})
		case f.isProperty:
			if self == nil {
				out = join(out, f)
			} else {
				out = join(out, st.callFn(f, self, &args{}, nil))
			}
		case self != nil:
			out = join(out, bound{f: f, self: self})
		default:
			out = join(out, f)
		}
	}
	return out
}

// instantiate calls a class: a new instance, its __init__ run.
func (st *state) instantiate(fr *frame, c *classInfo, a *args, site *Node) value {
	key := [2]any{site, c}
	if site == nil {
		key = [2]any{c.node, c}
	}
	o := st.alloc(key, objInstance)
	o.cls = c
	self := ref{o}
	if c.enum {
		return data{hint: c.name} // Color("red") looks a member up
	}
	if init := st.classAttr(c, "__init__", self); init != nil {
		if st.call(fr, init, a, site) == nil {
			return nil
		}
	} else {
		// object's own __init__ (an exception's keeps what it is given
		// in args, which the program reads back as plain data).
		for _, v := range a.all() {
			st.escape(fr, v)
		}
	}
	// Python may call its special methods at any point from now on.
	st.touch(fr, self)
	return self
}

// instanceAttr reads an attribute of an instance.
func (st *state) instanceAttr(o *object, name string, self value) value {
	v := o.attrs[name]
	ca := st.classAttr(o.cls, name, self)
	if v == nil && ca == nil {
		if o.cls != nil && o.cls.exception {
			return data{hint: name} // args, with_traceback, ...
		}
		if o.cls != nil && o.cls.namedTuple {
			return st.namedTupleAttr(o, name, self)
		}
		return nil
	}
	return join(v, ca)
}

// namedTupleAttr reads what a NamedTuple's instances have beside their
// fields. _replace writes into the instance itself (the heap joins what
// the copy holds into it, which covers both) and gives it back.
func (st *state) namedTupleAttr(o *object, name string, self value) value {
	switch name {
	case "_replace":
		return builtin{name: "namedtuple._replace", self: self}
	case "_asdict", "count", "index":
		return builtin{name: "namedtuple." + name, self: self}
	case "_fields", "_field_defaults":
		return data{hint: name}
	}
	if strings.HasPrefix(name, "_") {
		st.problem(ReasonUnknownHelper, "reads %s of the NamedTuple %s, which the reader does not know", name, o.cls.name)
		return top{}
	}
	return nil
}

// setInstanceAttr writes an attribute of an instance.
func (st *state) setInstanceAttr(fr *frame, o *object, name string, v value) {
	if raw := lookupRaw(o.cls, name, 0); raw != nil {
		for _, a := range alts(raw) {
			if f, ok := a.(*fn); ok && f.isProperty {
				if f.setter != nil {
					st.callFn(f.setter, ref{o}, &args{pos: []value{v}, posN: []*Node{nil}}, nil)
				}
				return
			}
		}
	}
	slot := o.attrs[name]
	st.grow(&slot, v)
	o.attrs[name] = slot
}

// touch follows the special methods of the instances in v, which Python
// may call on its own wherever v now goes.
func (st *state) touch(fr *frame, v value) { st.touchDepth(fr, v, 0) }

func (st *state) touchDepth(fr *frame, v value, depth int) {
	if depth > 4 {
		return
	}
	for _, a := range alts(v) {
		switch x := a.(type) {
		case tuple:
			for _, it := range x.items {
				st.touchDepth(fr, it, depth+1)
			}
			continue
		case seq:
			st.touchDepth(fr, x.elem, depth+1)
			continue
		case gen:
			// Whatever iterates what it is given (bytes, bytearray, a
			// formatter's join) runs a generator's body.
			st.escape(fr, x)
			continue
		}
		r, ok := a.(ref)
		if ok && r.o.kind != objInstance {
			st.touchDepth(fr, r.o.elem, depth+1)
			st.touchDepth(fr, r.o.keyElem, depth+1)
			continue
		}
		if !ok || r.o.cls == nil {
			continue
		}
		k := fnKey{self: [2]any{"touch", r.o}}
		if st.escaped[k] {
			continue
		}
		st.escaped[k] = true
		st.late++
		for _, name := range st.dunders(r.o.cls) {
			if m := st.classAttr(r.o.cls, name, a); m != nil {
				// What it returns goes wherever Python's own code takes it
				// (abs, format, iter): it is handed away in turn.
				st.escape(fr, st.call(fr, m, topArgs(), nil))
			}
		}
		st.late--
	}
}

// dunders lists the special methods a class and its bases define, but
// __init__.
func (st *state) dunders(c *classInfo) []string {
	return attrNames(c, func(name string, v value) bool {
		_, isFn := v.(*fn)
		return isFn && isDunder(name) && name != "__init__"
	})
}

// instanceIter is what iterating an instance gives.
func (st *state) instanceIter(fr *frame, o *object) value {
	self := ref{o}
	if it := st.classAttr(o.cls, "__iter__", self); it != nil {
		r := st.call(fr, it, &args{}, nil)
		if g, ok := r.(gen); ok {
			return st.consume(g)
		}
		if rr, ok := r.(ref); ok && rr.o.kind == objInstance {
			if nx := st.classAttr(rr.o.cls, "__next__", r); nx != nil {
				return st.call(fr, nx, &args{}, nil)
			}
		}
		_, elem := st.iterItems(fr, r)
		return elem
	}
	if gi := st.classAttr(o.cls, "__getitem__", self); gi != nil {
		return st.call(fr, gi, &args{pos: []value{data{hint: "index"}}, posN: []*Node{nil}}, nil)
	}
	if o.cls != nil && o.cls.namedTuple {
		var out value
		for _, f := range o.cls.fields {
			out = join(out, o.attrs[f])
		}
		return out
	}
	return nil
}

// dataclass makes a class a dataclass: its annotated class attributes
// are its fields and its __init__ sets them.
func (st *state) dataclass(fr *frame, v value, opts value) value {
	c, ok := v.(class)
	if !ok {
		return v
	}
	c.c.dataclass = true
	st.fields(c.c)
	return v
}

// fields reads a dataclass's or NamedTuple's fields from its body.
func (st *state) fields(c *classInfo) {
	if c.fields != nil {
		return
	}
	c.fields = []string{}
	for _, b := range c.bases {
		st.fields(b)
		c.fields = append(c.fields, b.fields...)
		for k, v := range b.fieldsDef {
			c.fieldsDef[k] = v
		}
	}
	for _, s := range c.node.Nodes("body") {
		if s == nil || s.Type != "AnnAssign" || s.Node("target").Type != "Name" {
			continue
		}
		name := s.Node("target").Str("id")
		c.fields = append(c.fields, name)
		if s.Has("value") {
			c.fieldsDef[name] = c.attrs[name]
		}
	}
}

// dataclassInit is the __init__ a dataclass or NamedTuple gets.
func (st *state) dataclassInit(fr *frame, self value, c *classInfo, a *args) value {
	if c.namedTuple {
		st.fields(c)
	}
	r, ok := self.(ref)
	if !ok || r.o.kind != objInstance {
		return noneV
	}
	for i, f := range c.fields {
		v := a.arg(i, f)
		if d, ok := c.fieldsDef[f]; ok && (v == nil || !a.exact() || i >= len(a.pos) && a.kw[f] == nil) {
			if dv, isFn := d.(builtin); isFn && dv.name == "dataclasses.field()" {
				d = dv.arg
			}
			v = join(v, d)
		}
		if v == nil {
			if a.exact() {
				return nil
			}
			v = top{}
		}
		st.setInstanceAttr(fr, r.o, f, v)
	}
	if post := st.classAttr(c, "__post_init__", self); post != nil {
		st.call(fr, post, &args{}, nil)
	}
	return noneV
}

// enter is a with statement's __enter__: the value "as" binds, and
// whether the context manager may suppress an exception of the body.
func (st *state) enter(fr *frame, cm value) (value, bool) {
	var out value
	suppress := false
	for _, a := range alts(cm) {
		switch x := a.(type) {
		case data:
			out = join(out, data{hint: x.hint})
		case builtin:
			switch x.name {
			case "contextmanager-instance":
				if g, ok := x.arg.(gen); ok {
					out = join(out, st.consume(g))
				} else {
					out = join(out, top{})
				}
				suppress = true
			case "contextlib.suppress()":
				out = join(out, noneV)
				suppress = true
			case "contextlib.nullcontext()":
				out = join(out, x.arg)
			default:
				out = join(out, data{hint: "context"})
			}
		case ref:
			if x.o.kind != objInstance {
				continue
			}
			if en := st.classAttr(x.o.cls, "__enter__", a); en != nil {
				out = join(out, st.call(fr, en, &args{}, nil))
			}
			if ex := st.classAttr(x.o.cls, "__exit__", a); ex != nil {
				st.call(fr, ex, topArgs(), nil)
				suppress = true
			}
		case top:
			st.problem(ReasonUnknownCallee, "uses a value the reader cannot follow as a context manager")
			out, suppress = join(out, top{}), true
		}
	}
	return out, suppress
}

// superOf is super() in a method: the class the method is defined in
// and its self.
func (st *state) superOf(fr *frame) value {
	f := fr.fn
	for p := fr; f == nil && p != nil; p = p.parent {
		f = p.fn
	}
	if f == nil || f.cls == nil {
		st.problem(ReasonUnsupported, "super() outside a method of a class the reader follows")
		return top{}
	}
	self := fr.self
	if self == nil {
		self = top{}
	}
	return builtin{name: "super", self: self, arg: class{f.cls}}
}

// superAttr reads an attribute through super(): the bases of the class.
func (st *state) superAttr(b builtin, name string) value {
	c, _ := b.arg.(class)
	if c.c == nil {
		return top{}
	}
	var out value
	found := false
	for _, base := range c.c.bases {
		if v := st.classAttr(base, name, b.self); v != nil {
			out = join(out, v)
			found = true
		}
	}
	if !found {
		return builtin{name: "noop"} // object.__init__, Exception.__init__, ...
	}
	return out
}
