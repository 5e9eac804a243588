package contract

import (
	"math/big"
	"strconv"
	"strings"
)

// args are the arguments of one call as the reader knows them.
type args struct {
	pos  []value
	posN []*Node // the expression of each positional argument, nil where not known
	kw   map[string]value
	kwN  map[string]*Node
	// star is every element of a *args whose length is not known, dstar
	// every value of a **kwargs whose keys are not known; nil for none.
	star  value
	dstar value
}

// topArgs are arguments the reader knows nothing of.
func topArgs() *args { return &args{star: top{}, dstar: top{}} }

func (a *args) arg(i int, name string) value {
	if i >= 0 && i < len(a.pos) {
		return a.pos[i]
	}
	if v, ok := a.kw[name]; ok && name != "" {
		return v
	}
	return join(a.star, a.dstar)
}

func (a *args) node(i int, name string) *Node {
	if i >= 0 && i < len(a.posN) {
		return a.posN[i]
	}
	return a.kwN[name]
}

// all returns every value the arguments can hold.
func (a *args) all() []value {
	out := append([]value{}, a.pos...)
	for _, k := range sortedKeys(a.kw) {
		out = append(out, a.kw[k])
	}
	if a.star != nil {
		out = append(out, a.star)
	}
	if a.dstar != nil {
		out = append(out, a.dstar)
	}
	return out
}

func (a *args) exact() bool { return a.star == nil && a.dstar == nil }

// slicev is a slice written in a subscript.
type slicev struct{ lo, hi, step value }

func (slicev) kind() string { return "slice" }

func (st *state) eval(fr *frame, n *Node) value {
	st.step()
	if n == nil {
		st.problem(ReasonParse, "the parser tree is missing an expression")
		return top{}
	}
	switch n.Type {
	case "Constant":
		return constValue(n.Const())
	case "Name":
		return st.evalName(fr, n)
	case "JoinedStr":
		return st.fstring(fr, n)
	case "FormattedValue":
		v := st.eval(fr, n.Node("value"))
		if v == nil {
			return nil
		}
		return st.render(fr, v, n.Int("conversion"), n.Has("format_spec"), exprName(n.Node("value")))
	case "Attribute":
		v := st.eval(fr, n.Node("value"))
		if v == nil {
			return nil
		}
		return st.getAttr(fr, v, n.Str("attr"))
	case "Subscript":
		c := st.eval(fr, n.Node("value"))
		k := st.evalSlice(fr, n.Node("slice"))
		if c == nil || k == nil {
			return nil
		}
		return st.getItem(fr, c, k, n)
	case "Call":
		return st.evalCall(fr, n)
	case "BinOp":
		l := st.eval(fr, n.Node("left"))
		r := st.eval(fr, n.Node("right"))
		if l == nil || r == nil {
			return nil
		}
		return st.binop(fr, n, n.Node("op"), l, r, n.Node("left"), n.Node("right"))
	case "UnaryOp":
		v := st.eval(fr, n.Node("operand"))
		if v == nil {
			return nil
		}
		return unaryop(n.Node("op"), v)
	case "BoolOp":
		return st.boolop(fr, n)
	case "Compare":
		return st.compare(fr, n)
	case "IfExp":
		test := n.Node("test")
		v := st.eval(fr, test)
		if v == nil {
			return nil
		}
		switch st.truth(fr, test, v) {
		case 1:
			return st.eval(fr, n.Node("body"))
		case 0:
			return st.eval(fr, n.Node("orelse"))
		}
		var a, b value
		va, _ := st.branch(fr, func() bool { st.refine(fr, test, true); a = st.eval(fr, n.Node("body")); return a != nil })
		vb, _ := st.branch(fr, func() bool { st.refine(fr, test, false); b = st.eval(fr, n.Node("orelse")); return b != nil })
		if va != nil || vb != nil {
			fr.vars = joinVars(va, vb)
		}
		return join(a, b)
	case "Dict":
		return st.dictLiteral(fr, n)
	case "List", "Set":
		items, exact := st.evalElts(fr, n.Nodes("elts"))
		if items == nil && exact {
			return nil
		}
		k := objList
		if n.Type == "Set" {
			k = objSet
		}
		o := st.alloc(n, k)
		if exact {
			st.setItems(o, items)
		} else {
			for _, v := range items {
				st.appendElem(o, v)
			}
		}
		return ref{o}
	case "Tuple":
		items, exact := st.evalElts(fr, n.Nodes("elts"))
		if items == nil && exact {
			return nil
		}
		if exact {
			return tuple{items: items}
		}
		return seq{elem: joinAll(items)}
	case "ListComp", "SetComp", "DictComp":
		return st.comprehension(fr, n)
	case "GeneratorExp":
		first := st.firstIter(fr, n)
		if first == nil {
			return nil
		}
		return gen{comp: n, fr: fr, first: first}
	case "Lambda":
		return st.defineLambda(fr, n)
	case "NamedExpr":
		v := st.eval(fr, n.Node("value"))
		if v == nil {
			return nil
		}
		target := fr
		for target.comp && target.parent != nil {
			target = target.parent
		}
		st.assign(target, n.Node("target"), v)
		return v
	case "Starred":
		v := st.eval(fr, n.Node("value"))
		return v
	case "Await":
		st.problem(ReasonUnsupported, "await: the reader does not follow asynchronous code")
		st.eval(fr, n.Node("value"))
		return top{}
	case "Yield":
		v := st.evalOr(fr, n, "value", noneV)
		if v == nil {
			return nil
		}
		fr.yield = join(fr.yield, v)
		return data{hint: "sent"}
	case "YieldFrom":
		v := st.eval(fr, n.Node("value"))
		if v == nil {
			return nil
		}
		_, elem := st.iterItems(fr, v)
		fr.yield = join(fr.yield, elem)
		return data{hint: "sent"}
	case "Slice":
		return st.evalSlice(fr, n)
	}
	st.problem(ReasonUnsupported, "the expression %s is not one the reader follows", n.Type)
	return top{}
}

