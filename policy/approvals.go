package policy

import (
	"fmt"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Approvals: which effects wait for a person, who may approve them, and
// with how much assurance.
//
//	approvals:
//	  - name: large-payments
//	    match: {provider: bank, method: POST, path: /payments}
//	    roles: [finance-approver]      # any one of them may approve
//	    assurance: mfa                 # the least accepted: password < mfa < webauthn
//	    destructive: false             # says the action cannot be undone
//	    waiver: false                  # see below
//
// A matching rule (the first in file order) makes the effect need an
// approval; without a satisfying Input.Approval the finding is
// approval-missing, which strict mode turns into VerdictHold and report
// mode records and lets through. An agent card's require_approval_for does
// the same with no roles and no least assurance.
//
// waiver: true lets a person approve the action without seeing its exact
// arguments (the broker then binds the approval to sink, action and run
// only). The loader refuses waiver on a rule that is destructive: one whose
// destructive is true, whose match names effect destructive, method DELETE,
// or whose match is so wide (no effect, method, action or tool) that it can
// reach a destructive action. Decide never applies a waiver to an effect of
// class destructive either.

// ApprovalNeed is what an approvals rule (or an agent card) asks for.
type ApprovalNeed struct {
	Rule        string   // the approvals rule ("approval:<name>") or card ("agent:<name>")
	Roles       []string // any one of them may approve; empty: any reviewer
	Assurance   string   // the least assurance accepted; "" none
	Destructive bool
	Waiver      bool
}

// ApprovalGrant is an approval the broker found for the exact action, as
// Decide checks it: who approved, with which roles and assurance.
type ApprovalGrant struct {
	ID        string
	Approver  string
	Roles     []string // the approver's roles
	Assurance string   // the approver's assurance
}

// Satisfies reports whether g meets need: one of the approver's roles is
// one the rule names (or the rule names none), and the approver's
// assurance is at least the rule's least.
func (g *ApprovalGrant) Satisfies(need ApprovalNeed) bool {
	if g == nil {
		return false
	}
	if len(need.Roles) > 0 {
		ok := false
		for _, r := range g.Roles {
			if contains(need.Roles, r) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return AssuranceAtLeast(g.Assurance, need.Assurance)
}

// assuranceRank orders the assurances a rule may ask for. A backend's
// signed assertion vouches as much as a second factor.
var assuranceRank = map[string]int{"": 0, "password": 1, "mfa": 2, "signed-assertion": 2, "webauthn": 3}

// KnownAssurance reports whether s is an assurance level policy knows.
func KnownAssurance(s string) bool { _, ok := assuranceRank[s]; return ok }

// AssuranceAtLeast reports whether have is at least least. An unknown
// level is below every known one except "".
func AssuranceAtLeast(have, least string) bool {
	l, ok := assuranceRank[least]
	if !ok {
		return false
	}
	h, ok := assuranceRank[have]
	if !ok {
		return l == 0
	}
	return h >= l
}

// approvalRule is one compiled approvals: entry.
type approvalRule struct {
	need  ApprovalNeed
	index int
	m     matcher
	tools []string // path.Match patterns on the tool name; nil: any
}

var approvalKeys = append(append([]string{}, scopeKeys...), "tool")

func (c *compiler) approvals(n *yaml.Node) ([]approvalRule, error) {
	items, err := c.sequence(n, "approvals")
	if err != nil {
		return nil, err
	}
	out := make([]approvalRule, 0, len(items))
	for i, item := range items {
		where := fmt.Sprintf("approvals[%d]", i)
		pairs, err := c.Mapping(item, where)
		if err != nil {
			return nil, err
		}
		r := approvalRule{index: i}
		var name string
		var matchNode *yaml.Node
		for _, kv := range pairs {
			switch kv.Key {
			case "name":
				name, err = c.Scalar(kv.Value, where+" name")
			case "match":
				matchNode = kv.Value
			case "roles":
				r.need.Roles, err = c.names(kv.Value, where+" roles")
			case "assurance":
				r.need.Assurance, err = c.Scalar(kv.Value, where+" assurance")
				if err == nil && !KnownAssurance(r.need.Assurance) {
					return nil, c.At(kv.Value, where, "unknown assurance %q (password, mfa, signed-assertion or webauthn)", r.need.Assurance)
				}
			case "destructive":
				r.need.Destructive, err = c.boolean(kv.Value, where+" destructive")
			case "waiver":
				r.need.Waiver, err = c.boolean(kv.Value, where+" waiver")
			default:
				return nil, c.At(kv.Value, where, "unknown key %q (an approvals rule has name, match, roles, assurance, destructive and waiver)", kv.Key)
			}
			if err != nil {
				return nil, err
			}
		}
		if name == "" {
			return nil, c.At(item, where, "the rule has no name; every approvals rule needs one so requests can cite it")
		}
		where = fmt.Sprintf("approvals[%d] %q", i, name)
		r.need.Rule = "approval:" + name
		for _, prev := range out {
			if prev.need.Rule == r.need.Rule {
				return nil, c.At(item, where, "the name is already used by approvals[%d]; names must be unique", prev.index)
			}
		}
		if matchNode == nil {
			return nil, c.At(item, where, "the rule has no match; say which effects need a person")
		}
		if r.tools, err = c.toolMatch(matchNode, where); err != nil {
			return nil, err
		}
		if rest := withoutKey(matchNode, "tool"); r.tools == nil || len(rest.Content) > 0 {
			if r.m, err = c.matcher(rest, where, "approvals", approvalKeys); err != nil {
				return nil, err
			}
		}
		if r.need.Waiver && r.mayBeDestructive() {
			return nil, c.At(item, where, "waiver is never allowed for destructive actions, and this rule can match one (destructive: true, effect destructive, method DELETE, or a match that names no effect, method, action or tool); remove waiver or narrow the match")
		}
		out = append(out, r)
	}
	return out, nil
}

// mayBeDestructive reports whether the rule's match can reach a
// destructive action.
func (r *approvalRule) mayBeDestructive() bool {
	if r.need.Destructive || contains(r.m.effect, string(EffectDestructive)) || contains(r.m.method, "DELETE") {
		return true
	}
	return r.m.effect == nil && r.m.method == nil && r.m.action == nil && r.tools == nil
}

// toolMatch reads match.tool, if written.
func (c *compiler) toolMatch(n *yaml.Node, where string) ([]string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value != "tool" {
			continue
		}
		vals, err := c.list(n.Content[i+1], where+" match.tool")
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			if _, err := path.Match(v, ""); err != nil {
				return nil, c.At(n.Content[i+1], where+" match.tool", "bad glob %q", v)
			}
		}
		return vals, nil
	}
	return nil, nil
}

// withoutKey returns a copy of mapping n without key.
func withoutKey(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return n
	}
	c := *n
	c.Content = nil
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			continue
		}
		c.Content = append(c.Content, n.Content[i], n.Content[i+1])
	}
	return &c
}

