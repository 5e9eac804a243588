package contract

import (
	"errors"
	"fmt"
	"strings"
)

// state is one reading of one program.
type state struct {
	tree *Tree
	opts Options

	heap map[any]*object
	ctxs map[ctx]*ctx
	cur  *ctx // the frame being run
	// ever is, for every frame, the join of every value each name was
	// bound to, anywhere in the program: what code that runs at a time the
	// reader cannot tell (a callback handed away, a special method Python
	// calls on its own) may read. late counts the readings of such code in
	// progress: names of frames made before it are read through ever.
	ever   map[*ctx]map[string]value
	late   int
	raised value // every exception the program raises, for the handlers that catch one
	pass   int
	// calls counts the gateway calls a pass reached; entries names the
	// functions read as entries of a library (see run).
	calls    int
	entries  []string
	heapGrew bool
	classes  map[*Node]*classInfo
	scopes   map[*Node]*scopeInfo
	genDefs  map[*Node]bool // function definitions that contain yield

	ops      map[Operation]bool
	problems map[Problem]bool

	steps     int
	maxSteps  int
	stack     []*Node // the function definitions being called, innermost last
	summing   map[*Node]bool
	escaped   map[any]bool // callables already followed as handed away (per pass)
	preDunder map[*classInfo]bool

	bound    map[string]bool // every name the program binds somewhere
	imported map[string]bool // every module the program imports somewhere (top-level names)
	reached  map[*Node]bool  // function definitions called
	line     int             // the line being read
	glob     *frame
}

// errBudget stops a reading that ran out of steps; errInternal is a
// fault of the reader's own.
var (
	errBudget   = errors.New("budget")
	errInternal = errors.New("internal error")
)

// InternalError prefixes the detail of a problem that is a fault of the
// reader itself (reason reader-failed).
const InternalError = "internal error"

const (
	maxPasses    = 12 // passes over the program while the heap grows
	maxCallDepth = 40
	loopWiden    = 3  // iterations of a loop before its changing values are widened
	maxLoopIters = 12 // iterations of a loop at most (widening settles far sooner)
	maxUnroll    = 24 // a loop over a known sequence this long is followed item by item
)

func analyse(t *Tree, opts Options) (c *Contract) {
	st := &state{tree: t, opts: opts, heap: map[any]*object{}, ctxs: map[ctx]*ctx{}, ever: map[*ctx]map[string]value{}, classes: map[*Node]*classInfo{},
		scopes: map[*Node]*scopeInfo{}, genDefs: map[*Node]bool{}, bound: map[string]bool{}, imported: map[string]bool{}}
	st.maxSteps = opts.MaxSteps
	if st.maxSteps <= 0 {
		st.maxSteps = DefaultMaxSteps
	}
	boundAnywhere(t.Module, st.bound)
	collectImports(t.Module, st.imported)
	c = &Contract{}
	settled := false
	for pass := 0; pass < maxPasses; pass++ {
		st.pass = pass
		st.heapGrew = false
		st.ops = map[Operation]bool{}
		st.problems = map[Problem]bool{}
		st.reached = map[*Node]bool{}
		st.escaped = map[any]bool{}
		st.preDunder = map[*classInfo]bool{}
		st.stack = st.stack[:0]
		st.summing = map[*Node]bool{}
		if err := st.run(); err != nil {
			p := Problem{Reason: ReasonTooComplex, Line: st.line,
				Detail: fmt.Sprintf("the program is beyond what the reader follows (%d steps); simplify it or split it", st.maxSteps)}
			if errors.Is(err, errInternal) {
				p = Problem{Reason: ReasonReaderFailed, Line: st.line, Detail: err.Error()}
			}
			st.problems = map[Problem]bool{p: true}
			settled = true
			break
		}
		if !st.heapGrew {
			settled = true
			break
		}
	}
	if !settled {
		st.problem(ReasonTooComplex, "what the program keeps in lists, dicts and objects did not settle after %d passes", maxPasses)
	}
	st.shadowedFiles()
	for op := range st.ops {
		c.Operations = append(c.Operations, op)
	}
	for p := range st.problems {
		c.Problems = append(c.Problems, p)
	}
	c.Unreached = st.unreached()
	c.Entries = st.entries
	return c
}

