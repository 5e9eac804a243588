package policy

import (
	"testing"
	"time"
)

// A rules file may name sink mcp in effects, approvals and scopes (it was
// refused as an unknown sink, so no deny rule, approval or scope limit could
// name MCP tool calls by their sink), and the rules decide MCP calls.
func TestRulesNameSinkMCP(t *testing.T) {
	p := mustParse(t, `
effects:
  - {name: no-wipe, decision: deny, match: {sink: mcp, target: "*/wipe"}}
approvals:
  - {name: publish, match: {sink: mcp, target: "*/publish"}, roles: [reviewer]}
scopes:
  require:
    - scope: payments.write
      match: {sink: mcp, target: "bank/pay"}
      limits: {amount: "100"}
`)
	who := Authority{For: Principal{Tenant: "acme", Person: "ada"}, Scopes: []string{"payments.write"}}
	mcp := func(target string, values map[string]string) Effect {
		return Effect{Sink: SinkMCP, Action: "call", Tool: target, Target: target, Provider: "bank", Class: EffectWrite, Values: values}
	}
	for _, tt := range []struct {
		name string
		e    Effect
		want Refusal
	}{
		{"deny rule", mcp("bank/wipe", nil), RefuseDeploymentRule},
		{"scope limit", mcp("bank/pay", map[string]string{"amount": "5000"}), RefuseOverScopeLimit},
		{"within the limit", mcp("bank/pay", map[string]string{"amount": "10"}), ""},
	} {
		d := p.Decide(Input{Mode: ModeStrict, Authority: who, Effect: tt.e, Now: time.Now()})
		if d.Refusal != tt.want {
			t.Errorf("%s: refusal %q, want %q (%+v)", tt.name, d.Refusal, tt.want, d)
		}
	}
	d := p.Decide(Input{Mode: ModeStrict, Authority: who, Effect: mcp("bank/publish", nil), Now: time.Now()})
	if d.Approval == nil {
		t.Errorf("approval rule on sink mcp: %+v", d)
	}
}

// A card's blocked_tools and require_approval_for hold for an upstream MCP
// tool whatever the case the server spells it in; allowed_tools stays
// exact, so it never widens by case.
func TestCardsMatchMCPToolsIgnoringCase(t *testing.T) {
	p := mustParse(t, `
agents:
  - name: bob
    allowed_tools: ["notes/read_*", "notes/Wipe_Notes", "notes/publish", "notes/PUBLISH"]
    blocked_tools: ["*/wipe_notes"]
    require_approval_for: ["*/publish"]
`)
	who := Authority{For: Principal{Tenant: "acme", Person: "ada"}, Agent: "bob"}
	decide := func(tool string) Decision {
		e := Effect{Sink: SinkMCP, Action: "call", Tool: tool, Target: tool, Provider: "notes", Class: EffectRead}
		return p.Decide(Input{Mode: ModeStrict, Authority: who, Effect: e, Now: time.Now()})
	}
	if d := decide("notes/Wipe_Notes"); d.Refusal != RefuseToolBlocked {
		t.Errorf("Wipe_Notes under a block of wipe_notes: %+v", d)
	}
	if d := decide("notes/PUBLISH"); d.Approval == nil {
		t.Errorf("PUBLISH under an approval for publish: %+v", d)
	}
	if d := decide("notes/READ_NOTE"); d.Refusal != RefuseToolNotAllowed {
		t.Errorf("READ_NOTE under an allow of read_*: %+v", d)
	}
	if d := decide("notes/read_note"); d.Verdict != VerdictAllow {
		t.Errorf("read_note: %+v", d)
	}
	// Not an MCP tool: cards match exactly, as before.
	e := Effect{Sink: SinkOutput, Action: "deliver", Tool: "OUTPUT.deliver"}
	if d := p.Decide(Input{Mode: ModeStrict, Authority: who, Effect: e, Now: time.Now()}); d.Refusal != RefuseToolNotAllowed {
		t.Errorf("an output tool: %+v", d)
	}
}
