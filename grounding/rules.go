package grounding

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gatehouse/gatehouse/policy/rulesyaml"
)

// ErrInvalidRules is wrapped by every error from Parse and Load about the
// file's content (syntax, an unknown key, a rule that cannot be read),
// always with the file's name and, for a rule, its index and name.
var ErrInvalidRules = errors.New("invalid grounding rules")

// maxFileSize bounds what Load reads; a rules file is hand-written.
const maxFileSize = 16 << 20

// Rules is a compiled grounding rules file. It is immutable once made and
// safe for concurrent use by any number of goroutines. A nil *Rules
// applies to nothing; a Rules from Unreadable refuses every call.
type Rules struct {
	name    string
	digest  string
	problem string // set by Unreadable: why the file cannot be used
	rules   []*rule
	// reads holds, per provider, every bind template, for Keeps.
	reads map[string][]template
	// resolved holds, per rule, the catalogued operations it grounds;
	// nil until Resolve.
	resolved [][]Operation
}

// rule is one compiled grounding rule.
type rule struct {
	name       string
	index      int
	match      matcher
	fromInput  bool // selectors_from: [input]
	reread     bool // fresh: reread
	maxAge     time.Duration
	binds      []binding
	reqs       []requirement
	denyOthers bool // other_fields: deny
	// named are the request fields a require or where names, as
	// "request.json.a.b", "request.form.x", "request.query.x" or
	// "request.path.x"; with denyOthers, anything else sent is refused.
	named map[string]bool
	// lists are the lists in the JSON body a require or where indexes
	// ("request.json.payments[0].iban"): a call that sends one with an
	// element none of them names fails, whatever other_fields says.
	lists []indexedList
}

// indexedList is a list of the JSON body a rule names elements of by
// index.
type indexedList struct {
	text  string // "request.json.payments"
	segs  []pseg // after request.json
	named map[int]bool
}

// indexedLists finds the lists the named request.json paths index.
func indexedLists(named map[string]bool) []indexedList {
	byText := map[string]*indexedList{}
	var order []string
	for p := range named {
		if !strings.HasPrefix(p, "request.json") {
			continue
		}
		segs, err := splitPath(p)
		if err != nil || len(segs) < 2 {
			continue
		}
		segs = segs[2:]
		text := "request.json"
		for i, sg := range segs {
			if sg.index >= 0 {
				l := byText[text]
				if l == nil {
					l = &indexedList{text: text, segs: segs[:i:i], named: map[int]bool{}}
					byText[text] = l
					order = append(order, text)
				}
				l.named[sg.index] = true
				text += "[" + strconv.Itoa(sg.index) + "]"
				continue
			}
			text += "." + sg.key
		}
	}
	sort.Strings(order)
	out := make([]indexedList, 0, len(order))
	for _, t := range order {
		out = append(out, *byText[t])
	}
	return out
}

type matcher struct {
	providers []string
	methods   []string // upper case; nil: any
	paths     []pattern
}

// pattern is a match path: segments that are "{name}" (one non-empty
// segment, its value available as request.path.name), "**" (any number of
// segments) or a path.Match glob.
type pattern struct {
	text string
	segs []string
}

// template is a bind's read path: literal segments and "{name}" segments
// a where fills.
type template struct {
	text string
	segs []tseg
}

type tseg struct {
	lit   string
	param string // non-empty: a placeholder
}

type binding struct {
	name     string
	provider string
	read     template
	where    []selector // one per placeholder, in the template's order
	// spends: a money or number requirement compares against this
	// binding's record, so the record bounds the amount a call sends and
	// grounds one carried-out call (see Result.Spends).
	spends bool
}

type selector struct {
	param string
	from  fieldPath
}

type relation uint8

const (
	relEquals relation = iota + 1
	relOneOf
	relAtMost
	relAtLeast
)

// sign is what a money or number requirement says about the sign of the
// value sent.
type sign uint8

const (
	signAny         sign = iota // negatives allowed
	signNonNegative             // not below zero and not written with a minus sign ("-0" is refused)
	signPositive                // above zero (and so without a minus sign)
)

type requirement struct {
	field   fieldPath
	rel     relation
	against fieldPath // equals, at_most, at_least, and one_of with a path
	list    []any     // one_of with a literal list; at_most or at_least with a literal bound (one entry)
	kind    string
	sign    sign
	text    string // the requirement as a person reads it
}

