package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"go.yaml.in/yaml/v3"
)

// Errors returned by Load and Parse, always wrapped with the file name and
// the problem; check them with errors.Is.
var (
	// ErrInvalidPolicy: the rules file is not valid (syntax, an unknown key,
	// a rule without a name or match, a bad glob or limit, ...).
	ErrInvalidPolicy = errors.New("invalid rules file")
	// ErrNoRules: the rules file holds no sections at all. An empty file is
	// refused rather than read as "no deployment rules": an operator who
	// points Gatehouse at an empty file has most likely made a mistake.
	ErrNoRules = errors.New("rules file is empty")
)

// maxFileSize bounds what Load reads; a rules file is hand-written.
const maxFileSize = 16 << 20

// Load reads the rules file at path. A name ending in .json must hold JSON;
// any other name is read as YAML (which also reads JSON). Every error names
// the file and wraps ErrInvalidPolicy, ErrNoRules or the read error.
//
// When Load fails the caller should keep running with Unreadable(path, err),
// which refuses every effect (fail closed).
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("policy: %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("policy: %s: %w: larger than %d bytes", path, ErrInvalidPolicy, maxFileSize)
	}
	return Parse(path, data)
}

// Parse compiles the bytes of a rules file. name is the file's name: it
// appears in every error, picks the format (".json" must be JSON, anything
// else is YAML) and is what Policy.Name returns. Parse never panics on any
// input.
func Parse(name string, data []byte) (*Policy, error) {
	p, err := parse(name, data)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	p.name = name
	p.digest = "sha256:" + hex.EncodeToString(sum[:])
	p.usable = true
	return p, nil
}

func parse(name string, data []byte) (*Policy, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("policy: %s: %w: %s", name, ErrInvalidPolicy, fmt.Sprintf(format, args...))
	}
	if strings.EqualFold(filepath.Ext(name), ".json") && len(bytes.TrimSpace(data)) > 0 && !json.Valid(data) {
		// Decode to get json's position-bearing message.
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("not valid JSON")
		}
		return nil, fail("%v", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("policy: %s: %w: no rules, scopes or agents (write at least one section, e.g. \"rules: []\")", name, ErrNoRules)
		}
		return nil, fail("%v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, fail("%v", err)
		}
		return nil, fail("line %d: more than one YAML document; a rules file holds one", extra.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) != 1 {
			return nil, fmt.Errorf("policy: %s: %w: no rules, scopes or agents", name, ErrNoRules)
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, fmt.Errorf("policy: %s: %w: no rules, scopes or agents (write at least one section, e.g. \"rules: []\")", name, ErrNoRules)
	}
	c := compiler{fail: fail}
	p, err := c.file(root)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// compiler turns the YAML tree into a Policy. Every error goes through fail,
// which names the file; the message names the line, the section, the
// entry's index and name, and the problem.
type compiler struct {
	fail func(format string, args ...any) error
}

func (c *compiler) at(n *yaml.Node, where, format string, args ...any) error {
	return c.fail("line %d: %s: %s", n.Line, where, fmt.Sprintf(format, args...))
}

type pair struct {
	key   string
	value *yaml.Node
}

// mapping returns the key/value pairs of a mapping node, refusing aliases,
// merge keys, non-string keys and repeated keys.
func (c *compiler) mapping(n *yaml.Node, where string) ([]pair, error) {
	if n.Kind == yaml.AliasNode {
		return nil, c.at(n, where, "YAML aliases are not supported in a rules file")
	}
	if n.Kind != yaml.MappingNode {
		return nil, c.at(n, where, "want a mapping (key: value), got %s", kindName(n))
	}
	pairs := make([]pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.ShortTag() == "!!merge" {
			return nil, c.at(k, where, "YAML merge keys are not supported in a rules file")
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			return nil, c.at(k, where, "keys must be plain names")
		}
		if v.Kind == yaml.AliasNode {
			return nil, c.at(v, where, "YAML aliases are not supported in a rules file")
		}
		for _, p := range pairs {
			if p.key == k.Value {
				return nil, c.at(k, where, "key %q appears twice", k.Value)
			}
		}
		pairs = append(pairs, pair{k.Value, v})
	}
	return pairs, nil
}

