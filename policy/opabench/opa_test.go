package opabench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/policy"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// spec is one deployment deny rule, from which both the Gatehouse rules
// file and the Rego rule are generated. Exactly one of provider or target
// is set: provider rules go to the rules section, target rules to effects.
type spec struct {
	name     string
	provider string
	effects  []string
	methods  []string
	target   string // glob, sink provider
}

// ruleSet returns n deny rules; only the last matches a Stripe charge.
// Rules alternate between the two sections, and the matching one is an
// effects rule, which Gatehouse checks after every rules entry, so it is
// last in both engines' order.
func ruleSet(n int) []spec {
	var rs []spec
	for i := 0; i < n-1; i++ {
		if i%2 == 0 {
			rs = append(rs, spec{name: fmt.Sprintf("no-vendor-%d-writes", i), provider: fmt.Sprintf("vendor-%d", i),
				effects: []string{"write", "destructive"}, methods: []string{"POST", "PUT"}})
		} else {
			rs = append(rs, spec{name: fmt.Sprintf("no-vendor-%d-api", i), target: fmt.Sprintf("api.vendor-%d.com/v1/*", i)})
		}
	}
	return append(rs, spec{name: "no-stripe-charges", target: "api.stripe.com/v1/*"})
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

func yamlFile(rs []spec) string {
	var rules, effects strings.Builder
	for _, r := range rs {
		if r.provider != "" {
			fmt.Fprintf(&rules, "  - name: %s\n    decision: deny\n    match: {provider: %q, effect: [%s], method: [%s]}\n",
				r.name, r.provider, quoteList(r.effects), quoteList(r.methods))
		} else {
			fmt.Fprintf(&effects, "  - name: %s\n    decision: deny\n    match: {sink: provider, target: %q}\n", r.name, r.target)
		}
	}
	return "rules:\n" + rules.String() + "effects:\n" + effects.String()
}

// regoModule generates one rule per deployment rule as an ordered else
// chain, in Gatehouse's order: rules entries first, then effects entries.
func regoModule(rs []spec) string {
	ordered := slices.Clone(rs)
	slices.SortStableFunc(ordered, func(a, b spec) int {
		ai, bi := 0, 0
		if a.provider == "" {
			ai = 1
		}
		if b.provider == "" {
			bi = 1
		}
		return ai - bi
	})
	var sb strings.Builder
	sb.WriteString("package gatehouse\n\n")
	for i, r := range ordered {
		if i == 0 {
			fmt.Fprintf(&sb, "deny := %q if {\n", r.name)
		} else {
			fmt.Fprintf(&sb, "} else := %q if {\n", r.name)
		}
		sb.WriteString("\tinput.sink == \"provider\"\n")
		if r.provider != "" {
			fmt.Fprintf(&sb, "\tinput.provider == %q\n", r.provider)
			fmt.Fprintf(&sb, "\tinput.declared in {%s}\n", quoteList(r.effects))
			fmt.Fprintf(&sb, "\tinput.method in {%s}\n", quoteList(r.methods))
		} else {
			fmt.Fprintf(&sb, "\tglob.match(%q, [\"/\"], input.target)\n", r.target)
		}
	}
	sb.WriteString("} else := \"\"\n")
	return sb.String()
}

// charge is a realistic provider call: a shipped Stripe integration
// creating a charge.
func charge() policy.Effect {
	return policy.Effect{Sink: policy.SinkProvider, Action: "call", Origin: policy.OriginShipped, Provider: "stripe",
		Method: "POST", Host: "api.stripe.com", Path: "/v1/charges", Target: "api.stripe.com/v1/charges",
		Atom: "stripe.charges.create", Declared: policy.EffectWrite}
}

// allowed is the same call to a provider no rule names.
func allowed() policy.Effect {
	e := charge()
	e.Provider, e.Host, e.Target, e.Atom = "acme", "api.acme.com", "api.acme.com/v1/charges", "acme.charges.create"
	return e
}

// opaInput is the OPA input for e, built once, as the broker would.
func opaInput(e policy.Effect) ast.Value {
	v, err := ast.InterfaceToValue(map[string]any{
		"sink": string(e.Sink), "provider": e.Provider, "declared": string(e.Declared),
		"method": strings.ToUpper(e.Method), "target": e.Target, "origin": string(e.Origin),
	})
	if err != nil {
		panic(err)
	}
	return v
}

type engines struct {
	gh  *policy.Policy
	opa rego.PreparedEvalQuery
}

func newEngines(tb testing.TB, n int) engines {
	tb.Helper()
	rs := ruleSet(n)
	p, err := policy.Parse(fmt.Sprintf("bench-%d.yaml", n), []byte(yamlFile(rs)))
	if err != nil {
		tb.Fatalf("Gatehouse: %v", err)
	}
	q, err := rego.New(
		rego.Query("data.gatehouse.deny"),
		rego.Module("gatehouse.rego", regoModule(rs)),
	).PrepareForEval(context.Background())
	if err != nil {
		tb.Fatalf("OPA: %v\n%s", err, regoModule(rs))
	}
	return engines{gh: p, opa: q}
}

// gatehouse returns the deny rule Gatehouse applies, "" for none.
func (en engines) gatehouse(e policy.Effect) string {
	d := en.gh.Decide(policy.Input{Mode: policy.ModeStrict, Effect: e})
	if d.Verdict == policy.VerdictRefuse && d.Refusal == policy.RefuseDeploymentRule {
		return d.Rule
	}
	return ""
}

func (en engines) opaDeny(ctx context.Context, in ast.Value) string {
	rs, err := en.opa.Eval(ctx, rego.EvalParsedInput(in))
	if err != nil || len(rs) != 1 || len(rs[0].Expressions) != 1 {
		panic(fmt.Sprintf("OPA eval: %v %v", err, rs))
	}
	s, _ := rs[0].Expressions[0].Value.(string)
	return s
}

// TestSameDecisions checks that both engines apply the same rule, or none,
// to the same inputs: the benchmark compares equal work.
func TestSameDecisions(t *testing.T) {
	ctx := context.Background()
	vary := func(f func(*policy.Effect)) policy.Effect { e := allowed(); f(&e); return e }
	type tcase struct {
		name string
		e    policy.Effect
		want string
	}
	for _, n := range []int{1, 100} {
		en := newEngines(t, n)
		cases := []tcase{
			{"charge", charge(), "no-stripe-charges"},
			{"allowed", allowed(), ""},
			{"deeper path", vary(func(e *policy.Effect) { e.Provider, e.Target = "stripe", "api.stripe.com/v1/charges/ch_1/refunds" }), ""},
			{"lower-case method", vary(func(e *policy.Effect) { e.Method = "post"; e.Provider, e.Target = "stripe", "api.stripe.com/v1/x" }), "no-stripe-charges"},
			{"other sink", vary(func(e *policy.Effect) { e.Sink = policy.SinkArtifact; e.Target = "api.stripe.com/v1/charges" }), ""},
		}
		if n == 100 {
			cases = append(cases,
				tcase{"middle rules entry", vary(func(e *policy.Effect) { e.Provider, e.Method = "vendor-40", "PUT" }), "no-vendor-40-writes"},
				tcase{"middle rules entry, read method", vary(func(e *policy.Effect) { e.Provider, e.Method = "vendor-40", "GET" }), ""},
				tcase{"middle effects entry", vary(func(e *policy.Effect) { e.Target = "api.vendor-41.com/v1/orders" }), "no-vendor-41-api"},
				tcase{"earlier rule wins", vary(func(e *policy.Effect) { e.Provider, e.Target = "vendor-40", "api.stripe.com/v1/charges" }), "no-vendor-40-writes"},
			)
		}
		for _, c := range cases {
			g, o := en.gatehouse(c.e), en.opaDeny(ctx, opaInput(c.e))
			if g != c.want || o != c.want {
				t.Errorf("rules=%d %s: Gatehouse %q, OPA %q, want %q", n, c.name, g, o, c.want)
			}
		}
	}
}

var sizes = []int{1, 100}

// percentiles times samples individual calls of fn and returns the median
// and the 99th percentile, in nanoseconds. Each sample includes the cost of
// reading the clock twice.
func percentiles(samples int, fn func()) (p50, p99 float64) {
	d := make([]time.Duration, samples)
	for i := range d {
		t0 := time.Now()
		fn()
		d[i] = time.Since(t0)
	}
	slices.Sort(d)
	return float64(d[samples/2]), float64(d[samples*99/100])
}

const samples = 50_000

// BenchmarkEngines decides the same calls with both engines: "deny" matches
// the last rule, "allow" matches none.
func BenchmarkEngines(b *testing.B) {
	ctx := context.Background()
	for _, n := range sizes {
		en := newEngines(b, n)
		for _, c := range []struct {
			name string
			e    policy.Effect
		}{{"deny", charge()}, {"allow", allowed()}} {
			in := policy.Input{Mode: policy.ModeStrict, Effect: c.e}
			b.Run(fmt.Sprintf("rules=%d/%s/gatehouse", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					en.gh.Decide(in)
				}
				p50, p99 := percentiles(samples, func() { en.gh.Decide(in) })
				b.ReportMetric(p50, "p50-ns")
				b.ReportMetric(p99, "p99-ns")
			})
			ov := opaInput(c.e)
			b.Run(fmt.Sprintf("rules=%d/%s/opa", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					en.opaDeny(ctx, ov)
				}
				p50, p99 := percentiles(samples, func() { en.opaDeny(ctx, ov) })
				b.ReportMetric(p50, "p50-ns")
				b.ReportMetric(p99, "p99-ns")
			})
		}
	}
}

