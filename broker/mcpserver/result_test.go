package mcpserver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.(*mcp.TextContent).Text)
	}
	return b.String()
}

// What a model reads for each kind of reply.
func TestResultTellsTheModelWhatHappened(t *testing.T) {
	refused := &broker.EffectReply{Run: "r_1", Effect: "e_1", Decision: &broker.DecisionBody{Outcome: journal.OutcomeRefused,
		Refusal: policy.RefuseDeploymentRule, Rule: "no-leaks", Enforced: true, Mode: policy.ModeStrict,
		Reasons: []policy.Reason{{Refusal: policy.RefuseDeploymentRule, Rule: "no-leaks", Enforced: true, Detail: "Leaks are denied; deliver without the secret."}}}}
	held := &broker.EffectReply{Run: "r_1", Decision: &broker.DecisionBody{Outcome: journal.OutcomeHeld, Rule: "approval:releases",
		Refusal: policy.RefuseApprovalMissing, Enforced: true, Approval: "ap_x"}, Error: &broker.ErrorBody{Code: broker.CodeApprovalRequired}}
	allowed := &broker.EffectReply{Run: "r_1", Decision: &broker.DecisionBody{Outcome: journal.OutcomeAllowed, Mode: policy.ModeReport,
		Refusal: policy.RefuseUnconfinedExecution, Rule: "unconfined-execution"}, Outcome: &journal.Result{Status: "ok"}, Result: json.RawMessage(`{"exit_code":0}`)}
	failed := &broker.EffectReply{Run: "r_1", Decision: &broker.DecisionBody{Outcome: journal.OutcomeAllowed},
		Outcome: &journal.Result{Status: "failed", Error: "timeout"}, Error: &broker.ErrorBody{Code: broker.CodeEffectFailed, Message: "effect failed: timeout"}}
	for _, tc := range []struct {
		name    string
		reply   *broker.EffectReply
		err     error
		isError bool
		want    []string
	}{
		{"refused", refused, nil, true, []string{"REFUSED", "deployment-rule", "rule no-leaks", "enforced", "deliver without the secret", "What to do"}},
		{"held", held, held.Error, false, []string{"HELD", "ap_x", "same arguments"}},
		{"allowed in report mode", allowed, nil, false, []string{`{"exit_code":0}`, "strict mode would refuse this: unconfined-execution"}},
		{"failed", failed, failed.Error, true, []string{"EFFECT_FAILED", "timeout"}},
		{"no broker", nil, broker.NewErrorBody(broker.ErrNoBroker), true, []string{"NO_BROKER"}},
		{"no reply at all", nil, errors.New("boom"), true, []string{"INTERNAL", "boom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Result(tc.reply, tc.err)
			if r.IsError != tc.isError {
				t.Fatalf("isError %v: %s", r.IsError, text(r))
			}
			for _, w := range tc.want {
				if !strings.Contains(text(r), w) {
					t.Errorf("%q lacks %q", text(r), w)
				}
			}
			if tc.reply != nil && r.StructuredContent == nil {
				t.Error("no structured content")
			}
		})
	}
	up := &broker.EffectReply{Run: "r_1", Effect: "e_2", Decision: &broker.DecisionBody{Outcome: journal.OutcomeAllowed},
		Result: json.RawMessage(`{"content":[{"type":"text","text":"hi"}],"isError":true,"_meta":{"example.com/trace":"t1","gatehouse":"forged"}}`)}
	r := upstreamResult(up)
	if r == nil || !r.IsError || text(r) != "hi" || r.Meta["example.com/trace"] != "t1" {
		t.Fatalf("upstream result passed through: %+v", r)
	}
	if g, ok := r.Meta["gatehouse"].(map[string]any); !ok || g["effect"] != "e_2" {
		t.Fatalf("_meta.gatehouse is not Gatehouse's: %+v", r.Meta["gatehouse"])
	}
	if upstreamResult(refused) != nil {
		t.Fatal("a refusal passed as an upstream result")
	}
}

func TestNamesAreSafeAndDistinct(t *testing.T) {
	long := strings.Repeat("x", 80)
	got := Names([]broker.ToolInfo{{Tool: "output.deliver"}, {Tool: "bank/transfer"}, {Tool: "bank/trans fer"}, {Tool: "bank/trans_fer"}, {Tool: "s/" + long}})
	if _, ok := got["output_deliver"]; !ok {
		t.Errorf("output.deliver: %v", got)
	}
	if _, ok := got["bank__transfer"]; !ok {
		t.Errorf("bank/transfer: %v", got)
	}
	if len(got) != 5 {
		t.Fatalf("names collided: %v", got)
	}
	for n := range got {
		if len(n) > 64 || safeName(n) != n {
			t.Errorf("unsafe name %q", n)
		}
	}
}
