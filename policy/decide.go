package policy

import (
	"fmt"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Decide decides one effect. It is pure: it reads p and in, keeps nothing,
// does no I/O and takes the time only from in.Now. The order of checks and
// what each mode enforces are in the package documentation.
//
// An allowed effect with no findings returns a Decision with nil Reasons and
// nil ScopesChecked, and Decide allocates nothing for it.
func (p *Policy) Decide(in Input) Decision {
	mode := in.Mode
	switch mode {
	case ModeOff:
		return Decision{Verdict: VerdictAllow, Mode: ModeOff}
	case "":
		mode = ModeReport
	case ModeReport, ModeStrict:
	default:
		return unknownMode(in.Mode)
	}
	if p == nil || !p.usable {
		return p.unreadable(mode)
	}

	d := decider{p: p, in: in, strict: mode == ModeStrict}
	d.method = strings.ToUpper(in.Effect.Method)
	if in.Effect.Sink == SinkProvider && in.Effect.Contract != nil {
		d.verified = in.Effect.Contract.matches(d.method, in.Effect.Path)
	}

	d.scopes()
	d.mandate()
	d.scopeFindings()
	d.cards()
	d.approvals()
	d.deployment()
	d.builtins()

	return d.verdict(mode)
}

// decider holds one decision in progress. It lives on Decide's stack.
type decider struct {
	p        *Policy
	in       Input
	strict   bool
	method   string // in.Effect.Method, upper case
	verified bool

	reasons []Reason
	allowed string

	checked []string // the scopes required, in order, without repeats

	need *ApprovalNeed // the first approval asked for
}

// add records a finding. personal findings (mandate and scopes) are
// enforced in every mode that decides; the rest only in strict mode.
func (d *decider) add(r Refusal, rule, detail string, personal bool) {
	d.reasons = append(d.reasons, Reason{Refusal: r, Rule: rule, Detail: detail, Enforced: personal || d.strict})
}

func (d *decider) verdict(mode Mode) Decision {
	dec := Decision{Mode: mode, Reasons: d.reasons, Allowed: d.allowed, ScopesChecked: d.checked, Verified: d.verified, Approval: d.need}
	var hold *Reason
	for i := range d.reasons {
		r := &d.reasons[i]
		if !r.Enforced {
			continue
		}
		if r.Refusal == RefuseApprovalMissing {
			if hold == nil {
				hold = r
			}
			continue
		}
		dec.Verdict, dec.Refusal, dec.Rule, dec.Enforced = VerdictRefuse, r.Refusal, r.Rule, true
		return dec
	}
	if hold != nil {
		dec.Verdict, dec.Refusal, dec.Rule, dec.Enforced = VerdictHold, hold.Refusal, hold.Rule, true
		return dec
	}
	dec.Verdict = VerdictAllow
	if len(d.reasons) > 0 {
		// Report mode: record what strict mode would have refused.
		dec.Refusal, dec.Rule = d.reasons[0].Refusal, d.reasons[0].Rule
	}
	return dec
}

func unknownMode(m Mode) Decision {
	r := Reason{
		Refusal:  RefusePolicyUnreadable,
		Rule:     "mode",
		Detail:   fmt.Sprintf("The mode %q is not off, report or strict, so every effect is refused; set the mode to one of those.", string(m)),
		Enforced: true,
	}
	return Decision{Verdict: VerdictRefuse, Mode: m, Refusal: r.Refusal, Rule: r.Rule, Enforced: true, Reasons: []Reason{r}}
}

func (p *Policy) unreadable(mode Mode) Decision {
	var detail string
	switch {
	case p == nil || (p.name == "" && p.problem == ""):
		detail = "No policy was loaded, so every effect is refused; start Gatehouse with a rules file or the default policy."
	default:
		detail = fmt.Sprintf("The policy file %s could not be used (%s), so every effect is refused; fix the file and load it again.", p.name, p.problem)
	}
	r := Reason{Refusal: RefusePolicyUnreadable, Rule: "policy", Detail: detail, Enforced: true}
	return Decision{Verdict: VerdictRefuse, Mode: mode, Refusal: r.Refusal, Rule: r.Rule, Enforced: true, Reasons: []Reason{r}}
}

// who names the person the work is for, for details.
func (d *decider) who() string {
	f := d.in.Authority.For
	switch {
	case f.Person == "" && f.Tenant == "":
		return "the person this work is for"
	case f.Tenant == "":
		return f.Person
	}
	return f.Person + " (" + f.Tenant + ")"
}

// system is what a mandate's Systems names: the provider for a provider
// call, the upstream server for an MCP tool call, else the sink.
func (d *decider) system() string {
	if d.in.Effect.Sink == SinkProvider || d.in.Effect.Sink == SinkMCP {
		return d.in.Effect.Provider
	}
	return string(d.in.Effect.Sink)
}

// class returns the effect class a mandate is checked against: Class if
// set, else Declared, else from Method (GET, HEAD, OPTIONS: read; DELETE:
// destructive; any other: write), else the sink's default (see the package
// documentation).
func (e *Effect) class(method string) EffectClass {
	switch {
	case e.Class != "":
		return e.Class
	case e.Declared != "":
		return e.Declared
	case method != "":
		switch method {
		case "GET", "HEAD", "OPTIONS":
			return EffectRead
		case "DELETE":
			return EffectDestructive
		}
		return EffectWrite
	}
	switch e.Sink {
	case SinkOutput, SinkPeer:
		return EffectNotify
	case SinkBrowser:
		return EffectRead
	}
	// memory, artifact, workspace, code, process, and anything unknown.
	return EffectWrite
}

// scopes finds the scopes the effect requires.
func (d *decider) scopes() {
	for i := range d.p.scopes {
		if d.p.scopes[i].m.matches(d) {
			s := d.p.scopes[i].scope
			if !contains(d.checked, s) {
				d.checked = append(d.checked, s)
			}
		}
	}
}

func (d *decider) mandate() {
	a := &d.in.Authority
	if a.MandateUnreadable {
		d.add(RefuseOutsideMandate, "mandate",
			"The mandate registered for this work could not be read, so nothing is done on the person's behalf; the application must register the mandate again.", true)
		return
	}
	m := a.Mandate
	if m == nil {
		return
	}
	if !m.ExpiresAt.IsZero() {
		switch {
		case d.in.Now.IsZero():
			d.add(RefuseOutsideMandate, "mandate.expires_at",
				fmt.Sprintf("The mandate expires at %s but no time was given to check it against, so it is treated as expired; the broker must pass the current time.", m.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z")), true)
		case !d.in.Now.Before(m.ExpiresAt):
			d.add(RefuseOutsideMandate, "mandate.expires_at",
				fmt.Sprintf("The mandate %s handed over expired at %s; they must hand over a new mandate for this work.", d.who(), m.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z")), true)
		}
	}
	if len(m.Systems) > 0 {
		sys := d.system()
		if !contains(m.Systems, sys) {
			d.add(RefuseOutsideMandate, "mandate.systems",
				fmt.Sprintf("The mandate from %s covers the systems %s, not %q; they must add %q to the mandate for this to happen.", d.who(), list(m.Systems), sys, sys), true)
		}
	}
	if len(m.Effects) > 0 {
		c := d.in.Effect.class(d.method)
		found := false
		for _, e := range m.Effects {
			if e == c {
				found = true
				break
			}
		}
		if !found {
			d.add(RefuseOutsideMandate, "mandate.effects",
				fmt.Sprintf("This is a %s effect and the mandate from %s hands over only %s; they must add %s to the mandate for this to happen.", c, d.who(), classList(m.Effects), c), true)
		}
	}
	if len(m.Scopes) > 0 {
		for _, s := range d.checked {
			if !contains(m.Scopes, s) {
				d.add(RefuseOutsideMandate, "mandate.scopes",
					fmt.Sprintf("This needs the scope %q and the mandate from %s hands over only %s; they must add the scope to the mandate for this to happen.", s, d.who(), list(m.Scopes)), true)
			}
		}
	}
}

func (d *decider) scopeFindings() {
	for _, s := range d.checked {
		if !contains(d.in.Authority.Scopes, s) {
			d.add(RefuseScopeMissing, "scope:"+s,
				fmt.Sprintf("This needs the scope %q and %s does not hold it; grant the scope in your application, or leave this to someone who holds it.", s, d.who()), true)
		}
	}
	for i := range d.p.scopes {
		req := &d.p.scopes[i]
		if req.limits == nil || !req.m.matches(d) {
			continue
		}
		rule := "scope:" + req.scope
		for _, l := range req.limits {
			v, ok := d.in.Effect.Values[l.key]
			if !ok {
				d.add(RefuseOverScopeLimit, rule,
					fmt.Sprintf("The scope %q limits %s to %s (scopes.require[%d]), but this request carries no %s, so the limit cannot be checked and the effect is refused.", req.scope, l.key, l.text, req.index, l.key), true)
				continue
			}
			r, ok := parseDecimal(v)
			if !ok {
				d.add(RefuseOverScopeLimit, rule,
					fmt.Sprintf("The scope %q limits %s to %s (scopes.require[%d]), but this request's %s is %q, which is not a decimal number, so the limit cannot be checked and the effect is refused.", req.scope, l.key, l.text, req.index, l.key, v), true)
				continue
			}
			if r.Cmp(l.max) > 0 {
				d.add(RefuseOverScopeLimit, rule,
					fmt.Sprintf("This request's %s is %s, above the limit of %s that the scope %q allows (scopes.require[%d]); lower it, or have the limit raised.", l.key, v, l.text, req.scope, req.index), true)
			}
		}
	}
}

func (d *decider) cards() {
	agent := d.in.Authority.Agent
	if agent == "" {
		return
	}
	c, ok := d.p.agents[agent]
	if !ok {
		d.add(RefuseAgentUnregistered, "agent:"+agent,
			fmt.Sprintf("The agent %q has no card in the policy's agents section, so it may not act; register its card, or run the work without that agent.", agent), false)
		return
	}
	e := &d.in.Effect
	tool := e.Tool
	if tool == "" {
		tool = string(e.Sink) + "." + e.Action
	}
	// An upstream MCP server names its own tools: a block or an approval
	// written for delete_note holds for its Delete_Note too. (An allow
	// stays exact: it must not widen by case.)
	match := globAny
	if e.Sink == SinkMCP {
		match = globAnyFold
	}
	if pat, hit := match(c.blockedTools, tool); hit {
		d.add(RefuseToolBlocked, c.rule,
			fmt.Sprintf("The card of agent %q blocks the tool %q (pattern %q), and a block holds even if the tool is also allowed; remove the pattern from blocked_tools if the agent should use it.", agent, tool, pat), false)
	} else if len(c.allowedTools) > 0 {
		if _, hit := globAny(c.allowedTools, tool); !hit {
			d.add(RefuseToolNotAllowed, c.rule,
				fmt.Sprintf("The tool %q is not on the allowed_tools of agent %q; add it to the card if the agent should use it.", tool, agent), false)
		}
	}
	if e.Sink == SinkPeer && e.Action == "delegate" && len(c.allowedDelegations) > 0 {
		if _, hit := globAny(c.allowedDelegations, e.Recipient); !hit {
			d.add(RefuseDelegationNotAllowed, c.rule,
				fmt.Sprintf("Agent %q may not delegate to %q; add the recipient to the card's allowed_delegations if it should.", agent, e.Recipient), false)
		}
	}
	if pat, hit := match(c.requireApproval, tool); hit {
		d.needApproval(ApprovalNeed{Rule: c.rule},
			fmt.Sprintf("The card of agent %q needs a person's approval for the tool %q (pattern %q); a reviewer must approve it before it happens.", agent, tool, pat))
	}
}

// deployment records the first matching deny rule (rules: for provider
// calls, then effects:) and notes the first matching allow rules for the
// built-ins to use.
func (d *decider) deployment() {
	if d.in.Effect.Sink == SinkProvider {
		if r := d.p.rules.first(d, false, false); r != nil {
			d.add(RefuseDeploymentRule, r.name, r.detail, false)
			return
		}
	}
	if r := d.p.effects.first(d, false, false); r != nil {
		d.add(RefuseDeploymentRule, r.name, r.detail, false)
	}
}

// allowRule returns the name of the first allow rule in s that matches,
// and when needTarget is set also names a target.
func (d *decider) allowRule(s *section, needTarget bool) string {
	r := s.first(d, true, needTarget)
	if r == nil {
		return ""
	}
	return r.name
}

func (d *decider) lifted(name string) {
	if d.allowed == "" {
		d.allowed = name
	}
}

func isMutating(m string) bool {
	switch m {
	case "POST", "PUT", "PATCH", "DELETE":
		return true
	}
	return false
}

func isSafe(m string) bool {
	switch m {
	case "GET", "HEAD", "OPTIONS":
		return true
	}
	return false
}

// untrusted reports whether code of origin o is held to what it verifiably
// does: registry and model code, and any origin Gatehouse does not know.
func untrusted(o Origin) bool {
	switch o {
	case OriginShipped, OriginRuntime, OriginDirect:
		return false
	}
	return true
}

func (d *decider) builtins() {
	e := &d.in.Effect
	switch e.Sink {
	case SinkProvider:
		d.provider()
	case SinkCode:
		if untrusted(e.Origin) && !e.Confined {
			d.unconfined(fmt.Sprintf("This program (origin %s) would run outside a confined sandbox, where it can reach the network and the host; enable confinement, or add an effects allow rule if the deployment accepts the risk.", originName(e.Origin)))
		}
	case SinkProcess:
		if e.Origin == OriginModel || (untrusted(e.Origin) && e.Origin != OriginRegistry) {
			d.unconfined(fmt.Sprintf("This host command was chosen by code of origin %s and runs outside any sandbox; run it in the confined sandbox instead, or add an effects allow rule if the deployment accepts the risk.", originName(e.Origin)))
		}
	case SinkBrowser:
		d.browserBuiltins() // browser.go
	case SinkMCP:
		d.ungrounded()
		if e.Unpinned != "" {
			d.add(RefuseToolChanged, string(RefuseToolChanged), fmt.Sprintf("The upstream MCP tool %q is not what an operator accepted: %s; "+
				"an operator must review the change and accept it (gatehouse mcp upstream show, then accept) before it can be called.", e.Target, e.Unpinned), true)
		}
	}
}

func originName(o Origin) string {
	if o == "" {
		return "unknown"
	}
	return string(o)
}

func (d *decider) unconfined(detail string) {
	if name := d.allowRule(&d.p.effects, false); name != "" {
		d.lifted(name)
		return
	}
	d.add(RefuseUnconfinedExecution, string(RefuseUnconfinedExecution), detail, false)
}

// ungrounded records the failures of the grounding rule that checked a
// provider or MCP tool call.
func (d *decider) ungrounded() {
	if g := d.in.Effect.Grounding; g != nil && len(g.Failures) > 0 {
		d.add(RefuseUngrounded, "grounding:"+g.Rule,
			fmt.Sprintf("The values this call sends are not grounded in the records read in this workflow (rule %q): %s.", g.Rule, strings.Join(g.Failures, "; ")), false)
	}
}

func (d *decider) provider() {
	e := &d.in.Effect
	if e.Ambiguous != "" {
		d.add(RefuseAmbiguousRequest, string(RefuseAmbiguousRequest),
			fmt.Sprintf("This request cannot be sent as one unambiguous request: %s. Send the path and body in their plain form; nothing was sent.", e.Ambiguous), true)
	}
	d.ungrounded()
	mut := isMutating(d.method)
	if mut && (e.Atom == "" || e.Declared == "") {
		if name := d.allowRule(&d.p.rules, false); name != "" {
			d.lifted(name)
		} else {
			d.add(RefuseMutationWithoutAtom, string(RefuseMutationWithoutAtom),
				fmt.Sprintf("A %s to %s does not come from an integration with a declared effect; send it through an integration, or add a rules allow rule if this is the deployment's own reviewed client.", d.method, providerName(e.Provider)), false)
		}
	}
	if e.Declared != "" && !declaredAllows(e.Declared, d.method) {
		d.add(RefuseBeyondDeclaredEffect, string(RefuseBeyondDeclaredEffect),
			beyondDetail(e, d.method), false)
	}
	if !mut {
		return
	}
	// Contracts hold for every origin: whoever composed the request, a
	// mutating call naming an integration is one of its operations.
	if e.Atom != "" && e.Declared != "" {
		switch {
		case e.Contract == nil && untrusted(e.Origin):
			d.add(RefuseUnverifiedModelCode, string(RefuseUnverifiedModelCode),
				fmt.Sprintf("Code of origin %s sends a %s through integration %q, which declares no operations; it may only mutate through operations the integration declares.", originName(e.Origin), d.method, e.Atom), false)
		case e.Contract == nil:
			d.add(RefuseOutsideContract, string(RefuseOutsideContract),
				fmt.Sprintf("The integration %q declares no operations, so it may only read; declare %s %s among its operations in the catalogue if it should send it.", e.Atom, d.method, e.Path), false)
		case !d.verified:
			d.add(RefuseOutsideContract, string(RefuseOutsideContract),
				fmt.Sprintf("%s %s is not one of the operations integration %q declares (origin %s); only a declared operation may be sent through it.", d.method, e.Path, e.Atom, originName(e.Origin)), false)
		}
	}
	if untrusted(e.Origin) && (e.Atom == "" || e.Declared == "") && !e.FromProgram {
		d.add(RefuseUnverifiedModelCode, string(RefuseUnverifiedModelCode),
			fmt.Sprintf("Code of origin %s sends a %s without an integration, so no operations it may send are known; it may only mutate through operations an integration declares or its own code was read to contain.", originName(e.Origin), d.method), false)
	}
	if e.FromProgram {
		switch {
		case e.ProgramContract == nil && untrusted(e.Origin):
			d.add(RefuseUnverifiedModelCode, string(RefuseUnverifiedModelCode),
				fmt.Sprintf("The program making this call (origin %s) sends a %s, and the operations its code can send could not be read; it may only mutate through operations read from its own code.", originName(e.Origin), d.method), false)
		case e.ProgramContract != nil && !e.ProgramContract.matches(d.method, e.Path):
			d.add(RefuseOutsideContract, string(RefuseOutsideContract),
				fmt.Sprintf("The program making this call (origin %s) sends %s %s, which is not one of the operations its own code contains; it may only send what its code was read to send.", originName(e.Origin), d.method, e.Path), false)
		}
	}
}

func providerName(p string) string {
	if p == "" {
		return "an unnamed provider"
	}
	return p
}

func beyondDetail(e *Effect, method string) string {
	switch e.Declared {
	case EffectRead, EffectNotify, EffectWrite, EffectDestructive:
		return fmt.Sprintf("The integration %q declares a %s effect, which does not allow %s; it must declare a wider effect (and be reviewed for it) to send this.", e.Atom, e.Declared, method)
	}
	return fmt.Sprintf("The integration %q declares the effect %q, which is not read, write, destructive or notify, so it may send nothing; fix its declaration.", e.Atom, e.Declared)
}

// declaredAllows reports whether an integration declaring class c may send
// method m: read and notify allow GET, HEAD, OPTIONS and POST; write every
// method but DELETE; destructive every method. An unknown class allows
// nothing.
func declaredAllows(c EffectClass, m string) bool {
	switch c {
	case EffectRead, EffectNotify:
		return isSafe(m) || m == "POST"
	case EffectWrite:
		return m != "DELETE"
	case EffectDestructive:
		return true
	}
	return false
}

// matches reports whether a request with the upper-case method and the
// path p is one of the contract's operations.
func (c *Contract) matches(method, p string) bool {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	for i := range c.Operations {
		op := &c.Operations[i]
		if strings.EqualFold(op.Method, method) && templateMatch(op.Template, p) {
			return true
		}
	}
	return false
}

// templateMatch matches a URL path against a template such as
// "/invoices/{id}": a "{name}" segment matches exactly one non-empty path
// segment, every other segment must be equal.
func templateMatch(tmpl, p string) bool {
	for {
		ts, trest, tmore := strings.Cut(tmpl, "/")
		ps, prest, pmore := strings.Cut(p, "/")
		if len(ts) >= 2 && ts[0] == '{' && ts[len(ts)-1] == '}' {
			if ps == "" {
				return false
			}
		} else if ts != ps {
			return false
		}
		if tmore != pmore {
			return false
		}
		if !tmore {
			return true
		}
		tmpl, p = trest, prest
	}
}

// matches reports whether the effect in d matches every key of m.
func (m *matcher) matches(d *decider) bool {
	e := &d.in.Effect
	if m.provider != nil && !contains(m.provider, e.Provider) {
		return false
	}
	if m.sink != nil && !contains(m.sink, string(e.Sink)) {
		return false
	}
	if m.method != nil && !contains(m.method, d.method) {
		return false
	}
	if m.effect != nil && !contains(m.effect, string(e.Declared)) {
		return false
	}
	if m.atom != nil && !contains(m.atom, e.Atom) {
		return false
	}
	if m.origin != nil && !contains(m.origin, string(e.Origin)) {
		return false
	}
	if m.action != nil && !contains(m.action, e.Action) {
		return false
	}
	if m.agent != nil && !contains(m.agent, d.in.Authority.Agent) {
		return false
	}
	if m.host != nil && !containsFold(m.host, e.Host) {
		return false
	}
	if !m.verified.matches(d.verified) || !m.confined.matches(e.Confined) {
		return false
	}
	if m.target != nil && !globsMatch(m.target, e.Target, e.PathFold) {
		return false
	}
	if m.path != nil && !globsMatch(m.path, e.Path, e.PathFold) {
		return false
	}
	return true
}

// globsMatch is doubleAny, ignoring ASCII case when fold is set.
func globsMatch(globs []glob, s string, fold bool) bool {
	if !fold {
		return doubleAny(globs, s)
	}
	l := strings.ToLower(s)
	for i := range globs {
		g := globs[i]
		if g.folded != nil {
			g = *g.folded
		}
		if doubleAny([]glob{g}, l) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// doubleAny matches s against doublestar globs, validated at load.
func doubleAny(globs []glob, s string) bool {
	for i := range globs {
		g := &globs[i]
		if !strings.HasPrefix(s, g.prefix) {
			continue
		}
		if g.literal {
			if len(s) == len(g.prefix) {
				return true
			}
			continue
		}
		if ok, _ := doublestar.Match(g.pattern, s); ok {
			return true
		}
	}
	return false
}

// globAny matches s against path.Match globs, validated at load, and
// returns the first pattern that matched.
func globAny(globs []string, s string) (string, bool) {
	for _, g := range globs {
		if ok, _ := path.Match(g, s); ok {
			return g, true
		}
	}
	return "", false
}

// globAnyFold is globAny, also matching when pattern and name are
// equal but for case.
func globAnyFold(globs []string, s string) (string, bool) {
	if g, ok := globAny(globs, s); ok {
		return g, true
	}
	l := strings.ToLower(s)
	for _, g := range globs {
		if ok, _ := path.Match(strings.ToLower(g), l); ok {
			return g, true
		}
	}
	return "", false
}

func list(vs []string) string {
	if len(vs) == 1 {
		return fmt.Sprintf("%q", vs[0])
	}
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

func classList(cs []EffectClass) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return list(s)
}