// run reads the module as a script, then calls the entry function if
// one is named.
func (st *state) run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			if r == errBudget {
				err = errBudget
				return
			}
			// A fault of the reader's own fails closed: the contract is
			// unverified, and the broker keeps running. The fuzz target
			// looks for these.
			err = fmt.Errorf("%w: %v", errInternal, r)
		}
	}()
	st.steps = 0
	glob := &frame{vars: map[string]value{
		"__name__": lit("__main__"), "__file__": lit("main.py"), "__doc__": noneV,
	}}
	glob.glob = glob
	glob.ctx = st.intern(nil, st.tree.Module, nil)
	st.cur = glob.ctx
	st.glob = glob
	st.calls, st.entries = 0, nil
	st.execBlock(glob, st.tree.Module.Nodes("body"))
	input := &args{star: data{hint: "input"}, dstar: data{hint: "input"}} // the runner hands an entry plain data: its JSON input
	if st.opts.Entry != "" {
		f, ok := glob.vars[st.opts.Entry]
		if !ok {
			st.problem(ReasonUnknownHelper, "the entry function %s is not defined at the module's top level", st.opts.Entry)
			return nil
		}
		st.line = 0
		st.call(glob, f, input, nil)
		return nil
	}
	if st.calls > 0 {
		return nil
	}
	// A module whose body sends nothing is read as a library, the way a
	// runner uses an integration: each top-level function that calls the
	// client is an entry, called with its input. This only adds operations.
	aliases, funcs := st.clientNames()
	for _, s := range st.tree.Module.Nodes("body") {
		if s == nil || s.Type != "FunctionDef" || !callsGateway(s, aliases, funcs) {
			continue
		}
		f, ok := glob.vars[s.Str("name")].(*fn)
		if !ok || f.def != s {
			continue
		}
		st.entries = append(st.entries, f.name)
		st.line = s.Line
		st.call(glob, f, input, nil)
	}
	return nil
}

func (st *state) step() {
	st.steps++
	if st.steps > st.maxSteps {
		panic(errBudget)
	}
}

// problem records a reason the contract is not verified, at the line
// being read.
func (st *state) problem(r Reason, format string, args ...any) {
	st.problems[Problem{Reason: r, Line: st.line, Detail: fmt.Sprintf(format, args...)}] = true
}

// execBlock runs statements in order and reports whether the end is
// reached.
//
// Where an if statement's arms (its elif chain included) end in different
// environments, the statements after it run once from each, up to
// maxForks deep in one block, and the results are joined at the block's
// end: what an arm sets together (a method and its path) stays together.
func (st *state) execBlock(fr *frame, stmts []*Node) bool {
	return st.execFrom(fr, stmts, 0, 0)
}

// maxForks bounds how many if statements in a row a block follows arm by
// arm (at most 2^maxForks paths, each arm chain at most maxArms wide).
const (
	maxForks = 3
	maxArms  = 6
)

func (st *state) execFrom(fr *frame, stmts []*Node, i, forks int) bool {
	for ; i < len(stmts); i++ {
		s := stmts[i]
		if s == nil || s.Type != "If" || forks >= maxForks || i+1 == len(stmts) {
			if !st.exec(fr, s) {
				return false
			}
			continue
		}
		st.step()
		if s.Line > 0 {
			st.line = s.Line
		}
		envs, ok := st.arms(fr, s)
		if !ok {
			return false
		}
		if len(envs) == 1 {
			fr.vars = envs[0]
			continue
		}
		var out map[string]value
		alive := false
		for _, env := range envs {
			fr.vars = env
			if st.execFrom(fr, stmts, i+1, forks+1) {
				out = joinVars(out, fr.vars)
				alive = true
			}
		}
		if !alive {
			fr.vars = map[string]value{}
			return false
		}
		fr.vars = out
		return true
	}
	return true
}