func constValue(c *Const) value {
	if c == nil {
		return top{}
	}
	switch c.Kind {
	case "str":
		if c.Bad {
			return data{hint: "text"}
		}
		return lit(c.Text)
	case "int":
		if i, err := strconv.ParseInt(c.Text, 10, 64); err == nil {
			return intV(i)
		}
		return cnst{k: 'i', text: c.Text}
	case "float":
		return cnst{k: 'f', text: c.Text}
	case "complex":
		return cnst{k: 'c', text: c.Text}
	case "bool":
		return boolV(c.Text == "true")
	case "none":
		return noneV
	case "bytes":
		return cnst{k: 'y', text: c.Text}
	case "ellipsis":
		return cnst{k: 'e', text: "..."}
	}
	return data{hint: "constant"}
}

func (st *state) evalName(fr *frame, n *Node) value {
	name := n.Str("id")
	if name == "" {
		st.problem(ReasonParse, "a name node without a name")
		return top{}
	}
	if strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__") {
		switch name {
		case "__name__", "__file__", "__doc__":
		case "__debug__":
			return trueV
		default:
			st.problem(ReasonIntrospection, "uses %s", name)
			return top{}
		}
	}
	v, ok := st.lookup(fr, name)
	if v == nil && !ok {
		st.problem(ReasonUnknownHelper, "uses %s, which this program does not define and the reader does not know", name)
	}
	return v
}

