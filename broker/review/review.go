package review

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// MaxExamples is how many example runs a Finding lists.
const MaxExamples = 3

// Report is a policy review of one journal. It marshals to JSON as is.
type Report struct {
	Journal   string    `json:"journal"`
	Runs      int       `json:"runs"`
	Decisions int       `json:"decisions"`
	Report    int       `json:"report_mode_decisions"` // decisions made in report mode
	Would     int       `json:"would_refuse"`          // decisions with at least one finding strict mode would enforce
	Skipped   int       `json:"skipped_lines"`         // lines that did not parse
	Findings  []Finding `json:"findings"`              // most frequent first
}

// Finding is one group: a refusal strict mode would make, for one rule and
// one target.
type Finding struct {
	Refusal     policy.Refusal `json:"refusal"`
	Rule        string         `json:"rule"`
	Sink        policy.Sink    `json:"sink"`
	Target      string         `json:"target"`
	Agent       string         `json:"agent,omitempty"`
	Count       int            `json:"count"`
	First       time.Time      `json:"first_seen"`
	Last        time.Time      `json:"last_seen"`
	Examples    []string       `json:"example_runs"`
	Detail      string         `json:"detail"` // the first occurrence's reason, for a person
	Suggestions []Suggestion   `json:"suggestions"`
	// Approval is, for an approval-missing finding, what the rule that
	// held the effect asks (its roles and least assurance), read from the
	// policy the decision was made under when Options.Policy has it; nil
	// when it is not known.
	Approval *policy.ApprovalNeed `json:"approval,omitempty"`

	effect policy.Effect // the first occurrence, for checking suggestions
	tenant policy.Principal
	digest string // the policy the first occurrence was decided under
}

// Options tune Review.
type Options struct {
	// Policy returns the policy whose digest is given (the one a decision
	// records), or nil when it is not at hand: the current policy, or one
	// kept in the content store. Review uses it to name what an
	// approvals rule or agent card really asked.
	Policy func(digest string) *policy.Policy
}

// RuleFindings is one rule's findings rolled up: the refusal and rule,
// their total count and time span, and the findings per target, most
// frequent first.
type RuleFindings struct {
	Refusal  policy.Refusal `json:"refusal"`
	Rule     string         `json:"rule"`
	Count    int            `json:"count"`
	First    time.Time      `json:"first_seen"`
	Last     time.Time      `json:"last_seen"`
	Findings []Finding      `json:"targets"`
}

// ByRule rolls findings up per refusal and rule, the rules with the most
// findings first; each keeps its findings (one per target) in order.
func ByRule(fs []Finding) []RuleFindings {
	var out []RuleFindings
	at := map[[2]string]int{}
	for _, f := range fs {
		k := [2]string{string(f.Refusal), f.Rule}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, RuleFindings{Refusal: f.Refusal, Rule: f.Rule, First: f.First, Last: f.Last})
		}
		g := &out[i]
		g.Count += f.Count
		g.Findings = append(g.Findings, f)
		if f.First.Before(g.First) {
			g.First = f.First
		}
		if f.Last.After(g.Last) {
			g.Last = f.Last
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	return out
}

// SuggestionKind names what a suggestion does.
type SuggestionKind string

const (
	KindAllowRule SuggestionKind = "allow-rule" // a rules or effects allow rule lifts the built-in
	KindScope     SuggestionKind = "scope"      // the allow rule, and only for people holding a scope
	KindApproval  SuggestionKind = "approval"   // a person approves each one
	KindCard      SuggestionKind = "agent-card" // register the agent or extend its card
	KindFix       SuggestionKind = "fix"        // no rule lifts it: change the integration, sandbox or rule
)

// Suggestion is one thing an operator can do about a Finding.
type Suggestion struct {
	Kind SuggestionKind `json:"kind"`
	Text string         `json:"text"`
	// Rules is YAML in the rules file's format to merge into the policy
	// file; "" when no rule does it.
	Rules string `json:"rules,omitempty"`
	// Checked is true when Rules parses and, in strict mode over the
	// recorded effect, turns the finding into what Kind promises.
	Checked bool `json:"checked"`
}

