package grounding

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustLoad(t testing.TB, path string) *Rules {
	t.Helper()
	r, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLoadValid(t *testing.T) {
	for _, name := range []string{"testdata/payment.yaml", "testdata/pinned.json"} {
		r := mustLoad(t, name)
		if !strings.HasPrefix(r.Digest(), "sha256:") || len(r.Digest()) != 71 {
			t.Errorf("%s: digest %q", name, r.Digest())
		}
		if r.Name() != name {
			t.Errorf("Name() = %q", r.Name())
		}
	}
	// The digest is of the bytes: a comment changes it.
	a, _ := Parse("a.yaml", []byte("grounding: []\n"))
	b, _ := Parse("a.yaml", []byte("grounding: [] # none\n"))
	if a.Digest() == b.Digest() {
		t.Error("digest ignores bytes")
	}
	if (*Rules)(nil).Digest() != "" || Unreadable("x", nil).Digest() != "" {
		t.Error("nil or unreadable rules have a digest")
	}
	pay := mustLoad(t, "testdata/payment.yaml")
	for _, c := range []struct {
		call Call
		want bool
	}{
		{Call{Provider: "erp", Method: "POST", Path: "/payments"}, true},
		{Call{Provider: "erp", Method: "POST", Path: "/payments/"}, false},
		{Call{Provider: "erp2", Method: "POST", Path: "/payments"}, false},
	} {
		call, want := c.call, c.want
		if got := pay.Applies(call); got != want || got != pay.Check(t.Context(), Input{Call: call}).Applied {
			t.Errorf("Applies(%+v) = %v, want %v as Check", call, got, want)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
}

// A valid rule to break in one place at a time.
const base = `grounding:
  - name: pay
    match: {provider: erp, method: POST, path: /payments}
    bind:
      - name: invoice
        read: {provider: erp, path: "/invoices/{id}"}
        where: {id: request.json.invoice}
    require:
      - {field: request.json.amount, at_most: invoice.amount_due, as: money}
`

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, file, body string
		want             []string // every one must appear in the error
	}{
		{"empty", "g.yaml", "", []string{"g.yaml", "empty"}},
		{"comments only", "g.yaml", "# nothing\n", []string{"g.yaml"}},
		{"null", "g.yaml", "null\n", []string{"grounding: []"}},
		{"syntax", "g.yaml", "grounding: [\n", []string{"g.yaml"}},
		{"not json", "g.json", "grounding: []", []string{"g.json"}},
		{"two documents", "g.yaml", "grounding: []\n---\ngrounding: []\n", []string{"more than one YAML document"}},
		{"unknown top key", "g.yaml", "grounding: []\nrules: []\n", []string{"g.yaml", `unknown key "rules"`}},
		{"no grounding key", "g.yaml", "{}\n", []string{"no grounding key"}},
		{"not a list", "g.yaml", "grounding: {a: 1}\n", []string{"want a list"}},
		{"unknown rule key", "g.yaml", strings.Replace(base, "    bind:", "    bnid: []\n    bind:", 1),
			[]string{"g.yaml", `grounding[0] "pay"`, `unknown key "bnid"`}},
		{"unknown key before name", "g.yaml", "grounding:\n  - colour: red\n    name: pay\n    match: {provider: erp}\n    other_fields: deny\n",
			[]string{`grounding[0] "pay"`, `unknown key "colour"`}},
		{"no name", "g.yaml", "grounding:\n  - match: {provider: erp}\n    other_fields: deny\n", []string{"grounding[0]", "no name"}},
		{"duplicate name", "g.yaml", base + strings.TrimPrefix(base, "grounding:\n"), []string{`grounding[1] "pay"`, "already used by grounding[0]"}},
		{"no match", "g.yaml", "grounding:\n  - name: pay\n    other_fields: deny\n", []string{`"pay"`, "no match"}},
		{"match without provider", "g.yaml", strings.Replace(base, "{provider: erp, method: POST, path: /payments}", "{method: POST}", 1), []string{"names no provider"}},
		{"unknown match key", "g.yaml", strings.Replace(base, "method: POST", "verb: POST", 1), []string{`grounding[0] "pay" match`, `unknown key "verb"`}},
		{"bad match glob", "g.yaml", strings.Replace(base, "path: /payments", "path: \"/pay[\"", 1), []string{"not a valid glob"}},
		{"match path without slash", "g.yaml", strings.Replace(base, "path: /payments", "path: payments", 1), []string{"starts with /"}},
		{"partial placeholder", "g.yaml", strings.Replace(base, "path: /payments", "path: \"/pay-{id}\"", 1), []string{"whole segment"}},
		{"bad as", "g.yaml", strings.Replace(base, "as: money", "as: currency", 1), []string{`require[0] "request.json.amount"`, `unknown comparison "currency"`}},
		{"no as", "g.yaml", strings.Replace(base, ", as: money", "", 1), []string{"no as"}},
		{"unknown relation", "g.yaml", strings.Replace(base, "at_most:", "more_than:", 1), []string{`unknown key "more_than"`}},
		{"two relations", "g.yaml", strings.Replace(base, "at_most: invoice.amount_due", "at_most: invoice.amount_due, equals: invoice.amount_due", 1), []string{"one relation"}},
		{"no relation", "g.yaml", strings.Replace(base, "at_most: invoice.amount_due, ", "", 1), []string{"no relation"}},
		{"at_most on text", "g.yaml", strings.Replace(base, "as: money", "as: text", 1), []string{"at_most compares money or number"}},
		{"unbound name in require", "g.yaml", strings.Replace(base, "at_most: invoice.amount_due", "at_most: supplier.amount_due", 1), []string{`"supplier"`, "not a binding"}},
		{"request grounds request", "g.yaml", strings.Replace(base, "at_most: invoice.amount_due", "at_most: request.json.limit", 1), []string{"cannot ground another"}},
		{"field not in request", "g.yaml", strings.Replace(base, "field: request.json.amount", "field: invoice.amount", 1), []string{"value of the request"}},
		{"star in equals", "g.yaml", strings.Replace(base, "at_most: invoice.amount_due", "at_most: \"invoice.lines[*].amount\"", 1), []string{"[*] is only for one_of"}},
		{"one_of path without star", "g.yaml", strings.Replace(base, "at_most: invoice.amount_due, as: money", "one_of: invoice.currencies, as: exact", 1), []string{"ending in [*]"}},
		{"one_of bad literal", "g.yaml", strings.Replace(base, "at_most: invoice.amount_due, as: money", "one_of: [12, abc], as: money", 1), []string{"cannot be read as money"}},
		{"one_of hex literal", "g.yaml", strings.Replace(base, "at_most: invoice.amount_due, as: money", "one_of: [0x10], as: number", 1), []string{"not a plain decimal"}},
		{"one_of empty", "g.yaml", strings.Replace(base, "at_most: invoice.amount_due, as: money", "one_of: [], as: exact", 1), []string{"allows nothing"}},
		{"where names unbound binding", "g.yaml", strings.Replace(base, "where: {id: request.json.invoice}", "where: {id: supplier.invoice}", 1),
			[]string{`bind[0] "invoice" where.id`, `"supplier"`, "not bound before"}},
		{"where names itself", "g.yaml", strings.Replace(base, "where: {id: request.json.invoice}", "where: {id: invoice.id}", 1), []string{"the binding it selects"}},
		{"forward reference", "g.yaml", `grounding:
  - name: pay
    match: {provider: erp}
    bind:
      - name: invoice
        read: {provider: erp, path: "/invoices/{id}"}
        where: {id: supplier.invoice_id}
      - name: supplier
        read: {provider: erp, path: "/suppliers/{id}"}
        where: {id: invoice.supplier_id}
    other_fields: deny
`, []string{`bind[0] "invoice"`, `"supplier"`, "not bound before"}},
		{"placeholder without where", "g.yaml", strings.Replace(base, `"/invoices/{id}"`, `"/invoices/{id}/{rev}"`, 1), []string{"{rev}", "has no where"}},
		{"where without placeholder", "g.yaml", strings.Replace(base, "where: {id: request.json.invoice}", "where: {id: request.json.invoice, rev: request.json.rev}", 1), []string{`"rev" is not a placeholder`}},
		{"read without placeholder", "g.yaml", strings.Replace(base, `"/invoices/{id}"`, `"/invoices/latest"`, 1), []string{"no {placeholder}"}},
		{"read with glob", "g.yaml", strings.Replace(base, `"/invoices/{id}"`, `"/invoices/*/{id}"`, 1), []string{"literal segments"}},
		{"duplicate binding", "g.yaml", strings.Replace(base, "    require:", "      - name: invoice\n        read: {provider: erp, path: \"/x/{id}\"}\n        where: {id: request.json.x}\n    require:", 1), []string{"already bound"}},
		{"binding named request", "g.yaml", strings.Replace(base, "name: invoice", "name: request", 1), []string{"not request or input"}},
		{"input without selectors_from", "g.yaml", strings.Replace(base, "where: {id: request.json.invoice}", "where: {id: input.invoice}", 1), []string{"add selectors_from: [input]"}},
		{"request selector with selectors_from input", "g.yaml", strings.Replace(base, "    bind:", "    selectors_from: [input]\n    bind:", 1), []string{"selectors_from: [input]; use an input. path"}},
		{"unknown selectors source", "g.yaml", strings.Replace(base, "    bind:", "    selectors_from: [email]\n    bind:", 1), []string{`unknown source "email"`}},
		{"bad fresh", "g.yaml", strings.Replace(base, "    bind:", "    fresh: always\n    bind:", 1), []string{`unknown value "always"`}},
		{"bad max age", "g.yaml", strings.Replace(base, "    bind:", "    max_age_seconds: 1.5\n    bind:", 1), []string{"whole number of seconds"}},
		{"zero max age", "g.yaml", strings.Replace(base, "    bind:", "    max_age_seconds: 0\n    bind:", 1), []string{"whole number of seconds"}},
		{"bad other_fields", "g.yaml", base + "    other_fields: refuse\n", []string{`unknown value "refuse"`}},
		{"checks nothing", "g.yaml", "grounding:\n  - name: pay\n    match: {provider: erp}\n", []string{"checks nothing"}},
		{"request.path without placeholder", "g.yaml", strings.Replace(base, "field: request.json.amount", "field: request.path.amount", 1), []string{"no {amount} placeholder"}},
		{"request.form nested", "g.yaml", strings.Replace(base, "field: request.json.amount", "field: request.form.a.b", 1), []string{"exactly one name"}},
		{"unknown request part", "g.yaml", strings.Replace(base, "field: request.json.amount", "field: request.header.amount", 1), []string{`unknown part of the request "header"`}},
		{"bad index", "g.yaml", strings.Replace(base, "field: request.json.amount", "field: \"request.json.lines[x]\"", 1), []string{"not a list index"}},
		{"alias", "g.yaml", "grounding:\n  - &r {name: a, match: {provider: erp}, other_fields: deny}\n  - *r\n", []string{"aliases"}},
		{"duplicate key", "g.yaml", "grounding: []\ngrounding: []\n", []string{"appears twice"}},
		{"duplicate key in json", "g.json", `{"grounding": [], "grounding": []}`, []string{"appears twice"}},
		{"unknown key in json rule", "g.json", `{"grounding": [{"name": "a", "match": {"provider": "erp"}, "other_fields": "deny", "extra": 1}]}`, []string{"g.json", `grounding[0] "a"`, `unknown key "extra"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(tt.file, []byte(tt.body))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tt.body)
			}
			if r != nil {
				t.Fatal("Parse returned rules and an error")
			}
			if !errors.Is(err, ErrInvalidRules) {
				t.Errorf("error does not wrap ErrInvalidRules: %v", err)
			}
			msg := err.Error()
			for _, w := range append([]string{tt.file}, tt.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	for name, body := range map[string]string{
		"no rules":       "grounding: []\n",
		"only deny":      "grounding:\n  - name: lock\n    match: {provider: erp, path: /notes/**}\n    other_fields: deny\n",
		"path list":      strings.Replace(base, "path: /payments", "path: [/payments, /v2/payments]", 1),
		"one_of literal": strings.Replace(base, "at_most: invoice.amount_due, as: money", "one_of: [EUR, USD], as: exact", 1),
		"one_of numbers": strings.Replace(base, "at_most: invoice.amount_due, as: money", "one_of: [10, 20.50], as: money", 1),
		"star path":      strings.Replace(base, "at_most: invoice.amount_due, as: money", "one_of: \"invoice.lines[*].amount\", as: money", 1),
		"json file":      `{"grounding": []}`,
	} {
		if _, err := Parse(name+".yaml", []byte(body)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestUnreadableRefusesEveryCall(t *testing.T) {
	_, err := Parse("g.yaml", []byte(strings.Replace(base, "as: money", "as: currency", 1)))
	r := Unreadable("g.yaml", err)
	for _, call := range []Call{
		{Provider: "erp", Method: "POST", Path: "/payments"},
		{Provider: "crm", Method: "GET", Path: "/contacts"},
		{},
	} {
		res := r.Check(t.Context(), Input{Call: call})
		if !r.Applies(call) || (*Rules)(nil).Applies(call) {
			t.Errorf("%+v: Applies disagrees with Check", call)
		}
		if !res.Applied || len(res.Failures) != 1 || res.Rule != UnreadableRule {
			t.Fatalf("%+v: %+v", call, res)
		}
		if !strings.Contains(res.Failures[0], "g.yaml") || !strings.Contains(res.Failures[0], "currency") {
			t.Errorf("failure does not name file and problem: %s", res.Failures[0])
		}
	}
	if r.Keeps("erp", "/invoices/7") {
		t.Error("unreadable rules keep records")
	}
}