// Load reads the grounding rules file at path. A name ending in .json must
// hold JSON; any other is read as YAML (which also reads JSON). Every
// error names the file; one about the content wraps ErrInvalidRules.
//
// When Load fails the broker keeps running with Unreadable(path, err),
// which refuses every provider call until the file is fixed.
func Load(path string) (*Rules, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("grounding: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("grounding: %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("grounding: %s: %w: larger than %d bytes", path, ErrInvalidRules, maxFileSize)
	}
	return Parse(path, data)
}

// Parse compiles the bytes of a grounding rules file; name appears in
// every error and picks the format (".json" must be JSON, anything else
// is YAML). On any error it returns nil: there is no partly read file.
// Parse never panics.
func Parse(name string, data []byte) (*Rules, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("grounding: %s: %w: %s", name, ErrInvalidRules, fmt.Sprintf(format, args...))
	}
	c := compiler{rulesyaml.Reader{Fail: fail}}
	root, err := c.Root(name, data)
	if errors.Is(err, rulesyaml.ErrEmpty) {
		return nil, fail("the file is empty (write \"grounding: []\" for no rules)")
	}
	if err != nil {
		return nil, err
	}
	r, err := c.file(root)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	r.name = name
	r.digest = "sha256:" + hex.EncodeToString(sum[:])
	return r, nil
}

// Unreadable returns rules that refuse every provider call: Check applies
// to any call and fails with a sentence naming the file and err. The
// broker uses it when Load fails, so it keeps running and refuses. Its
// Digest is "" and Keeps is always false (nothing can be grounded).
func Unreadable(name string, err error) *Rules {
	problem := "unknown problem"
	if err != nil {
		problem = err.Error()
	}
	return &Rules{name: name, problem: problem}
}

// Digest returns "sha256:<hex>" of the rules file's bytes as read; "" for
// nil rules and for rules from Unreadable.
func (r *Rules) Digest() string {
	if r == nil {
		return ""
	}
	return r.digest
}

// Name returns the name the rules were parsed or loaded under.
func (r *Rules) Name() string {
	if r == nil {
		return ""
	}
	return r.name
}

// compiler turns the YAML tree into Rules. Every error goes through Fail,
// which names the file; messages name the line, the rule's index and name,
// the part of the rule and the problem.
type compiler struct {
	rulesyaml.Reader
}

// scalar returns the text of a non-null, non-empty scalar.
func (c *compiler) scalar(n *yaml.Node, where string) (string, error) {
	v, err := c.Scalar(n, where)
	if err == nil && v == "" {
		return "", c.At(n, where, "the value is empty")
	}
	return v, err
}

// list reads one scalar (a one-element list) or a non-empty list of them.
func (c *compiler) list(n *yaml.Node, where string) ([]string, error) {
	return c.List(n, where, c.scalar, c.Sequence)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func (c *compiler) file(root *yaml.Node) (*Rules, error) {
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" || root.Kind == yaml.DocumentNode {
		return nil, c.Fail("the file holds nothing (write \"grounding: []\" for no rules)")
	}
	pairs, err := c.Mapping(root, "top level")
	if err != nil {
		return nil, err
	}
	var list *yaml.Node
	for _, kv := range pairs {
		if kv.Key != "grounding" {
			return nil, c.At(kv.Value, "top level", "unknown key %q (a grounding rules file has one key, grounding)", kv.Key)
		}
		list = kv.Value
	}
	if list == nil {
		return nil, c.Fail("no grounding key (write \"grounding: []\" for no rules)")
	}
	items, err := c.Sequence(list, "grounding")
	if err != nil {
		return nil, err
	}
	r := &Rules{reads: map[string][]template{}}
	for i, item := range items {
		ru, err := c.rule(i, item)
		if err != nil {
			return nil, err
		}
		for _, prev := range r.rules {
			if prev.name == ru.name {
				return nil, c.At(item, fmt.Sprintf("grounding[%d] %q", i, ru.name), "the name is already used by grounding[%d]; rule names must be unique", prev.index)
			}
		}
		r.rules = append(r.rules, ru)
		for _, b := range ru.binds {
			r.reads[b.provider] = append(r.reads[b.provider], b.read)
		}
	}
	return r, nil
}

