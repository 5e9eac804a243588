package policy

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestIndexKeepsFirstMatch checks, on random rule files and effects, that
// the indexed lookup returns exactly the rule a plain scan in file order
// would: the index may only skip rules that cannot match.
func TestIndexKeepsFirstMatch(t *testing.T) {
	hosts := []string{"api.a.com", "api.b.com", "exports", "*", "api.{a,b}.com", "api.?.com"}
	paths := []string{"", "/*", "/**", "/v1/*", "/exports/*"}
	providers := []string{"a", "b", "c"}
	rapid.Check(t, func(t *rapid.T) {
		var rules, effects strings.Builder
		n := rapid.IntRange(1, 12).Draw(t, "n")
		for i := 0; i < n; i++ {
			dec := rapid.SampledFrom([]string{"allow", "deny"}).Draw(t, "decision")
			if rapid.Bool().Draw(t, "provider-rule") {
				fmt.Fprintf(&rules, "  - {name: r%d, decision: %s, match: {method: [POST, GET]", i, dec)
				if rapid.Bool().Draw(t, "has-provider") {
					fmt.Fprintf(&rules, ", provider: [%s]", strings.Join(rapid.SliceOfNDistinct(rapid.SampledFrom(providers), 1, 2, rapid.ID).Draw(t, "providers"), ", "))
				}
				rules.WriteString("}}\n")
				continue
			}
			fmt.Fprintf(&effects, "  - {name: e%d, decision: %s, match: {sink: [provider, artifact]", i, dec)
			if rapid.Bool().Draw(t, "has-target") {
				var ts []string
				for j := rapid.IntRange(1, 2).Draw(t, "targets"); j > 0; j-- {
					ts = append(ts, `"`+rapid.SampledFrom(hosts).Draw(t, "host")+rapid.SampledFrom(paths).Draw(t, "path")+`"`)
				}
				fmt.Fprintf(&effects, ", target: [%s]", strings.Join(ts, ", "))
			}
			effects.WriteString("}}\n")
		}
		p, err := Parse("random.yaml", []byte("rules:\n"+rules.String()+"effects:\n"+effects.String()))
		if err != nil {
			t.Fatalf("%v\n%s%s", err, rules.String(), effects.String())
		}
		e := Effect{
			Sink:     rapid.SampledFrom([]Sink{SinkProvider, SinkArtifact}).Draw(t, "sink"),
			Provider: rapid.SampledFrom(providers).Draw(t, "provider"),
			Method:   "POST",
			Target: rapid.SampledFrom([]string{"api.a.com", "api.b.com", "exports"}).Draw(t, "target-host") +
				rapid.SampledFrom([]string{"", "/v1/x", "/exports/y", "/v1/x/y"}).Draw(t, "target-path"),
		}
		d := &decider{p: p, in: Input{Effect: e}, method: "POST"}
		for _, s := range []*section{&p.rules, &p.effects} {
			for _, allow := range []bool{false, true} {
				var want *rule
				for i := range s.rules {
					if r := &s.rules[i]; r.allow == allow && r.m.matches(d) {
						want = r
						break
					}
				}
				if got := s.first(d, allow, false); got != want {
					t.Fatalf("effect %+v allow=%v: index gave %v, a scan gives %v", e, allow, name(got), name(want))
				}
			}
		}
	})
}

func name(r *rule) string {
	if r == nil {
		return "none"
	}
	return r.name
}
