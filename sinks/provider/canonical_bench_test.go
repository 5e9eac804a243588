package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

// bigCatalogue is a provider with n operations over n/4 resources (four
// templates each), like a large API's catalogue.
func bigCatalogue(b *testing.B, n int) *Catalogue {
	var sb strings.Builder
	sb.WriteString("providers:\n  - {name: erp, base_url: https://erp.example.com/api, auth: {type: none}}\nintegrations:\n  - name: erp.all\n    provider: erp\n    effect: write\n    origin: shipped\n    operations:\n")
	for i := range n / 4 {
		fmt.Fprintf(&sb, "      - {method: GET, template: \"/res%d/{id}\"}\n      - {method: POST, template: /res%d}\n      - {method: GET, template: \"/res%d/{id}/lines\"}\n      - {method: POST, template: \"/res%d/{id}/approve\"}\n", i, i, i, i)
	}
	sb.WriteString("      - {method: POST, template: /payments}\n      - {method: GET, template: \"/invoices/{id}\"}\n")
	c, err := ParseCatalogue("big.yaml", []byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkCanonical is the cost of the canonical request: resolving an
// agent's path (a spelling with an upper-case letter, an escape and a
// trailing slash) against catalogues of 6 and 1,002 operations, next to
// what a naive sink does with the same path in the same run (url.Parse
// and path.Clean, which neither refuses ambiguity nor knows operations);
// and the whole Describe of a payment (params decoded strictly, path,
// query, body checked, the Effect built), no grounding.
func BenchmarkCanonical(b *testing.B) {
	const spelled = "/Invoices/INV%2D7/"
	for _, n := range []int{4, 1000} {
		p, _ := bigCatalogue(b, n).Provider("erp")
		b.Run(fmt.Sprintf("resolve/%d-operations", n+2), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rel, tmpl, err := p.resolvePath(spelled)
				if err != nil || rel != "/invoices/INV-7" || tmpl == "" {
					b.Fatal(rel, err)
				}
			}
		})
	}
	b.Run("naive-parse-clean", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			u, err := url.Parse("https://erp.example.com/api" + spelled)
			if err != nil {
				b.Fatal(err)
			}
			_ = path.Clean(u.Path)
		}
	})
	b.Run("describe-payment", func(b *testing.B) {
		s, err := New(context.Background(), nil, Config{Catalogue: bigCatalogue(b, 4)})
		if err != nil {
			b.Fatal(err)
		}
		params, _ := json.Marshal(map[string]any{"provider": "erp", "method": "post", "path": "/Payments/", "atom": "erp.all",
			"body": json.RawMessage(`{"invoice":"INV-7","iban":"NL91ABNA0417164300","amount":"1200.00","remittance_email":"ap@acme.example"}`)})
		run := &broker.Run{ID: "r_01jf0000000000000000000000"}
		req := &broker.EffectRequest{Run: run.ID, Action: ActionCall, Origin: policy.OriginModel, Params: params}
		b.ReportAllocs()
		for b.Loop() {
			p, err := s.Describe(context.Background(), run, req)
			if err != nil || p.Effect.Path != "/api/payments" || p.Effect.Ambiguous != "" {
				b.Fatal(err)
			}
		}
	})
}
