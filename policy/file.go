package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"go.yaml.in/yaml/v3"

	"github.com/gatehouse/gatehouse/policy/rulesyaml"
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
	c := compiler{rulesyaml.Reader{Fail: fail}}
	root, err := c.Root(name, data)
	if errors.Is(err, rulesyaml.ErrEmpty) {
		return nil, fmt.Errorf("policy: %s: %w: no rules, scopes or agents (write at least one section, e.g. \"rules: []\")", name, ErrNoRules)
	}
	if err != nil {
		return nil, err
	}
	p, err := c.file(root)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// compiler turns the YAML tree into a Policy. Every error goes through
// Fail, which names the file; the message names the line, the section, the
// entry's index and name, and the problem.
type compiler struct {
	rulesyaml.Reader
}

// sequence reads a list; null is an empty one.
func (c *compiler) sequence(n *yaml.Node, where string) ([]*yaml.Node, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, nil
	}
	return c.Sequence(n, where)
}

// list reads a value that is a scalar (a one-element list) or a non-empty
// list of scalars.
func (c *compiler) list(n *yaml.Node, where string) ([]string, error) {
	return c.List(n, where, c.Scalar, c.sequence)
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
		s, err := c.Scalar(e, where)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (c *compiler) boolean(n *yaml.Node, where string) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		return false, c.At(n, where, "want true or false, got %s", rulesyaml.KindName(n))
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		return false, c.At(n, where, "want true or false: %v", err)
	}
	return b, nil
}

