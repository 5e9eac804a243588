package policy

import (
	"testing"
)

// TestContractsForEveryOrigin: a mutating call naming an integration must
// be one of its declared operations whatever its origin; one naming none
// is mutation-without-atom (model code: unverified too); a call from a
// sandboxed program is held to its own code's contract as well; an
// ambiguous request is refused in report mode as in strict.
func TestContractsForEveryOrigin(t *testing.T) {
	p := mustParse(t, `rules:
  - {name: our-client, decision: allow, match: {provider: erp, code_origin: direct}}
`)
	pay := &Contract{Operations: []Operation{{Method: "POST", Template: "/api/payments"}, {Method: "GET", Template: "/api/invoices/{id}"}}}
	call := func(origin Origin, method, path string, f ...func(*Effect)) Effect {
		e := Effect{Sink: SinkProvider, Action: "call", Origin: origin, Provider: "erp", Method: method, Path: path,
			Atom: "erp.pay", Declared: EffectWrite, Contract: pay}
		for _, g := range f {
			g(&e)
		}
		return e
	}
	noAtom := func(e *Effect) { e.Atom, e.Declared, e.Contract = "", "", nil }
	noOps := func(e *Effect) { e.Contract = nil }
	program := func(c *Contract) func(*Effect) {
		return func(e *Effect) { e.FromProgram, e.ProgramContract = true, c }
	}
	for _, tc := range []struct {
		name    string
		mode    Mode
		eff     Effect
		refusal Refusal // "" allowed
	}{
		{"shipped, declared operation", ModeStrict, call(OriginShipped, "POST", "/api/payments"), ""},
		{"shipped, trailing-slash path no operation declares", ModeStrict, call(OriginShipped, "POST", "/api/payments/"), RefuseOutsideContract},
		{"shipped, sub-path", ModeStrict, call(OriginShipped, "POST", "/api/payments/x"), RefuseOutsideContract},
		{"shipped, PUT", ModeStrict, call(OriginShipped, "PUT", "/api/payments"), RefuseOutsideContract},
		{"runtime, undeclared", ModeStrict, call(OriginRuntime, "POST", "/api/refunds"), RefuseOutsideContract},
		{"direct, undeclared", ModeStrict, call(OriginDirect, "POST", "/api/refunds"), RefuseOutsideContract},
		{"model, declared operation", ModeStrict, call(OriginModel, "POST", "/api/payments"), ""},
		{"model, undeclared", ModeStrict, call(OriginModel, "POST", "/api/refunds"), RefuseOutsideContract},
		{"shipped, integration without operations", ModeStrict, call(OriginShipped, "POST", "/api/payments", noOps), RefuseOutsideContract},
		{"model, integration without operations", ModeStrict, call(OriginModel, "POST", "/api/payments", noOps), RefuseUnverifiedModelCode},
		{"reads are held to the declared effect only", ModeStrict, call(OriginShipped, "GET", "/api/anything"), ""},
		{"no integration", ModeStrict, call(OriginShipped, "POST", "/api/payments", noAtom), RefuseMutationWithoutAtom},
		{"no integration, lifted for the deployment's client", ModeStrict, call(OriginDirect, "POST", "/api/payments", noAtom), ""},
		{"no integration, model code is not lifted", ModeStrict, call(OriginModel, "POST", "/api/payments", noAtom, func(e *Effect) { e.Provider = "erp" }), RefuseMutationWithoutAtom},
		{"program within both contracts", ModeStrict, call(OriginModel, "POST", "/api/payments", program(&Contract{Operations: []Operation{{Method: "POST", Template: "/api/payments"}}})), ""},
		{"program outside its own contract", ModeStrict, call(OriginModel, "POST", "/api/payments", program(&Contract{Operations: []Operation{{Method: "GET", Template: "/api/invoices/{id}"}}})), RefuseOutsideContract},
		{"program whose contract could not be read", ModeStrict, call(OriginModel, "POST", "/api/payments", program(nil)), RefuseUnverifiedModelCode},
		{"program reading outside its contract", ModeStrict, call(OriginModel, "GET", "/api/invoices/7", program(&Contract{})), ""},
		{"shipped program whose contract was not read", ModeStrict, call(OriginShipped, "POST", "/api/payments", program(nil)), ""},
		{"shipped program outside its own contract", ModeStrict, call(OriginShipped, "POST", "/api/payments", program(&Contract{})), RefuseOutsideContract},
		{"ambiguous, strict", ModeStrict, call(OriginShipped, "POST", "/api/payments", func(e *Effect) { e.Ambiguous = "a ';'" }), RefuseAmbiguousRequest},
		{"ambiguous, report", ModeReport, call(OriginShipped, "GET", "/api/invoices/7", func(e *Effect) { e.Ambiguous = "a ';'" }), RefuseAmbiguousRequest},
	} {
		d := p.Decide(Input{Mode: tc.mode, Effect: tc.eff})
		switch {
		case tc.refusal == "" && d.Verdict != VerdictAllow:
			t.Errorf("%s: refused %s: %+v", tc.name, d.Refusal, d.Reasons)
		case tc.refusal != "" && (d.Verdict != VerdictRefuse || d.Refusal != tc.refusal || !d.Enforced):
			t.Errorf("%s: %v %s, want refused %s (%+v)", tc.name, d.Verdict, d.Refusal, tc.refusal, d.Reasons)
		}
	}
}

