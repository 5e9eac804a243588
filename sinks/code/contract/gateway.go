package contract

import (
	"slices"
	"strings"
)

// The gatehouse client, as the reader models it (the client module itself
// is in sinks/code; a test checks the two agree):
//
//	call(provider, method, path, body=None, *, query=None, headers=None,
//	     data=None, content_type=None, atom=None, operation_id=None)
//	get(provider, path, body=None, **kw), post, put, patch, delete, head, options
//
// The client sends exactly one gateway request per call, with provider,
// method and path as given (a path's query, after "?", goes as the
// query); a keyword it does not take raises before anything is sent.

// clientKeywords are call's keyword-only parameters.
var clientKeywords = map[string]bool{
	"query": true, "headers": true, "data": true, "content_type": true, "atom": true, "operation_id": true,
}

var clientMethods = map[string]string{
	"get": "GET", "post": "POST", "put": "PUT", "patch": "PATCH", "delete": "DELETE", "head": "HEAD", "options": "OPTIONS",
}

var httpMethods = map[string]bool{"GET": true, "HEAD": true, "OPTIONS": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true}

// maxOpsPerCall bounds the operations one call site can stand for.
const maxOpsPerCall = 256

// gateway models a call of the client's function fn.
func (st *state) gateway(fr *frame, fn string, a *args, site *Node) value {
	st.calls++
	var provider, method, path value
	var need []string
	if fixed, ok := clientMethods[fn]; ok {
		need = []string{"provider", "path", "body"}
		if _, twice := a.kw["method"]; twice {
			return nil // TypeError: method given twice
		}
		provider, path = a.arg(0, "provider"), a.arg(1, "path")
		method = lit(fixed)
	} else {
		need = []string{"provider", "method", "path", "body"}
		provider, method, path = a.arg(0, "provider"), a.arg(1, "method"), a.arg(2, "path")
	}
	if len(a.pos) > len(need) {
		return nil // TypeError: too many positional arguments
	}
	for name := range a.kw {
		i := slices.Index(need, name)
		if i >= 0 && i < len(a.pos) {
			return nil // TypeError: given twice
		}
		if i < 0 && !clientKeywords[name] {
			return nil // TypeError before anything is sent
		}
	}
	need = need[:len(need)-1] // body may be left out
	for i, n := range need {
		explicit := i < len(a.pos) || a.kw[n] != nil
		if !explicit {
			if a.exact() {
				return nil // a missing argument: TypeError
			}
			st.problem(ReasonArgumentsAtRunTime, "the %s of this gateway call comes from *args or **kwargs built at run time", n)
			return data{hint: "response"}
		}
	}
	st.handToClient(fr, a, len(need))
	st.recordOps(provider, method, path)
	return data{hint: "response"}
}

// handToClient gives the client what a call passes it beside provider,
// method and path (the first routing positional arguments): the client
// calls query's and headers' items() and formats their keys and values
// with str, makes bytes of data (iterating it: a generator's body runs)
// and json-encodes body, all before the request is sent. An instance
// given as query or headers is handed away (its items() is an ordinary
// method); the rest are touched.
func (st *state) handToClient(fr *frame, a *args, routing int) {
	for i, v := range a.pos {
		if i >= routing {
			st.touch(fr, v) // body
		}
	}
	for _, k := range sortedKeys(a.kw) {
		switch k {
		case "query", "headers":
			for _, v := range alts(a.kw[k]) {
				if r, ok := v.(ref); ok && r.o.kind == objInstance {
					st.escape(fr, v) // its items()
				} else {
					st.touch(fr, v) // a dict's items are formatted with str
				}
			}
		case "provider", "method", "path":
		default:
			st.touch(fr, a.kw[k]) // bytes(data) iterates a generator: touch runs it
		}
	}
	if a.star != nil {
		st.escape(fr, a.star)
	}
	if a.dstar != nil {
		st.escape(fr, a.dstar)
	}
}

