package provider

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/grounding/strictjson"
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

// fuzzSink is a sink over fuzzCatalogue, without grounding or NATS.
func fuzzSink(f *testing.F) (*Catalogue, *Sink) {
	cat, err := ParseCatalogue("fuzz.yaml", []byte(fuzzCatalogue))
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(context.Background(), nil, Config{Catalogue: cat})
	if err != nil {
		f.Fatal(err)
	}
	return cat, s
}

// FuzzDescribe feeds arbitrary params and origins to Describe: it must
// never panic, and what it accepts is described as sent: the path stays
// under the base path, is canonical (checkCanonical), the method is one it
// knows, and the declared effect is the catalogue's.
func FuzzDescribe(f *testing.F) {
	cat, s := fuzzSink(f)
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
		if e.Ambiguous != c.ambiguous {
			t.Fatalf("effect ambiguous %q, call %q", e.Ambiguous, c.ambiguous)
		}
		if c.ambiguous == "" {
			checkCanonical(t, c)
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
	})
}

// FuzzCanonical feeds spellings of a path and a JSON body: a spelling
// Describe accepts is canonical, is exactly what the client sends, and is
// its own canonical form; a body it accepts is one strictjson reads.
func FuzzCanonical(f *testing.F) {
	_, s := fuzzSink(f)
	for _, seed := range [][2]string{
		{"/payments", `{"amount":"1"}`}, {"/Payments/", `{"iban":"x","IBAN":"y"}`}, {"/pay%6Dents", `{}`},
		{"/payments;x", `{}`}, {"/payments%2F", `{}`}, {"//payments", `{}`}, {"/invoices/INV-7/", `{"a":"\ud800"}`},
		{"/invoices/a b", `{"_method":"DELETE"}`}, {"/x/../payments", `[]`}, {"/\uff50ayments", `{"a":1,"a":2}`},
	} {
		f.Add(seed[0], []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		if !json.Valid(body) {
			body = nil
		}
		params, err := json.Marshal(map[string]any{"provider": "erp", "method": "POST", "path": path, "atom": "erp.model.pay", "body": json.RawMessage(body)})
		if err != nil {
			return
		}
		run := &broker.Run{ID: "r_01jf0000000000000000000000"}
		p, err := s.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: ActionCall, Params: params})
		if err != nil {
			return
		}
		c := p.State.(*call)
		if c.ambiguous != "" {
			if p.Effect.Ambiguous == "" {
				t.Fatal("an ambiguous call is not refused")
			}
			return
		}
		checkCanonical(t, c)
		if c.body != nil && strictjson.Check(c.body) != nil {
			t.Fatalf("body %q accepted", c.body)
		}
		// The canonical path is its own canonical form.
		rel := strings.TrimPrefix(c.path, c.prov.basePath)
		again, _, err := c.prov.resolvePath(rel)
		if err != nil || c.prov.basePath+again != c.path {
			t.Fatalf("%q: canonical %q resolves again to %q (%v)", path, c.path, again, err)
		}
	})
}

// checkCanonical checks the invariants of an accepted call's path and
// that net/http sends exactly it.
func checkCanonical(t *testing.T, c *call) {
	t.Helper()
	for i, seg := range strings.Split(c.path, "/") {
		if seg == "." || seg == ".." || seg == "" && i > 0 && i < len(strings.Split(c.path, "/"))-1 {
			t.Fatalf("path %q has a dot or empty segment", c.path)
		}
	}
	if strings.ContainsAny(c.path, ";\\") || strings.Contains(strings.ToUpper(c.path), "%2F") || strings.Contains(strings.ToUpper(c.path), "%25") {
		t.Fatalf("path %q is not canonical", c.path)
	}
	req, err := http.NewRequest(c.method, c.canon.URL(), nil)
	if err != nil {
		t.Fatalf("%q: %v", c.canon.URL(), err)
	}
	want := c.path
	if c.rawQuery != "" {
		want += "?" + c.rawQuery
	}
	if got := req.URL.RequestURI(); got != want {
		t.Fatalf("net/http sends %q for the canonical %q", got, want)
	}
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
			if (p.scheme != "http" && p.scheme != "https") || p.host == "" || p.port < 1 {
				t.Fatalf("provider %q base %s://%s:%d", p.Name, p.scheme, p.host, p.port)
			}
		}
	})
}
