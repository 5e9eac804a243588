package contract

// scopeOf computes which names a function (FunctionDef, Lambda) binds in
// its own scope, by Python's rules: a name assigned anywhere in the body
// (not in a nested function, class or comprehension) is local unless
// declared global or nonlocal; parameters are local; the target of a
// walrus inside a comprehension binds in the function around it.
func (st *state) scopeOf(def *Node) *scopeInfo {
	if s := st.scopes[def]; s != nil {
		return s
	}
	s := &scopeInfo{locals: map[string]bool{}, globals: map[string]bool{}, nonlocals: map[string]bool{}}
	if a := def.Node("args"); a != nil {
		for _, field := range []string{"posonlyargs", "args", "kwonlyargs"} {
			for _, p := range a.Nodes(field) {
				s.locals[p.Str("arg")] = true
			}
		}
		for _, field := range []string{"vararg", "kwarg"} {
			if p := a.Node(field); p != nil {
				s.locals[p.Str("arg")] = true
			}
		}
	}
	if def.Type == "Lambda" {
		collectBinds(def.Node("body"), s)
	} else {
		for _, b := range def.Nodes("body") {
			collectBinds(b, s)
		}
	}
	for n := range s.globals {
		delete(s.locals, n)
	}
	for n := range s.nonlocals {
		delete(s.locals, n)
	}
	st.scopes[def] = s
	return s
}

// collectBinds adds the names n binds to s, not looking inside nested
// scopes (whose own name it binds).
func collectBinds(n *Node, s *scopeInfo) {
	if n == nil {
		return
	}
	switch n.Type {
	case "FunctionDef", "AsyncFunctionDef", "ClassDef":
		s.locals[n.Str("name")] = true
		for _, d := range n.Nodes("decorator_list") {
			collectBinds(d, s)
		}
		if a := n.Node("args"); a != nil {
			for _, d := range a.Nodes("defaults") {
				collectBinds(d, s)
			}
			for _, d := range a.Nodes("kw_defaults") {
				collectBinds(d, s)
			}
		}
		for _, b := range n.Nodes("bases") {
			collectBinds(b, s)
		}
		return
	case "Lambda":
		if a := n.Node("args"); a != nil {
			for _, d := range a.Nodes("defaults") {
				collectBinds(d, s)
			}
		}
		return
	case "ListComp", "SetComp", "GeneratorExp", "DictComp":
		// Only a walrus binds outside a comprehension.
		walrusTargets(n, s)
		return
	case "Global":
		for _, name := range n.Strs("names") {
			s.globals[name] = true
		}
		return
	case "Nonlocal":
		for _, name := range n.Strs("names") {
			s.nonlocals[name] = true
		}
		return
	case "Name":
		// Reads and writes look alike in the tree (contexts are left out);
		// targets are collected by the statements below.
		return
	case "NamedExpr":
		if t := n.Node("target"); t != nil && t.Type == "Name" {
			s.locals[t.Str("id")] = true
		}
		collectBinds(n.Node("value"), s)
		return
	case "Import", "ImportFrom":
		for _, a := range n.Nodes("names") {
			name := a.Str("asname")
			if name == "" {
				name = a.Str("name")
				if n.Type == "Import" {
					if i := indexByte(name, '.'); i >= 0 {
						name = name[:i]
					}
				}
			}
			if name != "*" {
				s.locals[name] = true
			}
		}
		return
	case "Assign":
		for _, t := range n.Nodes("targets") {
			targetNames(t, s)
		}
	case "AugAssign", "AnnAssign", "For", "AsyncFor":
		targetNames(n.Node("target"), s)
	case "With", "AsyncWith":
		for _, it := range n.Nodes("items") {
			targetNames(it.Node("optional_vars"), s)
		}
	case "ExceptHandler":
		if name := n.Str("name"); name != "" {
			s.locals[name] = true
		}
	case "Delete":
		for _, t := range n.Nodes("targets") {
			targetNames(t, s)
		}
	case "MatchAs", "MatchStar":
		if name := n.Str("name"); name != "" {
			s.locals[name] = true
		}
	case "MatchMapping":
		if name := n.Str("rest"); name != "" {
			s.locals[name] = true
		}
	}
	for _, v := range n.fields {
		switch v := v.(type) {
		case *Node:
			collectBinds(v, s)
		case []any:
			for _, x := range v {
				if c, ok := x.(*Node); ok {
					collectBinds(c, s)
				}
			}
		}
	}
}

func walrusTargets(n *Node, s *scopeInfo) {
	if n == nil {
		return
	}
	switch n.Type {
	case "NamedExpr":
		if t := n.Node("target"); t != nil && t.Type == "Name" {
			s.locals[t.Str("id")] = true
		}
	case "Lambda", "FunctionDef", "ClassDef":
		return
	}
	for _, v := range n.fields {
		switch v := v.(type) {
		case *Node:
			walrusTargets(v, s)
		case []any:
			for _, x := range v {
				if c, ok := x.(*Node); ok {
					walrusTargets(c, s)
				}
			}
		}
	}
}

// targetNames adds the names an assignment target binds.
func targetNames(t *Node, s *scopeInfo) {
	if t == nil {
		return
	}
	switch t.Type {
	case "Name":
		s.locals[t.Str("id")] = true
	case "Tuple", "List":
		for _, e := range t.Nodes("elts") {
			targetNames(e, s)
		}
	case "Starred":
		targetNames(t.Node("value"), s)
	}
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// boundAnywhere adds to out every name the module binds anywhere, in any
// scope: reading a name outside it can only be a helper that is not there.
func boundAnywhere(n *Node, out map[string]bool) {
	if n == nil {
		return
	}
	s := &scopeInfo{locals: out}
	switch n.Type {
	case "FunctionDef", "AsyncFunctionDef", "ClassDef":
		out[n.Str("name")] = true
	case "arg":
		out[n.Str("arg")] = true
	case "Assign", "Delete":
		for _, t := range n.Nodes("targets") {
			targetNames(t, s)
		}
	case "AugAssign", "AnnAssign", "For", "AsyncFor", "comprehension", "NamedExpr":
		targetNames(n.Node("target"), s)
	case "withitem":
		targetNames(n.Node("optional_vars"), s)
	case "ExceptHandler", "MatchAs", "MatchStar":
		if name := n.Str("name"); name != "" {
			out[name] = true
		}
	case "MatchMapping":
		if name := n.Str("rest"); name != "" {
			out[name] = true
		}
	case "Global", "Nonlocal":
		for _, name := range n.Strs("names") {
			out[name] = true
		}
	case "Import", "ImportFrom":
		collectBinds(n, s)
	}
	for _, v := range n.fields {
		switch v := v.(type) {
		case *Node:
			boundAnywhere(v, out)
		case []any:
			for _, x := range v {
				if c, ok := x.(*Node); ok {
					boundAnywhere(c, out)
				}
			}
		}
	}
}
