package contract

// The abstract heap. Every list, dict, set and instance the program makes
// is one object per place in the code that makes it (its allocation
// site), whatever the number of times that place runs. What an object
// holds is the join of everything ever written into it, wherever in the
// program that happens: writes are weak and the heap is the same at every
// point, so a read sees every write, even a later one. The reader repeats
// its pass over the program until the heap stops growing, so the last
// pass reads with every write already in (see analyse).

type objKind byte

const (
	objList objKind = iota
	objDict
	objSet
	objInstance
)

type object struct {
	kind objKind

	// exact is set while the object holds exactly items (a list or set)
	// or exactly the keys in keys (a dict) as made: nothing appended,
	// inserted or removed since, so its length and order are known.
	exact bool
	items []value
	elem  value // the join of every element (list, set) or value (dict)

	keys    map[string]value // dict: values by known key
	keyVals map[string]value // dict: the known keys themselves
	order   []string         // dict: the known keys, in order
	keyElem value            // dict: the join of every key
	other   value            // dict: values written under keys not known

	attrs map[string]value // instance
	cls   *classInfo
}

// alloc returns the object made at site, made on first use. site is the
// node that makes it, or for an instance the node and its class.
func (st *state) alloc(site any, k objKind) *object {
	if o := st.heap[site]; o != nil {
		return o
	}
	o := &object{kind: k, exact: true, keys: map[string]value{}, keyVals: map[string]value{}, attrs: map[string]value{}}
	st.heap[site] = o
	st.heapGrew = true
	return o
}

// grow joins v into *slot, noting when it grew. The slot takes the join
// even when it did not grow: a function of the same frame made in a later
// pass replaces the one made in an earlier one.
func (st *state) grow(slot *value, v value) {
	n := join(*slot, v)
	if !same(n, *slot) && st.pass >= heapWiden { // still growing: what keeps changing is widened
		n = join(*slot, widen(v))
	}
	if !same(n, *slot) {
		st.heapGrew = true
	}
	*slot = n
}

// heapWiden is the pass after which heap values that still grow are widened.
const heapWiden = 3

// ctx names a frame across passes: the frame of def, called at site from
// the frame named parent. Passes make new frames; values that hold one
// (closures, generators) compare by its ctx, so the heap can settle.
type ctx struct {
	parent    *ctx
	def, site *Node
}

func (st *state) intern(parent *ctx, def, site *Node) *ctx {
	k := ctx{parent: parent, def: def, site: site}
	if c := st.ctxs[k]; c != nil {
		return c
	}
	c := &ctx{parent: parent, def: def, site: site}
	st.ctxs[k] = c
	return c
}

func ctxOf(f *frame) *ctx {
	if f == nil {
		return nil
	}
	return f.ctx
}

// inexact marks o as no longer holding exactly what it was made with.
func (st *state) inexact(o *object) {
	if o.exact {
		o.exact = false
		st.heapGrew = true
	}
}

// setItems records the items of a list or set as made at its site. Made
// again with other items (a loop, a second call), it is no longer exact.
func (st *state) setItems(o *object, items []value) {
	for _, v := range items {
		st.grow(&o.elem, v)
	}
	if !o.exact {
		return
	}
	if o.items == nil {
		o.items = append([]value{}, items...)
		if len(items) == 0 {
			o.items = []value{}
		}
		return
	}
	if len(o.items) != len(items) {
		st.inexact(o)
		return
	}
	for i := range items {
		st.grow(&o.items[i], items[i])
	}
}

// appendElem adds v to a list or set: its length is no longer known.
func (st *state) appendElem(o *object, v value) {
	st.grow(&o.elem, v)
	st.inexact(o)
}