// exprName names what an expression holds, for a template's placeholder:
// the variable, attribute or key it reads.
func exprName(n *Node) string {
	if n == nil {
		return ""
	}
	switch n.Type {
	case "Name":
		return n.Str("id")
	case "Attribute":
		return n.Str("attr")
	case "Subscript":
		if k := n.Node("slice"); k != nil {
			if c := k.Const(); c != nil && c.Kind == "str" && identLike(c.Text) {
				return c.Text
			}
		}
		return exprName(n.Node("value"))
	case "Call":
		if a := n.Nodes("args"); len(a) > 0 {
			if name := exprName(a[0]); name != "" {
				return name
			}
		}
		return exprName(n.Node("func"))
	case "FormattedValue", "Starred":
		return exprName(n.Node("value"))
	case "BinOp":
		return exprName(n.Node("right"))
	}
	return ""
}

func identLike(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// evalElts evaluates list, tuple or set items; starred items spread. It
// returns the items and whether they are exactly those (every starred
// item of known length).
func (st *state) evalElts(fr *frame, elts []*Node) ([]value, bool) {
	out := make([]value, 0, len(elts))
	exact := true
	for _, e := range elts {
		if e != nil && e.Type == "Starred" {
			v := st.eval(fr, e.Node("value"))
			if v == nil {
				return nil, true
			}
			items, elem := st.iterItems(fr, v)
			if items != nil {
				out = append(out, items...)
			} else {
				exact = false
				if elem != nil {
					out = append(out, elem)
				}
			}
			continue
		}
		v := st.eval(fr, e)
		if v == nil {
			return nil, true
		}
		out = append(out, v)
	}
	return out, exact
}

func (st *state) newList(site *Node, items []value) value {
	o := st.alloc(site, objList)
	st.setItems(o, items)
	return ref{o}
}

func (st *state) dictLiteral(fr *frame, n *Node) value {
	o := st.alloc(n, objDict)
	keys, vals := n.Nodes("keys"), n.Nodes("values")
	if len(keys) != len(vals) {
		st.problem(ReasonParse, "a dict whose keys and values do not pair")
		return top{}
	}
	for i := range keys {
		v := st.eval(fr, vals[i])
		if v == nil {
			return nil
		}
		if keys[i] == nil { // {**other}
			st.mergeDict(fr, o, v)
			continue
		}
		k := st.eval(fr, keys[i])
		if k == nil {
			return nil
		}
		st.setKey(o, k, v)
	}
	return ref{o}
}

// mergeDict writes every item of v into dict o.
func (st *state) mergeDict(fr *frame, o *object, v value) {
	for _, a := range alts(v) {
		switch x := a.(type) {
		case ref:
			if x.o.kind == objDict && x.o != o {
				for _, k := range x.o.order {
					st.setKey(o, x.o.keyVals[k], join(x.o.keys[k], x.o.other))
				}
				if x.o.other != nil || !x.o.exact {
					st.grow(&o.other, join(x.o.other, x.o.elem))
					st.grow(&o.keyElem, x.o.keyElem)
					st.grow(&o.elem, x.o.elem)
					st.inexact(o)
				}
				continue
			}
			if x.o.kind == objInstance {
				st.escape(fr, x) // {**obj} calls its keys() and __getitem__
			}
			st.setKey(o, data{hint: "key"}, top{})
		default:
			st.setKey(o, data{hint: "key"}, a)
		}
	}
}

// evalSlice evaluates what goes in a subscript's brackets.
func (st *state) evalSlice(fr *frame, n *Node) value {
	if n != nil && n.Type == "Slice" {
		s := slicev{lo: noneV, hi: noneV, step: noneV}
		if n.Has("lower") {
			s.lo = st.eval(fr, n.Node("lower"))
		}
		if n.Has("upper") {
			s.hi = st.eval(fr, n.Node("upper"))
		}
		if n.Has("step") {
			s.step = st.eval(fr, n.Node("step"))
		}
		if s.lo == nil || s.hi == nil || s.step == nil {
			return nil
		}
		return s
	}
	return st.eval(fr, n)
}

// condEval evaluates an expression that may or may not run.
func (st *state) condEval(fr *frame, n *Node) value {
	var v value
	vars, ok := st.branch(fr, func() bool { v = st.eval(fr, n); return v != nil })
	if ok {
		fr.vars = joinVars(fr.vars, vars)
	}
	return v
}

func (st *state) boolop(fr *frame, n *Node) value {
	isAnd := n.Node("op") != nil && n.Node("op").Type == "And"
	vals := n.Nodes("values")
	var out value
	for i, vn := range vals {
		var v value
		if i == 0 {
			v = st.eval(fr, vn)
		} else {
			v = st.condEval(fr, vn)
		}
		if v == nil {
			if i == 0 {
				return nil
			}
			continue
		}
		t := truthy(v)
		last := i == len(vals)-1
		switch {
		case last:
			return join(out, v)
		case isAnd && t == 0, !isAnd && t == 1:
			return join(out, v)
		case isAnd && t == 1, !isAnd && t == 0:
			continue
		}
		// Unknown: this value is the result on some paths, the next ones on others.
		if isAnd {
			out = join(out, filterAlts(v, func(a value) bool { return truthy(a) != 1 }))
		} else {
			out = join(out, filterAlts(v, func(a value) bool { return truthy(a) != 0 }))
		}
	}
	return out
}

func filterAlts(v value, keep func(value) bool) value {
	var out value
	for _, a := range alts(v) {
		if keep(a) {
			out = join(out, a)
		}
	}
	return out
}

// truth is what is known of a condition's truth: 1, 0 or -1.
func (st *state) truth(fr *frame, n *Node, v value) int {
	if r, ok := v.(ref); ok {
		switch r.o.kind {
		case objInstance:
			return -1 // __bool__ and __len__ were followed when the class was made
		default:
			if r.o.exact && r.o.kind != objDict && r.o.items != nil {
				if len(r.o.items) == 0 {
					return -1 // the list may be appended to
				}
			}
			return -1
		}
	}
	return truthy(v)
}

func unaryop(op *Node, v value) value {
	if op == nil {
		return top{}
	}
	switch op.Type {
	case "Not":
		switch truthy(v) {
		case 1:
			return falseV
		case 0:
			return trueV
		}
		return data{hint: "bool"}
	case "USub":
		if c, ok := v.(cnst); ok && c.k == 'i' && c.iok && c.i != -c.i {
			return intV(-c.i)
		}
	case "UAdd":
		if c, ok := v.(cnst); ok && c.k == 'i' {
			return c
		}
	}
	switch v.(type) {
	case top, ref:
		return top{}
	}
	return data{hint: "number"}
}

// compare evaluates a comparison chain to a known bool where it can.
func (st *state) compare(fr *frame, n *Node) value {
	left := st.eval(fr, n.Node("left"))
	if left == nil {
		return nil
	}
	ops, rights := n.Nodes("ops"), n.Nodes("comparators")
	if len(ops) != len(rights) {
		st.problem(ReasonParse, "a comparison whose operators and operands do not pair")
		return top{}
	}
	result := 1
	for i, op := range ops {
		right := st.eval(fr, rights[i])
		if right == nil {
			return nil
		}
		t := compareValues(op, left, right)
		switch {
		case t == 0:
			result = 0
		case t == -1 && result == 1:
			result = -1
		}
		left = right
	}
	switch result {
	case 1:
		return trueV
	case 0:
		return falseV
	}
	return data{hint: "bool"}
}

// compareValues decides "l op r" when both sides are known well enough:
// 1 true, 0 false, -1 unknown.
func compareValues(op *Node, l, r value) int {
	if op == nil {
		return -1
	}
	la, ra := alts(l), alts(r)
	if len(la)*len(ra) > 64 {
		return -1
	}
	result := -2
	for _, x := range la {
		for _, y := range ra {
			t := compare1(op.Type, x, y)
			if t == -1 {
				return -1
			}
			if result == -2 {
				result = t
			} else if result != t {
				return -1
			}
		}
	}
	if result == -2 {
		return -1
	}
	return result
}

func compare1(op string, l, r value) int {
	switch op {
	case "Eq", "NotEq":
		t := equal(l, r)
		if t == -1 || op == "Eq" {
			return t
		}
		return 1 - t
	case "Is", "IsNot":
		t := -1
		ln, lok := l.(cnst)
		rn, rok := r.(cnst)
		switch {
		case lok && ln.k == 'n' && rok && rn.k == 'n':
			t = 1
		case lok && ln.k == 'n' && definitelyNotNone(r), rok && rn.k == 'n' && definitelyNotNone(l):
			t = 0
		case lok && rok && ln.k == 'b' && rn.k == 'b':
			t = boolInt(ln.text == rn.text)
		}
		if t == -1 || op == "Is" {
			return t
		}
		return 1 - t
	case "In", "NotIn":
		t := contains(r, l)
		if t == -1 || op == "In" {
			return t
		}
		return 1 - t
	case "Lt", "LtE", "Gt", "GtE":
		a, aok := numberOf(l)
		b, bok := numberOf(r)
		if !aok || !bok {
			return -1
		}
		c := a.Cmp(b)
		switch op {
		case "Lt":
			return boolInt(c < 0)
		case "LtE":
			return boolInt(c <= 0)
		case "Gt":
			return boolInt(c > 0)
		}
		return boolInt(c >= 0)
	}
	return -1
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func definitelyNotNone(v value) bool {
	switch v := v.(type) {
	case strv, tuple, seq, ref, *fn, bound, builtin, module, class, partial, gen:
		return true
	case cnst:
		return v.k != 'n'
	}
	return false
}

// numberOf returns a known int or bool as a number.
func numberOf(v value) (*big.Int, bool) {
	c, ok := v.(cnst)
	if !ok {
		return nil, false
	}
	switch c.k {
	case 'i':
		n, ok := new(big.Int).SetString(c.text, 10)
		return n, ok
	case 'b':
		if c.text == "true" {
			return big.NewInt(1), true
		}
		return big.NewInt(0), true
	}
	return nil, false
}

// equal decides l == r for known strings, numbers, None and tuples of
// them: 1, 0 or -1.
func equal(l, r value) int {
	switch x := l.(type) {
	case strv:
		lt, lok := x.known()
		switch y := r.(type) {
		case strv:
			rt, rok := y.known()
			if lok && rok {
				return boolInt(lt == rt)
			}
			// A known prefix that differs settles it.
			if p, q := prefixOf(x), prefixOf(y); p != "" && q != "" && !strings.HasPrefix(p, q) && !strings.HasPrefix(q, p) {
				return 0
			}
			return -1
		case cnst:
			return 0 // a str is never equal to a number, None or bytes
		case tuple, ref, *fn, module, class:
			return 0
		}
		return -1
	case cnst:
		switch y := r.(type) {
		case cnst:
			if x.k == 'n' || y.k == 'n' {
				return boolInt(x.k == y.k)
			}
			a, aok := numberOf(x)
			b, bok := numberOf(y)
			if aok && bok {
				return boolInt(a.Cmp(b) == 0)
			}
			if x.k == 'y' && y.k == 'y' {
				return boolInt(x.text == y.text)
			}
			if (x.k == 'y') != (y.k == 'y') {
				return 0
			}
			return -1
		case strv:
			return 0
		case tuple, *fn, module, class:
			return 0
		}
		return -1
	case tuple:
		if y, ok := r.(tuple); ok {
			if len(x.items) != len(y.items) {
				return 0
			}
			result := 1
			for i := range x.items {
				switch equal(x.items[i], y.items[i]) {
				case 0:
					return 0
				case -1:
					result = -1
				}
			}
			return result
		}
		switch r.(type) {
		case strv, cnst:
			return 0
		}
	}
	return -1
}

func prefixOf(s strv) string {
	if len(s.parts) > 0 && !s.parts[0].hole {
		return s.parts[0].lit
	}
	return ""
}

// contains decides "item in container" for known containers.
func contains(container, item value) int {
	var items []value
	switch c := container.(type) {
	case tuple:
		items = c.items
	case ref:
		switch {
		case c.o.kind == objDict && c.o.exact:
			for _, k := range c.o.order {
				items = append(items, c.o.keyVals[k])
			}
		case (c.o.kind == objList || c.o.kind == objSet) && c.o.exact && c.o.items != nil:
			items = c.o.items
		default:
			return -1
		}
	case strv:
		ct, cok := c.known()
		s, ok := item.(strv)
		if !ok || !cok {
			return -1
		}
		it, iok := s.known()
		if !iok {
			return -1
		}
		return boolInt(strings.Contains(ct, it))
	default:
		return -1
	}
	result := 0
	for _, x := range items {
		switch equal(item, x) {
		case 1:
			return 1
		case -1:
			result = -1
		}
	}
	return result
}

// refine narrows the names a condition tests, on the branch where it is
// (or is not) true: a name compared with a string, tested for None, or
// for truth. Only names of the frame itself are narrowed.
func (st *state) refine(fr *frame, test *Node, holds bool) {
	if test == nil {
		return
	}
	switch test.Type {
	case "UnaryOp":
		if op := test.Node("op"); op != nil && op.Type == "Not" {
			st.refine(fr, test.Node("operand"), !holds)
		}
	case "BoolOp":
		isAnd := test.Node("op") != nil && test.Node("op").Type == "And"
		if isAnd == holds {
			for _, v := range test.Nodes("values") {
				st.refine(fr, v, holds)
			}
		}
	case "Name":
		name := test.Str("id")
		cur, ok := st.ownVar(fr, name)
		if !ok {
			return
		}
		want := 1
		if !holds {
			want = 0
		}
		if n := filterAlts(cur, func(a value) bool { t := truthy(a); return t == -1 || t == want }); n != nil {
			fr.vars[name] = n
		}
	case "Compare":
		ops, rights := test.Nodes("ops"), test.Nodes("comparators")
		left := test.Node("left")
		if len(ops) != 1 || len(rights) != 1 || left == nil || ops[0] == nil || rights[0] == nil {
			return
		}
		name, other := left, rights[0]
		if name.Type != "Name" {
			name, other = other, name
		}
		if name.Type != "Name" {
			return
		}
		cur, ok := st.ownVar(fr, name.Str("id"))
		if !ok {
			return
		}
		op := ops[0].Type
		c := other.Const()
		switch {
		case (op == "Eq" || op == "NotEq") && c != nil && c.Kind == "str" && !c.Bad:
			want := lit(c.Text)
			if (op == "Eq") == holds {
				if equal(cur, want) != 0 {
					fr.vars[name.Str("id")] = narrowTo(cur, want)
				}
			} else if n := filterAlts(cur, func(a value) bool { return equal(a, want) != 1 }); n != nil {
				fr.vars[name.Str("id")] = n
			}
		case (op == "Is" || op == "IsNot") && c != nil && c.Kind == "none":
			isNone := (op == "Is") == holds
			n := filterAlts(cur, func(a value) bool {
				cn, ok := a.(cnst)
				if isNone {
					return !definitelyNotNone(a)
				}
				return !(ok && cn.k == 'n')
			})
			if isNone && n != nil {
				n = noneV
			}
			if n != nil {
				fr.vars[name.Str("id")] = n
			}
		case (op == "In" || op == "NotIn") && other.Type == "Tuple" || other.Type == "List" || other.Type == "Set":
			if (op == "In") != holds || name != left {
				return
			}
			var allowed value
			for _, e := range other.Nodes("elts") {
				ec := e.Const()
				if ec == nil || ec.Kind != "str" || ec.Bad {
					return
				}
				allowed = join(allowed, narrowTo(cur, lit(ec.Text)))
			}
			if allowed != nil {
				fr.vars[name.Str("id")] = allowed
			}
		}
	}
}

// narrowTo is what cur is once it is known to equal the string want.
func narrowTo(cur value, want strv) value {
	var out value
	for _, a := range alts(cur) {
		switch equal(a, want) {
		case 1:
			out = join(out, a)
		case -1:
			out = join(out, want)
		}
	}
	return out
}

// ownVar returns a name's value when it belongs to the frame itself.
func (st *state) ownVar(fr *frame, name string) (value, bool) {
	if fr.scope != nil && !fr.class && !fr.scope.locals[name] {
		return nil, false
	}
	v, ok := fr.vars[name]
	return v, ok && v != nil
}

// binop evaluates l op r.
func (st *state) binop(fr *frame, site, op *Node, l, r value, ln, rn *Node) value {
	if op == nil {
		return top{}
	}
	if _, ok := l.(union); ok {
		return st.binopAlts(fr, site, op, l, r, ln, rn)
	}
	if _, ok := r.(union); ok {
		return st.binopAlts(fr, site, op, l, r, ln, rn)
	}
	if v := st.instanceOperand(fr, l, r); v != nil {
		return v
	}
	switch op.Type {
	case "Add":
		ls, lok := asStr(l, exprName(ln))
		rs, rok := asStr(r, exprName(rn))
		if lok && rok {
			return concat(ls, rs)
		}
		if a, ok := numberOf(l); ok {
			if b, ok := numberOf(r); ok {
				return bigV(new(big.Int).Add(a, b))
			}
		}
		return st.seqConcat(site, l, r)
	case "Mod":
		if s, ok := l.(strv); ok {
			return st.percent(fr, s, r, rn)
		}
		if a, ok := numberOf(l); ok {
			if b, ok := numberOf(r); ok && b.Sign() != 0 {
				m := new(big.Int)
				new(big.Int).DivMod(a, b, m)
				if b.Sign() < 0 && m.Sign() > 0 {
					m.Add(m, b)
				}
				return bigV(m)
			}
		}
	case "Sub", "Mult", "FloorDiv":
		a, aok := numberOf(l)
		b, bok := numberOf(r)
		if aok && bok {
			switch op.Type {
			case "Sub":
				return bigV(new(big.Int).Sub(a, b))
			case "Mult":
				if a.BitLen()+b.BitLen() < 256 {
					return bigV(new(big.Int).Mul(a, b))
				}
			case "FloorDiv":
				if b.Sign() != 0 {
					// DivMod is Euclidean (m >= 0); Python floors, so a
					// negative divisor with a remainder rounds down once more.
					q, m := new(big.Int).DivMod(a, b, new(big.Int))
					if b.Sign() < 0 && m.Sign() > 0 {
						q.Sub(q, big.NewInt(1))
					}
					return bigV(q)
				}
			}
		}
		if op.Type == "Mult" {
			if s, ok := l.(strv); ok {
				return repeatStr(s, r)
			}
			if s, ok := r.(strv); ok {
				return repeatStr(s, l)
			}
			return st.seqRepeat(site, l, r)
		}
	case "BitOr":
		lr, lok := l.(ref)
		rr, rok := r.(ref)
		if lok && rok && lr.o.kind == objDict && rr.o.kind == objDict {
			o := st.alloc(site, objDict)
			st.mergeDict(fr, o, l)
			st.mergeDict(fr, o, r)
			return ref{o}
		}
	}
	return opaque(l, r)
}

func (st *state) binopAlts(fr *frame, site, op *Node, l, r value, ln, rn *Node) value {
	la, ra := alts(l), alts(r)
	if len(la)*len(ra) > maxUnion {
		return opaque(l, r)
	}
	var out value
	for _, x := range la {
		for _, y := range ra {
			out = join(out, st.binop(fr, site, op, x, y, ln, rn))
		}
	}
	return out
}

// opaque is the result of an operation the reader does not compute:
// plain run-time data, or top when an operand may be anything.
func opaque(vs ...value) value {
	for _, v := range vs {
		switch v.(type) {
		case top:
			return top{}
		case ref:
			return top{}
		}
	}
	return data{hint: "value"}
}

func bigV(b *big.Int) value {
	if b.IsInt64() {
		return intV(b.Int64())
	}
	if b.BitLen() > 4096 {
		return data{hint: "number"}
	}
	return cnst{k: 'i', text: b.String()}
}

// asStr reads a value that meets a string in +: a string is itself, run-time
// data is a hole, anything else does not make a string.
func asStr(v value, hint string) (strv, bool) {
	switch v := v.(type) {
	case strv:
		return v, true
	case data:
		if hint == "" {
			hint = v.hint
		}
		return hole(hint), true
	case top:
		return span(hint), true
	}
	return strv{}, false
}

func repeatStr(s strv, n value) value {
	c, ok := n.(cnst)
	t, known := s.known()
	if ok && c.k == 'i' && c.iok && known && c.i >= 0 && int64(len(t))*c.i <= 1<<16 {
		return lit(strings.Repeat(t, int(c.i)))
	}
	if ok && c.k == 'i' && c.iok && c.i <= 0 {
		return lit("")
	}
	return span(hintOf(s))
}

// seqConcat is tuple + tuple, list + list.
func (st *state) seqConcat(site *Node, l, r value) value {
	switch x := l.(type) {
	case tuple:
		switch y := r.(type) {
		case tuple:
			return tuple{items: append(append([]value{}, x.items...), y.items...)}
		case seq:
			return seq{elem: join(joinAll(x.items), y.elem)}
		}
	case seq:
		switch y := r.(type) {
		case tuple:
			return seq{elem: join(x.elem, joinAll(y.items))}
		case seq:
			return seq{elem: join(x.elem, y.elem)}
		}
	case ref:
		if y, ok := r.(ref); ok && x.o.kind == objList && y.o.kind == objList {
			o := st.alloc(site, objList)
			xi, xe := x.o.elems()
			yi, ye := y.o.elems()
			if xi != nil && yi != nil {
				st.setItems(o, append(append([]value{}, xi...), yi...))
			} else {
				st.appendElem(o, join(xe, ye))
			}
			return ref{o}
		}
	}
	return opaque(l, r)
}

func (st *state) seqRepeat(site *Node, l, r value) value {
	for _, v := range []value{l, r} {
		switch x := v.(type) {
		case tuple:
			return seq{elem: joinAll(x.items)}
		case seq:
			return x
		case ref:
			if x.o.kind == objList {
				o := st.alloc(site, objList)
				_, e := x.o.elems()
				st.appendElem(o, e)
				return ref{o}
			}
		}
	}
	return opaque(l, r)
}

// instanceOperand is an operation on an instance of a class the program
// defines: its special methods run (followed by touch) and the result is
// not known. nil when neither operand is an instance.
func (st *state) instanceOperand(fr *frame, l, r value) value {
	isInst := func(v value) bool {
		x, ok := v.(ref)
		return ok && x.o.kind == objInstance
	}
	if !isInst(l) && !isInst(r) {
		return nil
	}
	st.touch(fr, l)
	st.touch(fr, r)
	return top{}
}

// evalOr evaluates the optional field of n, def when it is absent.
func (st *state) evalOr(fr *frame, n *Node, field string, def value) value {
	if !n.Has(field) {
		return def
	}
	return st.eval(fr, n.Node(field))
}

// overAlts applies f to each alternative of v and joins the results.
func overAlts(v value, f func(value) value) value {
	var out value
	for _, a := range alts(v) {
		out = join(out, f(a))
	}
	return out
}