func (c *compiler) file(root *yaml.Node) (*Policy, error) {
	pairs, err := c.Mapping(root, "top level")
	if err != nil {
		return nil, err
	}
	if len(pairs) == 0 {
		return nil, c.Fail("%v: no rules, scopes or agents (write at least one section, e.g. \"rules: []\")", ErrNoRules)
	}
	p := &Policy{}
	for _, kv := range pairs {
		switch kv.Key {
		case "rules":
			var rs []rule
			rs, err = c.rules(kv.Value, "rules", providerKeys)
			p.rules = newRulesSection(rs)
		case "effects":
			var rs []rule
			rs, err = c.rules(kv.Value, "effects", effectKeys)
			p.effects = newEffectsSection(rs)
		case "scopes":
			p.scopes, err = c.scopes(kv.Value)
		case "agents":
			p.agents, err = c.agents(kv.Value)
		case "browser":
			p.browser, err = c.browserSettings(kv.Value)
		case "approvals":
			p.approvals, err = c.approvals(kv.Value)
		default:
			return nil, c.At(kv.Value, "top level", "unknown section %q (the sections are rules, effects, scopes, agents, approvals and browser)", kv.Key)
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
		pairs, err := c.Mapping(item, where)
		if err != nil {
			return nil, err
		}
		r := rule{index: i}
		var matchNode *yaml.Node
		for _, kv := range pairs {
			switch kv.Key {
			case "name":
				if r.name, err = c.Scalar(kv.Value, where+" name"); err != nil {
					return nil, err
				}
			case "decision":
				if r.decision, err = c.Scalar(kv.Value, where+" decision"); err != nil {
					return nil, err
				}
			case "match":
				matchNode = kv.Value
			default:
				return nil, c.At(kv.Value, where, "unknown key %q (a rule has name, decision and match)", kv.Key)
			}
		}
		if r.name == "" {
			return nil, c.At(item, where, "the rule has no name; every rule needs one so decisions can cite it")
		}
		where = fmt.Sprintf("%s[%d] %q", section, i, r.name)
		for _, prev := range out {
			if prev.name == r.name {
				return nil, c.At(item, where, "the name is already used by %s[%d]; rule names must be unique", section, prev.index)
			}
		}
		if matchNode == nil {
			return nil, c.At(item, where, "the rule has no match; a rule without one would apply to everything")
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
	pairs, err := c.Mapping(n, where+" match")
	if err != nil {
		return m, err
	}
	if len(pairs) == 0 {
		return m, c.At(n, where, "the match is empty; a rule that matches everything must say what it matches")
	}
	for _, kv := range pairs {
		known := false
		for _, k := range keys {
			if k == kv.Key {
				known = true
				break
			}
		}
		if !known {
			return m, c.At(kv.Value, where, "unknown match key %q (%s: match keys are %s)", kv.Key, section, strings.Join(keys, ", "))
		}
		kw := where + " match." + kv.Key
		switch kv.Key {
		case "verified", "confined":
			b, err := c.boolean(kv.Value, kw)
			if err != nil {
				return m, err
			}
			t := triFalse
			if b {
				t = triTrue
			}
			if kv.Key == "verified" {
				m.verified = t
			} else {
				m.confined = t
			}
			continue
		}
		vals, err := c.list(kv.Value, kw)
		if err != nil {
			return m, err
		}
		switch kv.Key {
		case "provider":
			m.provider = vals
		case "atom":
			m.atom = vals
		case "effect":
			for _, v := range vals {
				switch EffectClass(v) {
				case EffectRead, EffectWrite, EffectDestructive, EffectNotify:
				default:
					return m, c.At(kv.Value, kw, "unknown effect %q (effects are read, write, destructive and notify)", v)
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
				return m, c.At(kv.Value, kw, "code_origin and origin mean the same; write one of them")
			}
			m.origin = vals
		case "sink":
			for _, v := range vals {
				if !KnownSink(Sink(v)) {
					return m, c.At(kv.Value, kw, "unknown sink %q", v)
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
					return m, c.At(kv.Value, kw, "bad glob %q", v)
				}
				globs = append(globs, newGlob(v))
			}
			if kv.Key == "target" {
				m.target = globs
			} else {
				m.path = globs
			}
		}
	}
	return m, nil
}

// KnownSink reports whether s is one of the sinks Gatehouse has.
func KnownSink(s Sink) bool {
	switch s {
	case SinkCode, SinkProcess, SinkArtifact, SinkWorkspace, SinkMemory, SinkPeer, SinkOutput, SinkProvider, SinkBrowser, SinkMCP:
		return true
	}
	return false
}

func (c *compiler) scopes(n *yaml.Node) ([]scopeReq, error) {
	pairs, err := c.Mapping(n, "scopes")
	if err != nil {
		return nil, err
	}
	var out []scopeReq
	for _, kv := range pairs {
		if kv.Key != "require" {
			return nil, c.At(kv.Value, "scopes", "unknown key %q (scopes has require)", kv.Key)
		}
		items, err := c.sequence(kv.Value, "scopes.require")
		if err != nil {
			return nil, err
		}
		for i, item := range items {
			where := fmt.Sprintf("scopes.require[%d]", i)
			pairs, err := c.Mapping(item, where)
			if err != nil {
				return nil, err
			}
			s := scopeReq{index: i}
			var matchNode, limitsNode *yaml.Node
			for _, kv := range pairs {
				switch kv.Key {
				case "scope":
					if s.scope, err = c.Scalar(kv.Value, where+" scope"); err != nil {
						return nil, err
					}
				case "match":
					matchNode = kv.Value
				case "limits":
					limitsNode = kv.Value
				default:
					return nil, c.At(kv.Value, where, "unknown key %q (a scope requirement has scope, match and limits)", kv.Key)
				}
			}
			if s.scope == "" {
				return nil, c.At(item, where, "no scope named; say which scope this requires")
			}
			where = fmt.Sprintf("scopes.require[%d] %q", i, s.scope)
			if matchNode == nil {
				return nil, c.At(item, where, "no match; say which effects need the scope")
			}
			if s.m, err = c.matcher(matchNode, where, "scopes.require", scopeKeys); err != nil {
				return nil, err
			}
			if limitsNode != nil {
				lp, err := c.Mapping(limitsNode, where+" limits")
				if err != nil {
					return nil, err
				}
				for _, l := range lp {
					v, err := c.Scalar(l.Value, where+" limits."+l.Key)
					if err != nil {
						return nil, err
					}
					r, ok := parseDecimal(v)
					if !ok {
						return nil, c.At(l.Value, where, "limit %s is %q, not a decimal number (write e.g. \"1000\" or \"99.50\")", l.Key, v)
					}
					s.limits = append(s.limits, limit{key: l.Key, text: v, max: r})
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
		pairs, err := c.Mapping(item, where)
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
			if kv.Key == "name" {
				if cd.name, err = c.Scalar(kv.Value, where+" name"); err != nil {
					return nil, err
				}
				continue
			}
			dst, ok := lists[kv.Key]
			if !ok {
				return nil, c.At(kv.Value, where, "unknown key %q (a card has name, allowed_tools, blocked_tools, require_approval_for and allowed_delegations)", kv.Key)
			}
			vals, err := c.names(kv.Value, where+" "+kv.Key)
			if err != nil {
				return nil, err
			}
			for _, v := range vals {
				if _, err := path.Match(v, ""); err != nil {
					return nil, c.At(kv.Value, where+" "+kv.Key, "bad glob %q", v)
				}
			}
			*dst = vals
		}
		if cd.name == "" {
			return nil, c.At(item, where, "the card has no name; name the agent it is for")
		}
		if prev, dup := out[cd.name]; dup {
			return nil, c.At(item, fmt.Sprintf("agents[%d] %q", i, cd.name), "agent %q is already registered by agents[%d]; each agent has one card", cd.name, prev.index)
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