// dictKey is the key a known value has in a dict, "" for a key not known.
func dictKey(k value) string {
	switch k := k.(type) {
	case strv:
		if t, ok := k.known(); ok {
			return "s" + t
		}
	case cnst:
		switch k.k {
		case 'i':
			if k.iok {
				return "i" + k.text
			}
		case 'b':
			if k.text == "true" {
				return "i1"
			}
			return "i0"
		case 'n':
			return "n"
		}
	}
	return ""
}

// setKey writes v under key k of dict o.
func (st *state) setKey(o *object, k, v value) {
	st.grow(&o.keyElem, k)
	st.grow(&o.elem, v)
	key := dictKey(k)
	if key == "" {
		st.grow(&o.other, v)
		st.inexact(o)
		return
	}
	if _, ok := o.keys[key]; !ok {
		o.keys[key] = nil
		o.keyVals[key] = k
		o.order = append(o.order, key)
		st.heapGrew = true
	}
	slot := o.keys[key]
	st.grow(&slot, v)
	o.keys[key] = slot
}

// getKey reads key k of dict o: every value that can be under it.
func (o *object) getKey(k value) value {
	key := dictKey(k)
	if key == "" || !o.exact {
		if key != "" {
			if v, ok := o.keys[key]; ok {
				return join(v, o.other)
			}
			return o.other
		}
		return o.elem
	}
	return join(o.keys[key], o.other)
}

// elems returns what iterating o gives: the exact items when known (a
// dict gives its keys), else nil and the join of them. A set of more than
// one item gives no items: the order it iterates in is its hashes' (for
// text, a new one each run), which the reader cannot know.
func (o *object) elems() ([]value, value) {
	switch o.kind {
	case objDict:
		if o.exact {
			out := make([]value, len(o.order))
			for i, k := range o.order {
				out[i] = o.keyVals[k]
			}
			return out, o.keyElem
		}
		return nil, o.keyElem
	case objList, objSet:
		if o.exact && o.items != nil && (o.kind == objList || len(o.items) <= 1) {
			return o.items, o.elem
		}
		return nil, o.elem
	}
	return nil, top{}
}

// frame is one running scope: a module, a function call, a class body or
// a comprehension. vars holds the names bound now; the reader swaps the
// map to follow branches, and closures read the frame they were made in
// as it is when they run.
type frame struct {
	vars     map[string]value
	ctx      *ctx // which frame this is, the same from one pass to the next
	scope    *scopeInfo
	parent   *frame // the enclosing function scope, for closures; nil at module level
	glob     *frame
	class    bool       // a class body: functions defined here do not see it
	comp     bool       // a comprehension: a walrus binds in the frame around it
	late     bool       // made while reading code that runs at a time the reader cannot tell
	defining *classInfo // a class body: the class being made

	loops []*loopCtx
	tries []map[string]value // handler environments of the try statements open in this frame
	rets  value              // the join of what the call returns
	gen   bool               // a generator's body: yields collect into yields
	yield value
	fn    *fn // the function this frame runs, for super()
	self  value
}

type loopCtx struct {
	breaks    []map[string]value
	continues []map[string]value
}

// scopeInfo is which names a function's body binds (locals) or declares
// global or nonlocal.
type scopeInfo struct {
	locals    map[string]bool
	globals   map[string]bool
	nonlocals map[string]bool
}

func cloneVars(m map[string]value) map[string]value {
	c := make(map[string]value, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// joinVars joins two environments. A name bound in one only is kept: on
// the other path it is unbound, and reading it there raises.
func joinVars(a, b map[string]value) map[string]value {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	out := make(map[string]value, len(a))
	for k, v := range a {
		out[k] = join(v, b[k])
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out[k] = v
		}
	}
	return out
}

func sameVars(a, b map[string]value) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !same(v, w) {
			return false
		}
	}
	return true
}

func widenVars(old, next map[string]value) map[string]value {
	out := make(map[string]value, len(next))
	for k, v := range next {
		if o, ok := old[k]; ok && same(o, v) {
			out[k] = v
			continue
		}
		out[k] = join(old[k], widen(v))
	}
	return out
}
