package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// spell writes path (of plain ASCII segments) in one of the ways servers
// read as the same resource and the sink accepts: letters of its literal
// segments (not of the values in placeholder segments, the ids) in random
// case, unreserved bytes but "." percent-encoded in either hex case, a
// trailing slash, the leading slash dropped.
func spell(t *rapid.T, path string, ids map[int]bool) string {
	var b strings.Builder
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, seg := range segs {
		if i > 0 || rapid.Bool().Draw(t, "leading slash") {
			b.WriteByte('/')
		}
		for j := 0; j < len(seg); j++ {
			c := seg[j]
			how := rapid.IntRange(0, 5).Draw(t, "how")
			if c == '.' && (how == 1 || how == 2) {
				how = 3 // an encoded dot is refused (see TestCanonicalPath)
			}
			switch how {
			case 0:
				if !ids[i] && c >= 'a' && c <= 'z' {
					c -= 'a' - 'A'
				}
				b.WriteByte(c)
			case 1:
				fmt.Fprintf(&b, "%%%02X", c)
			case 2:
				fmt.Fprintf(&b, "%%%02x", c)
			default:
				b.WriteByte(c)
			}
		}
	}
	if rapid.Bool().Draw(t, "trailing slash") {
		b.WriteByte('/')
	}
	return b.String()
}

// describe describes and decides one call in process (the broker's own
// steps, without sending it), against the records the run read.
func (s *setup) describe(t testing.TB, run *broker.Run, origin policy.Origin, params map[string]any) (*broker.Proposal, policy.Decision) {
	t.Helper()
	raw, _ := json.Marshal(params)
	prop, err := s.sink.Describe(ctxT(t), run, &broker.EffectRequest{Run: run.ID, Action: provider.ActionCall, Origin: origin, Params: raw})
	if err != nil {
		t.Fatalf("describe %s: %v", raw, err)
	}
	d := s.env.Broker.Policy().Decide(policy.Input{Mode: policy.ModeStrict, Authority: run.Authority(), Effect: prop.Effect, Now: time.Now()})
	return prop, d
}

