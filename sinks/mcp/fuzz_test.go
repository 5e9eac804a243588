package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// FuzzPinTools: an upstream server's tool list (untrusted: whatever a
// server answers to tools/list) never makes PinTools panic; a list it
// accepts pins the same digests twice, each tool once, and differs from
// its own pin in nothing.
func FuzzPinTools(f *testing.F) {
	for _, s := range []string{
		`[{"name":"read","description":"Read.","inputSchema":{"type":"object"}}]`,
		`[{"name":"a","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}},"annotations":{"readOnlyHint":true}},{"name":"b","inputSchema":{"type":"object"}}]`,
		`[{"name":"a","inputSchema":{"type":"object"}},{"name":"a","inputSchema":{"type":"object"}}]`,
		`[{"name":"x/y","inputSchema":{}}]`, `[{"name":"","inputSchema":{"type":"object"}}]`, `[{"name":"n","inputSchema":[]}]`,
		`[{"name":"n","inputSchema":{"type":"object"},"outputSchema":{"type":"object"},"title":"T","_meta":{"k":1}}]`, `[null]`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var tools []*sdk.Tool
		if json.Unmarshal(data, &tools) != nil {
			return
		}
		a, err := PinTools(tools)
		if err != nil {
			if !errors.Is(err, ErrToolList) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		b, err := PinTools(tools)
		if err != nil || len(a) != len(b) {
			t.Fatalf("pinned twice: %v", err)
		}
		seen := map[string]bool{}
		for i := range a {
			if a[i].Digest != b[i].Digest || seen[a[i].Name] {
				t.Fatalf("tool %q: digests %s and %s, or named twice", a[i].Name, a[i].Digest, b[i].Digest)
			}
			seen[a[i].Name] = true
		}
		if d := Diff(&Pin{Tools: a}, b); len(d) != 0 {
			t.Fatalf("a list differs from its own pin: %+v", d)
		}
	})
}

// FuzzDecodeParams: an agent's params for a call never make the sink
// panic; accepted params name a catalogued server and a plain tool name,
// and carry a JSON object of arguments.
func FuzzDecodeParams(f *testing.F) {
	for _, s := range []string{`{"server":"files","tool":"read","arguments":{"path":"a"}}`, `{"server":"files","tool":"read"}`,
		`{"server":"nope","tool":"read"}`, `{"server":"files","tool":"a/b"}`, `{"server":"files","tool":"read","arguments":[1]}`,
		`{"server":"files","tool":"read","arguments":null}`, `{"server":"files","tool":"read","extra":1}`, `null`, `[]`, `{`} {
		f.Add([]byte(s))
	}
	cat, err := ParseCatalogue("fuzz.yaml", []byte("servers:\n  - {name: files, url: http://127.0.0.1:1/mcp}\n"))
	if err != nil {
		f.Fatal(err)
	}
	k := &Sink{cat: cat}
	f.Fuzz(func(t *testing.T, data []byte) {
		srv, p, err := k.DecodeParams(data)
		if err != nil {
			if !errors.Is(err, broker.ErrBadRequest) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if srv.Name != "files" || p.Tool == "" {
			t.Fatalf("accepted %+v for %s", p, srv.Name)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(p.Arguments, &obj); err != nil {
			t.Fatalf("arguments %q are not an object: %v", p.Arguments, err)
		}
	})
}

// FuzzCatalogue: a catalogue file never makes ParseCatalogue panic; one it
// accepts has valid, distinct names and one transport per server.
func FuzzCatalogue(f *testing.F) {
	for _, s := range []string{
		"servers:\n  - {name: files, command: [./srv], files: {srv: /bin/true}, auth: {type: env, env: TOKEN}}\n  - {name: bank, url: https://bank.example/mcp, auth: {type: bearer}}\n",
		"servers:\n  - {name: a, url: http://x/mcp, command: [x]}\n", "servers:\n  - &a {name: a, url: http://x/mcp}\n  - *a\n",
		"servers: []\n", "", "servers:\n  - {name: A, url: ftp://x}\n", "servers:\n  - {name: a, url: http://u:p@x/mcp}\n", "{\"servers\":[{\"name\":\"j\",\"url\":\"http://h/mcp\"}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCatalogue("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrCatalogue) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, s := range c.Servers {
			if !serverName.MatchString(s.Name) || seen[s.Name] || s.Stdio() == (s.URL != "") {
				t.Fatalf("accepted server %+v", s)
			}
			seen[s.Name] = true
		}
	})
}

// FuzzRedactResult: whatever result a server answers (untrusted), the
// redacted result holds the credential in no decoded string and is JSON
// whenever the result was.
func FuzzRedactResult(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"tok-fuzz-1"}]}`, `{"tok-fuzz-1":"\u0074ok-fuzz-1"}`, `["dG9rLWZ1enotMQ=="]`,
		`"plain"`, `{"a":1e400}`, `not json tok-fuzz-1`, `{"a":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	const tok = "tok-fuzz-1"
	cred := provider.Credential{Token: provider.NewSecret(tok)}
	f.Fuzz(func(t *testing.T, data []byte) {
		out := redactResult(data, cred)
		if json.Valid(data) && !json.Valid(out) {
			t.Fatalf("valid JSON became %q", out)
		}
		if !json.Valid(out) {
			if bytes.Contains(out, []byte(tok)) {
				t.Fatalf("the credential is left in %q", out)
			}
			return
		}
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			return
		}
		b, _ := json.Marshal(v)
		if bytes.Contains(b, []byte(tok)) || bytes.Contains(out, []byte(tok)) {
			t.Fatalf("the credential is left in %s", out)
		}
	})
}
