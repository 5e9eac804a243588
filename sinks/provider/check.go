package provider

import (
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
)

// LoadGrounding reads the grounding rules file at path and checks it
// against cat, as ParseGrounding does. gatehouse policy check uses it;
// serve reads the file itself, checking who may write it, and hands the
// bytes to ParseGrounding.
func LoadGrounding(path string, cat grounding.Catalogue) (*grounding.Rules, error) {
	r, err := grounding.Load(path)
	if err != nil {
		return nil, err
	}
	return r.Resolve(cat)
}

// ParseGrounding parses grounding rules read from path and checks them
// against cat (grounding.Rules.Resolve): every rule's match must fit
// operations cat declares and every read must be a GET some integration
// declares. cat is the sink's GroundingCatalogue (a *Catalogue, or one
// WithToolServers made). The error names the file and every problem;
// serve then runs with grounding.Unreadable(path, err), which refuses
// every provider call.
func ParseGrounding(path string, data []byte, cat grounding.Catalogue) (*grounding.Rules, error) {
	r, err := grounding.Parse(path, data)
	if err != nil {
		return nil, err
	}
	return r.Resolve(cat)
}

// Catalogue returns the catalogue the sink calls providers from.
func (s *Sink) Catalogue() *Catalogue { return s.cat }

// GroundingCatalogue returns what the sink checks grounding rules
// against: its catalogue and the tool servers of Config.ToolServers.
func (s *Sink) GroundingCatalogue() grounding.Catalogue { return s.gcat }

// ToolCallTemplate is the path an upstream MCP tool call stands as in
// grounding rules: a POST of its arguments to /tools/<tool> on provider
// <server> (see sinks/mcp).
const ToolCallTemplate = "/tools/{tool}"

// WithToolServers returns c for grounding rules, with each named upstream
// MCP server as a provider whose one operation is POST /tools/{tool}, the
// form the mcp sink grounds a tool call in; a provider of c keeps its name
// when a server has the same one.
func (c *Catalogue) WithToolServers(servers ...string) grounding.Catalogue {
	if len(servers) == 0 {
		return c
	}
	g := toolServers{cat: c, servers: map[string]bool{}}
	for _, n := range servers {
		g.servers[n] = true
	}
	return g
}

type toolServers struct {
	cat     *Catalogue
	servers map[string]bool
}

func (g toolServers) Operations(p string) ([]grounding.Operation, bool) {
	if ops, ok := g.cat.Operations(p); ok {
		return ops, true
	}
	if g.servers[p] {
		return []grounding.Operation{{Integration: p + " (MCP server)", Method: "POST", Template: ToolCallTemplate}}, true
	}
	return nil, false
}

func (g toolServers) BasePath(p string) string { return g.cat.BasePath(p) }

// PolicyProblem is one reason a rule of a policy file does not fit the
// catalogue (gatehouse policy check).
type PolicyProblem struct {
	Section string // rules, effects, scopes.require, approvals
	Index   int
	Rule    string // the rule's name (a scope for scopes.require)
	Part    string // match.provider, match.atom, match.host, match
	Problem string
	Fix     string
}

func (p PolicyProblem) String() string {
	s := fmt.Sprintf("%s[%d] %q %s: %s", p.Section, p.Index, p.Rule, p.Part, p.Problem)
	if p.Fix != "" {
		s += "; fix: " + p.Fix
	}
	return s
}

// CheckPolicy cross-checks the rules of pol that are about provider calls
// against the catalogue:
//
//   - every provider, atom and host a rule names must be in the catalogue
//     (a name that is not is a typo that silently matches nothing);
//   - every approvals and scopes.require rule must fit some operation the
//     catalogue declares, with its provider, atom, method and path together.
//     A mutating call must be a declared operation of its integration, so
//     an approvals rule that fits none gates nothing such a call reaches;
//     paths are matched as sent (the base_url's path included), and the
//     fix says what to write when a path was written relative to it;
//   - a rule that restricts calls and names providers must name every
//     provider of their server that declares an operation it would reach
//     (checkSameServer): the server answers whichever entry sends.
//
// Deny rules (rules:, effects:) may name undeclared paths on purpose, so
// only their names are checked, and that an effects target about provider
// calls can match one at all (checkDenyPaths).
func (c *Catalogue) CheckPolicy(pol *policy.Policy) []PolicyProblem {
	var out []PolicyProblem
	for _, m := range pol.Matches() {
		prob := func(part, format string, args ...any) *PolicyProblem {
			out = append(out, PolicyProblem{Section: m.Section, Index: m.Index, Rule: m.Name, Part: part, Problem: fmt.Sprintf(format, args...)})
			return &out[len(out)-1]
		}
		if m.Section == "effects" {
			c.checkDenyPaths(m, prob)
		}
		if !m.SendsToProvider || !m.MayReachProviderCall {
			continue
		}
		named := true
		for _, p := range m.Provider {
			if _, ok := c.providers[p]; !ok {
				prob("match.provider", "provider %q is not in the provider catalogue %s", p, c.name()).Fix = "name a provider the catalogue lists: " + strings.Join(c.providerNames(), ", ")
				named = false
			}
		}
		for _, a := range m.Atom {
			in, ok := c.integrations[a]
			switch {
			case !ok:
				prob("match.atom", "integration %q is not in the provider catalogue %s", a, c.name()).Fix = "name an integration the catalogue lists"
				named = false
			case m.Provider != nil && !contains(m.Provider, in.Provider):
				prob("match.atom", "integration %q calls provider %s, which the match does not name", a, in.Provider).Fix = "name its provider, or another integration"
				named = false
			}
		}
		for _, h := range m.Host {
			if !c.hasHost(h) {
				prob("match.host", "no provider of the catalogue has host %q", h).Fix = "match the host of a provider's base_url, as host[:port]"
				named = false
			}
		}
		if named {
			c.checkSameServer(m, prob)
		}
		if !named || (m.Section != "approvals" && m.Section != "scopes.require") {
			continue
		}
		if c.anyOperation(m, func(_ *Provider, _ *Integration, op policy.Operation) bool { return true }) {
			continue
		}
		p := prob("match", "the match fits no operation the catalogue declares, so it reaches no call made through an integration (paths are matched as sent)")
		p.Fix = c.policyFix(m)
	}
	return out
}

