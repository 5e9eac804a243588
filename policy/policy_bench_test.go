package policy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchRules returns a rules file of n deny rules of which only the last
// matches a Stripe charge. Rules alternate between the rules section
// (provider, declared effect, methods) and the effects section (a target
// glob over host and path); the matching one is an effects rule, checked
// after every rules entry. policy/opabench generates the same rule sets for
// OPA.
func benchRules(n int) string {
	var rules, effects strings.Builder
	for i := 0; i < n-1; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&rules, "  - name: no-vendor-%d-writes\n    decision: deny\n    match: {provider: vendor-%d, effect: [write, destructive], method: [POST, PUT]}\n", i, i)
		} else {
			fmt.Fprintf(&effects, "  - name: no-vendor-%d-api\n    decision: deny\n    match: {sink: provider, target: \"api.vendor-%d.com/v1/*\"}\n", i, i)
		}
	}
	effects.WriteString("  - name: no-stripe-charges\n    decision: deny\n    match: {sink: provider, target: \"api.stripe.com/v1/*\"}\n")
	return "rules:\n" + rules.String() + "effects:\n" + effects.String()
}

// benchCharge is a realistic provider call: a shipped integration creating
// a charge, for a person with a mandate.
func benchCharge(provider string) Input {
	return Input{
		Mode: ModeStrict,
		Now:  now,
		Authority: Authority{
			For:     Principal{Tenant: "acme", Person: "ada"},
			Mandate: &Mandate{Systems: []string{"stripe", "acme"}, Effects: []EffectClass{EffectRead, EffectWrite}, ExpiresAt: now.Add(time.Hour)},
			Scopes:  []string{"payments.write"},
		},
		Effect: Effect{Sink: SinkProvider, Action: "call", Origin: OriginShipped, Provider: provider,
			Method: "POST", Host: "api." + provider + ".com", Path: "/v1/charges", Target: "api." + provider + ".com/v1/charges",
			Atom: provider + ".charges.create", Declared: EffectWrite,
			Contract: &Contract{Operations: []Operation{{Method: "POST", Template: "/v1/charges"}}}},
	}
}

// BenchmarkDecide decides provider calls under 1 and 100 deny rules:
// "deny" is refused by the last rule, "allow" matches none. p50-ns and
// p99-ns come from individually timed decisions (clock reads included).
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{1, 100} {
		p, err := Parse("bench.yaml", []byte(benchRules(n)))
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name    string
			in      Input
			verdict Verdict
		}{{"deny", benchCharge("stripe"), VerdictRefuse}, {"allow", benchCharge("acme"), VerdictAllow}} {
			b.Run(fmt.Sprintf("rules=%d/%s", n, c.name), func(b *testing.B) {
				if d := p.Decide(c.in); d.Verdict != c.verdict {
					b.Fatalf("decided %v (%s %s), want %v", d.Verdict, d.Refusal, d.Rule, c.verdict)
				}
				b.ReportAllocs()
				for b.Loop() {
					p.Decide(c.in)
				}
				const samples = 200_000
				d := make([]time.Duration, samples)
				for i := range d {
					t0 := time.Now()
					p.Decide(c.in)
					d[i] = time.Since(t0)
				}
				slices.Sort(d)
				b.ReportMetric(float64(d[samples/2]), "p50-ns")
				b.ReportMetric(float64(d[samples*99/100]), "p99-ns")
			})
		}
	}
}

// BenchmarkParse compiles the 100-rule file.
func BenchmarkParse(b *testing.B) {
	src := []byte(benchRules(100))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("bench.yaml", src); err != nil {
			b.Fatal(err)
		}
	}
}