// meanNs runs fn in batches for about d and returns the mean time per
// call in nanoseconds.
func meanNs(d time.Duration, fn func()) (ns float64, calls int) {
	const batch = 256
	start := time.Now()
	var el time.Duration
	for el < d {
		for range batch {
			fn()
		}
		calls += batch
		el = time.Since(start)
	}
	return float64(el.Nanoseconds()), calls
}

// BenchmarkRatio measures both engines in the same process, alternating
// between them in rounds so drift in the machine hits both alike, and
// reports OPA's mean time per decision divided by Gatehouse's
// ("opa/gatehouse"). It measures for about 2.2 s whatever b.N is, so the
// framework runs it once with -benchtime up to 2s; its own ns/op is
// suppressed and the figures are the metrics.
func BenchmarkRatio(b *testing.B) {
	ctx := context.Background()
	for _, n := range sizes {
		en := newEngines(b, n)
		for _, c := range []struct {
			name string
			e    policy.Effect
		}{{"deny", charge()}, {"allow", allowed()}} {
			in := policy.Input{Mode: policy.ModeStrict, Effect: c.e}
			ov := opaInput(c.e)
			b.Run(fmt.Sprintf("rules=%d/%s", n, c.name), func(b *testing.B) {
				var gt, ot float64
				var gn, on int
				for range 11 {
					t, k := meanNs(100*time.Millisecond, func() { en.gh.Decide(in) })
					gt, gn = gt+t, gn+k
					t, k = meanNs(100*time.Millisecond, func() { en.opaDeny(ctx, ov) })
					ot, on = ot+t, on+k
				}
				gns, ons := gt/float64(gn), ot/float64(on)
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(gns, "gatehouse-ns")
				b.ReportMetric(ons, "opa-ns")
				b.ReportMetric(ons/gns, "opa/gatehouse")
				b.Logf("rules=%d %s: Gatehouse %.0f ns, OPA %.0f ns per decision; OPA/Gatehouse %.1fx", n, c.name, gns, ons, ons/gns)
			})
		}
	}
}
