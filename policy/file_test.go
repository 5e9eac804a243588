package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadValid(t *testing.T) {
	for _, name := range []string{"testdata/valid.yaml", "testdata/valid.json"} {
		t.Run(name, func(t *testing.T) {
			p, err := Load(name)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			data, _ := os.ReadFile(name)
			sum := sha256.Sum256(data)
			if want := "sha256:" + hex.EncodeToString(sum[:]); p.Digest() != want {
				t.Errorf("Digest = %s, want %s", p.Digest(), want)
			}
			if p.Name() != name {
				t.Errorf("Name = %q, want %q", p.Name(), name)
			}
			d := p.Decide(Input{Mode: ModeStrict, Effect: Effect{Sink: SinkProvider, Provider: "github", Method: "delete", Atom: "gh", Declared: EffectDestructive, Origin: OriginShipped}})
			if d.Verdict != VerdictRefuse || d.Rule != "no-deletes" {
				t.Errorf("DELETE: got %v %s %s, want refuse by no-deletes", d.Verdict, d.Refusal, d.Rule)
			}
		})
	}
}

// Every broken file fails to load with an error that names the file and the
// problem.
func TestLoadBroken(t *testing.T) {
	tests := []struct {
		file string
		want []string // substrings of the error
		is   error
	}{
		{"empty.yaml", []string{"no rules"}, ErrNoRules},
		{"comments-only.yaml", []string{"no rules"}, ErrNoRules},
		{"unknown-section.yaml", []string{`unknown section "rulez"`}, ErrInvalidPolicy},
		{"unknown-match-key.yaml", []string{`rules[1] "no-deletes"`, `unknown match key "mthod"`}, ErrInvalidPolicy},
		{"effects-key-in-rules.yaml", []string{`rules[0] "wrong-section"`, `unknown match key "sink"`}, ErrInvalidPolicy},
		{"no-name.yaml", []string{"rules[0]", "no name"}, ErrInvalidPolicy},
		{"empty-match.yaml", []string{`effects[0] "everything"`, "match is empty"}, ErrInvalidPolicy},
		{"no-match.yaml", []string{`effects[0] "everything"`, "no match"}, ErrInvalidPolicy},
		{"bad-glob.yaml", []string{`effects[0] "broken-target"`, "bad glob"}, ErrInvalidPolicy},
		{"duplicate-agent.yaml", []string{`agents[1] "invoice-bot"`, "already registered"}, ErrInvalidPolicy},
		{"bad-limit.yaml", []string{`scopes.require[0] "payments.write"`, "not a decimal"}, ErrInvalidPolicy},
		{"syntax.yaml", []string{"yaml:"}, ErrInvalidPolicy},
		{"not-json.json", []string{"invalid character"}, ErrInvalidPolicy},
		{"unknown-rule-key.json", []string{"rules[0]", `unknown key "desicion"`}, ErrInvalidPolicy},
		{"empty-list.yaml", []string{`rules[0] "nothing"`, "empty list"}, ErrInvalidPolicy},
		{"alias.yaml", []string{"aliases are not supported"}, ErrInvalidPolicy},
		{"duplicate-rule.yaml", []string{`rules[1] "same"`, "already used"}, ErrInvalidPolicy},
		{"bad-verified.yaml", []string{"match.verified", "true or false"}, ErrInvalidPolicy},
	}
	files, _ := filepath.Glob("testdata/bad/*")
	if len(files) != len(tests) {
		t.Errorf("testdata/bad holds %d files, the table %d: test every broken file", len(files), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			name := filepath.Join("testdata", "bad", tt.file)
			p, err := Load(name)
			if err == nil {
				t.Fatalf("Load succeeded, want an error")
			}
			if p != nil {
				t.Errorf("Load returned a policy with its error")
			}
			msg := err.Error()
			if !strings.Contains(msg, name) {
				t.Errorf("error %q does not name the file", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %q is not %v", msg, tt.is)
			}
			// The broker's fallback refuses, naming the file.
			d := Unreadable(name, err).Decide(Input{Mode: ModeReport, Effect: Effect{Sink: SinkOutput, Action: "deliver"}})
			if d.Verdict != VerdictRefuse || d.Refusal != RefusePolicyUnreadable || !strings.Contains(d.Reasons[0].Detail, name) {
				t.Errorf("Unreadable decided %+v", d)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml")
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "does-not-exist.yaml") {
		t.Fatalf("Load of a missing file: %v", err)
	}
}

func TestParseEdgeCases(t *testing.T) {
	ok := []struct{ name, src string }{
		{"empty rules list", "rules: []"},
		{"null section", "rules:\n"},
		{"two sections", "rules: []\neffects: []"},
		{"scalar match value", "rules: [{name: a, decision: deny, match: {method: post}}]"},
		{"no decision is deny", "rules: [{name: a, match: {method: post}}]"},
		{"card with empty lists", "agents: [{name: a, allowed_tools: [], blocked_tools: null}]"},
		{"json file", `{"rules": []}`},
	}
	for _, tt := range ok {
		if _, err := Parse(tt.name+".yaml", []byte(tt.src)); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	bad := []struct{ name, src, want string }{
		{"braces only", "{}", "no rules"},
		{"null document", "null", "no rules"},
		{"two documents", "rules: []\n---\nrules: []", "more than one YAML document"},
		{"list at top", "- a", "want a mapping"},
		{"repeated key", "rules: []\nrules: []", "appears twice"},
		{"repeated match key", "rules: [{name: a, match: {method: GET, method: PUT}}]", "appears twice"},
		{"unknown effect", "rules: [{name: a, match: {effect: delete}}]", `unknown effect "delete"`},
		{"unknown sink", "effects: [{name: a, match: {sink: disk}}]", `unknown sink "disk"`},
		{"nested list value", "rules: [{name: a, match: {method: [[GET]]}}]", "want a single value"},
		{"bad card glob", "agents: [{name: a, allowed_tools: ['[']}]", "bad glob"},
		{"card without name", "agents: [{allowed_tools: [x]}]", "no name"},
		{"scope without scope", "scopes: {require: [{match: {provider: x}}]}", "no scope named"},
		{"scope without match", "scopes: {require: [{scope: x}]}", "no match"},
		{"limit fraction", "scopes: {require: [{scope: x, match: {provider: x}, limits: {amount: 1/3}}]}", "not a decimal"},
		{"limit empty", "scopes: {require: [{scope: x, match: {provider: x}, limits: {amount: ''}}]}", "not a decimal"},
		{"origin twice", "scopes: {require: [{scope: x, match: {origin: model, code_origin: shipped}}]}", "mean the same"},
		{"merge key", "rules: [{name: a, match: {<<: {method: GET}}}]", "merge keys"},
	}
	for _, tt := range bad {
		_, err := Parse(tt.name+".yaml", []byte(tt.src))
		if err == nil {
			t.Errorf("%s: parsed, want an error saying %q", tt.name, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.name+".yaml") {
			t.Errorf("%s: error %q, want it to name the file and say %q", tt.name, err, tt.want)
		}
	}
}

func TestParseDecimal(t *testing.T) {
	good := []string{"0", "1000", "1000.00", "-3", "+4", ".5", "5.", "0001"}
	for _, s := range good {
		if _, ok := parseDecimal(s); !ok {
			t.Errorf("parseDecimal(%q) refused", s)
		}
	}
	bad := []string{"", "-", ".", "1e3", "1/3", "0x10", "Inf", "NaN", "1.2.3", " 1", "1,000", "--1"}
	for _, s := range bad {
		if _, ok := parseDecimal(s); ok {
			t.Errorf("parseDecimal(%q) accepted", s)
		}
	}
}