// checkSameServer reports, for a rule that restricts calls (approvals,
// scopes.require, a rules: or effects: rule that does not allow) and names
// its providers, each other provider of a named one's server whose
// declared operations the rule would reach if it were named: the same
// server answers the call whichever catalogue entry sends it, so a call
// through the unnamed one skips the rule (a payment held for approval
// through erp is not held through erp-plain). Rules that name atoms are
// about those integrations and are left alone.
func (c *Catalogue) checkSameServer(m policy.RuleMatch, prob func(part, format string, args ...any) *PolicyProblem) {
	if m.Provider == nil || m.Atom != nil || (m.Section == "rules" || m.Section == "effects") && m.Decision == "allow" {
		return
	}
	seen := map[string]bool{}
	for _, name := range m.Provider {
		p := c.providers[name]
		for _, q := range c.SameServer(p) {
			if contains(m.Provider, q) || seen[q] {
				continue
			}
			seen[q] = true
			alt := m
			alt.Provider = []string{q}
			var what string
			if !c.anyOperation(alt, func(_ *Provider, _ *Integration, op policy.Operation) bool {
				what = op.Method + " " + op.Template
				return true
			}) {
				continue
			}
			a := (&Canonical{Scheme: p.scheme, Host: p.host, Port: p.port}).Authority()
			fix := fmt.Sprintf("add %s to match.provider", q)
			if qp := c.providers[q]; qp.host == p.host && qp.port == p.port {
				fix += ", or match the server with host: " + a
			}
			prob("match.provider", "provider %s has the server of %s (%s) and declares %s, which this rule does not reach, so a call through %s skips it", q, name, a, what, q).Fix = fix
		}
	}
}

// checkDenyPaths reports the target globs of an effects rule about
// provider calls that no provider call can match, written without the
// call's host (a target is host and path) or its provider's base path
// (every path sent starts with it). Such a rule looks like it denies
// something and denies nothing.
func (c *Catalogue) checkDenyPaths(m policy.RuleMatch, prob func(part, format string, args ...any) *PolicyProblem) {
	if !m.MayReachProviderCall {
		return
	}
	// A rule for every sink is about provider calls only through a target
	// on a provider's host.
	aboutProviders := m.SendsToProvider || contains(m.Sink, string(policy.SinkProvider))
	var provs []*Provider
	for i := range c.Providers {
		if p := &c.Providers[i]; m.Provider == nil || contains(m.Provider, p.Name) {
			provs = append(provs, p)
		}
	}
	under := func(g string, host func(*Provider) bool) (bool, string) {
		for _, p := range provs {
			if host(p) && mayMatchUnder(g, p.basePath) {
				return true, ""
			}
		}
		for _, p := range provs {
			if p.basePath != "" && host(p) {
				return false, p.basePath + g
			}
		}
		return false, ""
	}
	for _, g := range m.Target {
		if strings.HasPrefix(g, "/") {
			if aboutProviders {
				prob("match.target", "target %s is a path, but a provider call's target is its host and path (such as %s), so the rule matches no provider call", g, c.exampleTarget(provs)).Fix = "write **" + g + " for any host, or the host and the path"
			}
			continue
		}
		i := strings.IndexByte(g, '/')
		if i < 0 {
			continue
		}
		hostGlob, pathGlob := g[:i], g[i:]
		if !aboutProviders && !c.hasHost(hostGlob) {
			continue // another sink's target
		}
		onHost := func(p *Provider) bool {
			if strings.Contains(hostGlob, "**") {
				return true
			}
			ok, _ := doublestar.Match(strings.ToLower(hostGlob), (&Canonical{Scheme: p.scheme, Host: p.host, Port: p.port}).Authority())
			return ok
		}
		if ok, fix := under(pathGlob, onHost); !ok && fix != "" {
			prob("match.target", "target %s can match no provider call: every path sent starts with its provider's base path", g).Fix = "targets are host and path as sent: write " + hostGlob + fix
		}
	}
}