// arms runs an if statement's arms, following an elif chain, and returns
// the environment each live arm ends in (joined into one past maxArms);
// ok is false when none goes on.
func (st *state) arms(fr *frame, n *Node) ([]map[string]value, bool) {
	var envs []map[string]value
	var walk func(n *Node) bool // false: the test raised
	walk = func(n *Node) bool {
		test := n.Node("test")
		v := st.eval(fr, test)
		if v == nil {
			return false
		}
		body, orelse := n.Nodes("body"), n.Nodes("orelse")
		t := st.truth(fr, test, v)
		if t != 0 {
			if env, ok := st.branch(fr, func() bool { st.refine(fr, test, true); return st.execBlock(fr, body) }); ok {
				envs = append(envs, env)
			}
		}
		if t == 1 {
			return true
		}
		if len(orelse) == 1 && orelse[0] != nil && orelse[0].Type == "If" {
			saved := fr.vars
			fr.vars = cloneVars(saved)
			st.refine(fr, test, false)
			ok := walk(orelse[0])
			fr.vars = saved
			return ok
		}
		if env, ok := st.branch(fr, func() bool { st.refine(fr, test, false); return st.execBlock(fr, orelse) }); ok {
			envs = append(envs, env)
		}
		return true
	}
	walk(n)
	if len(envs) == 0 {
		return nil, false
	}
	if len(envs) > maxArms {
		var j map[string]value
		for _, e := range envs {
			j = joinVars(j, e)
		}
		envs = []map[string]value{j}
	}
	return envs, true
}

// exec runs one statement and reports whether control goes on after it.
func (st *state) exec(fr *frame, n *Node) bool {
	st.step()
	if n == nil {
		st.problem(ReasonParse, "the parser tree has a statement that is not a node")
		return true
	}
	if n.Line > 0 {
		st.line = n.Line
	}
	switch n.Type {
	case "Expr":
		st.eval(fr, n.Node("value"))
		return true
	case "Pass":
		return true
	case "Assign":
		v := st.eval(fr, n.Node("value"))
		if v == nil {
			return false
		}
		for _, t := range n.Nodes("targets") {
			st.assign(fr, t, v)
		}
		return true
	case "AnnAssign":
		if fr.scope == nil || fr.class { // annotations are evaluated at module and class level
			st.eval(fr, n.Node("annotation"))
		}
		if n.Has("value") {
			v := st.eval(fr, n.Node("value"))
			if v == nil {
				return false
			}
			st.assign(fr, n.Node("target"), v)
		}
		return true
	case "AugAssign":
		t := n.Node("target")
		old := st.eval(fr, t)
		r := st.eval(fr, n.Node("value"))
		if old == nil || r == nil {
			return false
		}
		v := st.augmented(fr, n, old, r, t)
		st.assign(fr, t, v)
		return true
	case "Return":
		v := st.evalOr(fr, n, "value", noneV)
		if v == nil {
			return false
		}
		fr.rets = join(fr.rets, v)
		return false
	case "If":
		return st.execIf(fr, n)
	case "For", "AsyncFor":
		if n.Type == "AsyncFor" {
			st.problem(ReasonUnsupported, "async for: the reader does not follow asynchronous code")
		}
		return st.execFor(fr, n)
	case "While":
		return st.execWhile(fr, n)
	case "Break":
		if l := st.loop(fr); l != nil {
			l.breaks = append(l.breaks, cloneVars(fr.vars))
		}
		return false
	case "Continue":
		if l := st.loop(fr); l != nil {
			l.continues = append(l.continues, cloneVars(fr.vars))
		}
		return false
	case "Raise":
		if n.Has("exc") {
			exc := st.eval(fr, n.Node("exc"))
			for _, a := range alts(exc) {
				if c, ok := a.(class); ok { // raise E: Python makes the instance
					a = st.instantiate(fr, c.c, &args{}, n)
				}
				st.grow(&st.raised, a)
			}
		}
		if n.Has("cause") {
			st.eval(fr, n.Node("cause"))
		}
		return false
	case "Assert":
		v := st.eval(fr, n.Node("test"))
		if truthy(v) == 0 {
			return false
		}
		if n.Has("msg") {
			st.condEval(fr, n.Node("msg"))
		}
		return v != nil
	case "Try", "TryStar":
		return st.execTry(fr, n)
	case "With", "AsyncWith":
		if n.Type == "AsyncWith" {
			st.problem(ReasonUnsupported, "async with: the reader does not follow asynchronous code")
		}
		return st.execWith(fr, n)
	case "FunctionDef", "AsyncFunctionDef", "ClassDef":
		define := st.defineFunction
		if n.Type == "ClassDef" {
			define = st.defineClass
		}
		v := define(fr, n)
		if v == nil {
			return false
		}
		st.setVar(fr, n.Str("name"), v)
		return true
	case "Import":
		for _, a := range n.Nodes("names") {
			st.importModule(fr, a, n)
		}
		return true
	case "ImportFrom":
		st.importFrom(fr, n)
		return true
	case "Global", "Nonlocal":
		return true
	case "Delete":
		for _, t := range n.Nodes("targets") {
			st.deleteTarget(fr, t)
		}
		return true
	case "Match":
		return st.execMatch(fr, n)
	}
	st.problem(ReasonUnsupported, "the statement %s is not one the reader follows", n.Type)
	return true
}