// TestSpellingsOfOneResource is the property: every spelling of the
// grounded payment that the sink accepts is the same canonical request,
// decided the same way, under the same grounding rule, citing the same
// records; every spelling of a read is the same record path; and a
// spelling made ambiguous (a ';', an encoded '/', an empty or dot
// segment) is always refused, never sent.
func TestSpellingsOfOneResource(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{grounding: groundingYAML})
	id := s.open(t, "ada")
	s.readBoth(t, id)
	run := &broker.Run{ID: id, For: policy.Principal{Tenant: "acme", Person: "ada"}, Scopes: []string{}}
	base := strings.TrimPrefix(s.erp.srv.URL, "http://")

	type outcome struct {
		path, method string
		verdict      policy.Verdict
		refusal      policy.Refusal
		grounding    *policy.Grounding
		citations    []journal.Citation
	}
	decide := func(t testing.TB, method, path, body string) outcome {
		p := pay(body)
		p["method"], p["path"] = method, path
		prop, d := s.describe(t, run, policy.OriginModel, p)
		return outcome{prop.Effect.Path, prop.Effect.Method, d.Verdict, d.Refusal, prop.Effect.Grounding, prop.Citations}
	}
	want := map[string]outcome{
		honest:                          decide(t, "POST", "/payments", honest),
		payment(attackerIBAN, "1", "x"): decide(t, "POST", "/payments", payment(attackerIBAN, "1", "x")),
	}
	if h := want[honest]; h.verdict != policy.VerdictAllow || len(h.citations) != 2 || h.path != "/payments" {
		t.Fatalf("the honest payment: %+v", h)
	}
	if a := want[payment(attackerIBAN, "1", "x")]; a.refusal != policy.RefuseUngrounded {
		t.Fatalf("the attacker's payment: %+v", a)
	}

	rapid.Check(t, func(rt *rapid.T) {
		body := rapid.SampledFrom([]string{honest, payment(attackerIBAN, "1", "x")}).Draw(rt, "body")
		method := rapid.SampledFrom([]string{"POST", "post", "Post", "pOsT"}).Draw(rt, "method")
		path := spell(rt, "/payments", nil)
		got := decide(t, method, path, body)
		if !reflect.DeepEqual(got, want[body]) {
			rt.Fatalf("%s %q: %+v, want %+v", method, path, got, want[body])
		}
		// The record a read of any spelling keeps is the one grounding
		// looks up.
		read := spell(rt, "/invoices/INV-7", map[int]bool{1: true})
		prop, d := s.describe(t, run, policy.OriginModel, get(read))
		if prop.Effect.Path != "/invoices/INV-7" || prop.Effect.Target != base+"/invoices/INV-7" || d.Verdict != policy.VerdictAllow {
			rt.Fatalf("GET %q described as %s (%v)", read, prop.Effect.Target, d.Refusal)
		}
		// Made ambiguous, it is refused whatever its body.
		bad := rapid.SampledFrom([]string{";x", "%2F", "%2f", "%2E", "/", "/.", "/..", "%25", "%5C", "\\", ".json", ".", "%20", "%3Fx", "%23", "+", "::$DATA", "/%20"}).Draw(rt, "ambiguity")
		at := rapid.IntRange(1, len(path)).Draw(rt, "at")
		amb := path[:at] + bad + path[at:]
		if strings.HasSuffix(amb, "/") && bad == "/" && !strings.Contains(amb, "//") {
			return // only a trailing slash: not ambiguous
		}
		if _, d := s.describe(t, run, policy.OriginModel, map[string]any{"provider": "erp", "method": method, "path": amb, "atom": "erp.pay", "body": json.RawMessage(body)}); d.Refusal != policy.RefuseAmbiguousRequest && d.Verdict == policy.VerdictAllow {
			rt.Fatalf("%q was allowed", amb)
		}
	})
}

// TestDifferentResourcesNeverCollide: two different resources (another
// template, or another id, ids being case-sensitive values), each spelled
// at random, never share a canonical path.
func TestDifferentResourcesNeverCollide(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{})
	run := &broker.Run{ID: s.open(t, "ada"), For: policy.Principal{Tenant: "acme", Person: "ada"}}
	templates := []string{"/invoices/", "/suppliers/"}
	rapid.Check(t, func(rt *rapid.T) {
		resource := func(label string) (string, string) {
			tm := rapid.SampledFrom(templates).Draw(rt, label+" template")
			id := rapid.StringMatching(`[A-Za-z0-9._~-]{1,12}`).Filter(func(s string) bool { return s != "." && s != ".." }).Draw(rt, label+" id")
			return tm + id, spell(rt, tm+id, map[int]bool{1: true})
		}
		a, sa := resource("a")
		b, sb := resource("b")
		pa, _ := s.describe(t, run, policy.OriginModel, get(sa))
		pb, _ := s.describe(t, run, policy.OriginModel, get(sb))
		if pa.Effect.Path != a || pb.Effect.Path != b {
			rt.Fatalf("%q -> %q, %q -> %q", sa, pa.Effect.Path, sb, pb.Effect.Path)
		}
		if (a == b) != (pa.Effect.Path == pb.Effect.Path) {
			rt.Fatalf("%s and %s: canonical %s and %s", a, b, pa.Effect.Path, pb.Effect.Path)
		}
	})
}