var ruleKeys = []string{"name", "match", "selectors_from", "fresh", "max_age_seconds", "bind", "require", "other_fields"}

func (c *compiler) rule(i int, item *yaml.Node) (*rule, error) {
	where := fmt.Sprintf("grounding[%d]", i)
	if item.Kind == yaml.MappingNode {
		// Name the rule in every error, even one about a key before name.
		for j := 0; j+1 < len(item.Content); j += 2 {
			if item.Content[j].Value == "name" && item.Content[j+1].Kind == yaml.ScalarNode {
				where = fmt.Sprintf("grounding[%d] %q", i, item.Content[j+1].Value)
			}
		}
	}
	pairs, err := c.Mapping(item, where, ruleKeys...)
	if err != nil {
		return nil, err
	}
	ru := &rule{index: i, named: map[string]bool{}}
	get := map[string]*yaml.Node{}
	for _, kv := range pairs {
		get[kv.Key] = kv.Value
	}
	if n := get["name"]; n == nil {
		return nil, c.At(item, where, "the rule has no name; every rule needs one so decisions can cite it")
	} else if ru.name, err = c.scalar(n, where+" name"); err != nil {
		return nil, err
	}
	n := get["match"]
	if n == nil {
		return nil, c.At(item, where, "the rule has no match; say which provider calls it grounds")
	}
	if ru.match, err = c.matcher(n, where+" match"); err != nil {
		return nil, err
	}
	if n := get["selectors_from"]; n != nil {
		srcs, err := c.list(n, where+" selectors_from")
		if err != nil {
			return nil, err
		}
		for _, s := range srcs {
			if s != "input" {
				return nil, c.At(n, where+" selectors_from", "unknown source %q (the one source is input, the caller's structured input)", s)
			}
		}
		ru.fromInput = true
	}
	if n := get["fresh"]; n != nil {
		s, err := c.scalar(n, where+" fresh")
		if err != nil {
			return nil, err
		}
		if s != "reread" {
			return nil, c.At(n, where+" fresh", "unknown value %q (fresh takes reread; bound a record's age with max_age_seconds)", s)
		}
		ru.reread = true
	}
	if n := get["max_age_seconds"]; n != nil {
		var secs int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&secs) != nil || secs <= 0 || secs > 1<<31 {
			return nil, c.At(n, where+" max_age_seconds", "want a whole number of seconds above 0, got %s", rulesyaml.KindName(n))
		}
		ru.maxAge = time.Duration(secs) * time.Second
	}
	if n := get["other_fields"]; n != nil {
		s, err := c.scalar(n, where+" other_fields")
		if err != nil {
			return nil, err
		}
		switch s {
		case "deny":
			ru.denyOthers = true
		case "allow":
		default:
			return nil, c.At(n, where+" other_fields", "unknown value %q (other_fields takes deny or allow)", s)
		}
	}
	if n := get["bind"]; n != nil {
		items, err := c.Sequence(n, where+" bind")
		if err != nil {
			return nil, err
		}
		for j, b := range items {
			bd, err := c.binding(ru, j, b, where)
			if err != nil {
				return nil, err
			}
			ru.binds = append(ru.binds, bd)
		}
	}
	if n := get["require"]; n != nil {
		items, err := c.Sequence(n, where+" require")
		if err != nil {
			return nil, err
		}
		for j, q := range items {
			rq, err := c.requirement(ru, j, q, where)
			if err != nil {
				return nil, err
			}
			ru.reqs = append(ru.reqs, rq)
		}
	}
	if len(ru.reqs) == 0 && !ru.denyOthers {
		return nil, c.At(item, where, "the rule checks nothing; give it a require list or other_fields: deny")
	}
	ru.lists = indexedLists(ru.named)
	for _, q := range ru.reqs {
		if (q.kind == KindMoney || q.kind == KindNumber) && q.against.root == rootBinding && q.against.bind >= 0 {
			ru.binds[q.against.bind].spends = true
		}
	}
	return ru, nil
}

var matchKeys = []string{"provider", "method", "path"}