// augmented is old op= r. A list, dict or set changes in place (list +=
// extends it with any iterable, *= repeats it; dict |= updates; a set's
// |=, &=, -=, ^= change it), so every name for the object sees the change
// and the target is the same object; anything else is the binary
// operation (an instance's __iadd__ is one of its special methods).
func (st *state) augmented(fr *frame, n *Node, old, r value, t *Node) value {
	op := n.Node("op")
	if op == nil {
		return top{}
	}
	var out, rest value
	for _, a := range alts(old) {
		x, ok := a.(ref)
		if !ok || x.o.kind == objInstance {
			rest = join(rest, a)
			continue
		}
		switch {
		case x.o.kind == objList && op.Type == "Add":
			_, e := st.iterItems(fr, r)
			st.appendElem(x.o, e)
		case x.o.kind == objList && op.Type == "Mult":
			st.inexact(x.o)
		case x.o.kind == objDict && op.Type == "BitOr":
			st.dictFrom(fr, x.o, r)
		case x.o.kind == objSet && op.Type == "BitOr":
			_, e := st.iterItems(fr, r)
			st.appendElem(x.o, e)
		case x.o.kind == objSet && (op.Type == "BitAnd" || op.Type == "Sub" || op.Type == "BitXor"):
			_, e := st.iterItems(fr, r)
			if op.Type == "BitXor" {
				st.grow(&x.o.elem, e)
			}
			st.inexact(x.o)
		default:
			rest = join(rest, a)
			continue
		}
		out = join(out, a)
	}
	if rest != nil {
		out = join(out, st.binop(fr, n, op, rest, r, t, n.Node("value")))
	}
	return out
}

func (st *state) loop(fr *frame) *loopCtx {
	if len(fr.loops) == 0 {
		return nil
	}
	return fr.loops[len(fr.loops)-1]
}

// branch runs f on a copy of the frame's variables and returns them,
// and whether f's end was reached; the frame is left as it was.
func (st *state) branch(fr *frame, f func() bool) (map[string]value, bool) {
	saved := fr.vars
	fr.vars = cloneVars(saved)
	alive := f()
	out := fr.vars
	fr.vars = saved
	if !alive {
		return nil, false
	}
	return out, true
}

func (st *state) execIf(fr *frame, n *Node) bool {
	test := n.Node("test")
	v := st.eval(fr, test)
	if v == nil {
		return false
	}
	t := st.truth(fr, test, v)
	body, orelse := n.Nodes("body"), n.Nodes("orelse")
	switch t {
	case 1:
		st.refine(fr, test, true)
		return st.execBlock(fr, body)
	case 0:
		st.refine(fr, test, false)
		return st.execBlock(fr, orelse)
	}
	a, aok := st.branch(fr, func() bool { st.refine(fr, test, true); return st.execBlock(fr, body) })
	b, bok := st.branch(fr, func() bool { st.refine(fr, test, false); return st.execBlock(fr, orelse) })
	if !aok && !bok {
		return false
	}
	fr.vars = joinVars(a, b)
	return true
}