// recordOps adds every operation the three values can make, or says why
// they cannot be read.
func (st *state) recordOps(provider, method, path value) {
	var providers, methods, templates []string
	for _, p := range alts(provider) {
		if _, isConst := p.(cnst); isConst {
			continue // not a str: the client raises before sending
		}
		s, ok := p.(strv)
		t, known := s.known()
		if !ok || !known {
			st.problem(ReasonProviderAtRunTime, "the provider of this gateway call is computed at run time")
			continue
		}
		if t != "" { // no provider is named "": the gateway refuses it, nothing is sent
			providers = append(providers, t)
		}
	}
	for _, m := range alts(method) {
		if _, isConst := m.(cnst); isConst {
			continue
		}
		s, ok := m.(strv)
		t, known := s.known()
		if !ok || !known {
			st.problem(ReasonMethodAtRunTime, "the method of this gateway call is computed at run time")
			continue
		}
		t = strings.ToUpper(t)
		if httpMethods[t] {
			methods = append(methods, t)
		} // any other method is refused by the gateway: nothing is sent
	}
	for _, p := range alts(path) {
		s, ok := p.(strv)
		if !ok {
			if _, isConst := p.(cnst); isConst {
				continue // the client refuses a path that is not text
			}
			st.problem(ReasonURLAtRunTime, "the path of this gateway call is computed at run time (%s)", describe(p))
			continue
		}
		tmpl, why, drop := templateOf(s)
		switch {
		case why != "":
			st.problem(ReasonURLAtRunTime, "%s", why)
		case !drop:
			templates = append(templates, tmpl)
		}
	}
	if len(providers)*len(methods)*len(templates) > maxOpsPerCall {
		st.problem(ReasonTooComplex, "one gateway call stands for more than %d operations", maxOpsPerCall)
		return
	}
	for _, p := range providers {
		for _, m := range methods {
			for _, t := range templates {
				st.ops[Operation{Provider: p, Method: m, Template: t}] = true
			}
		}
	}
}