// TestSentIsWhatWasDecided: what the ERP receives is, byte for byte, the
// path and query the journal records the decision on; and an ambiguous
// spelling is refused in report mode too, reaching nothing.
func TestSentIsWhatWasDecided(t *testing.T) {
	for _, mode := range []policy.Mode{policy.ModeStrict, policy.ModeReport} {
		s := start(t, mode, opts{})
		run := s.open(t, "ada")
		for _, p := range []string{"/INVOICES/INV-7/", "invoices/INV%2D7", "/Suppliers/S-1"} {
			g := get(p)
			g["query"] = map[string][]string{"z": {"2 3"}, "a": {"é"}}
			r := s.call(t, run, policy.OriginModel, g)
			mustAllow(t, r)
			d := s.decision(t, run, r.Effect)
			calls := s.erp.snapshot()
			last := calls[len(calls)-1]
			if last.Path != d.Path || last.RawQuery != "a=%C3%A9&z=2+3" || !strings.HasPrefix(d.Path, "/invoices/INV-7") && d.Path != "/suppliers/S-1" {
				t.Fatalf("%s: decided on %q, the ERP got %q?%s", p, d.Path, last.Path, last.RawQuery)
			}
		}
		for _, p := range []string{"/invoices/INV-7;x", "/invoices%2FINV-7", "//invoices/INV-7", "/invoices/./INV-7"} {
			before := s.erp.count("", "")
			r := s.call(t, run, policy.OriginModel, get(p))
			mustRefuse(t, r, policy.RefuseAmbiguousRequest)
			if s.erp.count("", "") != before {
				t.Fatalf("%s (%s) reached the ERP", p, mode)
			}
		}
		s.env.Verify(t)
	}
}

// TestBodiesReadOneWay: a body parsers read in different ways is refused
// before anything is sent: a key twice (params too), an unpaired
// surrogate, a charset other than UTF-8, a method override.
func TestBodiesReadOneWay(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{})
	run := s.open(t, "ada")
	send := func(raw string) *broker.EffectReply {
		r, err := s.env.Agent.Effect(ctxT(t), policy.SinkProvider, broker.EffectRequest{Run: run, Action: "call", Origin: policy.OriginModel, Params: json.RawMessage(raw)})
		if r == nil {
			t.Fatal(err)
		}
		return r
	}
	const pre = `{"provider":"erp","method":"POST","path":"/payments","atom":"erp.pay",`
	before := s.erp.count("", "")
	for _, p := range []string{
		pre + `"body":{"iban":"A","iban":"B"}}`,
		pre + `"body":{"lines":[{"amount":1,"amount":2}]}}`,
		pre + `"body":{"_method":"DELETE"}}`,
		pre + `"body":{"a":1},"content_type":"application/json; charset=utf-16"}`,
		pre + `"body_base64":"eyJhIjoxLCJhIjoyfQ==","content_type":"application/json"}`,          // {"a":1,"a":2}
		pre + `"body_base64":"YT0xO2E9Mg==","content_type":"application/x-www-form-urlencoded"}`, // a=1;a=2
		pre + `"query":{"_method":["DELETE"]},"body":{}}`,
	} {
		mustRefuse(t, send(p), policy.RefuseAmbiguousRequest)
	}
	for _, p := range []string{
		`{"provider":"erp","provider":"erp-plain","method":"GET","path":"/invoices/INV-7"}`,
		`{"provider":"erp","method":"GET","path":"/invoices/INV-7","path":"/payments"}`,
		pre + `"body":{"memo":"\ud800"}}`,
	} {
		if r := send(p); r.Error == nil || r.Error.Code != broker.CodeBadRequest || r.Decision != nil {
			t.Fatalf("%s: %+v", p, r)
		}
	}
	if s.erp.count("", "") != before {
		t.Fatal("an ambiguous request reached the ERP")
	}
}

