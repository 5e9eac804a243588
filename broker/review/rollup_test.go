package review

import (
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/policy"
)

// ByRule rolls one rule's findings for several targets into one group,
// largest first, keeping each target.
func TestByRule(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	fs := []Finding{
		{Refusal: policy.RefuseMutationWithoutAtom, Rule: "mutation-without-atom", Target: "stripe POST /v1/refunds", Count: 3, First: t0, Last: t0.Add(time.Hour)},
		{Refusal: policy.RefuseAgentUnregistered, Rule: "agent:helper", Target: "deliver", Count: 2, First: t0, Last: t0},
		{Refusal: policy.RefuseMutationWithoutAtom, Rule: "mutation-without-atom", Target: "bank POST /payments", Count: 1, First: t0.Add(-time.Hour), Last: t0},
	}
	g := ByRule(fs)
	if len(g) != 2 || g[0].Rule != "mutation-without-atom" || g[0].Count != 4 || len(g[0].Findings) != 2 ||
		!g[0].First.Equal(t0.Add(-time.Hour)) || !g[0].Last.Equal(t0.Add(time.Hour)) || g[1].Count != 2 {
		t.Fatalf("ByRule: %+v", g)
	}
}

// The advice for effects an approvals rule holds names that rule's roles
// and assurance, not the reviewer role or require_approval_for.
func TestApprovalAdviceNamesTheRule(t *testing.T) {
	f := &Finding{Refusal: policy.RefuseApprovalMissing, Rule: "approval:payments",
		Approval: &policy.ApprovalNeed{Rule: "approval:payments", Roles: []string{"finance"}, Assurance: "mfa"}}
	a := approvalAdvice(f)
	for _, want := range []string{`"payments"`, "finance", "mfa", "--role finance", "totp"} {
		if !strings.Contains(a, want) {
			t.Errorf("advice lacks %q: %s", want, a)
		}
	}
	if strings.Contains(a, "require_approval_for") {
		t.Errorf("advice for an approvals rule names agent cards: %s", a)
	}
	card := approvalAdvice(&Finding{Refusal: policy.RefuseApprovalMissing, Rule: "agent:invoice-bot"})
	if !strings.Contains(card, "require_approval_for") || !strings.Contains(card, "invoice-bot") {
		t.Errorf("advice for a card: %s", card)
	}
	// needOf reads the rule from the policy the decision was made under.
	p, err := policy.Parse("p.yaml", []byte("approvals:\n  - name: payments\n    match: {sink: output}\n    roles: [finance]\n    assurance: mfa\n"))
	if err != nil {
		t.Fatal(err)
	}
	n := needOf(&Finding{Rule: "approval:payments", effect: policy.Effect{Sink: policy.SinkOutput, Action: "deliver"}}, p)
	if n == nil || n.Assurance != "mfa" || len(n.Roles) != 1 || n.Roles[0] != "finance" {
		t.Fatalf("needOf: %+v", n)
	}
	d := p.Decide(policy.Input{Mode: policy.ModeReport, Effect: policy.Effect{Sink: policy.SinkOutput, Action: "deliver"}})
	for _, r := range d.Reasons {
		if strings.Contains(r.Detail, `at least ""`) {
			t.Errorf("a reason reads %q", r.Detail)
		}
	}
	p2, _ := policy.Parse("p.yaml", []byte("approvals:\n  - name: any\n    match: {sink: output}\n"))
	for _, r := range p2.Decide(policy.Input{Mode: policy.ModeReport, Effect: policy.Effect{Sink: policy.SinkOutput, Action: "deliver"}}).Reasons {
		if strings.Contains(r.Detail, `assurance at least ""`) {
			t.Errorf("a rule without assurance reads %q", r.Detail)
		}
	}
}
