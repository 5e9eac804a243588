package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the rules-file parser, as YAML and as
// JSON. It must never panic; a file it accepts must decide without
// panicking; a file it refuses must say which file.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	more, _ := filepath.Glob("testdata/*.json")
	bad, _ := filepath.Glob("testdata/bad/*")
	for _, name := range append(append(files, more...), bad...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, strings.HasSuffix(name, ".json"))
	}
	effects := []Effect{
		read(),
		{Sink: SinkProvider, Provider: "stripe", Method: "POST", Path: "/v1/charges", Origin: OriginModel, Values: map[string]string{"amount": "10"}},
		{Sink: SinkBrowser, Action: "send", Method: "POST", Host: "a", PageHost: "b", Target: "a/x"},
		{Sink: SinkCode, Action: "run", Origin: OriginModel},
		{Sink: SinkPeer, Action: "delegate", Recipient: "x"},
	}
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		name := "fuzz.yaml"
		if asJSON {
			name = "fuzz.json"
		}
		p, err := Parse(name, data)
		if err != nil {
			if p != nil {
				t.Fatalf("Parse returned a policy and an error")
			}
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("error does not name the file: %v", err)
			}
			if !errors.Is(err, ErrInvalidPolicy) && !errors.Is(err, ErrNoRules) {
				t.Fatalf("error is neither ErrInvalidPolicy nor ErrNoRules: %v", err)
			}
			return
		}
		if !strings.HasPrefix(p.Digest(), "sha256:") {
			t.Fatalf("digest %q", p.Digest())
		}
		for _, e := range effects {
			for _, a := range []Authority{{}, {Agent: "invoice-bot", Scopes: []string{"payments.write"}}} {
				d := p.Decide(Input{Mode: ModeStrict, Authority: a, Effect: e})
				if d.Verdict != VerdictAllow && d.Refusal == "" {
					t.Fatalf("verdict %v without a refusal", d.Verdict)
				}
			}
		}
	})
}