func (c *Catalogue) exampleTarget(provs []*Provider) string {
	if len(provs) == 0 {
		return "erp.example.com/api/payments"
	}
	p := provs[0]
	return (&Canonical{Scheme: p.scheme, Host: p.host, Port: p.port}).Authority() + p.basePath + "/..."
}

// mayMatchUnder reports whether a doublestar glob may match some path
// under base (base itself included): its literal text up to the first
// wildcard and base agree, ignoring case (rules match paths ignoring case
// on providers that route them so).
func mayMatchUnder(g, base string) bool {
	if base == "" {
		return true
	}
	lit := strings.ToLower(g)
	if i := strings.IndexAny(lit, "*?[{\\"); i >= 0 {
		lit = lit[:i]
	}
	b := strings.ToLower(base)
	return strings.HasPrefix(lit, b+"/") || lit == b || strings.HasPrefix(b+"/", lit)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (c *Catalogue) providerNames() []string {
	out := make([]string, len(c.Providers))
	for i := range c.Providers {
		out[i] = c.Providers[i].Name
	}
	return out
}

func (c *Catalogue) hasHost(h string) bool {
	for i := range c.Providers {
		p := &c.Providers[i]
		if strings.EqualFold((&Canonical{Scheme: p.scheme, Host: p.host, Port: p.port}).Authority(), h) {
			return true
		}
	}
	return false
}

// anyOperation reports whether some declared operation fits the match m
// and f.
func (c *Catalogue) anyOperation(m policy.RuleMatch, f func(*Provider, *Integration, policy.Operation) bool) bool {
	for i := range c.Integrations {
		in := &c.Integrations[i]
		p := c.providers[in.Provider]
		if in.contract == nil || m.Provider != nil && !contains(m.Provider, p.Name) || m.Atom != nil && !contains(m.Atom, in.Name) ||
			m.Effect != nil && !contains(m.Effect, string(in.Effect)) {
			continue
		}
		if m.Host != nil && !c.hostOf(p, m.Host) {
			continue
		}
		for _, op := range in.contract.Operations {
			if m.Method != nil && !contains(m.Method, op.Method) {
				continue
			}
			if m.Path != nil && !globsMayMatch(m.Path, op.Template) {
				continue
			}
			if f(p, in, op) {
				return true
			}
		}
	}
	return false
}

func (c *Catalogue) hostOf(p *Provider, hosts []string) bool {
	a := (&Canonical{Scheme: p.scheme, Host: p.host, Port: p.port}).Authority()
	for _, h := range hosts {
		if strings.EqualFold(h, a) {
			return true
		}
	}
	return false
}

// policyFix suggests what to write for a match that fits no operation.
func (c *Catalogue) policyFix(m policy.RuleMatch) string {
	if m.Path != nil {
		for i := range c.Providers {
			p := &c.Providers[i]
			if p.basePath == "" || m.Provider != nil && !contains(m.Provider, p.Name) {
				continue
			}
			rel := make([]string, 0, len(m.Path))
			for _, g := range m.Path {
				if !strings.HasPrefix(g, p.basePath+"/") {
					rel = append(rel, p.basePath+g)
				}
			}
			if len(rel) == 0 {
				continue
			}
			mm := m
			mm.Path = rel
			if c.anyOperation(mm, func(*Provider, *Integration, policy.Operation) bool { return true }) {
				return fmt.Sprintf("provider %s's base_url has the path %s and paths are matched as sent: write %s", p.Name, p.basePath, strings.Join(rel, ", "))
			}
		}
	}
	var ops []string
	mm := m
	mm.Method, mm.Path = nil, nil
	c.anyOperation(mm, func(_ *Provider, in *Integration, op policy.Operation) bool {
		ops = append(ops, in.Name+" "+op.Method+" "+op.Template)
		return len(ops) >= 5
	})
	if len(ops) == 0 {
		return "declare the operation in the catalogue, or correct the match"
	}
	return "match an operation the catalogue declares (" + strings.Join(ops, "; ") + ")"
}

// globsMayMatch reports whether some path the template stands for matches
// one of the doublestar globs; a "{name}" template segment stands for any
// one non-empty segment.
func globsMayMatch(globs []string, tmpl string) bool {
	ts := strings.Split(strings.TrimPrefix(tmpl, "/"), "/")
	for _, g := range globs {
		if !strings.HasPrefix(g, "/") {
			if ok, _ := doublestar.Match(g, tmpl); ok {
				return true
			}
			continue
		}
		if segsMayMatch(strings.Split(g[1:], "/"), ts) {
			return true
		}
	}
	return false
}

func segsMayMatch(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if segsMayMatch(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if isPlaceholder(segs[0]) {
			if pat[0] == "" {
				return false
			}
		} else if ok, _ := doublestar.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

func isPlaceholder(seg string) bool { return len(seg) >= 2 && seg[0] == '{' && seg[len(seg)-1] == '}' }
