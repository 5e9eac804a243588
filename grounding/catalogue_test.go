package grounding

import (
	"errors"
	"strings"
	"testing"
)

// testCatalogue is a Catalogue written out: per provider its base path and
// operations.
type testCatalogue map[string]struct {
	base string
	ops  []Operation
}

func (c testCatalogue) Operations(p string) ([]Operation, bool) { e, ok := c[p]; return e.ops, ok }
func (c testCatalogue) BasePath(p string) string                { return c[p].base }

var apiERP = testCatalogue{"erp": {base: "/api", ops: []Operation{
	{"erp.pay", "POST", "/api/payments"},
	{"erp.read", "GET", "/api/invoices/{id}"},
	{"erp.read", "GET", "/api/suppliers/{supplier}"},
	{"erp.refund", "POST", "/api/payments/{id}/refund"},
}}}

const readmeRule = `grounding:
  - name: supplier-payment
    match: {provider: erp, method: POST, path: PATH}
    bind:
      - {name: invoice, read: {provider: erp, path: "READ"}, where: {id: request.json.invoice}}
    require:
      - {field: request.json.amount, at_most: invoice.amount_due, as: money}
`

func ruleWith(t *testing.T, path, read string) *Rules {
	t.Helper()
	r, err := Parse("grounding.yaml", []byte(strings.NewReplacer("PATH", path, "READ", read).Replace(readmeRule)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestResolveAgainstTheCatalogue: a rule binds to the operations it fits;
// one that fits none, a path written relative to a base_url with a path,
// and a read no integration declares are load errors naming the file, the
// rule, the part and what to write.
func TestResolveAgainstTheCatalogue(t *testing.T) {
	r, err := ruleWith(t, "/api/payments", "/api/invoices/{id}").Resolve(apiERP)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Resolved(); len(got) != 1 || len(got[0].Operations) != 1 || got[0].Operations[0].String() != "erp.pay POST /api/payments" {
		t.Fatalf("resolved %+v", got)
	}
	r, err = ruleWith(t, "/api/payments/**", "/api/invoices/{id}").Resolve(apiERP)
	if err != nil || len(r.Resolved()[0].Operations) != 2 {
		t.Fatalf("a glob: %v %+v", err, r.Resolved())
	}

	for _, tc := range []struct {
		path, read string
		want       []string
	}{
		{"/payments", "/api/invoices/{id}", []string{`rule[0] "supplier-payment" match.path: /payments fits no operation`, "write /api/payments"}},
		{"/api/Payments", "/api/invoices/{id}", []string{"as the catalogue spells it: /api/payments"}},
		{"/api/payments/", "/api/invoices/{id}", []string{"as the catalogue spells it: /api/payments"}},
		{"/api/refunds", "/api/invoices/{id}", []string{"match an operation the catalogue declares (POST /api/payments"}},
		{"/api/payments", "/invoices/{id}", []string{`bind[0] invoice read: no integration of erp declares GET /invoices/{id}`, "write /api/invoices/{id}"}},
		{"/api/payments", "/api/bills/{id}", []string{"read a path an integration declares (GET /api/invoices/{id}"}},
	} {
		_, err := ruleWith(t, tc.path, tc.read).Resolve(apiERP)
		if !errors.Is(err, ErrInvalidRules) || !strings.Contains(err.Error(), "grounding.yaml") {
			t.Errorf("%s %s: %v", tc.path, tc.read, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s: %v, want %q", tc.path, tc.read, err, w)
			}
		}
	}

	probs := ruleWith(t, "/api/payments", "/api/invoices/{id}").CheckCatalogue(testCatalogue{})
	if len(probs) != 2 || probs[0].Part != "match.provider" || !strings.Contains(probs[1].Problem, `provider "erp" is not in the provider catalogue`) {
		t.Fatalf("unknown provider: %+v", probs)
	}
	r2, err := Parse("g.yaml", []byte(strings.NewReplacer("method: POST", "method: [POST, DELETE]", "PATH", "/api/payments", "READ", "/api/invoices/{id}").Replace(readmeRule)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Resolve(apiERP); err == nil || !strings.Contains(err.Error(), "match.method: no operation the catalogue declares for erp is a DELETE") {
		t.Fatalf("a method nothing declares: %v", err)
	}
	bad := Unreadable("g.yaml", errors.New("line 2: colour"))
	if got, err := bad.Resolve(apiERP); err != nil || got != bad {
		t.Fatalf("unreadable rules resolve to %v, %v", got, err)
	}
	if p := bad.CheckCatalogue(apiERP); len(p) != 1 || !strings.Contains(p[0].Problem, "colour") {
		t.Fatalf("unreadable rules: %+v", p)
	}
	if _, err := (*Rules)(nil).Resolve(apiERP); err != nil {
		t.Fatal(err)
	}
}