// tool is the name agent cards and approvals rules match.
func (d *decider) tool() string {
	if t := d.in.Effect.Tool; t != "" {
		return t
	}
	return string(d.in.Effect.Sink) + "." + d.in.Effect.Action
}

// needApproval records that the effect needs need: nothing when
// Input.Approval satisfies it, else approval-missing (a hold in strict
// mode). The first need is kept in the Decision.
func (d *decider) needApproval(need ApprovalNeed, detail string) {
	if need.Waiver && d.in.Effect.class(d.method) == EffectDestructive {
		need.Waiver = false
	}
	if d.need == nil {
		n := need
		d.need = &n
	}
	if d.in.Approval.Satisfies(need) {
		return
	}
	if d.in.Approval != nil {
		detail += fmt.Sprintf(" The approval %s given for it no longer suffices (approver roles %s, assurance %q; the rule asks %s at %q), so it goes back to a person.",
			d.in.Approval.ID, list(d.in.Approval.Roles), d.in.Approval.Assurance, roleList(need.Roles), need.Assurance)
	}
	d.add(RefuseApprovalMissing, need.Rule, detail, false)
}

// assuranceAtLeast is ", assurance at least X" for a rule that asks one,
// "" for one that does not.
func assuranceAtLeast(a string) string {
	if a == "" {
		return ""
	}
	return fmt.Sprintf(", assurance at least %q", a)
}

func roleList(r []string) string {
	if len(r) == 0 {
		return "any reviewer"
	}
	return list(r)
}

// approvals applies the first matching approvals rule.
func (d *decider) approvals() {
	tool := ""
	for i := range d.p.approvals {
		r := &d.p.approvals[i]
		if r.tools != nil {
			if tool == "" {
				tool = d.tool()
			}
			if _, hit := globAny(r.tools, tool); !hit {
				continue
			}
		}
		if !r.m.matches(d) {
			continue
		}
		d.needApproval(r.need, fmt.Sprintf("Approvals rule %q (approvals[%d]) needs a person's approval (%s%s) before this happens.",
			strings.TrimPrefix(r.need.Rule, "approval:"), r.index, roleList(r.need.Roles), assuranceAtLeast(r.need.Assurance)))
		return
	}
}
