package policy

import (
	"errors"
	"strings"
	"testing"
)

const approvalsFile = `
approvals:
  - name: payments
    match: {provider: bank, method: POST}
    roles: [finance]
    assurance: mfa
  - name: memory-notes
    match: {tool: "memory.*"}
    waiver: true
`

func TestApprovalsRules(t *testing.T) {
	p, err := Parse("a.yaml", []byte(approvalsFile))
	if err != nil {
		t.Fatal(err)
	}
	pay := Effect{Sink: SinkProvider, Action: "call", Provider: "bank", Method: "POST", Host: "bank.example", Path: "/payments", Origin: OriginShipped, Atom: "bank.pay", Declared: EffectWrite,
		Contract: &Contract{Operations: []Operation{{Method: "POST", Template: "/payments"}}}}
	mem := Effect{Sink: SinkMemory, Action: "put"}
	good := &ApprovalGrant{ID: "ap_1", Approver: "rita", Roles: []string{"finance"}, Assurance: "mfa"}
	weak := &ApprovalGrant{ID: "ap_1", Approver: "rita", Roles: []string{"finance"}, Assurance: "password"}
	for _, tc := range []struct {
		name     string
		mode     Mode
		e        Effect
		grant    *ApprovalGrant
		verdict  Verdict
		rule     string
		needRule string
	}{
		{"strict, no approval: held", ModeStrict, pay, nil, VerdictHold, "approval:payments", "approval:payments"},
		{"report, no approval: recorded, allowed", ModeReport, pay, nil, VerdictAllow, "approval:payments", "approval:payments"},
		{"strict, approval: allowed", ModeStrict, pay, good, VerdictAllow, "", "approval:payments"},
		{"strict, too little assurance: held again", ModeStrict, pay, weak, VerdictHold, "approval:payments", "approval:payments"},
		{"tool match", ModeStrict, mem, nil, VerdictHold, "approval:memory-notes", "approval:memory-notes"},
		{"no match", ModeStrict, Effect{Sink: SinkOutput, Action: "deliver"}, nil, VerdictAllow, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(Input{Mode: tc.mode, Effect: tc.e, Approval: tc.grant})
			if d.Verdict != tc.verdict || d.Rule != tc.rule {
				t.Fatalf("verdict %v rule %q, want %v %q (%+v)", d.Verdict, d.Rule, tc.verdict, tc.rule, d.Reasons)
			}
			switch {
			case tc.needRule == "" && d.Approval != nil:
				t.Fatalf("need %+v, want none", d.Approval)
			case tc.needRule != "" && (d.Approval == nil || d.Approval.Rule != tc.needRule):
				t.Fatalf("need %+v, want %s", d.Approval, tc.needRule)
			}
		})
	}
}

func TestApprovalsCardGrant(t *testing.T) {
	p, err := Parse("a.yaml", []byte("agents:\n  - name: bot\n    require_approval_for: [provider.pay]\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := Effect{Sink: SinkProvider, Action: "call", Tool: "provider.pay", Method: "GET"}
	if d := p.Decide(Input{Mode: ModeStrict, Authority: Authority{Agent: "bot"}, Effect: e}); d.Verdict != VerdictHold {
		t.Fatalf("card without approval: %v", d.Verdict)
	}
	g := &ApprovalGrant{ID: "ap_1", Approver: "rita"}
	if d := p.Decide(Input{Mode: ModeStrict, Authority: Authority{Agent: "bot"}, Effect: e, Approval: g}); d.Verdict != VerdictAllow {
		t.Fatalf("card with approval: %v %+v", d.Verdict, d.Reasons)
	}
}

func TestApprovalsLoaderRefuses(t *testing.T) {
	for name, src := range map[string]string{
		"waiver on destructive": "approvals:\n  - name: x\n    match: {method: DELETE}\n    waiver: true\n",
		"waiver, effect destr.": "approvals:\n  - name: x\n    match: {effect: destructive}\n    waiver: true\n",
		"waiver, destructive":   "approvals:\n  - name: x\n    match: {method: POST}\n    destructive: true\n    waiver: true\n",
		"waiver, wide match":    "approvals:\n  - name: x\n    match: {provider: bank}\n    waiver: true\n",
		"no name":               "approvals:\n  - match: {provider: bank}\n",
		"no match":              "approvals:\n  - name: x\n",
		"unknown assurance":     "approvals:\n  - name: x\n    match: {provider: bank}\n    assurance: strong\n",
		"unknown key":           "approvals:\n  - name: x\n    match: {provider: bank}\n    quorum: 2\n",
		"duplicate":             "approvals:\n  - name: x\n    match: {provider: bank}\n  - name: x\n    match: {provider: erp}\n",
	} {
		_, err := Parse("a.yaml", []byte(src))
		if !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: %v", name, err)
		}
		if name == "waiver on destructive" && !strings.Contains(err.Error(), "waiver is never allowed for destructive") {
			t.Errorf("unclear error: %v", err)
		}
	}
}