// templateOf turns the path a call sends into its template. why says why
// it cannot be one; drop is set for a path the gateway refuses outright
// (nothing is sent).
//
// A hole stands for one path segment: a value with a "/" in it sends
// a path of more segments, which no template with a placeholder there
// matches, so the gateway decides it outside the contract. A segment
// with a hole in it becomes one placeholder, named for what it holds.
func templateOf(s strv) (tmpl, why string, drop bool) {
	if s.hasSpan() {
		return "", "the path of this gateway call is built in a way the reader cannot bound (a loop, or a join of parts computed at run time)", false
	}
	var parts []part
	for _, p := range s.parts {
		if !p.hole {
			if i := strings.IndexByte(p.lit, '?'); i >= 0 {
				parts = append(parts, part{lit: p.lit[:i]})
				break
			}
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 || len(parts) == 1 && !parts[0].hole && parts[0].lit == "" {
		return "", "", true // the gateway needs a path
	}
	if parts[0].hole {
		return "", "the path of this gateway call starts with a value computed at run time", false
	}
	for _, p := range parts {
		if !p.hole && (strings.ContainsAny(p.lit, "#\\") || strings.IndexFunc(p.lit, isControl) >= 0) {
			return "", "", true
		}
	}
	segs := [][]part{{}}
	for _, p := range parts {
		if p.hole {
			segs[len(segs)-1] = append(segs[len(segs)-1], p)
			continue
		}
		pieces := strings.Split(p.lit, "/")
		for i, piece := range pieces {
			if i > 0 {
				segs = append(segs, []part{})
			}
			if piece != "" {
				segs[len(segs)-1] = append(segs[len(segs)-1], part{lit: piece})
			}
		}
	}
	trailing := len(segs) > 1 && len(segs[len(segs)-1]) == 0
	var out []string
	lits := 0
	used := map[string]int{}
	for _, seg := range segs {
		if len(seg) == 0 {
			continue
		}
		hint, hasHole := "", false
		var b strings.Builder
		for _, p := range seg {
			if p.hole {
				if !hasHole {
					hint = p.hint
				}
				hasHole = true
			}
			b.WriteString(p.lit)
		}
		if !hasHole {
			text := b.String()
			if text == "." || text == ".." {
				return "", "", true
			}
			out = append(out, text)
			lits++
			continue
		}
		name := placeholder(hint)
		used[name]++
		if used[name] > 1 {
			name += itoa(used[name])
		}
		out = append(out, "{"+name+"}")
	}
	if lits == 0 && len(out) > 0 {
		return "", "the path of this gateway call has no fixed segment: it is computed at run time", false
	}
	tmpl = "/" + strings.Join(out, "/")
	if trailing && len(out) > 0 {
		tmpl += "/"
	}
	return tmpl, "", false
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// placeholder makes a placeholder name from a hint: letters, digits and
// underscores, "value" when nothing is left.
func placeholder(hint string) string {
	var b strings.Builder
	for _, r := range hint {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	s := b.String()
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return "value"
	}
	if len(s) > 32 {
		s = s[:32]
	}
	return s
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// unreached names the functions that contain a gateway call and that the
// reading never called.
func (st *state) unreached() []string {
	aliases, funcs := st.clientNames()
	var out []string
	var defs func(n *Node)
	defs = func(n *Node) {
		if n == nil {
			return
		}
		if (n.Type == "FunctionDef" || n.Type == "AsyncFunctionDef") && !st.reached[n] && callsGateway(n, aliases, funcs) {
			out = append(out, n.Str("name"))
		}
		eachChild(n, defs)
	}
	defs(st.tree.Module)
	return out
}

// clientNames returns the names the module imports the client as
// (import gatehouse [as gh]) and its functions as (from gatehouse import
// post [as send]).
func (st *state) clientNames() (aliases, funcs map[string]bool) {
	aliases, funcs = map[string]bool{}, map[string]bool{}
	var imports func(n *Node)
	imports = func(n *Node) {
		if n == nil {
			return
		}
		switch n.Type {
		case "Import":
			for _, a := range n.Nodes("names") {
				if a.Str("name") == "gatehouse" {
					aliases[pick(a.Str("asname"), "gatehouse")] = true
				}
			}
		case "ImportFrom":
			if n.Str("module") == "gatehouse" {
				for _, a := range n.Nodes("names") {
					funcs[pick(a.Str("asname"), a.Str("name"))] = true
				}
			}
		}
		eachChild(n, imports)
	}
	imports(st.tree.Module)
	return aliases, funcs
}

func callsGateway(n *Node, aliases, funcs map[string]bool) bool {
	found := false
	var walk func(c *Node)
	walk = func(c *Node) {
		if c == nil || found {
			return
		}
		if c.Type == "Call" {
			f := c.Node("func")
			switch {
			case f != nil && f.Type == "Attribute" && f.Node("value") != nil && f.Node("value").Type == "Name" && aliases[f.Node("value").Str("id")]:
				found = true
			case f != nil && f.Type == "Name" && funcs[f.Str("id")]:
				found = true
			}
		}
		eachChild(c, walk)
	}
	for _, s := range n.Nodes("body") {
		walk(s)
	}
	return found
}

func eachChild(n *Node, f func(*Node)) {
	for _, v := range n.fields {
		switch v := v.(type) {
		case *Node:
			f(v)
		case []any:
			for _, x := range v {
				if c, ok := x.(*Node); ok {
					f(c)
				}
			}
		}
	}
}

// Client describes the client module as the reader models it, for the
// test that holds the module to it: its functions (with the method each
// fixes, "" for call; each takes provider, [method,] path and body
// positionally), call's keyword-only parameters, and the modules it
// imports.
func Client() (functions map[string]string, keywords []string, imports []string) {
	functions = map[string]string{"call": ""}
	for k, v := range clientMethods {
		functions[k] = v
	}
	for k := range clientKeywords {
		keywords = append(keywords, k)
	}
	return functions, keywords, append([]string{}, clientImports...)
}