// iterItems is what a for loop over v sees: the items one by one when
// they are known (and few), else nil and the join of every item.
func (st *state) iterItems(fr *frame, v value) ([]value, value) {
	switch v := v.(type) {
	case tuple:
		return v.items, joinAll(v.items)
	case seq:
		return nil, v.elem
	case strv:
		if t, ok := v.known(); ok && len(t) <= maxUnroll {
			items := make([]value, 0, len(t))
			for _, r := range t {
				items = append(items, lit(string(r)))
			}
			return items, joinAll(items)
		}
		return nil, data{hint: "char"}
	case ref:
		switch v.o.kind {
		case objInstance:
			return nil, st.instanceIter(fr, v.o)
		}
		items, elem := v.o.elems()
		if len(items) > maxUnroll {
			items = nil
		}
		return items, elem
	case gen:
		if v.comp != nil {
			if items, ok := st.compExact(v.fr, v.comp, v.first); ok && len(items) <= maxUnroll {
				return items, joinAll(items)
			}
		}
		return nil, st.consume(v)
	case data, cnst:
		return nil, data{hint: hintOf(v)}
	case top:
		return nil, top{}
	case union:
		var elem value
		for _, a := range v.alts {
			_, e := st.iterItems(fr, a)
			elem = join(elem, e)
		}
		return nil, elem
	case class:
		return nil, top{} // an Enum class iterates its members
	}
	return nil, nil
}

func (st *state) execFor(fr *frame, n *Node) bool {
	it := st.eval(fr, n.Node("iter"))
	if it == nil {
		return false
	}
	items, elem := st.iterItems(fr, it)
	target, body, orelse := n.Node("target"), n.Nodes("body"), n.Nodes("orelse")
	lc := &loopCtx{}
	fr.loops = append(fr.loops, lc)
	defer func() { fr.loops = fr.loops[:len(fr.loops)-1] }()
	var after map[string]value // the environment when the loop ends by running out
	if items != nil {
		for _, item := range items {
			st.assign(fr, target, item)
			lc.continues = nil
			alive := st.execBlock(fr, body)
			var next map[string]value
			if alive {
				next = fr.vars
			}
			for _, c := range lc.continues {
				next = joinVars(next, c)
			}
			if next == nil { // every path breaks or returns
				fr.vars = nil
				break
			}
			fr.vars = next
		}
		after = fr.vars
	} else {
		if elem == nil {
			return true // iterating something that is not iterable raises... or nothing: nothing runs
		}
		after = st.fixpoint(fr, lc, func() bool {
			st.assign(fr, target, elem)
			return st.execBlock(fr, body)
		})
	}
	return st.loopEnd(fr, lc, after, orelse)
}

// loopEnd continues after a loop: its else block from where the loop ran
// out (after, nil when it never does), joined with every break.
func (st *state) loopEnd(fr *frame, lc *loopCtx, after map[string]value, orelse []*Node) bool {
	var out map[string]value
	if after != nil {
		fr.vars = after
		if st.execBlock(fr, orelse) {
			out = fr.vars
		}
	}
	for _, b := range lc.breaks {
		out = joinVars(out, b)
	}
	if out == nil {
		fr.vars = map[string]value{}
		return false
	}
	fr.vars = out
	return true
}

// fixpoint runs a loop body from the current environment until the
// environment at the loop's head stops changing, widening what keeps
// changing; it returns that environment (the body may have run any number
// of times, none included), the frame left on it.
func (st *state) fixpoint(fr *frame, lc *loopCtx, body func() bool) map[string]value {
	head := cloneVars(fr.vars)
	for i := 0; ; i++ {
		fr.vars = cloneVars(head)
		lc.continues = nil
		alive := body()
		next := head
		if alive {
			next = joinVars(next, fr.vars)
		}
		for _, c := range lc.continues {
			next = joinVars(next, c)
		}
		if i >= loopWiden {
			next = widenVars(head, next)
		}
		if sameVars(next, head) {
			break
		}
		head = next
		if i >= maxLoopIters {
			st.problem(ReasonTooComplex, "a loop whose values the reader could not bound")
			break
		}
	}
	fr.vars = head
	return head
}

