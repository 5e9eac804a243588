package policy

import (
	"slices"
	"strings"
)

// RuleMatch is what one rule of a rules file matches, as written, for
// checking the file against what the deployment can call (gatehouse policy
// check cross-checks provider calls against the provider catalogue). A nil
// list is a key the rule does not write, which matches anything.
type RuleMatch struct {
	Section string // "rules", "effects", "scopes.require" or "approvals"
	Index   int    // the rule's index in its section
	// Name is the rule's name; for scopes.require, the scope.
	Name     string
	Decision string // rules and effects: as written

	Provider, Atom, Effect, Method []string // methods upper case
	Sink, Origin, Action, Agent    []string
	Host, Tool                     []string
	Path, Target                   []string // doublestar globs
	Verified, Confined             *bool

	// SendsToProvider: the rule names a provider-call key (provider,
	// atom, method, path or host). MayReachProviderCall: its sink, if
	// written, includes provider.
	SendsToProvider, MayReachProviderCall bool
}

// Matches lists the match of every rule of the policy, section by section
// (rules, effects, scopes.require, approvals) and in file order within
// each. SendsToProvider is set for a rule that names a provider-call key
// (provider, atom, method, path or host); MayReachProviderCall for one
// whose sink (if written) includes provider. A nil or unreadable policy
// has none.
func (p *Policy) Matches() []RuleMatch {
	if p == nil || !p.usable {
		return nil
	}
	var out []RuleMatch
	for _, s := range []*section{&p.rules, &p.effects} {
		for i := range s.rules {
			r := &s.rules[i]
			rm := r.m.view()
			rm.Section, rm.Index, rm.Name, rm.Decision = r.section, r.index, r.name, r.decision
			out = append(out, rm)
		}
	}
	for i := range p.scopes {
		rm := p.scopes[i].m.view()
		rm.Section, rm.Index, rm.Name = "scopes.require", p.scopes[i].index, p.scopes[i].scope
		out = append(out, rm)
	}
	for i := range p.approvals {
		r := &p.approvals[i]
		rm := r.m.view()
		rm.Section, rm.Index, rm.Name, rm.Tool = "approvals", r.index, strings.TrimPrefix(r.need.Rule, "approval:"), r.tools
		out = append(out, rm)
	}
	return out
}

func (m *matcher) view() RuleMatch {
	rm := RuleMatch{
		Provider: m.provider, Atom: m.atom, Effect: m.effect, Method: m.method, Sink: m.sink,
		Origin: m.origin, Action: m.action, Agent: m.agent, Host: m.host,
		Path: globTexts(m.path), Target: globTexts(m.target),
		Verified: m.verified.ptr(), Confined: m.confined.ptr(),
	}
	rm.SendsToProvider = rm.Provider != nil || rm.Atom != nil || rm.Method != nil || rm.Path != nil || rm.Host != nil
	rm.MayReachProviderCall = rm.Sink == nil || contains(rm.Sink, string(SinkProvider))
	return rm
}

func globTexts(gs []glob) []string {
	if gs == nil {
		return nil
	}
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.pattern
	}
	return out
}

func (t tri) ptr() *bool {
	if t == triAny {
		return nil
	}
	b := t == triTrue
	return &b
}

// CardPattern is one tool pattern of an agent card, as written.
type CardPattern struct {
	Agent   string // the card's agent
	Key     string // allowed_tools, blocked_tools or require_approval_for
	Pattern string
}

// CardPatterns lists every tool pattern of every agent card, by agent
// name and then in file order, for gatehouse policy check. A nil or
// unreadable policy has none.
func (p *Policy) CardPatterns() []CardPattern {
	if p == nil || !p.usable {
		return nil
	}
	names := make([]string, 0, len(p.agents))
	for n := range p.agents {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []CardPattern
	for _, n := range names {
		c := p.agents[n]
		for _, k := range []struct {
			key  string
			pats []string
		}{{"allowed_tools", c.allowedTools}, {"blocked_tools", c.blockedTools}, {"require_approval_for", c.requireApproval}} {
			for _, pat := range k.pats {
				out = append(out, CardPattern{Agent: n, Key: k.key, Pattern: pat})
			}
		}
	}
	return out
}
