package policy

import "strings"

// section is one list of deployment rules (rules: or effects:) with an
// index that narrows it, per effect, to the rules that can match, in file
// order. First-match semantics are unchanged: the index only skips rules
// that cannot match.
//
// A rule is filed under a key when it constrains that key to literal
// values: in rules:, the provider; in effects:, the first segment of its
// target globs (the host, for provider and browser targets), when that
// segment of every target glob is literal. Every other rule is in rest and
// is tried for every effect. So a file of many per-provider or per-host
// rules costs about what one rule costs.
type section struct {
	rules    []rule
	byKey    map[string][]int32 // key -> rule indices, ascending
	rest     []int32            // rules filed under no key, ascending
	byTarget bool               // keyed by target's first segment, else by provider
}

// key is the effect's key in s: a plain function, not a func value, so
// Decide's state stays on the stack.
func (s *section) key(e *Effect) string {
	if s.byTarget {
		seg, _, _ := strings.Cut(e.Target, "/")
		return seg
	}
	return e.Provider
}

func newSection(rules []rule, keysOf func(*rule) []string, byTarget bool) section {
	s := section{rules: rules, byKey: map[string][]int32{}, byTarget: byTarget}
	for i := range rules {
		keys := keysOf(&rules[i])
		if keys == nil {
			s.rest = append(s.rest, int32(i))
			continue
		}
		for _, k := range keys {
			if l := s.byKey[k]; len(l) == 0 || l[len(l)-1] != int32(i) {
				s.byKey[k] = append(l, int32(i))
			}
		}
	}
	return s
}

// first returns the first rule, in file order, whose decision is allow (or
// deny) and which matches the effect d decides; with needTarget only rules
// naming a target count. nil if none.
func (s *section) first(d *decider, allow, needTarget bool) *rule {
	if len(s.rules) == 0 {
		return nil
	}
	a, b := s.byKey[s.key(&d.in.Effect)], s.rest
	for len(a) > 0 || len(b) > 0 {
		var i int32
		if len(b) == 0 || len(a) > 0 && a[0] < b[0] {
			i, a = a[0], a[1:]
		} else {
			i, b = b[0], b[1:]
		}
		if r := &s.rules[i]; r.allow == allow && (!needTarget || r.m.target != nil) && r.m.matches(d) {
			return r
		}
	}
	return nil
}

func newRulesSection(rules []rule) section {
	return newSection(rules, func(r *rule) []string { return r.m.provider }, false)
}

func newEffectsSection(rules []rule) section {
	return newSection(rules, func(r *rule) []string {
		if r.m.target == nil {
			return nil
		}
		keys := make([]string, 0, len(r.m.target))
		for _, g := range r.m.target {
			seg, _, _ := strings.Cut(g.pattern, "/")
			if strings.ContainsAny(seg, `*?[{\`) {
				return nil
			}
			keys = append(keys, seg)
		}
		return keys
	}, true)
}