type groupKey struct {
	refusal policy.Refusal
	rule    string
	sink    policy.Sink
	target  string
	agent   string
}

// Review reads the journal in dir and groups what strict mode would have
// refused. It returns ErrNoJournal when dir is not a journal.
func Review(dir string) (*Report, error) { return ReviewWith(dir, Options{}) }

// ReviewWith is Review with options.
func ReviewWith(dir string, opts Options) (*Report, error) {
	rep := &Report{Journal: dir, Findings: []Finding{}}
	groups := map[groupKey]*Finding{}
	skipped, err := eachRun(dir, func(r *run) error {
		rep.Runs++
		var who policy.Principal
		if r.Open != nil {
			who = r.Open.ActingFor
		}
		for _, ev := range r.Events {
			if ev.Type != journal.TypeDecision {
				continue
			}
			var d journal.Decision
			if json.Unmarshal(ev.Data, &d) != nil {
				rep.Skipped++
				continue
			}
			rep.Decisions++
			if d.Mode == policy.ModeReport {
				rep.Report++
			}
			reasons := d.Reasons
			if len(reasons) == 0 && d.Refusal != "" && !d.Enforced {
				reasons = []policy.Reason{{Refusal: d.Refusal, Rule: d.Rule}}
			}
			would := false
			for _, rs := range reasons {
				if rs.Enforced || rs.Refusal == "" {
					continue
				}
				would = true
				k := groupKey{refusal: rs.Refusal, rule: rs.Rule, sink: d.Sink, target: targetOf(&d), agent: d.Agent}
				f := groups[k]
				if f == nil {
					f = &Finding{Refusal: rs.Refusal, Rule: rs.Rule, Sink: d.Sink, Target: k.target, Agent: d.Agent,
						First: ev.Time, Last: ev.Time, Detail: rs.Detail, effect: effectOf(&d), tenant: who, digest: d.PolicyDigest}
					groups[k] = f
				}
				f.Count++
				if ev.Time.Before(f.First) {
					f.First = ev.Time
				}
				if ev.Time.After(f.Last) {
					f.Last = ev.Time
				}
				if len(f.Examples) < MaxExamples && (len(f.Examples) == 0 || f.Examples[len(f.Examples)-1] != r.ID) {
					f.Examples = append(f.Examples, r.ID)
				}
			}
			if would {
				rep.Would++
			}
		}
		return nil
	})
	rep.Skipped += skipped
	if err != nil {
		return nil, err
	}
	for _, f := range groups {
		if f.Refusal == policy.RefuseApprovalMissing && opts.Policy != nil {
			f.Approval = needOf(f, opts.Policy(f.digest))
		}
		f.Suggestions = suggest(f)
		rep.Findings = append(rep.Findings, *f)
	}
	sort.Slice(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		if a.Refusal != b.Refusal {
			return a.Refusal < b.Refusal
		}
		return a.Target < b.Target
	})
	return rep, nil
}

// needOf decides f's effect under p in strict mode and returns what the
// approvals rule or card named by f.Rule asks, nil when p is nil or asks
// through another rule now.
func needOf(f *Finding, p *policy.Policy) *policy.ApprovalNeed {
	if p == nil {
		return nil
	}
	d := p.Decide(policy.Input{Mode: policy.ModeStrict, Authority: policy.Authority{For: f.tenant, Agent: f.Agent}, Effect: f.effect, Now: f.Last})
	if d.Approval == nil || d.Approval.Rule != f.Rule {
		return nil
	}
	n := *d.Approval
	return &n
}

// effectOf rebuilds, from what the journal recorded, the policy.Effect the
// decision was made over. The journal keeps no contract, only whether the
// call matched one (Verified), so a verified call gets a one-operation
// contract of itself.
func effectOf(d *journal.Decision) policy.Effect {
	e := policy.Effect{
		Sink: d.Sink, Action: d.Action, Origin: d.Origin, Tool: d.Tool, Target: d.Target, Confined: d.Confined,
		Provider: d.Provider, Method: d.Method, Host: d.Host, Path: d.Path, PageHost: d.PageHost,
		Atom: d.Atom, Declared: d.Declared,
	}
	if d.Sink == policy.SinkPeer {
		e.Recipient = d.Target
	}
	if d.Verified {
		e.Contract = &policy.Contract{Operations: []policy.Operation{{Method: d.Method, Template: d.Path}}}
	}
	return e
}