func (st *state) execWhile(fr *frame, n *Node) bool {
	test, body, orelse := n.Node("test"), n.Nodes("body"), n.Nodes("orelse")
	lc := &loopCtx{}
	fr.loops = append(fr.loops, lc)
	defer func() { fr.loops = fr.loops[:len(fr.loops)-1] }()
	var exits map[string]value // where the test is false
	st.fixpoint(fr, lc, func() bool {
		v := st.eval(fr, test)
		if v == nil {
			return false
		}
		switch st.truth(fr, test, v) {
		case 0:
			exits = joinVars(exits, cloneVars(fr.vars))
			return false
		case -1:
			saved := cloneVars(fr.vars)
			st.refine(fr, test, false)
			exits = joinVars(exits, fr.vars)
			fr.vars = saved
			st.refine(fr, test, true)
		}
		return st.execBlock(fr, body)
	})
	return st.loopEnd(fr, lc, exits, orelse)
}

// execTry follows the body, and each handler from any point of it: a
// handler starts from the environment before the body joined with every
// value any name got inside it.
func (st *state) execTry(fr *frame, n *Node) bool {
	handlerEnv := cloneVars(fr.vars)
	fr.tries = append(fr.tries, handlerEnv)
	idx := len(fr.tries) - 1
	alive := st.execBlock(fr, n.Nodes("body"))
	handlerEnv = fr.tries[idx]
	fr.tries = fr.tries[:idx]
	for _, t := range fr.tries { // an outer handler sees what this one saw
		for k, v := range handlerEnv {
			t[k] = join(t[k], v)
		}
	}
	var out map[string]value
	if alive {
		if st.execBlock(fr, n.Nodes("orelse")) {
			out = fr.vars
		}
	}
	for _, h := range n.Nodes("handlers") {
		fr.vars = cloneVars(handlerEnv)
		if h == nil {
			continue
		}
		if h.Has("type") {
			st.eval(fr, h.Node("type"))
		}
		if name := h.Str("name"); name != "" {
			// A builtin exception or the gateway's (plain data), or any the program raises.
			st.setVar(fr, name, join(data{hint: name}, st.raised))
		}
		if st.execBlock(fr, h.Nodes("body")) {
			out = joinVars(out, fr.vars)
		}
	}
	final := n.Nodes("finalbody")
	if len(final) == 0 {
		if out == nil {
			fr.vars = map[string]value{}
			return false
		}
		fr.vars = out
		return true
	}
	// The final block runs on every path, the exceptional ones included.
	fr.vars = joinVars(out, handlerEnv)
	if !st.execBlock(fr, final) || out == nil {
		return false
	}
	return true
}

func (st *state) execWith(fr *frame, n *Node) bool {
	suppress := false
	for _, it := range n.Nodes("items") {
		if it == nil {
			continue
		}
		cm := st.eval(fr, it.Node("context_expr"))
		if cm == nil {
			return false
		}
		v, sup := st.enter(fr, cm)
		suppress = suppress || sup
		if t := it.Node("optional_vars"); t != nil {
			st.assign(fr, t, v)
		}
	}
	if !suppress {
		return st.execBlock(fr, n.Nodes("body"))
	}
	// A context manager that may suppress an exception can leave the body
	// at any point: what follows sees the body's values from anywhere in it.
	handlerEnv := cloneVars(fr.vars)
	fr.tries = append(fr.tries, handlerEnv)
	idx := len(fr.tries) - 1
	alive := st.execBlock(fr, n.Nodes("body"))
	handlerEnv = fr.tries[idx]
	fr.tries = fr.tries[:idx]
	if alive {
		fr.vars = joinVars(fr.vars, handlerEnv)
	} else {
		fr.vars = handlerEnv
	}
	return true
}