// TestProgramContract: the code sink hands the provider sink the contract
// of the program making a call, in process, through the context; a
// mutating call must fit it as well as the integration's. No param can set
// it.
func TestProgramContract(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{})
	run := s.open(t, "ada")
	propose := func(ctx context.Context, p map[string]any) *broker.EffectReply {
		raw, _ := json.Marshal(request(run, policy.OriginModel, p))
		return s.env.Broker.Propose(ctx, broker.Internal(policy.OriginModel), policy.SinkProvider, raw)
	}
	payOnly := &policy.Contract{Operations: []policy.Operation{{Method: "post", Template: "payments"}}}
	readOnly := &policy.Contract{Operations: []policy.Operation{{Method: "GET", Template: "/invoices/{id}"}}}
	before := s.erp.payCount()
	mustAllow(t, propose(broker.ContextWithProgramContract(ctxT(t), payOnly), pay(`{"amount":"1"}`)))
	mustRefuse(t, propose(broker.ContextWithProgramContract(ctxT(t), readOnly), pay(`{"amount":"1"}`)), policy.RefuseOutsideContract)
	mustRefuse(t, propose(broker.ContextWithProgramContract(ctxT(t), nil), pay(`{"amount":"1"}`)), policy.RefuseUnverifiedModelCode)
	mustAllow(t, propose(broker.ContextWithProgramContract(ctxT(t), readOnly), get("/Invoices/INV-7/")))
	if s.erp.payCount() != before+1 {
		t.Fatalf("%d payments, want 1", s.erp.payCount()-before)
	}
	p := pay(`{"amount":"1"}`)
	p["program_contract"] = payOnly
	if r := s.call(t, run, policy.OriginModel, p); r.Error == nil || r.Error.Code != broker.CodeBadRequest {
		t.Fatalf("a contract in params: %+v", r)
	}
	if c, ok := broker.ProgramContractFrom(ctxT(t)); ok || c != nil {
		t.Fatal("a plain context carries a program contract")
	}
}

// TestRulesMatchTheCanonicalRequest: scopes, their limits and approvals
// written for /payments hold for every spelling of it.
func TestRulesMatchTheCanonicalRequest(t *testing.T) {
	rules := `scopes:
  require:
    - scope: payments.write
      match: {provider: erp, method: POST, path: /payments}
      limits: {amount: "1000"}
approvals:
  - name: payments
    match: {provider: erp, method: POST, path: /payments}
    roles: [finance]
effects:
  - name: no-refund-page
    decision: deny
    match: {sink: provider, target: "*/refunds/**"}
`
	s := start(t, policy.ModeStrict, opts{rules: rules})
	without, with := s.open(t, "ada"), s.open(t, "ada", "payments.write")
	before := s.erp.payCount()
	for _, p := range []string{"/payments", "/Payments/", "payments", "/PAY%4dENTS"} {
		call := func(run, body string) *broker.EffectReply {
			c := pay(body)
			c["path"] = p
			return s.call(t, run, policy.OriginModel, c)
		}
		mustRefuse(t, call(without, `{"amount":"10"}`), policy.RefuseScopeMissing)
		mustRefuse(t, call(with, `{"amount":"5000"}`), policy.RefuseOverScopeLimit)
		mustRefuse(t, call(with, `{"amount":"10","Amount":"5000"}`), policy.RefuseOverScopeLimit)
		merged := pay(`{"amount":"10"}`)
		merged["path"], merged["query"] = p, map[string][]string{"AMOUNT": {"5000"}}
		mustRefuse(t, s.call(t, with, policy.OriginModel, merged), policy.RefuseOverScopeLimit)
		if r := call(with, `{"amount":"10"}`); r.Decision == nil || r.Decision.Outcome != journal.OutcomeHeld || r.Decision.Rule != "approval:payments" {
			t.Fatalf("%s: want held for approval, got %+v", p, r.Decision)
		}
	}
	r := s.call(t, with, policy.OriginModel, map[string]any{"provider": "erp", "method": "GET", "path": "/REFUNDS/7/", "atom": "erp.read"})
	mustRefuse(t, r, policy.RefuseDeploymentRule)
	if s.erp.payCount() != before {
		t.Fatal("a payment reached the ERP")
	}
}