var unsafeName = regexp.MustCompile(`[^a-z0-9]+`)

// ruleName makes a rule name from parts: lowercase letters, digits and '-'.
func ruleName(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p = strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(p), "-"), "-"); p != "" {
			out = append(out, p)
		}
	}
	n := strings.Join(out, "-")
	if len(n) > 60 {
		n = strings.TrimRight(n[:60], "-")
	}
	return n
}

// yamlString quotes s as a YAML double-quoted scalar (JSON's string syntax
// is valid YAML).
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// tool is the name agent cards match for the effect.
func tool(e *policy.Effect) string {
	if e.Tool != "" {
		return e.Tool
	}
	return string(e.Sink) + "." + e.Action
}

// suggest lists what to do about f, keeping only suggestions whose rule
// text passes its check.
func suggest(f *Finding) []Suggestion {
	e := &f.effect
	var out []Suggestion
	add := func(s Suggestion) {
		if s.Rules != "" {
			s.Checked = check(f, s) == nil
			if !s.Checked {
				return
			}
		}
		out = append(out, s)
	}
	// approval asks a person for each one: the approvals rule, with the
	// rule text that lifts the built-in (lift) so there is something to
	// approve.
	approval := func(match, lift string) {
		add(Suggestion{Kind: KindApproval,
			Text:  "Let it through only when a reviewer approves each one: the allow rule plus an approvals rule (strict mode then holds it for the dashboard's approvals queue).",
			Rules: lift + fmt.Sprintf("approvals:\n  - name: %s\n    match: %s\n    roles: [reviewer]\n    assurance: password\n", ruleName("approve", string(e.Sink), e.Provider, e.Host, e.Action), match)})
	}
	switch f.Refusal {
	case policy.RefuseMutationWithoutAtom:
		name := ruleName("allow", e.Provider, e.Method)
		match := fmt.Sprintf("{provider: %s, method: %s}", yamlString(e.Provider), yamlString(strings.ToUpper(e.Method)))
		allow := fmt.Sprintf("rules:\n  - name: %s\n    decision: allow\n    match: %s\n", name, match)
		add(Suggestion{Kind: KindAllowRule,
			Text:  fmt.Sprintf("Allow %s %s calls to %s without a declared integration: add this rule to the rules section.", strings.ToUpper(e.Method), e.Host+e.Path, e.Provider),
			Rules: allow})
		scope := ruleName(e.Provider) + ".write"
		add(Suggestion{Kind: KindScope,
			Text: fmt.Sprintf("Allow them only for people who hold the scope %s: the allow rule plus a scope requirement.", scope),
			Rules: fmt.Sprintf("rules:\n  - name: %s\n    decision: allow\n    match: %s\nscopes:\n  require:\n    - scope: %s\n      match: %s\n",
				name, match, yamlString(scope), match)})
		add(Suggestion{Kind: KindFix, Text: "Better still, send these calls through an integration (atom) that declares its effect, so no allow rule is needed."})
		approval(fmt.Sprintf("{provider: %s, method: %s, path: %s}", yamlString(e.Provider), yamlString(strings.ToUpper(e.Method)), yamlString(e.Path)), allow)
	case policy.RefuseUnconfinedExecution:
		match := fmt.Sprintf("{sink: %s, action: %s", e.Sink, yamlString(e.Action))
		if f.Agent != "" {
			match += ", agent: " + yamlString(f.Agent)
		}
		match += ", confined: false}"
		add(Suggestion{Kind: KindFix, Text: unconfinedFix(e.Sink)})
		allow := fmt.Sprintf("effects:\n  - name: %s\n    decision: allow\n    match: %s\n", ruleName("allow-unconfined", string(e.Sink), f.Agent), match)
		add(Suggestion{Kind: KindAllowRule,
			Text:  "Accept unconfined execution for this agent and action: add this rule to the effects section.",
			Rules: allow})
		approval(fmt.Sprintf("{sink: %s, action: %s}", e.Sink, yamlString(e.Action)), allow)
	case policy.RefuseBrowserSendOffSite:
		target := e.Host + "/**"
		allow := fmt.Sprintf("effects:\n  - name: %s\n    decision: allow\n    match: {sink: browser, action: send, target: %s}\n", ruleName("allow-send", e.Host), yamlString(target))
		add(Suggestion{Kind: KindAllowRule,
			Text:  fmt.Sprintf("Allow the browser to send to %s from other sites' pages: add this rule to the effects section.", e.Host),
			Rules: allow})
		approval(fmt.Sprintf("{sink: browser, action: send, host: %s}", yamlString(e.Host)), allow)
	case policy.RefuseAgentUnregistered:
		add(Suggestion{Kind: KindCard,
			Text:  fmt.Sprintf("Register agent %s with a card listing the tools it may use.", f.Agent),
			Rules: fmt.Sprintf("agents:\n  - name: %s\n    allowed_tools: [%s]\n", yamlString(f.Agent), yamlString(tool(e)))})
	case policy.RefuseToolNotAllowed:
		add(Suggestion{Kind: KindCard,
			Text:  fmt.Sprintf("Add %q to allowed_tools on agent %s's card (merge into the existing card).", tool(e), f.Agent),
			Rules: fmt.Sprintf("agents:\n  - name: %s\n    allowed_tools: [%s]\n", yamlString(f.Agent), yamlString(tool(e)))})
	case policy.RefuseToolBlocked:
		add(Suggestion{Kind: KindFix, Text: fmt.Sprintf("Agent %s's card blocks %q: remove it from blocked_tools if the agent should use it.", f.Agent, tool(e))})
	case policy.RefuseDelegationNotAllowed:
		add(Suggestion{Kind: KindCard,
			Text:  fmt.Sprintf("Add %q to allowed_delegations on agent %s's card (merge into the existing card).", e.Recipient, f.Agent),
			Rules: fmt.Sprintf("agents:\n  - name: %s\n    allowed_delegations: [%s]\n", yamlString(f.Agent), yamlString(e.Recipient))})
	case policy.RefuseDeploymentRule:
		add(Suggestion{Kind: KindFix, Text: fmt.Sprintf("Your own deny rule %q matches: nothing lifts a deny rule, so narrow or remove it in the policy file if this should go through.", f.Rule)})
	case policy.RefuseApprovalMissing:
		add(Suggestion{Kind: KindFix, Text: approvalAdvice(f)})
	case policy.RefuseBeyondDeclaredEffect:
		add(Suggestion{Kind: KindFix, Text: fmt.Sprintf("The integration %s declares %q but sends %s: declare the effect it really has, or stop sending that method.", e.Atom, e.Declared, strings.ToUpper(e.Method))})
	case policy.RefuseOutsideContract:
		add(Suggestion{Kind: KindFix, Text: fmt.Sprintf("Add %s %s to the contract of integration %s once its code is reviewed.", strings.ToUpper(e.Method), e.Path, e.Atom)})
	case policy.RefuseUnverifiedModelCode:
		add(Suggestion{Kind: KindFix, Text: fmt.Sprintf("Give integration %s a contract (the operations its code may send) so its mutating calls can be verified.", e.Atom)})
	case policy.RefuseUngrounded:
		add(Suggestion{Kind: KindFix, Text: fmt.Sprintf("Grounding rule %s found values not backed by records the agent read: read the records first, or correct the grounding rule.", f.Rule)})
	default:
		add(Suggestion{Kind: KindFix, Text: "Read the detail and the example runs; no rule change is suggested for this refusal."})
	}
	return out
}