func TestMatches(t *testing.T) {
	p := mustParse(t, `rules:
  - {name: no-deletes, decision: deny, match: {method: delete}}
effects:
  - {name: no-leaks, decision: deny, match: {sink: output, target: "leak*"}}
scopes:
  require:
    - {scope: payments.write, match: {provider: erp, path: /api/payments}}
approvals:
  - {name: pay, match: {provider: erp, method: POST, tool: "provider.*"}, roles: [finance]}
`)
	m := p.Matches()
	if len(m) != 4 {
		t.Fatalf("%+v", m)
	}
	if m[0].Section != "rules" || m[0].Method[0] != "DELETE" || !m[0].SendsToProvider || !m[0].MayReachProviderCall {
		t.Errorf("rules: %+v", m[0])
	}
	if m[1].Section != "effects" || m[1].SendsToProvider || m[1].MayReachProviderCall || m[1].Target[0] != "leak*" {
		t.Errorf("effects: %+v", m[1])
	}
	if m[2].Section != "scopes.require" || m[2].Name != "payments.write" || m[2].Path[0] != "/api/payments" {
		t.Errorf("scopes: %+v", m[2])
	}
	if m[3].Section != "approvals" || m[3].Name != "pay" || m[3].Tool[0] != "provider.*" || m[3].Provider[0] != "erp" {
		t.Errorf("approvals: %+v", m[3])
	}
	if (*Policy)(nil).Matches() != nil || Unreadable("x", nil).Matches() != nil {
		t.Error("an unusable policy has matches")
	}
}

// TestPathFold: for a provider that routes paths without regard to case,
// path and target globs match ignoring case; otherwise exactly.
func TestPathFold(t *testing.T) {
	p := mustParse(t, `effects:
  - {name: no-refunds, decision: deny, match: {sink: provider, target: "erp.example.com/api/Refunds/**"}}
scopes:
  require:
    - {scope: reports, match: {provider: erp, path: "/api/reports/*"}}
`)
	for _, tc := range []struct {
		path string
		fold bool
		want Refusal
	}{
		{"/api/refunds/7", true, RefuseDeploymentRule},
		{"/api/REFUNDS/7", true, RefuseDeploymentRule},
		{"/api/refunds/7", false, ""},
		{"/api/Refunds/7", false, RefuseDeploymentRule},
		{"/api/REPORTS/q1", true, RefuseScopeMissing},
		{"/api/REPORTS/q1", false, ""},
	} {
		e := Effect{Sink: SinkProvider, Action: "call", Provider: "erp", Method: "GET", Host: "erp.example.com", Path: tc.path,
			Target: "erp.example.com" + tc.path, Origin: OriginShipped, PathFold: tc.fold}
		d := p.Decide(Input{Mode: ModeStrict, Effect: e})
		if d.Refusal != tc.want {
			t.Errorf("%s fold %v: %s, want %q", tc.path, tc.fold, d.Refusal, tc.want)
		}
	}
}