// setVar binds name in fr as Python would: in the frame, or (declared
// global or nonlocal) in the frame that holds it, weakly, since the
// function may be running on one branch of its caller.
func (st *state) setVar(fr *frame, name string, v value) {
	if fr.scope != nil && !fr.class {
		if fr.scope.globals[name] {
			st.bindWeak(st.glob, name, v)
			return
		}
		if fr.scope.nonlocals[name] {
			for p := fr.parent; p != nil; p = p.parent {
				if p.scope != nil && p.scope.locals[name] {
					st.bindWeak(p, name, v)
					return
				}
			}
			return
		}
	}
	fr.vars[name] = v
	st.remember(fr, name, v)
	for _, t := range fr.tries {
		t[name] = join(t[name], v)
	}
}

// bindWeak joins v into name of a frame other than the running one (a
// global, a nonlocal): that frame may be on any branch of its own code,
// and a try open there sees the value too.
func (st *state) bindWeak(p *frame, name string, v value) {
	p.vars[name] = join(p.vars[name], v)
	st.remember(p, name, v)
	for _, t := range p.tries {
		t[name] = join(t[name], v)
	}
}

// remember joins v into what name of fr is ever bound to.
func (st *state) remember(fr *frame, name string, v value) {
	if fr.ctx == nil || v == nil {
		return
	}
	m := st.ever[fr.ctx]
	if m == nil {
		m = map[string]value{}
		st.ever[fr.ctx] = m
	}
	slot := m[name]
	st.grow(&slot, v)
	m[name] = slot
}

// seen is what reading name of fr gives: its value now, or in code that
// runs at a time the reader cannot tell, every value it is ever bound to.
func (st *state) seen(fr *frame, name string, v value) value {
	if st.late == 0 || fr.late {
		return v
	}
	return join(v, st.ever[fr.ctx][name])
}

// lookup reads a name: the frame's own (or, in a function, not yet bound:
// nil), then enclosing functions', then the module's, then builtins.
func (st *state) lookup(fr *frame, name string) (value, bool) {
	if fr.scope != nil && !fr.class {
		switch {
		case fr.scope.globals[name]:
			return st.globalOrBuiltin(name)
		case fr.scope.locals[name]:
			return st.seen(fr, name, fr.vars[name]), true // nil when not bound yet: reading it raises
		}
	} else if v, ok := fr.vars[name]; ok {
		return st.seen(fr, name, v), true
	}
	for p := fr.parent; p != nil; p = p.parent {
		if p.class {
			continue
		}
		if p.scope != nil && p.scope.locals[name] {
			return st.seen(p, name, p.vars[name]), true
		}
	}
	return st.globalOrBuiltin(name)
}

func (st *state) globalOrBuiltin(name string) (value, bool) {
	if v := st.seen(st.glob, name, st.glob.vars[name]); v != nil {
		return v, true
	}
	if v := builtinName(name); v != nil {
		return v, true
	}
	return nil, st.bound[name]
}

func (st *state) deleteTarget(fr *frame, t *Node) {
	if t == nil {
		return
	}
	switch t.Type {
	case "Name":
		if fr.scope == nil || fr.scope.locals[t.Str("id")] || fr.class {
			delete(fr.vars, t.Str("id"))
		}
	case "Subscript":
		c := st.eval(fr, t.Node("value"))
		st.eval(fr, t.Node("slice"))
		if r, ok := c.(ref); ok {
			st.inexact(r.o)
		}
		if _, ok := c.(top); ok {
			st.problem(ReasonUnknownCallee, "deletes from a value the reader cannot follow")
		}
	case "Attribute":
		o := st.eval(fr, t.Node("value"))
		switch o.(type) {
		case module, class, *fn, builtin, top:
			st.problem(ReasonDynamicAttribute, "deletes the attribute %s of %s", t.Str("attr"), describe(o))
		}
	case "Tuple", "List":
		for _, e := range t.Nodes("elts") {
			st.deleteTarget(fr, e)
		}
	}
}