// approvalAdvice is what to do about effects strict mode will hold: make
// sure someone who may approve them (the rule's roles and assurance) can
// sign in, or change the rule that holds them.
func approvalAdvice(f *Finding) string {
	name, card := strings.CutPrefix(f.Rule, "agent:")
	if !card {
		name = strings.TrimPrefix(f.Rule, "approval:")
	}
	where := fmt.Sprintf("the approvals rule %q", name)
	change := "narrow its match or remove it from the approvals section"
	if card {
		where = fmt.Sprintf("agent %s's card (require_approval_for)", name)
		change = "take the tool out of the card's require_approval_for"
	}
	n := f.Approval
	if n == nil {
		return fmt.Sprintf("Strict mode will hold these for a person, as %s asks: make sure someone holding one of the roles it names can sign in to the dashboard with the assurance it asks (see the rule in the policy file), or %s.", where, change)
	}
	roles := "the reviewer role"
	add := "--role reviewer"
	if len(n.Roles) > 0 {
		roles = "one of the roles " + strings.Join(n.Roles, ", ")
		add = "--role reviewer --role " + n.Roles[0]
	}
	how := ""
	switch n.Assurance {
	case "", "password":
	case "mfa", "signed-assertion":
		how = fmt.Sprintf(", signed in with assurance %s (an authenticator: gatehouse users totp NAME, or a signed assertion from your backend)", n.Assurance)
	default:
		how = fmt.Sprintf(", with assurance %s (from your backend's signed assertions: gatehouse approve approve ... --assurance %s)", n.Assurance, n.Assurance)
	}
	return fmt.Sprintf("Strict mode will hold these for a person, as %s asks: someone holding %s%s must approve each one. Make sure such a person can sign in (gatehouse users add NAME %s), or %s.",
		where, roles, how, add, change)
}

