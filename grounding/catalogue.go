package grounding

import (
	"fmt"
	"path"
	"strings"

	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// Catalogue is what grounding rules are checked against when they are
// loaded: the providers Gatehouse calls and the operations their
// integrations declare (the provider sink's catalogue implements it).
// Templates are paths as sent, the provider's base path included, with
// "{name}" placeholder segments, e.g. "/api/invoices/{id}".
type Catalogue interface {
	// Operations returns every operation the catalogue declares for
	// provider, in catalogue order; ok is false when the provider is not
	// in the catalogue.
	Operations(provider string) (ops []Operation, ok bool)
	// BasePath returns the path of the provider's base URL, "" for none.
	BasePath(provider string) string
}

// Operation is one operation of a catalogued integration.
type Operation struct {
	Integration string
	Method      string // upper case
	Template    string // as sent: "/api/payments"
}

func (o Operation) String() string { return o.Integration + " " + o.Method + " " + o.Template }

// Problem is one reason a rules file does not fit a catalogue.
type Problem struct {
	Rule  string // the rule's name
	Index int    // the rule's index in the file
	// Part says where in the rule: "match.provider", "match.method",
	// "match.path", "bind[0] invoice read".
	Part    string
	Problem string
	Fix     string // what to write instead, or what to add to the catalogue
}

func (p Problem) String() string {
	s := fmt.Sprintf("rule[%d] %q %s: %s", p.Index, p.Rule, p.Part, p.Problem)
	if p.Fix != "" {
		s += "; fix: " + p.Fix
	}
	return s
}

// Resolved is what one rule grounds: the catalogued operations its match
// fits.
type Resolved struct {
	Rule       string
	Operations []Operation
}

// CheckCatalogue checks every rule against cat and returns each problem:
//
//   - match: every provider must be in the catalogue, and every method and
//     every path the match lists must fit some operation the catalogue
//     declares for those providers (with the match's other values). Rules
//     match the path as sent, so a path written relative to a base_url
//     that has a path (/payments for https://erp.example.com/api) fits
//     nothing; the fix names the path to write. A rule that fits no
//     operation at all would ground nothing, which is always a mistake.
//   - bind: every read must be a GET some integration of its provider
//     declares, with the same segments ("{id}" and "{invoice}" are the
//     same placeholder), or no integration can make the read a binding
//     needs, and the rule could never be grounded.
//
// Rules from Unreadable have one problem, the file's. A nil *Rules has
// none.
func (r *Rules) CheckCatalogue(cat Catalogue) []Problem {
	_, probs := r.resolve(cat)
	return probs
}

// Resolve checks r against cat (see CheckCatalogue) and returns rules that
// also know the operations each rule grounds (Resolved); with any problem
// it returns an error wrapping ErrInvalidRules that names the file and
// every problem, and no rules. The rules match calls exactly as r does:
// on the canonical method and path the provider sink sends, so every
// spelling of a catalogued operation that the sink accepts is the same
// call to them. Nil rules and rules from Unreadable are returned as they
// are (the latter refuse every call already).
func (r *Rules) Resolve(cat Catalogue) (*Rules, error) {
	if r == nil || r.problem != "" {
		return r, nil
	}
	out, probs := r.resolve(cat)
	if len(probs) > 0 {
		texts := make([]string, len(probs))
		for i, p := range probs {
			texts[i] = p.String()
		}
		return nil, fmt.Errorf("grounding: %s: %w: the rules do not fit the provider catalogue: %s", r.Name(), ErrInvalidRules, strings.Join(texts, "; "))
	}
	return out, nil
}

// Advice lists what in the rules loads but is likely a mistake, as
// Problems: a rule that checks fields of the request body and leaves
// other_fields at allow (the default), so a field no requirement names
// (a second IBAN, a currency, a nested beneficiary) is sent unchecked.
// gatehouse policy check prints each as a note; none stops the rules from
// loading.
func (r *Rules) Advice() []Problem {
	if r == nil {
		return nil
	}
	var out []Problem
	for _, ru := range r.rules {
		if ru.denyOthers {
			continue
		}
		for f := range ru.named {
			if strings.HasPrefix(f, "request.json") || strings.HasPrefix(f, "request.form.") {
				out = append(out, Problem{Rule: ru.name, Index: ru.index, Part: "other_fields",
					Problem: "other_fields is allow (the default): a body field no requirement names (a second IBAN, a currency, a nested beneficiary) is sent unchecked",
					Fix:     "write other_fields: deny, and name in require or where every field the call may send"})
				break
			}
		}
	}
	return out
}

// Resolved lists, per rule in file order, the catalogued operations its
// match fits; nil for rules that were not resolved against a catalogue.
func (r *Rules) Resolved() []Resolved {
	if r == nil || r.resolved == nil {
		return nil
	}
	out := make([]Resolved, len(r.rules))
	for i, ru := range r.rules {
		out[i] = Resolved{Rule: ru.name, Operations: r.resolved[i]}
	}
	return out
}

func (r *Rules) resolve(cat Catalogue) (*Rules, []Problem) {
	if r == nil {
		return nil, nil
	}
	if r.problem != "" {
		return nil, []Problem{{Rule: UnreadableRule, Index: -1, Part: "file", Problem: r.problem, Fix: "fix the file so it loads"}}
	}
	var probs []Problem
	resolved := make([][]Operation, len(r.rules))
	for i, ru := range r.rules {
		ops, ps := ru.resolve(cat)
		resolved[i] = ops
		probs = append(probs, ps...)
	}
	if len(probs) > 0 {
		return nil, probs
	}
	out := *r
	out.resolved = resolved
	return &out, nil
}

func (ru *rule) problem(part, format string, args ...any) Problem {
	return Problem{Rule: ru.name, Index: ru.index, Part: part, Problem: fmt.Sprintf(format, args...)}
}

// resolve returns the operations the rule's match fits and its problems.
func (ru *rule) resolve(cat Catalogue) ([]Operation, []Problem) {
	var probs []Problem
	var all []Operation // every operation of the providers the match names
	bases := map[string]string{}
	for _, p := range ru.match.providers {
		ops, ok := cat.Operations(p)
		if !ok {
			pr := ru.problem("match.provider", "provider %q is not in the provider catalogue", p)
			pr.Fix = "name a provider the catalogue (--providers) lists, or add " + p + " to it"
			probs = append(probs, pr)
			continue
		}
		bases[p] = cat.BasePath(p)
		all = append(all, ops...)
	}
	var fit []Operation
	for _, op := range all {
		if ru.match.fitsOperation(op) {
			fit = append(fit, op)
		}
	}
	switch {
	case len(bases) > 0 && len(all) == 0:
		pr := ru.problem("match.provider", "the catalogue declares no operations for %s, so the rule can ground nothing", list(ru.match.providers))
		pr.Fix = "declare the operations the rule grounds (integrations: operations)"
		probs = append(probs, pr)
	case len(bases) > 0:
		for _, m := range ru.match.methods {
			if !anyOp(all, func(op Operation) bool { return op.Method == m }) {
				pr := ru.problem("match.method", "no operation the catalogue declares for %s is a %s", list(ru.match.providers), m)
				pr.Fix = "match a method an integration declares, or declare the operation in the catalogue"
				probs = append(probs, pr)
			}
		}
		for _, p := range ru.match.paths {
			if anyOp(all, func(op Operation) bool { return ru.match.methodFits(op) && p.mayMatch(op.Template) }) {
				continue
			}
			pr := ru.problem("match.path", "%s fits no operation the catalogue declares for %s%s, and rules match the path as sent", p.text, list(ru.match.providers), methodsNote(ru.match))
			pr.Fix = pathFix(p.text, all, bases, ru.match)
			probs = append(probs, pr)
		}
		if len(fit) == 0 && len(probs) == 0 {
			pr := ru.problem("match", "the match fits no operation the catalogue declares, so the rule would ground nothing")
			pr.Fix = "declare the operation in the catalogue or correct the match"
			probs = append(probs, pr)
		}
	}
	for j, b := range ru.binds {
		part := fmt.Sprintf("bind[%d] %s read", j, b.name)
		ops, ok := cat.Operations(b.provider)
		if !ok {
			pr := ru.problem(part, "provider %q is not in the provider catalogue", b.provider)
			pr.Fix = "read from a provider the catalogue lists"
			probs = append(probs, pr)
			continue
		}
		if anyOp(ops, func(op Operation) bool { return op.Method == "GET" && b.read.sameShape(op.Template) }) {
			continue
		}
		pr := ru.problem(part, "no integration of %s declares GET %s, so no read can ground this binding", b.provider, b.read.text)
		var gets []Operation
		for _, op := range ops {
			if op.Method == "GET" {
				gets = append(gets, op)
			}
		}
		base := cat.BasePath(b.provider)
		switch {
		case base != "" && !strings.HasPrefix(b.read.text, base+"/") && anyOp(gets, func(op Operation) bool { return sameShapeText(base+b.read.text, op.Template) }):
			pr.Fix = fmt.Sprintf("reads are matched as sent, with the base_url's path %s: write %s", base, base+b.read.text)
		case len(gets) > 0:
			pr.Fix = "read a path an integration declares (" + opList(gets) + "), or declare this read in the catalogue"
		default:
			pr.Fix = "declare a GET operation for the read in the catalogue (integrations: operations)"
		}
		probs = append(probs, pr)
	}
	return fit, probs
}

func anyOp(ops []Operation, f func(Operation) bool) bool {
	for _, op := range ops {
		if f(op) {
			return true
		}
	}
	return false
}

func list(vs []string) string { return strings.Join(vs, ", ") }

func methodsNote(m matcher) string {
	if m.methods == nil {
		return ""
	}
	return " with method " + strings.Join(m.methods, " or ")
}

func opList(ops []Operation) string {
	texts := make([]string, 0, min(len(ops), 5))
	for i, op := range ops {
		if i == 5 {
			texts = append(texts, "...")
			break
		}
		texts = append(texts, op.Method+" "+op.Template)
	}
	return strings.Join(texts, ", ")
}

// pathFix says what to write for a match path that fits nothing.
func pathFix(p string, all []Operation, bases map[string]string, m matcher) string {
	for _, base := range bases {
		if base == "" || strings.HasPrefix(p, base+"/") || p == base {
			continue
		}
		if q, err := parsePattern(base + p); err == nil && anyOp(all, func(op Operation) bool { return m.methodFits(op) && q.mayMatch(op.Template) }) {
			return fmt.Sprintf("the provider's base_url has the path %s and rules match the path as sent: write %s", base, base+p)
		}
	}
	folded := strictjson.FoldKey(strings.TrimSuffix(p, "/"))
	for _, op := range all {
		if m.methodFits(op) && strictjson.FoldKey(strings.TrimSuffix(op.Template, "/")) == folded {
			return "write the path as the catalogue spells it: " + op.Template
		}
	}
	var ops []Operation
	for _, op := range all {
		if m.methodFits(op) {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return "declare the operation in the catalogue"
	}
	return "match an operation the catalogue declares (" + opList(ops) + ")"
}

// fitsOperation reports whether a catalogued operation is one the match
// fits: its provider, method and path.
func (m matcher) fitsOperation(op Operation) bool {
	return m.methodFits(op) && m.pathsFit(op)
}

func (m matcher) methodFits(op Operation) bool {
	return m.methods == nil || contains(m.methods, op.Method)
}

func (m matcher) pathsFit(op Operation) bool {
	if len(m.paths) == 0 {
		return true
	}
	for _, p := range m.paths {
		if p.mayMatch(op.Template) {
			return true
		}
	}
	return false
}

// mayMatch reports whether some path the template stands for fits the
// pattern: a template placeholder stands for any one non-empty segment.
func (p pattern) mayMatch(tmpl string) bool {
	if !strings.HasPrefix(tmpl, "/") {
		return false
	}
	return mayMatchSegs(p.segs, strings.Split(tmpl[1:], "/"))
}

func mayMatchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if mayMatchSegs(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		_, tparam := placeholder(segs[0])
		if _, ok := placeholder(pat[0]); ok {
			if segs[0] == "" {
				return false
			}
		} else if tparam {
			if pat[0] == "" {
				return false
			}
		} else if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// sameShape reports whether a catalogued template has the read template's
// segments: equal literals, and placeholders in the same places.
func (t template) sameShape(tmpl string) bool { return sameShapeText(t.text, tmpl) }

func sameShapeText(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		_, ap := placeholder(as[i])
		_, bp := placeholder(bs[i])
		if ap != bp || !ap && as[i] != bs[i] {
			return false
		}
	}
	return true
}
