package provider

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

const fuzzCatalogue = `providers:
  - name: erp
    base_url: https://erp.example.com/api/v1
    auth: {type: bearer}
    idempotency_header: Idempotency-Key
    headers_allowed: [Accept, X-Request-Id]
integrations:
  - {name: erp.read, provider: erp, effect: read, origin: shipped, operations: [{method: GET, template: "/invoices/{id}"}]}
  - {name: erp.model.pay, provider: erp, effect: write, origin: model, operations: [{method: POST, template: /payments}]}
`

// FuzzDescribe feeds arbitrary params and origins to Describe: it must
// never panic, and what it accepts is described as sent: the path stays
// under the base path with no "." or ".." segment, the method is one it
// knows, and the declared effect is the catalogue's.
func FuzzDescribe(f *testing.F) {
	cat, err := ParseCatalogue("fuzz.yaml", []byte(fuzzCatalogue))
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(context.Background(), nil, Config{Catalogue: cat})
	if err != nil {
		f.Fatal(err)
	}
	origins := []policy.Origin{"", policy.OriginShipped, policy.OriginModel, policy.OriginDirect, policy.OriginRegistry}
	f.Add(uint8(1), []byte(`{"provider":"erp","method":"get","path":"/invoices/INV-7","atom":"erp.read"}`))
	f.Fuzz(func(t *testing.T, origin uint8, params []byte) {
		run := &broker.Run{ID: "r_01jf0000000000000000000000"}
		req := &broker.EffectRequest{Run: run.ID, Action: ActionCall, Origin: origins[int(origin)%len(origins)], Params: params}
		p, err := s.Describe(context.Background(), run, req)
		if err != nil {
			return
		}
		c := p.State.(*call)
		e := p.Effect
		if !strings.HasPrefix(c.path, "/api/v1") || (c.path != "/api/v1" && !strings.HasPrefix(c.path, "/api/v1/")) {
			t.Fatalf("path %q leaves the base path", c.path)
		}
		for seg := range strings.SplitSeq(c.path, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("path %q has a dot segment", c.path)
			}
		}
		if e.Path != c.path || e.Host != "erp.example.com" || e.Target != e.Host+e.Path || !knownMethods[e.Method] || e.Method != c.method {
			t.Fatalf("effect %+v for call %+v", e, c)
		}
		if e.Atom != "" {
			if in, ok := cat.Integration(e.Atom); ok && e.Declared != in.Effect {
				t.Fatalf("declared %q, catalogue %q", e.Declared, in.Effect)
			} else if !ok && (e.Declared != "" || e.Contract != nil) {
				t.Fatalf("unknown atom %q declares %q", e.Atom, e.Declared)
			}
		} else if e.Declared != "" {
			t.Fatalf("declared without atom")
		}
		if c.body != nil && p.Digest != digest(c.body) {
			t.Fatal("digest is not the body's")
		}
		for k := range c.headers {
			if !c.prov.allowed[k] {
				t.Fatalf("header %q is not allowed", k)
			}
		}
		_ = json.Valid
	})
}

// FuzzParseCatalogue: never panics; an accepted catalogue indexes every
// provider and integration, and every integration's provider exists.
func FuzzParseCatalogue(f *testing.F) {
	f.Add([]byte(fuzzCatalogue))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCatalogue("fuzz.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, in := range c.Integrations {
			p, ok := c.Provider(in.Provider)
			if !ok {
				t.Fatalf("integration %q has no provider", in.Name)
			}
			if ct := in.Contract(); ct != nil {
				for _, op := range ct.Operations {
					if !strings.HasPrefix(op.Template, p.basePath) || !knownMethods[op.Method] {
						t.Fatalf("operation %+v", op)
					}
				}
			}
		}
		for _, p := range c.Providers {
			if p.base == nil || (p.base.Scheme != "http" && p.base.Scheme != "https") {
				t.Fatalf("provider %q base %v", p.Name, p.base)
			}
		}
	})
}