// check parses s.Rules and decides f's effect under it in strict mode.
func check(f *Finding, s Suggestion) error {
	if _, err := policy.Parse("suggestion.yaml", []byte(s.Rules)); err != nil {
		return err
	}
	// The agent's card, when the suggestion does not write one, is taken
	// to allow the tool: the check is about this suggestion, not the card.
	text := s.Rules
	if f.Agent != "" && !strings.Contains(text, "agents:") {
		text += "agents:\n  - name: " + yamlString(f.Agent) + "\n"
	}
	p, err := policy.Parse("suggestion.yaml", []byte(text))
	if err != nil {
		return err
	}
	auth := policy.Authority{For: f.tenant, Agent: f.Agent}
	if s.Kind == KindScope {
		auth.Scopes = []string{ruleName(f.effect.Provider) + ".write"}
	}
	e := f.effect
	d := p.Decide(policy.Input{Mode: policy.ModeStrict, Authority: auth, Effect: e, Now: f.Last})
	for _, r := range d.Reasons {
		if r.Refusal == f.Refusal && r.Enforced && !(s.Kind == KindApproval && r.Refusal == policy.RefuseApprovalMissing) {
			return fmt.Errorf("review: suggestion leaves %s", r.Refusal)
		}
	}
	want := policy.VerdictAllow
	if s.Kind == KindApproval {
		want = policy.VerdictHold
	}
	if d.Verdict != want {
		return fmt.Errorf("review: suggestion gives %s, want %s (%v)", d.Verdict, want, d.Reasons)
	}
	return nil
}

// unconfinedFix is what to do, short of an allow rule, about an
// unconfined-execution refusal of sink's effects. Sandboxed code is
// confined by a working sandbox tier; a host command (process exec) never
// runs in one, so no sandbox helps it: it is refused because the model
// chose it, and the fix is a declared origin or the code sink.
func unconfinedFix(sink policy.Sink) string {
	if sink == policy.SinkProcess {
		return "Host commands never run in the sandbox, so no sandbox tier helps here: it is refused because code of an untrusted origin chose it. " +
			"Have a deployment-owned agent run it (gatehouse agents add NAME --origin shipped, and open the work with --agent NAME), " +
			"or run the work as sandboxed code instead (the code sink); no rule is then needed."
	}
	return "Run programs confined: install bubblewrap (or allow user namespaces) and check with 'gatehouse sandbox check'; no rule is then needed."
}