func (c *compiler) sequence(n *yaml.Node, where string) ([]*yaml.Node, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, c.at(n, where, "want a list, got %s", kindName(n))
	}
	for _, e := range n.Content {
		if e.Kind == yaml.AliasNode {
			return nil, c.at(e, where, "YAML aliases are not supported in a rules file")
		}
	}
	return n.Content, nil
}

// scalar returns the text of a non-null scalar.
func (c *compiler) scalar(n *yaml.Node, where string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return "", c.at(n, where, "want a single value, got %s", kindName(n))
	}
	return n.Value, nil
}

// list reads a value that is a scalar (a one-element list) or a non-empty
// list of scalars.
func (c *compiler) list(n *yaml.Node, where string) ([]string, error) {
	if n.Kind == yaml.ScalarNode {
		s, err := c.scalar(n, where)
		if err != nil {
			return nil, err
		}
		return []string{s}, nil
	}
	items, err := c.sequence(n, where)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, c.at(n, where, "an empty list matches nothing; remove the key or give a value")
	}
	out := make([]string, 0, len(items))
	for _, e := range items {
		s, err := c.scalar(e, where)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// names reads a card list: absent, null or empty all restrict nothing.
func (c *compiler) names(n *yaml.Node, where string) ([]string, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		return c.list(n, where)
	}
	items, err := c.sequence(n, where)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range items {
		s, err := c.scalar(e, where)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (c *compiler) boolean(n *yaml.Node, where string) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		return false, c.at(n, where, "want true or false, got %s", kindName(n))
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		return false, c.at(n, where, "want true or false: %v", err)
	}
	return b, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing (null)"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unexpected YAML node"
}