// assign binds target to v.
func (st *state) assign(fr *frame, t *Node, v value) {
	if t == nil {
		return
	}
	switch t.Type {
	case "Name":
		st.setVar(fr, t.Str("id"), v)
	case "Tuple", "List":
		st.unpack(fr, t.Nodes("elts"), v)
	case "Starred":
		st.assign(fr, t.Node("value"), v)
	case "Attribute":
		o := st.eval(fr, t.Node("value"))
		if o != nil {
			st.setAttr(fr, o, t.Str("attr"), v)
		}
	case "Subscript":
		c := st.eval(fr, t.Node("value"))
		k := st.evalSlice(fr, t.Node("slice"))
		if c != nil && k != nil {
			st.setItem(fr, c, k, v)
		}
	default:
		st.problem(ReasonUnsupported, "an assignment to %s", t.Type)
	}
}

// unpack assigns the items of v to targets (one of which may be starred).
func (st *state) unpack(fr *frame, targets []*Node, v value) {
	star := -1
	for i, t := range targets {
		if t != nil && t.Type == "Starred" {
			star = i
		}
	}
	var items []value
	var elem value
	if u, ok := v.(union); ok && star < 0 {
		if t, ok := tupleOfAlts(u, len(targets)); ok {
			v = t // each target gets what its position holds in some alternative
		}
	}
	switch x := v.(type) {
	case tuple:
		items, elem = x.items, joinAll(x.items)
	case ref:
		if x.o.kind == objList || x.o.kind == objSet || x.o.kind == objDict {
			items, elem = x.o.elems()
		} else {
			_, elem = st.iterItems(fr, v)
		}
	default:
		items, elem = st.iterItems(fr, v)
	}
	if items != nil && (star < 0 && len(items) == len(targets) || star >= 0 && len(items) >= len(targets)-1) {
		for i, t := range targets {
			switch {
			case i < star || star < 0:
				st.assign(fr, t, items[i])
			case i == star:
				rest := items[star : len(items)-(len(targets)-1-star)]
				st.assign(fr, t, st.newList(t, rest))
			default:
				st.assign(fr, t, items[len(items)-(len(targets)-i)])
			}
		}
		return
	}
	if items != nil { // the wrong number of items: unpacking raises
		for _, t := range targets {
			st.assign(fr, t, nil)
		}
		return
	}
	for i, t := range targets {
		if i == star {
			o := st.alloc(t, objList)
			st.appendElem(o, elem)
			st.assign(fr, t, ref{o})
			continue
		}
		st.assign(fr, t, elem)
	}
}

// collectImports adds every module name an import statement names.
func collectImports(n *Node, out map[string]bool) {
	if n == nil {
		return
	}
	switch n.Type {
	case "Import":
		for _, a := range n.Nodes("names") {
			out[topName(a.Str("name"))] = true
		}
	case "ImportFrom":
		if m := n.Str("module"); m != "" && n.Int("level") == 0 {
			out[topName(m)] = true
		}
	}
	for _, v := range n.fields {
		switch v := v.(type) {
		case *Node:
			collectImports(v, out)
		case []any:
			for _, x := range v {
				if c, ok := x.(*Node); ok {
					collectImports(c, out)
				}
			}
		}
	}
}

func topName(m string) string {
	if i := strings.IndexByte(m, '.'); i >= 0 {
		return m[:i]
	}
	return m
}

// describe names a value for a detail.
func describe(v value) string {
	switch v := v.(type) {
	case module:
		return "the module " + v.name
	case builtin:
		if v.name == "type-of" {
			return "a value's type"
		}
		return v.name
	case *fn:
		return "the function " + v.name
	case class:
		return "the class " + v.c.name
	case top:
		return "a value the reader cannot follow"
	case data:
		return "run-time data"
	case strv:
		return "a string"
	}
	return "a " + v.kind()
}

// tupleOfAlts is a union of tuples of length n as one tuple whose items
// join the alternatives' items position by position.
func tupleOfAlts(u union, n int) (tuple, bool) {
	items := make([]value, n)
	for _, a := range u.alts {
		t, ok := a.(tuple)
		if !ok || len(t.items) != n {
			return tuple{}, false
		}
		for i := range items {
			items[i] = join(items[i], t.items[i])
		}
	}
	return tuple{items: items}, true
}
