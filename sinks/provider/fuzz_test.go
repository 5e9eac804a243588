package provider

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"
	"pgregory.net/rapid"

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
func fuzzSink(f testing.TB) (*Catalogue, *Sink) {
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
		checkNoServerReadsAnother(t, s.cat, c)
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

// serverReadings are the paths servers may route a request for sent (a
// path as sent, escaped) on, each folded for case and compatibility
// forms: decoded once or twice, ended at a decoded "?" or "#", "\" as
// "/", ";" parameters dropped, segments cut at a format suffix, ":", "+"
// or white space, white space and dots trimmed, dot and empty segments
// resolved, a trailing slash dropped. A model of Rails, Spring, Tomcat,
// IIS, ASP.NET, Express and decoding proxies, for the property that no
// accepted spelling routes to an operation other than the one it was
// decided as.
func serverReadings(sent string) []string {
	once, err := url.PathUnescape(sent)
	if err != nil {
		return nil
	}
	twice, err := url.PathUnescape(once)
	if err != nil {
		twice = once
	}
	var out []string
	for _, p := range []string{once, twice, cutQuery(once), cutQuery(twice)} {
		for _, cut := range []bool{false, true} {
			p := strings.ReplaceAll(p, "\\", "/")
			segs := strings.Split(p, "/")
			for i, sg := range segs {
				sg, _, _ = strings.Cut(sg, ";")
				if cut {
					if j := strings.IndexFunc(sg, func(r rune) bool { return strings.ContainsRune(".:+", r) || unicode.IsSpace(r) }); j > 0 {
						sg = sg[:j]
					}
				}
				if sg != "." && sg != ".." {
					sg = strings.TrimRightFunc(sg, func(r rune) bool { return r == '.' || unicode.IsSpace(r) })
					sg = strings.TrimLeftFunc(sg, unicode.IsSpace)
				}
				segs[i] = sg
			}
			r := path.Clean("/" + strings.Join(segs, "/"))
			out = append(out, strictjson.FoldKey(norm.NFKC.String(r)))
		}
	}
	return out
}

// cutQuery ends a decoded path at a "?" or "#", as a proxy that decodes
// before it forwards makes the rest a query.
func cutQuery(p string) string {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return p[:i]
	}
	return p
}

// fitsFolded reports whether a folded reading fits a template (joined to
// the base path): as many segments, literals equal folded, a placeholder
// any non-empty segment.
func fitsFolded(reading, tmpl string) bool {
	rs := strings.Split(strings.TrimSuffix(reading, "/"), "/")
	ts := strings.Split(strings.TrimSuffix(tmpl, "/"), "/")
	if len(rs) != len(ts) {
		return false
	}
	for i, t := range ts {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if rs[i] == "" {
				return false
			}
			continue
		}
		if strictjson.FoldKey(t) != rs[i] {
			return false
		}
	}
	return true
}

// checkNoServerReadsAnother checks that no server reading of an accepted
// call's path routes to a catalogued operation other than the one the
// call was resolved to (none, for a path that fits none).
func checkNoServerReadsAnother(t *testing.T, cat *Catalogue, c *call) {
	t.Helper()
	var tmpls []string
	for _, in := range cat.Integrations {
		if in.Provider != c.prov.Name {
			continue
		}
		for _, op := range in.Operations {
			tmpls = append(tmpls, c.prov.basePath+op.Template)
		}
	}
	for _, r := range serverReadings(c.path) {
		for _, tm := range tmpls {
			if fitsFolded(r, tm) && !fitsFolded(r, c.canon.Operation) {
				t.Fatalf("%s is sent for operation %q, but a server may read it as %s, which is operation %s", c.path, c.canon.Operation, r, tm)
			}
		}
	}
}

// TestNoServerReadsAnotherOperation is the property FuzzCanonical checks
// too, over paths made of the pieces spelling attacks use: whatever path
// the sink accepts, no server reading of what it sends routes to another
// operation than the one decided on.
func TestNoServerReadsAnotherOperation(t *testing.T) {
	cat, s := fuzzSink(t)
	pieces := []string{"payments", "Payments", "invoices", "INV-7", "/", "//", ".", "..", "json", "%2e", "%2E", "%20", "%09", ";", ";x", "x",
		"\\", "%5c", "%2f", "%3F", "%23", "%3A", ":", "+", "%2B", "%u002e", "~", "%7e", "\u2028", "\u00a0", " ", "\u017f", "\u212a", "\u0130",
		"\uff50", "\u200b", "%c0%ae", "%25", "%252e", "-", "_", "!", "$", "*", "'", "(", ")", "@", "="}
	rapid.Check(t, func(rt *rapid.T) {
		var b strings.Builder
		b.WriteByte('/')
		for range rapid.IntRange(1, 6).Draw(rt, "n") {
			b.WriteString(rapid.SampledFrom(pieces).Draw(rt, "piece"))
		}
		method := rapid.SampledFrom([]string{"POST", "GET"}).Draw(rt, "method")
		params, _ := json.Marshal(map[string]any{"provider": "erp", "method": method, "path": b.String(), "atom": "erp.model.pay"})
		run := &broker.Run{ID: "r_01jf0000000000000000000000"}
		p, err := s.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: ActionCall, Params: params})
		if err != nil {
			return
		}
		c := p.State.(*call)
		if c.ambiguous == "" {
			checkCanonical(t, c)
			checkNoServerReadsAnother(t, cat, c)
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

// FuzzPathAs: a whole path read by another provider of the server never
// panics; what pathAs gives is under the provider's base path, read the
// same way again (its own spelling), and, resolved as a call of the
// provider, the path that provider would send.
func FuzzPathAs(f *testing.F) {
	for _, s := range []string{"/api/v1/Payments", "/API/V1/invoices/INV-7/", "/api/v1", "/api/v1x", "/api/v1/%2e%2e/x", "/api/v1/payments;x", "", "/"} {
		f.Add(s)
	}
	cat, _ := fuzzSink(f)
	p, _ := cat.Provider("erp")
	f.Fuzz(func(t *testing.T, full string) {
		got := p.pathAs(full)
		if got == "" {
			return
		}
		if !strings.HasPrefix(got, p.basePath+"/") {
			t.Fatalf("pathAs(%q) = %q, not under %s", full, got, p.basePath)
		}
		if again := p.pathAs(got); again != got {
			t.Fatalf("pathAs(%q) = %q, but pathAs(%q) = %q", full, got, got, again)
		}
		rel, _, err := p.resolvePath(got[len(p.basePath):])
		if err != nil || p.basePath+rel != got {
			t.Fatalf("pathAs(%q) = %q, which the provider sends as %q (%v)", full, got, p.basePath+rel, err)
		}
	})
}