func (c *compiler) matcher(n *yaml.Node, where string) (matcher, error) {
	var m matcher
	pairs, err := c.Mapping(n, where, matchKeys...)
	if err != nil {
		return m, err
	}
	for _, kv := range pairs {
		vals, err := c.list(kv.Value, where+"."+kv.Key)
		if err != nil {
			return m, err
		}
		switch kv.Key {
		case "provider":
			m.providers = vals
		case "method":
			for i, v := range vals {
				vals[i] = strings.ToUpper(v)
			}
			m.methods = vals
		case "path":
			for _, v := range vals {
				p, err := parsePattern(v)
				if err != nil {
					return m, c.At(kv.Value, where+".path", "%q: %v", v, err)
				}
				m.paths = append(m.paths, p)
			}
		}
	}
	if m.providers == nil {
		return m, c.At(n, where, "the match names no provider; a grounding rule is for one provider's calls")
	}
	return m, nil
}

// parsePattern reads a match path: it starts with "/", and each segment is
// "{name}", "**", or a path.Match glob without braces.
func parsePattern(s string) (pattern, error) {
	if !strings.HasPrefix(s, "/") {
		return pattern{}, errors.New("a path starts with /")
	}
	p := pattern{text: s, segs: strings.Split(s[1:], "/")}
	seen := map[string]bool{}
	for _, seg := range p.segs {
		if name, ok := placeholder(seg); ok {
			if !isName(name) {
				return pattern{}, fmt.Errorf("bad placeholder %q (a name is letters, digits and _)", seg)
			}
			if seen[name] {
				return pattern{}, fmt.Errorf("placeholder {%s} appears twice", name)
			}
			seen[name] = true
			continue
		}
		if seg == "**" {
			continue
		}
		if strings.ContainsAny(seg, "{}") {
			return pattern{}, fmt.Errorf("segment %q: a placeholder is a whole segment, {name}", seg)
		}
		if _, err := path.Match(seg, ""); err != nil {
			return pattern{}, fmt.Errorf("segment %q is not a valid glob", seg)
		}
	}
	return p, nil
}

