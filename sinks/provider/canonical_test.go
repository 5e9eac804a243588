package provider

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

const canonicalCatalogue = `providers:
  - {name: erp, base_url: "https://ERP.Example.com:443/api", auth: {type: none}}
  - {name: strict, base_url: "http://127.0.0.1:8080", auth: {type: none}, path_case: sensitive}
  - {name: dj, base_url: "https://dj.example.com", auth: {type: none}}
integrations:
  - name: erp.pay
    provider: erp
    effect: write
    origin: shipped
    operations:
      - {method: POST, template: /payments}
      - {method: GET, template: "/invoices/{id}"}
      - {method: GET, template: /invoices/search}
      - {method: GET, template: /}
  - {name: strict.pay, provider: strict, effect: write, origin: shipped, operations: [{method: POST, template: /payments}]}
  - {name: dj.pay, provider: dj, effect: write, origin: shipped, operations: [{method: POST, template: /payments/}]}
`

func canonicalCat(t testing.TB) *Catalogue {
	t.Helper()
	c, err := ParseCatalogue("canonical.yaml", []byte(canonicalCatalogue))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCanonicalPath is the package documentation's table of spellings:
// each is sent as one canonical path, or refused as ambiguous (or
// malformed) before anything is sent.
func TestCanonicalPath(t *testing.T) {
	cat := canonicalCat(t)
	for _, tc := range []struct {
		provider, path string
		want           string // the path as sent, base path included
		tmpl           string // the operation it was resolved to
		ambiguous      string // a word of the reason, for a refused spelling
		bad            bool   // BAD_REQUEST
	}{
		{provider: "erp", path: "/payments", want: "/api/payments", tmpl: "/payments"},
		{provider: "erp", path: "payments/", want: "/api/payments", tmpl: "/payments"},
		{provider: "erp", path: "/Payments", want: "/api/payments", tmpl: "/payments"},
		{provider: "erp", path: "/PAYMENTS/", want: "/api/payments", tmpl: "/payments"},
		{provider: "erp", path: "/pay%6Dents", want: "/api/payments", tmpl: "/payments"},
		{provider: "erp", path: "/payment\u017f", ambiguous: "compatibility"}, // long s: NFKC makes it s
		{provider: "erp", path: "/\u212aeys", ambiguous: "compatibility"},     // Kelvin sign: NFC makes it K
		{provider: "erp", path: "/INVOICES/INV-7/", want: "/api/invoices/INV-7", tmpl: "/invoices/{id}"},
		{provider: "erp", path: "/invoices/Search", want: "/api/invoices/search", tmpl: "/invoices/search"},
		{provider: "erp", path: "/invoices/a b", want: "/api/invoices/a%20b", tmpl: "/invoices/{id}"},
		{provider: "erp", path: "/invoices/caf%c3%a9", want: "/api/invoices/caf%C3%A9", tmpl: "/invoices/{id}"},
		{provider: "erp", path: "/invoices/café", want: "/api/invoices/caf%C3%A9", tmpl: "/invoices/{id}"},
		{provider: "erp", path: "/invoices/%7e!", want: "/api/invoices/~%21", tmpl: "/invoices/{id}"},
		{provider: "erp", path: "/", want: "/api/", tmpl: "/"},
		{provider: "erp", path: "/reports/Q1/", want: "/api/reports/Q1/"},
		{provider: "erp", path: "/payments/x", want: "/api/payments/x"},
		{provider: "dj", path: "/payments", want: "/payments/", tmpl: "/payments/"},
		{provider: "dj", path: "/Payments/", want: "/payments/", tmpl: "/payments/"},
		{provider: "strict", path: "/payments", want: "/payments", tmpl: "/payments"},
		{provider: "strict", path: "/payments/", want: "/payments", tmpl: "/payments"},
		{provider: "strict", path: "/Payments", ambiguous: "only in case"},
		{provider: "erp", path: "/payments;x", ambiguous: "';'"},
		{provider: "erp", path: "/payments;", ambiguous: "';'"},
		{provider: "erp", path: "/payments%2F", ambiguous: "encoded /"},
		{provider: "erp", path: "/payments%2f..", ambiguous: "encoded /"},
		{provider: "erp", path: "/payments%5C", ambiguous: "encoded /"},
		{provider: "erp", path: "/payments%2e", ambiguous: "encoded ."},
		{provider: "erp", path: "/payments%3B", ambiguous: "encoded ;"},
		{provider: "erp", path: "/payments%252F", ambiguous: "encoded %"},
		{provider: "erp", path: "/payments%00", ambiguous: "control"},
		{provider: "erp", path: "/payments%", ambiguous: "escape"},
		{provider: "erp", path: "/payments%zz", ambiguous: "escape"},
		{provider: "erp", path: "/payments%ff", ambiguous: "UTF-8"},
		{provider: "erp", path: "//payments", ambiguous: "empty segment"},
		{provider: "erp", path: "/x//payments", ambiguous: "empty segment"},
		{provider: "erp", path: "/./payments", ambiguous: "\".\""},
		{provider: "erp", path: "/x/../payments", ambiguous: "\"..\""},
		{provider: "erp", path: "/payments\\", ambiguous: "backslash"},
		{provider: "erp", path: "/\uff50ayments", ambiguous: "compatibility"},
		{provider: "erp", path: "/payments\u2024", ambiguous: "compatibility"}, // one dot leader
		{provider: "erp", path: "/cafe\u0301", ambiguous: "compatibility"},     // decomposed accent
		{provider: "erp", path: "/pay\u200bments", ambiguous: "format"},
		{provider: "erp", path: "/pay\u00adments", ambiguous: "format"},
		{provider: "erp", path: "/payments.json", ambiguous: "suffix"}, // Rails formats, Spring suffix patterns
		{provider: "erp", path: "/Payments.JSON/", ambiguous: "suffix"},
		{provider: "erp", path: "/payments.", ambiguous: "suffix"},    // IIS trims trailing dots
		{provider: "erp", path: "/payments%20", ambiguous: "suffix"},  // and spaces
		{provider: "erp", path: "/payments%3Fx", ambiguous: "suffix"}, // a proxy that decodes ? before it forwards
		{provider: "erp", path: "/payments%23", ambiguous: "suffix"},
		{provider: "erp", path: "/payments::$DATA", ambiguous: "suffix"}, // an NTFS stream
		{provider: "erp", path: "/payments+", ambiguous: "suffix"},
		{provider: "erp", path: "/%20payments", ambiguous: "white space"},
		{provider: "erp", path: "/payments\u2028", ambiguous: "suffix"},
		{provider: "erp", path: "/%20/payments", ambiguous: "only white space"},
		{provider: "erp", path: "/.../payments", ambiguous: "only white space or dots"},
		{provider: "erp", path: "/payments%3F/x/y", ambiguous: "suffix"},
		{provider: "erp", path: "/payments%23x/y", ambiguous: "suffix"},
		{provider: "erp", path: "/invoices.xml/INV-7", ambiguous: "suffix"},
		{provider: "strict", path: "/Payments.json", ambiguous: "suffix"},
		{provider: "erp", path: "/invoices/INV-7.json", want: "/api/invoices/INV-7.json", tmpl: "/invoices/{id}"},
		{provider: "erp", path: "/reports/q1.csv", want: "/api/reports/q1.csv"},
		{provider: "erp", path: "/.well-known", want: "/api/.well-known"},
		{provider: "erp", path: "", bad: true},
		{provider: "erp", path: "/payments?x=1", bad: true},
		{provider: "erp", path: "/payments#x", bad: true},
		{provider: "erp", path: "/pay\x00ments", bad: true},
		{provider: "erp", path: "/pay\nments", bad: true},
		{provider: "erp", path: "/" + strings.Repeat("a", 2048), bad: true},
	} {
		p, _ := cat.Provider(tc.provider)
		rel, tmpl, err := p.resolvePath(tc.path)
		var amb *AmbiguousError
		switch {
		case tc.bad:
			if err == nil || errors.As(err, &amb) {
				t.Errorf("%s %q: %v, want BAD_REQUEST", tc.provider, tc.path, err)
			}
		case tc.ambiguous != "":
			if !errors.As(err, &amb) || !strings.Contains(amb.Reason, tc.ambiguous) {
				t.Errorf("%s %q: %v, want ambiguous (%s)", tc.provider, tc.path, err, tc.ambiguous)
			}
		case err != nil:
			t.Errorf("%s %q: %v", tc.provider, tc.path, err)
		case p.basePath+rel != tc.want || tmpl != tc.tmpl:
			t.Errorf("%s %q = %q (template %q), want %q (%q)", tc.provider, tc.path, p.basePath+rel, tmpl, tc.want, tc.tmpl)
		default:
			// What net/http sends for it is exactly it, and it is its own
			// canonical form.
			c := Canonical{Scheme: p.scheme, Host: p.host, Port: p.port, Method: "GET", Path: p.basePath + rel}
			req, err := http.NewRequest("GET", c.URL(), nil)
			if err != nil || req.URL.RequestURI() != c.Path {
				t.Errorf("%s %q: net/http sends %v (%v), want %q", tc.provider, tc.path, req.URL.RequestURI(), err, c.Path)
			}
			if again, _, err := p.resolvePath(rel); err != nil || again != rel {
				t.Errorf("%s %q: canonical %q resolves to %q (%v)", tc.provider, tc.path, rel, again, err)
			}
		}
	}
}

func TestCanonicalHost(t *testing.T) {
	cat := canonicalCat(t)
	for name, want := range map[string]string{"erp": "https://erp.example.com/api/payments", "strict": "http://127.0.0.1:8080/payments"} {
		p, _ := cat.Provider(name)
		c := Canonical{Scheme: p.scheme, Host: p.host, Port: p.port, Path: p.basePath + "/payments"}
		if c.URL() != want {
			t.Errorf("%s: %q, want %q", name, c.URL(), want)
		}
	}
	c := Canonical{Scheme: "https", Host: "::1", Port: 8443, Path: "/", Query: url.Values{"b": {"2", "1"}, "a": {"x y"}}}
	c.RawQuery = c.Query.Encode()
	if c.URL() != "https://[::1]:8443/?a=x+y&b=2&b=1" || c.Authority() != "[::1]:8443" {
		t.Errorf("URL %q, authority %q", c.URL(), c.Authority())
	}
}

// TestCatalogueTemplates: the catalogue holds templates in the form they
// are sent, and never two that one path could fit in two spellings.
func TestCatalogueTemplates(t *testing.T) {
	for _, tc := range []struct{ ops, want string }{
		{`[{method: POST, template: /payments}, {method: GET, template: /Payments}]`, "differ only in case"},
		{`[{method: POST, template: /payments}, {method: GET, template: /payments/}]`, "trailing /"},
		{`[{method: POST, template: "/pay%6Dents"}]`, "not written as it is sent"},
		{`[{method: POST, template: "/caf\u00e9"}]`, "not written as it is sent"},
		{`[{method: POST, template: "/a//b"}]`, "empty segment"},
		{`[{method: POST, template: "/a/../b"}]`, "\"..\""},
		{`[{method: POST, template: "/a;b"}]`, "';'"},
		{`[{method: POST, template: "/x{id}"}]`, "whole segment"},
		{`[{method: POST, template: "payments"}]`, "must start with /"},
	} {
		doc := "providers:\n  - {name: erp, base_url: https://erp.example.com, auth: {type: none}}\nintegrations:\n  - {name: erp.x, provider: erp, effect: write, origin: shipped, operations: " + tc.ops + "}\n"
		if _, err := ParseCatalogue("c.yaml", []byte(doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.ops, err, tc.want)
		}
	}
	for _, bad := range []string{"https://erp.example.com/a;b", "https://erp.example.com/a//b", "https://erp.example.com/a%2Fb", "https://erp.example.com/a/../b"} {
		doc := "providers:\n  - {name: erp, base_url: \"" + bad + "\", auth: {type: none}}\n"
		if _, err := ParseCatalogue("c.yaml", []byte(doc)); err == nil {
			t.Errorf("base_url %s accepted", bad)
		}
	}
	for _, h := range []string{"X-HTTP-Method-Override", "X_HTTP_METHOD_OVERRIDE", "x-http-method", "X-Method-Override", "X-Original-URL", "X_Rewrite_Url",
		"Content-Encoding", "content-type", "Content-Range", "Content_Length", "X-Forwarded-Host", "X-Forwarded-Uri", "X-Real-IP", "Destination",
		"Idempotency_Key", "X_Api_Key"} {
		doc := "providers:\n  - {name: erp, base_url: https://erp.example.com, auth: {type: header, header: X-Api-Key}, idempotency_header: Idempotency-Key, headers_allowed: [Accept, " + h + "]}\n"
		if _, err := ParseCatalogue("c.yaml", []byte(doc)); err == nil || !strings.Contains(err.Error(), "may not come from an agent") {
			t.Errorf("headers_allowed %s: %v", h, err)
		}
	}
	if _, err := ParseCatalogue("c.yaml", []byte("providers:\n  - {name: erp, base_url: https://erp.example.com, auth: {type: none}, headers_allowed: [Accept, X-Request-Id, If-Match, Prefer]}\n")); err != nil {
		t.Errorf("ordinary headers: %v", err)
	}
}

// TestPathAs: a whole path sent through another provider of the server,
// as a provider would send it: under its base path (ignoring case unless
// its paths are case-sensitive), in its templates' spelling.
func TestPathAs(t *testing.T) {
	c, err := ParseCatalogue("c.yaml", []byte(`providers:
  - {name: ci, base_url: "https://erp.example.com/api", auth: {type: none}}
  - {name: cs, base_url: "https://erp.example.com/api", auth: {type: none}, path_case: sensitive}
  - {name: root, base_url: "https://erp.example.com", auth: {type: none}}
integrations:
  - {name: ci.w, provider: ci, effect: write, origin: shipped, operations: [{method: POST, template: /payments}, {method: PUT, template: "/suppliers/{id}"}]}
  - {name: cs.w, provider: cs, effect: write, origin: shipped, operations: [{method: POST, template: /payments}]}
  - {name: root.w, provider: root, effect: write, origin: shipped, operations: [{method: POST, template: /api/payments}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ prov, full, want string }{
		{"ci", "/api/Payments", "/api/payments"},
		{"ci", "/API/PAYMENTS", "/api/payments"},
		{"ci", "/api/Suppliers/S-1", "/api/suppliers/S-1"},
		{"ci", "/api", "/api/"},
		{"ci", "/apix/payments", ""},
		{"ci", "/other/payments", ""},
		{"cs", "/api/Payments", ""},
		{"cs", "/API/payments", ""},
		{"cs", "/api/payments", "/api/payments"},
		{"root", "/API/Payments", "/api/payments"},
	} {
		p, _ := c.Provider(tc.prov)
		if got := p.pathAs(tc.full); got != tc.want {
			t.Errorf("%s.pathAs(%s) = %q, want %q", tc.prov, tc.full, got, tc.want)
		}
	}
}
