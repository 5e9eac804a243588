package approvalgate

import (
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/policy"
)

const rules = `
approvals:
  - name: payments
    match: {provider: bank, method: POST}
    roles: [finance]
    assurance: mfa
`

func TestDecide(t *testing.T) {
	pol, err := policy.Parse("a.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	pay := policy.Effect{Sink: policy.SinkProvider, Action: "call", Provider: "bank", Method: "POST", Host: "bank.example", Path: "/payments",
		Origin: policy.OriginShipped, Atom: "bank.pay", Declared: policy.EffectWrite,
		Contract: &policy.Contract{Operations: []policy.Operation{{Method: "POST", Template: "/payments"}}}}
	in := policy.Input{Mode: policy.ModeStrict, Effect: pay}
	held := pol.Decide(in)
	if held.Verdict != policy.VerdictHold || held.Approval == nil {
		t.Fatalf("the fixture is not held for approval: %+v", held)
	}
	const id = "ap_20260301T120000_0011223344556677"
	for _, tc := range []struct {
		name    string
		a       Approval
		verdict policy.Verdict
		rule    string
		detail  string // in the last reason, "" for none added
	}{
		{"waiting", Approval{ID: id, Standing: Waiting}, policy.VerdictHold, "approval:payments", ""},
		{"closed", Approval{ID: id, Standing: Closed}, policy.VerdictHold, "approval:payments", ""},
		{"approved", Approval{ID: id, Standing: Approved, Approver: "rita", Roles: []string{"finance"}, Assurance: "mfa"}, policy.VerdictAllow, "", ""},
		{"approved, too weak", Approval{ID: id, Standing: Approved, Approver: "rita", Roles: []string{"finance"}, Assurance: "password"},
			policy.VerdictHold, "approval:payments", ""},
		{"approved, wrong role", Approval{ID: id, Standing: Approved, Approver: "rita", Roles: []string{"sales"}, Assurance: "mfa"},
			policy.VerdictHold, "approval:payments", ""},
		{"refused", Approval{ID: id, Standing: Refused, Approver: "rita"}, policy.VerdictRefuse, id, "A person refused this exact action by rita; the first decision stands."},
		{"refused, approver unknown", Approval{ID: id, Standing: Refused}, policy.VerdictRefuse, id, "A person refused this exact action; the first decision stands."},
		{"used", Approval{ID: id, Standing: Used, Approver: "rita", Roles: []string{"finance"}, Assurance: "mfa"}, policy.VerdictRefuse, id,
			"This approved action has already started; it runs at most once."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(pol, in, held, tc.a)
			if got.Verdict != tc.verdict || got.Rule != tc.rule {
				t.Fatalf("verdict %v rule %q, want %v %q (%+v)", got.Verdict, got.Rule, tc.verdict, tc.rule, got.Reasons)
			}
			if tc.verdict == policy.VerdictRefuse {
				last := got.Reasons[len(got.Reasons)-1]
				if !got.Enforced || got.Refusal != policy.RefuseApprovalMissing || !last.Enforced || last.Rule != id || !strings.HasPrefix(last.Detail, tc.detail) {
					t.Fatalf("refusal %+v", got)
				}
				if len(got.Reasons) != len(held.Reasons)+1 {
					t.Fatalf("reasons %d, want the policy's %d and the gate's", len(got.Reasons), len(held.Reasons))
				}
			}
		})
	}
	if in.Approval != nil {
		t.Fatal("Decide changed the caller's input")
	}
}

func TestRefuse(t *testing.T) {
	d := Refuse(policy.Decision{Verdict: policy.VerdictAllow}, "approval", "The approval store could not be read.")
	if d.Verdict != policy.VerdictRefuse || d.Refusal != policy.RefuseApprovalMissing || d.Rule != "approval" || !d.Enforced ||
		len(d.Reasons) != 1 || d.Reasons[0].Detail != "The approval store could not be read." {
		t.Fatalf("%+v", d)
	}
}