func placeholder(seg string) (string, bool) {
	if len(seg) >= 2 && seg[0] == '{' && seg[len(seg)-1] == '}' {
		return seg[1 : len(seg)-1], true
	}
	return "", false
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// params lists a pattern's placeholder names.
func (p pattern) params() []string {
	var out []string
	for _, seg := range p.segs {
		if name, ok := placeholder(seg); ok {
			out = append(out, name)
		}
	}
	return out
}

func parseTemplate(s string) (template, error) {
	if !strings.HasPrefix(s, "/") {
		return template{}, errors.New("a path starts with /")
	}
	t := template{text: s}
	seen := map[string]bool{}
	for _, seg := range strings.Split(s[1:], "/") {
		if name, ok := placeholder(seg); ok {
			if !isName(name) {
				return template{}, fmt.Errorf("bad placeholder %q (a name is letters, digits and _)", seg)
			}
			if seen[name] {
				return template{}, fmt.Errorf("placeholder {%s} appears twice", name)
			}
			seen[name] = true
			t.segs = append(t.segs, tseg{param: name})
			continue
		}
		if strings.ContainsAny(seg, "{}*?[]") {
			return template{}, fmt.Errorf("segment %q: a read path is literal segments and whole-segment {name} placeholders", seg)
		}
		t.segs = append(t.segs, tseg{lit: seg})
	}
	if len(seen) == 0 {
		return template{}, errors.New("the read path has no {placeholder}, so no where can select which record; a fixed record needs no binding")
	}
	return t, nil
}

var bindKeys = []string{"name", "read", "where"}

func (c *compiler) binding(ru *rule, j int, n *yaml.Node, ruleWhere string) (binding, error) {
	where := fmt.Sprintf("%s bind[%d]", ruleWhere, j)
	var b binding
	pairs, err := c.Mapping(n, where, bindKeys...)
	if err != nil {
		return b, err
	}
	get := map[string]*yaml.Node{}
	for _, kv := range pairs {
		get[kv.Key] = kv.Value
	}
	if get["name"] == nil {
		return b, c.At(n, where, "the binding has no name; requirements refer to it by name")
	}
	if b.name, err = c.scalar(get["name"], where+" name"); err != nil {
		return b, err
	}
	where = fmt.Sprintf("%s bind[%d] %q", ruleWhere, j, b.name)
	if !isIdent(b.name) || b.name == "request" || b.name == "input" {
		return b, c.At(get["name"], where, "a binding's name is a letter then letters, digits and _, and not request or input")
	}
	for _, prev := range ru.binds {
		if prev.name == b.name {
			return b, c.At(n, where, "the name is already bound earlier in this rule")
		}
	}
	rd := get["read"]
	if rd == nil {
		return b, c.At(n, where, "the binding has no read: say which provider path holds the record")
	}
	rp, err := c.Mapping(rd, where+" read", "provider", "path")
	if err != nil {
		return b, err
	}
	var tmplNode *yaml.Node
	for _, kv := range rp {
		s, err := c.scalar(kv.Value, where+" read."+kv.Key)
		if err != nil {
			return b, err
		}
		if kv.Key == "provider" {
			b.provider = s
		} else {
			tmplNode = kv.Value
			if b.read, err = parseTemplate(s); err != nil {
				return b, c.At(kv.Value, where+" read.path", "%q: %v", s, err)
			}
		}
	}
	if b.provider == "" || tmplNode == nil {
		return b, c.At(rd, where+" read", "read needs both provider and path")
	}
	wn := get["where"]
	if wn == nil {
		return b, c.At(n, where, "the binding has no where: say how each placeholder of %s is filled", b.read.text)
	}
	wp, err := c.Mapping(wn, where+" where")
	if err != nil {
		return b, err
	}
	set := map[string]fieldPath{}
	for _, kv := range wp {
		if !b.read.has(kv.Key) {
			return b, c.At(kv.Value, where+" where", "%q is not a placeholder of %s", kv.Key, b.read.text)
		}
		s, err := c.scalar(kv.Value, where+" where."+kv.Key)
		if err != nil {
			return b, err
		}
		fp, err := parseFieldPath(s, ru)
		if err != nil {
			return b, c.At(kv.Value, where+" where."+kv.Key, "%v", err)
		}
		if err := c.selectorSource(ru, fp, b.name); err != nil {
			return b, c.At(kv.Value, where+" where."+kv.Key, "%v", err)
		}
		if fp.star {
			return b, c.At(kv.Value, where+" where."+kv.Key, "a selector picks one record; [*] is only for one_of")
		}
		set[kv.Key] = fp
		if fp.root.isRequest() {
			ru.named[fp.requestField()] = true
		}
	}
	for _, sg := range b.read.segs {
		if sg.param == "" {
			continue
		}
		fp, ok := set[sg.param]
		if !ok {
			return b, c.At(wn, where+" where", "placeholder {%s} of %s has no where", sg.param, b.read.text)
		}
		b.where = append(b.where, selector{param: sg.param, from: fp})
	}
	return b, nil
}

// selectorSource checks where a where value may come from.
func (c *compiler) selectorSource(ru *rule, fp fieldPath, self string) error {
	switch {
	case fp.root == rootBinding && fp.bind < 0:
		if fp.bindName == self {
			return fmt.Errorf("%s refers to the binding it selects", fp.text)
		}
		return fmt.Errorf("%s refers to %q, which is not bound before this binding (bindings are followed in order; a later or unknown name cannot select)", fp.text, fp.bindName)
	case fp.root.isRequest() && ru.fromInput:
		return fmt.Errorf("%s comes from the request, but the rule takes selectors_from: [input]; use an input. path", fp.text)
	case fp.root == rootInput && !ru.fromInput:
		return fmt.Errorf("%s comes from the caller's input; add selectors_from: [input] to take selectors from it", fp.text)
	case fp.root == rootPath && !ru.match.hasParam(fp.segs[0].key):
		return fmt.Errorf("%s: the match path has no {%s} placeholder (in every path it lists)", fp.text, fp.segs[0].key)
	}
	return nil
}

func (t template) has(name string) bool {
	for _, s := range t.segs {
		if s.param == name {
			return true
		}
	}
	return false
}

// hasParam reports whether every match path has the placeholder name.
func (m matcher) hasParam(name string) bool {
	if len(m.paths) == 0 {
		return false
	}
	for _, p := range m.paths {
		if !contains(p.params(), name) {
			return false
		}
	}
	return true
}

func isIdent(s string) bool {
	return isName(s) && !isDigit(s[0]) && s[0] != '-'
}

var requireKeys = []string{"field", "equals", "one_of", "at_most", "at_least", "as", "sign"}

func (c *compiler) requirement(ru *rule, j int, n *yaml.Node, ruleWhere string) (requirement, error) {
	where := fmt.Sprintf("%s require[%d]", ruleWhere, j)
	if n.Kind == yaml.MappingNode {
		for k := 0; k+1 < len(n.Content); k += 2 {
			if n.Content[k].Value == "field" && n.Content[k+1].Kind == yaml.ScalarNode {
				where = fmt.Sprintf("%s require[%d] %q", ruleWhere, j, n.Content[k+1].Value)
			}
		}
	}
	var q requirement
	pairs, err := c.Mapping(n, where, requireKeys...)
	if err != nil {
		return q, err
	}
	var relNode, signNode *yaml.Node
	var relName string
	for _, kv := range pairs {
		switch kv.Key {
		case "sign":
			signNode = kv.Value
		case "field":
			s, err := c.scalar(kv.Value, where+" field")
			if err != nil {
				return q, err
			}
			if q.field, err = parseFieldPath(s, ru); err != nil {
				return q, c.At(kv.Value, where+" field", "%v", err)
			}
			if !q.field.root.isRequest() {
				return q, c.At(kv.Value, where+" field", "%s: the field checked is a value of the request (request.json, request.form, request.query or request.path)", s)
			}
			if q.field.star {
				return q, c.At(kv.Value, where+" field", "%s: [*] is only for one_of", s)
			}
			if q.field.root == rootPath && !ru.match.hasParam(q.field.segs[0].key) {
				return q, c.At(kv.Value, where+" field", "%s: the match path has no {%s} placeholder (in every path it lists)", s, q.field.segs[0].key)
			}
		case "as":
			s, err := c.scalar(kv.Value, where+" as")
			if err != nil {
				return q, err
			}
			switch s {
			case KindIBAN, KindMoney, KindNumber, KindEmail, KindText, KindID, KindExact:
				q.kind = s
			default:
				return q, c.At(kv.Value, where+" as", "unknown comparison %q (as takes iban, money, number, email, text, id or exact)", s)
			}
		default:
			if relNode != nil {
				return q, c.At(kv.Value, where, "%s and %s both given; a requirement has one relation", relName, kv.Key)
			}
			relNode, relName = kv.Value, kv.Key
		}
	}
	if q.field.text == "" {
		return q, c.At(n, where, "the requirement has no field: say which value of the request it checks")
	}
	if relNode == nil {
		return q, c.At(n, where, "the requirement has no relation (equals, one_of, at_most or at_least)")
	}
	if q.kind == "" {
		return q, c.At(n, where, "the requirement has no as: say how to compare (iban, money, number, email, text, id or exact)")
	}
	switch relName {
	case "equals":
		q.rel = relEquals
	case "at_most", "at_least":
		q.rel = relAtMost
		if relName == "at_least" {
			q.rel = relAtLeast
		}
		if q.kind != KindMoney && q.kind != KindNumber {
			return q, c.At(relNode, where, "%s compares money or number, not %s", relName, q.kind)
		}
	case "one_of":
		q.rel = relOneOf
	}
	if err := c.sign(&q, signNode, where); err != nil {
		return q, err
	}
	if (q.rel == relAtMost || q.rel == relAtLeast) && relNode.Kind == yaml.ScalarNode && (relNode.ShortTag() == "!!int" || relNode.ShortTag() == "!!float" || looksNumeric(relNode.Value)) {
		// A literal bound: at_most: 1000, at_least: 0.01 (or quoted).
		if !decimalSyntax(relNode.Value, q.kind == KindNumber) {
			return q, c.At(relNode, where+" "+relName, "%q is not a plain decimal number (write e.g. 0.01 or 1000, or a record's field such as invoice.amount_due)", relNode.Value)
		}
		q.list = []any{json.Number(relNode.Value)}
		q.text = fmt.Sprintf("%s %s %s (%s)", q.field.text, relName, relNode.Value, q.kind)
		ru.named[q.field.requestField()] = true
		return q, nil
	}
	if q.rel == relOneOf && relNode.Kind == yaml.SequenceNode {
		items, err := c.Sequence(relNode, where+" one_of")
		if err != nil {
			return q, err
		}
		if len(items) == 0 {
			return q, c.At(relNode, where+" one_of", "an empty list allows nothing")
		}
		for _, it := range items {
			v, err := c.literal(it, where+" one_of")
			if err != nil {
				return q, err
			}
			if _, err := canonicalAny(q.kind, v); err != nil {
				return q, c.At(it, where+" one_of", "an entry cannot be read as %s", q.kind)
			}
			q.list = append(q.list, v)
		}
		q.text = fmt.Sprintf("%s one_of the rule's list (%s)", q.field.text, q.kind)
	} else {
		s, err := c.scalar(relNode, where+" "+relName)
		if err != nil {
			return q, err
		}
		if q.against, err = parseFieldPath(s, ru); err != nil {
			return q, c.At(relNode, where+" "+relName, "%v", err)
		}
		switch {
		case q.against.root.isRequest():
			return q, c.At(relNode, where+" "+relName, "%s is in the request itself; a request value cannot ground another", s)
		case q.against.root == rootBinding && q.against.bind < 0:
			return q, c.At(relNode, where+" "+relName, "%s refers to %q, which is not a binding of this rule", s, q.against.bindName)
		case q.against.root == rootInput && !ru.fromInput:
			return q, c.At(relNode, where+" "+relName, "%s comes from the caller's input; add selectors_from: [input] to use it", s)
		case q.rel == relOneOf && !q.against.star:
			return q, c.At(relNode, where+" one_of", "one_of takes a list, or a path to a list ending in [*] (e.g. %s[*])", s)
		case q.rel != relOneOf && q.against.star:
			return q, c.At(relNode, where+" "+relName, "[*] is only for one_of")
		}
		q.text = fmt.Sprintf("%s %s %s (%s)", q.field.text, relName, s, q.kind)
	}
	ru.named[q.field.requestField()] = true
	return q, nil
}

// sign reads a requirement's sign, or sets its default: a value bounded
// from above (at_most) may not be negative, nor written with a minus sign,
// unless the rule says sign: any.
func (c *compiler) sign(q *requirement, n *yaml.Node, where string) error {
	if n == nil {
		if q.rel == relAtMost {
			q.sign = signNonNegative
		}
		return nil
	}
	s, err := c.scalar(n, where+" sign")
	if err != nil {
		return err
	}
	if q.kind != KindMoney && q.kind != KindNumber {
		return c.At(n, where+" sign", "sign is for money and number, not %s", q.kind)
	}
	switch s {
	case "positive":
		q.sign = signPositive
	case "non-negative":
		q.sign = signNonNegative
	case "any":
		q.sign = signAny
	default:
		return c.At(n, where+" sign", "unknown value %q (sign takes positive, non-negative or any)", s)
	}
	return nil
}

// looksNumeric reports text that is meant as a number rather than a
// path: it starts with a digit, a sign or a dot (no binding name does).
func looksNumeric(s string) bool {
	return s != "" && (isDigit(s[0]) || s[0] == '-' || s[0] == '+' || s[0] == '.')
}

// literal reads a one_of entry: a string, a decimal number, true, false
// or null.
func (c *compiler) literal(n *yaml.Node, where string) (any, error) {
	if n.Kind != yaml.ScalarNode {
		return nil, c.At(n, where, "want a single value, got %s", rulesyaml.KindName(n))
	}
	switch n.ShortTag() {
	case "!!str":
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, c.At(n, where, "want true or false")
		}
		return b, nil
	case "!!int", "!!float":
		if !decimalSyntax(n.Value, true) {
			return nil, c.At(n, where, "%q is not a plain decimal number; quote it if it is text", n.Value)
		}
		return json.Number(n.Value), nil
	}
	return nil, c.At(n, where, "want a plain value, got tag %s", n.ShortTag())
}

// canonicalAny checks that v can be read as kind.
func canonicalAny(kind string, v any) (any, error) {
	switch kind {
	case KindMoney, KindNumber:
		return decimalOf(kind, v)
	case KindExact:
		return v, exactReadable(v)
	}
	return canonical(kind, v)
}
