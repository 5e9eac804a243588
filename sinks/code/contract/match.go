package contract

// execMatch follows a match statement: each case whose pattern can match
// the subject as the reader knows it, in order; a case that surely
// matches ends the search (those after it never run).
func (st *state) execMatch(fr *frame, n *Node) bool {
	subject := st.eval(fr, n.Node("subject"))
	if subject == nil {
		return false
	}
	var out map[string]value
	reachedEnd := true // no case matched surely: control may fall out of the match
	for _, c := range n.Nodes("cases") {
		if c == nil {
			continue
		}
		m := st.patternMatches(fr, c.Node("pattern"), subject)
		if m == 0 {
			continue
		}
		surely := m == 1 && !c.Has("guard")
		vars, alive := st.branch(fr, func() bool {
			st.bindPattern(fr, c.Node("pattern"), subject)
			if c.Has("guard") {
				g := st.eval(fr, c.Node("guard"))
				if g == nil || truthy(g) == 0 {
					return false
				}
			}
			return st.execBlock(fr, c.Nodes("body"))
		})
		if alive {
			out = joinVars(out, vars)
		}
		if surely {
			reachedEnd = false
			break
		}
	}
	if reachedEnd {
		out = joinVars(out, cloneVars(fr.vars))
	}
	if out == nil {
		return false
	}
	fr.vars = out
	return true
}

// patternMatches says whether a pattern matches the subject: 1 surely,
// 0 never, -1 maybe.
func (st *state) patternMatches(fr *frame, p *Node, subject value) int {
	if p == nil {
		return -1
	}
	switch p.Type {
	case "MatchAs":
		if !p.Has("pattern") {
			return 1 // a capture or _
		}
		return st.patternMatches(fr, p.Node("pattern"), subject)
	case "MatchValue":
		v := st.eval(fr, p.Node("value"))
		if v == nil {
			return 0
		}
		return compareValues(&Node{Type: "Eq"}, subject, v)
	case "MatchSingleton":
		return compareValues(&Node{Type: "Is"}, subject, constValue(p.Node("value").Const()))
	case "MatchOr":
		result := 0
		for _, alt := range p.Nodes("patterns") {
			switch st.patternMatches(fr, alt, subject) {
			case 1:
				return 1
			case -1:
				result = -1
			}
		}
		return result
	case "MatchClass":
		st.eval(fr, p.Node("cls"))
		return -1
	}
	return -1
}

// bindPattern binds the names a pattern captures: the subject for a
// capture of it, what the reader knows of its parts otherwise.
func (st *state) bindPattern(fr *frame, p *Node, subject value) {
	if p == nil {
		return
	}
	switch p.Type {
	case "MatchAs":
		if name := p.Str("name"); name != "" {
			st.setVar(fr, name, subject)
		}
		st.bindPattern(fr, p.Node("pattern"), subject)
	case "MatchOr":
		for _, alt := range p.Nodes("patterns") {
			st.bindPattern(fr, alt, subject)
		}
	case "MatchSequence":
		_, elem := st.iterItems(fr, subject)
		if elem == nil {
			elem = data{hint: "item"}
		}
		for _, sp := range p.Nodes("patterns") {
			if sp != nil && sp.Type == "MatchStar" {
				if name := sp.Str("name"); name != "" {
					o := st.alloc(sp, objList)
					st.appendElem(o, elem)
					st.setVar(fr, name, ref{o})
				}
				continue
			}
			st.bindPattern(fr, sp, elem)
		}
	case "MatchMapping":
		for i, sp := range p.Nodes("patterns") {
			var v value = data{hint: "value"}
			keys := p.Nodes("keys")
			if i < len(keys) {
				if k := st.eval(fr, keys[i]); k != nil {
					v = st.getItem(fr, subject, k, p)
					if v == nil {
						v = data{hint: "value"}
					}
				}
			}
			st.bindPattern(fr, sp, v)
		}
		if name := p.Str("rest"); name != "" {
			o := st.alloc(p, objDict)
			st.setKey(o, data{hint: "key"}, data{hint: "value"})
			st.setVar(fr, name, ref{o})
		}
	case "MatchClass":
		for _, sp := range p.Nodes("patterns") {
			st.bindPattern(fr, sp, top{})
		}
		for i, sp := range p.Nodes("kwd_patterns") {
			attrs := p.Strs("kwd_attrs")
			var v value = top{}
			if i < len(attrs) {
				if got := st.getAttr(fr, subject, attrs[i]); got != nil {
					v = got
				}
			}
			st.bindPattern(fr, sp, v)
		}
	}
}