func (c *compiler) file(root *yaml.Node) (*Policy, error) {
	pairs, err := c.mapping(root, "top level")
	if err != nil {
		return nil, err
	}
	if len(pairs) == 0 {
		return nil, c.fail("%v: no rules, scopes or agents (write at least one section, e.g. \"rules: []\")", ErrNoRules)
	}
	p := &Policy{}
	for _, kv := range pairs {
		switch kv.key {
		case "rules":
			var rs []rule
			rs, err = c.rules(kv.value, "rules", providerKeys)
			p.rules = newRulesSection(rs)
		case "effects":
			var rs []rule
			rs, err = c.rules(kv.value, "effects", effectKeys)
			p.effects = newEffectsSection(rs)
		case "scopes":
			p.scopes, err = c.scopes(kv.value)
		case "agents":
			p.agents, err = c.agents(kv.value)
		default:
			return nil, c.at(kv.value, "top level", "unknown section %q (the sections are rules, effects, scopes and agents)", kv.key)
		}
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Match keys each section accepts.
var (
	providerKeys = []string{"provider", "atom", "effect", "method", "code_origin", "verified"}
	effectKeys   = []string{"sink", "action", "origin", "agent", "target", "confined"}
	scopeKeys    = []string{"provider", "atom", "effect", "method", "code_origin", "verified",
		"sink", "action", "origin", "agent", "target", "path", "host"}
)

func (c *compiler) rules(n *yaml.Node, section string, keys []string) ([]rule, error) {
	items, err := c.sequence(n, section)
	if err != nil {
		return nil, err
	}
	out := make([]rule, 0, len(items))
	for i, item := range items {
		where := fmt.Sprintf("%s[%d]", section, i)
		pairs, err := c.mapping(item, where)
		if err != nil {
			return nil, err
		}
		r := rule{index: i}
		var matchNode *yaml.Node
		for _, kv := range pairs {
			switch kv.key {
			case "name":
				if r.name, err = c.scalar(kv.value, where+" name"); err != nil {
					return nil, err
				}
			case "decision":
				if r.decision, err = c.scalar(kv.value, where+" decision"); err != nil {
					return nil, err
				}
			case "match":
				matchNode = kv.value
			default:
				return nil, c.at(kv.value, where, "unknown key %q (a rule has name, decision and match)", kv.key)
			}
		}
		if r.name == "" {
			return nil, c.at(item, where, "the rule has no name; every rule needs one so decisions can cite it")
		}
		where = fmt.Sprintf("%s[%d] %q", section, i, r.name)
		for _, prev := range out {
			if prev.name == r.name {
				return nil, c.at(item, where, "the name is already used by %s[%d]; rule names must be unique", section, prev.index)
			}
		}
		if matchNode == nil {
			return nil, c.at(item, where, "the rule has no match; a rule without one would apply to everything")
		}
		if r.m, err = c.matcher(matchNode, where, section, keys); err != nil {
			return nil, err
		}
		r.allow = r.decision == "allow"
		if !r.allow {
			r.detail = fmt.Sprintf("Deployment rule %q (%s[%d]) denies this effect; if it should happen, change or remove that rule in the rules file.", r.name, section, i)
		}
		r.section = section
		out = append(out, r)
	}
	return out, nil
}

func (c *compiler) matcher(n *yaml.Node, where, section string, keys []string) (matcher, error) {
	var m matcher
	pairs, err := c.mapping(n, where+" match")
	if err != nil {
		return m, err
	}
	if len(pairs) == 0 {
		return m, c.at(n, where, "the match is empty; a rule that matches everything must say what it matches")
	}
	for _, kv := range pairs {
		known := false
		for _, k := range keys {
			if k == kv.key {
				known = true
				break
			}
		}
		if !known {
			return m, c.at(kv.value, where, "unknown match key %q (%s: match keys are %s)", kv.key, section, strings.Join(keys, ", "))
		}
		kw := where + " match." + kv.key
		switch kv.key {
		case "verified", "confined":
			b, err := c.boolean(kv.value, kw)
			if err != nil {
				return m, err
			}
			t := triFalse
			if b {
				t = triTrue
			}
			if kv.key == "verified" {
				m.verified = t
			} else {
				m.confined = t
			}
			continue
		}
		vals, err := c.list(kv.value, kw)
		if err != nil {
			return m, err
		}
		switch kv.key {
		case "provider":
			m.provider = vals
		case "atom":
			m.atom = vals
		case "effect":
			for _, v := range vals {
				switch EffectClass(v) {
				case EffectRead, EffectWrite, EffectDestructive, EffectNotify:
				default:
					return m, c.at(kv.value, kw, "unknown effect %q (effects are read, write, destructive and notify)", v)
				}
			}
			m.effect = vals
		case "method":
			for i, v := range vals {
				vals[i] = strings.ToUpper(v)
			}
			m.method = vals
		case "code_origin", "origin":
			if m.origin != nil {
				return m, c.at(kv.value, kw, "code_origin and origin mean the same; write one of them")
			}
			m.origin = vals
		case "sink":
			for _, v := range vals {
				if !knownSink(Sink(v)) {
					return m, c.at(kv.value, kw, "unknown sink %q", v)
				}
			}
			m.sink = vals
		case "action":
			m.action = vals
		case "agent":
			m.agent = vals
		case "host":
			m.host = vals
		case "target", "path":
			globs := make([]glob, 0, len(vals))
			for _, v := range vals {
				if !doublestar.ValidatePattern(v) {
					return m, c.at(kv.value, kw, "bad glob %q", v)
				}
				globs = append(globs, newGlob(v))
			}
			if kv.key == "target" {
				m.target = globs
			} else {
				m.path = globs
			}
		}
	}
	return m, nil
}

func knownSink(s Sink) bool {
	switch s {
	case SinkCode, SinkProcess, SinkArtifact, SinkWorkspace, SinkMemory, SinkPeer, SinkOutput, SinkProvider, SinkBrowser:
		return true
	}
	return false
}

func (c *compiler) scopes(n *yaml.Node) ([]scopeReq, error) {
	pairs, err := c.mapping(n, "scopes")
	if err != nil {
		return nil, err
	}
	var out []scopeReq
	for _, kv := range pairs {
		if kv.key != "require" {
			return nil, c.at(kv.value, "scopes", "unknown key %q (scopes has require)", kv.key)
		}
		items, err := c.sequence(kv.value, "scopes.require")
		if err != nil {
			return nil, err
		}
		for i, item := range items {
			where := fmt.Sprintf("scopes.require[%d]", i)
			pairs, err := c.mapping(item, where)
			if err != nil {
				return nil, err
			}
			s := scopeReq{index: i}
			var matchNode, limitsNode *yaml.Node
			for _, kv := range pairs {
				switch kv.key {
				case "scope":
					if s.scope, err = c.scalar(kv.value, where+" scope"); err != nil {
						return nil, err
					}
				case "match":
					matchNode = kv.value
				case "limits":
					limitsNode = kv.value
				default:
					return nil, c.at(kv.value, where, "unknown key %q (a scope requirement has scope, match and limits)", kv.key)
				}
			}
			if s.scope == "" {
				return nil, c.at(item, where, "no scope named; say which scope this requires")
			}
			where = fmt.Sprintf("scopes.require[%d] %q", i, s.scope)
			if matchNode == nil {
				return nil, c.at(item, where, "no match; say which effects need the scope")
			}
			if s.m, err = c.matcher(matchNode, where, "scopes.require", scopeKeys); err != nil {
				return nil, err
			}
			if limitsNode != nil {
				lp, err := c.mapping(limitsNode, where+" limits")
				if err != nil {
					return nil, err
				}
				for _, l := range lp {
					v, err := c.scalar(l.value, where+" limits."+l.key)
					if err != nil {
						return nil, err
					}
					r, ok := parseDecimal(v)
					if !ok {
						return nil, c.at(l.value, where, "limit %s is %q, not a decimal number (write e.g. \"1000\" or \"99.50\")", l.key, v)
					}
					s.limits = append(s.limits, limit{key: l.key, text: v, max: r})
				}
			}
			out = append(out, s)
		}
	}
	return out, nil
}

func (c *compiler) agents(n *yaml.Node) (map[string]*card, error) {
	items, err := c.sequence(n, "agents")
	if err != nil {
		return nil, err
	}
	out := make(map[string]*card, len(items))
	for i, item := range items {
		where := fmt.Sprintf("agents[%d]", i)
		pairs, err := c.mapping(item, where)
		if err != nil {
			return nil, err
		}
		cd := &card{}
		lists := map[string]*[]string{
			"allowed_tools":        &cd.allowedTools,
			"blocked_tools":        &cd.blockedTools,
			"require_approval_for": &cd.requireApproval,
			"allowed_delegations":  &cd.allowedDelegations,
		}
		for _, kv := range pairs {
			if kv.key == "name" {
				if cd.name, err = c.scalar(kv.value, where+" name"); err != nil {
					return nil, err
				}
				continue
			}
			dst, ok := lists[kv.key]
			if !ok {
				return nil, c.at(kv.value, where, "unknown key %q (a card has name, allowed_tools, blocked_tools, require_approval_for and allowed_delegations)", kv.key)
			}
			vals, err := c.names(kv.value, where+" "+kv.key)
			if err != nil {
				return nil, err
			}
			for _, v := range vals {
				if _, err := path.Match(v, ""); err != nil {
					return nil, c.at(kv.value, where+" "+kv.key, "bad glob %q", v)
				}
			}
			*dst = vals
		}
		if cd.name == "" {
			return nil, c.at(item, where, "the card has no name; name the agent it is for")
		}
		if prev, dup := out[cd.name]; dup {
			return nil, c.at(item, fmt.Sprintf("agents[%d] %q", i, cd.name), "agent %q is already registered by agents[%d]; each agent has one card", cd.name, prev.index)
		}
		cd.index = i
		cd.rule = "agent:" + cd.name
		out[cd.name] = cd
	}
	return out, nil
}

// parseDecimal reads an exact decimal: an optional sign, digits, and an
// optional fraction ("1000", "-3", "99.50", ".5"). Exponents, fractions
// written a/b, hex, Inf and NaN are refused, so a limit never means
// something other than what it looks like; so is anything longer than 100
// characters.
func parseDecimal(s string) (*big.Rat, bool) {
	t := s
	if t != "" && (t[0] == '+' || t[0] == '-') {
		t = t[1:]
	}
	digits, dot := 0, false
	for i := 0; i < len(t); i++ {
		switch b := t[i]; {
		case b >= '0' && b <= '9':
			digits++
		case b == '.' && !dot:
			dot = true
		default:
			return nil, false
		}
	}
	if digits == 0 || len(s) > 100 {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}
