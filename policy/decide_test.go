package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bmatcuk/doublestar/v4"
)

var now = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

// testRules is the rules file most cases decide under.
const testRules = `
rules:
  - name: no-stripe-writes
    decision: deny
    match: {provider: stripe, effect: [write, destructive]}
  - name: no-deletes-on-github
    decision: Deny
    match: {provider: github, method: delete}
  - name: blocked-by-odd-decision
    decision: block
    match: {provider: slack, method: [POST, PUT]}
  - name: no-unverified-jira
    decision: deny
    match: {provider: jira, verified: false, code_origin: model}
  - name: our-crm-client
    decision: allow
    match: {provider: hubspot, code_origin: direct}
  - name: lift-everything-on-evil
    decision: allow
    match: {provider: evil}
effects:
  - name: no-broadcast
    decision: deny
    match: {sink: peer, action: broadcast}
  - name: no-exports
    decision: deny
    match: {sink: artifact, target: "*/exports/*"}
  - name: no-deep-secrets
    decision: deny
    match: {sink: workspace, target: "secrets/**"}
  - name: ci-without-bubblewrap
    decision: allow
    match: {sink: code, agent: ci-bot}
  - name: our-app-api
    decision: allow
    match: {sink: browser, target: "api.example.com/*"}
  - name: browser-without-target
    decision: allow
    match: {sink: browser, action: send}
scopes:
  require:
    - scope: payments.write
      match: {provider: bank, method: POST, path: "/payments/*"}
      limits: {amount: "1000.00"}
    - scope: payments.write
      match: {provider: bank, host: API.BANK.EXAMPLE}
    - scope: crm.read
      match: {provider: hubspot}
agents:
  - name: invoice-bot
    allowed_tools: ["provider.*", output.deliver, "peer.*"]
    blocked_tools: [provider.delete*]
    require_approval_for: [provider.pay]
    allowed_delegations: ["auditor-*"]
  - name: blocker
    allowed_tools: ["*"]
    blocked_tools: ["*"]
  - name: free-bot
    allowed_tools: []
    blocked_tools: []
    allowed_delegations: []
`

func mustParse(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

// A shipped integration reading: allowed everywhere. Its contract holds
// every method on the path, so only its declared effect limits it.
func read() Effect {
	return Effect{Sink: SinkProvider, Action: "call", Origin: OriginShipped, Provider: "github",
		Method: "GET", Host: "api.github.com", Path: "/repos/x", Atom: "github.repos", Declared: EffectRead,
		Contract: &Contract{Operations: []Operation{{Method: "GET", Template: "/repos/{r}"}, {Method: "POST", Template: "/repos/{r}"},
			{Method: "PUT", Template: "/repos/{r}"}, {Method: "PATCH", Template: "/repos/{r}"}, {Method: "DELETE", Template: "/repos/{r}"}}}}
}

func with(e Effect, f func(*Effect)) Effect { f(&e); return e }

type want struct {
	verdict  Verdict
	refusal  Refusal
	rule     string
	enforced bool
	reasons  []Refusal // every finding in order; nil for none
	allowed  string
}

func TestDecide(t *testing.T) {
	p := mustParse(t, testRules)
	bank := func(amount string) Effect {
		e := Effect{Sink: SinkProvider, Action: "call", Origin: OriginShipped, Provider: "bank", Method: "POST",
			Host: "api.bank.example", Path: "/payments/new", Atom: "bank.pay", Declared: EffectWrite,
			Contract: &Contract{Operations: []Operation{{Method: "POST", Template: "/payments/new"}}}}
		if amount != "-" {
			e.Values = map[string]string{"amount": amount}
		}
		return e
	}
	payer := Authority{For: Principal{Tenant: "acme", Person: "ada"}, Scopes: []string{"payments.write"}}

	tests := []struct {
		name string
		mode Mode
		auth Authority
		eff  Effect
		want want
	}{
		// Modes.
		{"off allows anything", ModeOff, Authority{MandateUnreadable: true}, with(read(), func(e *Effect) { e.Method = "DELETE" }),
			want{verdict: VerdictAllow}},
		{"empty mode is report", "", Authority{}, read(), want{verdict: VerdictAllow}},
		{"strict allows a shipped read", ModeStrict, Authority{}, read(), want{verdict: VerdictAllow}},
		{"unknown mode refuses", "Strict", Authority{}, read(),
			want{VerdictRefuse, RefusePolicyUnreadable, "mode", true, []Refusal{RefusePolicyUnreadable}, ""}},

		// Mandate: enforced in report and strict.
		{"mandate unreadable", ModeReport, Authority{MandateUnreadable: true}, read(),
			want{VerdictRefuse, RefuseOutsideMandate, "mandate", true, []Refusal{RefuseOutsideMandate}, ""}},
		{"mandate expired", ModeReport, Authority{Mandate: &Mandate{ExpiresAt: now}}, read(),
			want{VerdictRefuse, RefuseOutsideMandate, "mandate.expires_at", true, []Refusal{RefuseOutsideMandate}, ""}},
		{"mandate not yet expired", ModeStrict, Authority{Mandate: &Mandate{ExpiresAt: now.Add(time.Nanosecond)}}, read(),
			want{verdict: VerdictAllow}},
		{"mandate system missing", ModeReport, Authority{Mandate: &Mandate{Systems: []string{"erp"}}}, read(),
			want{VerdictRefuse, RefuseOutsideMandate, "mandate.systems", true, []Refusal{RefuseOutsideMandate}, ""}},
		{"mandate system present", ModeStrict, Authority{Mandate: &Mandate{Systems: []string{"erp", "github"}}}, read(),
			want{verdict: VerdictAllow}},
		{"mandate system of a sink", ModeStrict, Authority{Mandate: &Mandate{Systems: []string{"output"}}},
			Effect{Sink: SinkOutput, Action: "deliver", Origin: OriginRuntime}, want{verdict: VerdictAllow}},
		{"mandate effect missing", ModeReport, Authority{Mandate: &Mandate{Effects: []EffectClass{EffectRead}}},
			with(read(), func(e *Effect) { e.Method = "PUT"; e.Declared = EffectWrite }),
			want{VerdictRefuse, RefuseOutsideMandate, "mandate.effects", true, []Refusal{RefuseOutsideMandate}, ""}},
		{"mandate effect of a sink", ModeReport, Authority{Mandate: &Mandate{Effects: []EffectClass{EffectRead}}},
			Effect{Sink: SinkMemory, Action: "keep", Origin: OriginRuntime},
			want{VerdictRefuse, RefuseOutsideMandate, "mandate.effects", true, []Refusal{RefuseOutsideMandate}, ""}},
		{"mandate effect from Class", ModeStrict, Authority{Mandate: &Mandate{Effects: []EffectClass{EffectNotify}}},
			Effect{Sink: SinkMemory, Action: "keep", Origin: OriginRuntime, Class: EffectNotify}, want{verdict: VerdictAllow}},
		{"mandate scopes lack a required scope", ModeReport, Authority{Scopes: []string{"payments.write"}, Mandate: &Mandate{Scopes: []string{"crm.read"}}}, bank("5"),
			want{VerdictRefuse, RefuseOutsideMandate, "mandate.scopes", true, []Refusal{RefuseOutsideMandate}, ""}},
		{"every mandate finding is listed", ModeReport, Authority{Mandate: &Mandate{ExpiresAt: now.Add(-time.Hour), Systems: []string{"erp"}, Effects: []EffectClass{EffectWrite}}}, read(),
			want{VerdictRefuse, RefuseOutsideMandate, "mandate.expires_at", true, []Refusal{RefuseOutsideMandate, RefuseOutsideMandate, RefuseOutsideMandate}, ""}},

		// Scopes: enforced in report and strict.
		{"scope held, under limit", ModeStrict, payer, bank("999.99"), want{verdict: VerdictAllow}},
		{"scope held, at limit with more zeros", ModeStrict, payer, bank("1000.0000"), want{verdict: VerdictAllow}},
		{"scope missing", ModeReport, Authority{}, bank("5"),
			want{VerdictRefuse, RefuseScopeMissing, "scope:payments.write", true, []Refusal{RefuseScopeMissing}, ""}},
		{"over limit by a thousandth", ModeReport, payer, bank("1000.001"),
			want{VerdictRefuse, RefuseOverScopeLimit, "scope:payments.write", true, []Refusal{RefuseOverScopeLimit}, ""}},
		{"limited value missing", ModeReport, payer, bank("-"),
			want{VerdictRefuse, RefuseOverScopeLimit, "scope:payments.write", true, []Refusal{RefuseOverScopeLimit}, ""}},
		{"limited value not a decimal", ModeReport, payer, bank("1e2"),
			want{VerdictRefuse, RefuseOverScopeLimit, "scope:payments.write", true, []Refusal{RefuseOverScopeLimit}, ""}},
		{"limited value float-looking", ModeReport, payer, bank("NaN"),
			want{VerdictRefuse, RefuseOverScopeLimit, "scope:payments.write", true, []Refusal{RefuseOverScopeLimit}, ""}},
		{"scope host match ignores case", ModeReport, Authority{}, with(bank("1"), func(e *Effect) {
			e.Path = "/accounts"
			e.Contract = &Contract{Operations: []Operation{{Method: "POST", Template: "/accounts"}}}
		}),
			want{VerdictRefuse, RefuseScopeMissing, "scope:payments.write", true, []Refusal{RefuseScopeMissing}, ""}},
		{"scope missing and over limit", ModeReport, Authority{}, bank("2000"),
			want{VerdictRefuse, RefuseScopeMissing, "scope:payments.write", true, []Refusal{RefuseScopeMissing, RefuseOverScopeLimit}, ""}},

		// Agent cards: strict enforces, report records.
		{"card: unregistered, strict", ModeStrict, Authority{Agent: "stranger"}, read(),
			want{VerdictRefuse, RefuseAgentUnregistered, "agent:stranger", true, []Refusal{RefuseAgentUnregistered}, ""}},
		{"card: unregistered, report records", ModeReport, Authority{Agent: "stranger"}, read(),
			want{VerdictAllow, RefuseAgentUnregistered, "agent:stranger", false, []Refusal{RefuseAgentUnregistered}, ""}},
		{"card: allowed tool", ModeStrict, Authority{Agent: "invoice-bot"}, read(), want{verdict: VerdictAllow}},
		{"card: block wins over allow", ModeStrict, Authority{Agent: "invoice-bot"}, with(read(), func(e *Effect) { e.Tool = "provider.delete_invoice" }),
			want{VerdictRefuse, RefuseToolBlocked, "agent:invoice-bot", true, []Refusal{RefuseToolBlocked}, ""}},
		{"card: block all", ModeStrict, Authority{Agent: "blocker"}, read(),
			want{VerdictRefuse, RefuseToolBlocked, "agent:blocker", true, []Refusal{RefuseToolBlocked}, ""}},
		{"card: tool not allowed", ModeStrict, Authority{Agent: "invoice-bot"}, Effect{Sink: SinkMemory, Action: "keep", Origin: OriginRuntime},
			want{VerdictRefuse, RefuseToolNotAllowed, "agent:invoice-bot", true, []Refusal{RefuseToolNotAllowed}, ""}},
		{"card: delegation allowed", ModeStrict, Authority{Agent: "invoice-bot"}, Effect{Sink: SinkPeer, Action: "delegate", Recipient: "auditor-1", Origin: OriginRuntime},
			want{verdict: VerdictAllow}},
		{"card: delegation not allowed", ModeStrict, Authority{Agent: "invoice-bot"}, Effect{Sink: SinkPeer, Action: "delegate", Recipient: "payer", Origin: OriginRuntime},
			want{VerdictRefuse, RefuseDelegationNotAllowed, "agent:invoice-bot", true, []Refusal{RefuseDelegationNotAllowed}, ""}},
		{"card: approval holds in strict", ModeStrict, Authority{Agent: "invoice-bot"}, with(read(), func(e *Effect) { e.Tool = "provider.pay" }),
			want{VerdictHold, RefuseApprovalMissing, "agent:invoice-bot", true, []Refusal{RefuseApprovalMissing}, ""}},
		{"card: approval recorded in report", ModeReport, Authority{Agent: "invoice-bot"}, with(read(), func(e *Effect) { e.Tool = "provider.pay" }),
			want{VerdictAllow, RefuseApprovalMissing, "agent:invoice-bot", false, []Refusal{RefuseApprovalMissing}, ""}},
		{"card: a refusal beats a hold", ModeStrict, Authority{Agent: "invoice-bot"}, with(read(), func(e *Effect) { e.Tool = "provider.pay"; e.Provider = "stripe"; e.Declared = EffectWrite }),
			want{VerdictRefuse, RefuseDeploymentRule, "no-stripe-writes", true, []Refusal{RefuseApprovalMissing, RefuseDeploymentRule}, ""}},
		{"card: empty lists restrict nothing", ModeStrict, Authority{Agent: "free-bot"}, Effect{Sink: SinkPeer, Action: "delegate", Recipient: "anyone", Origin: OriginRuntime},
			want{verdict: VerdictAllow}},

		// Deployment rules.
		{"deny rule, strict", ModeStrict, Authority{}, with(read(), func(e *Effect) { e.Provider = "stripe"; e.Method = "POST"; e.Declared = EffectWrite }),
			want{VerdictRefuse, RefuseDeploymentRule, "no-stripe-writes", true, []Refusal{RefuseDeploymentRule}, ""}},
		{"deny rule, report records", ModeReport, Authority{}, with(read(), func(e *Effect) { e.Provider = "stripe"; e.Method = "POST"; e.Declared = EffectWrite }),
			want{VerdictAllow, RefuseDeploymentRule, "no-stripe-writes", false, []Refusal{RefuseDeploymentRule}, ""}},
		{"deny rule list misses", ModeStrict, Authority{}, with(read(), func(e *Effect) { e.Provider = "stripe" }), want{verdict: VerdictAllow}},
		{"method matched ignoring case, Deny denies", ModeStrict, Authority{}, with(read(), func(e *Effect) { e.Method = "Delete"; e.Declared = EffectDestructive }),
			want{VerdictRefuse, RefuseDeploymentRule, "no-deletes-on-github", true, []Refusal{RefuseDeploymentRule}, ""}},
		{"any other decision denies", ModeStrict, Authority{}, with(read(), func(e *Effect) { e.Provider = "slack"; e.Method = "PUT"; e.Declared = EffectWrite }),
			want{VerdictRefuse, RefuseDeploymentRule, "blocked-by-odd-decision", true, []Refusal{RefuseDeploymentRule}, ""}},
		{"effects rule: action", ModeStrict, Authority{}, Effect{Sink: SinkPeer, Action: "broadcast", Origin: OriginRuntime},
			want{VerdictRefuse, RefuseDeploymentRule, "no-broadcast", true, []Refusal{RefuseDeploymentRule}, ""}},
		{"effects rule: * stays in a segment", ModeStrict, Authority{}, Effect{Sink: SinkArtifact, Action: "publish", Target: "run1/exports/a.csv", Origin: OriginRuntime},
			want{VerdictRefuse, RefuseDeploymentRule, "no-exports", true, []Refusal{RefuseDeploymentRule}, ""}},
		{"effects rule: * does not cross /", ModeStrict, Authority{}, Effect{Sink: SinkArtifact, Action: "publish", Target: "run1/exports/deep/a.csv", Origin: OriginRuntime},
			want{verdict: VerdictAllow}},
		{"effects rule: ** crosses /", ModeStrict, Authority{}, Effect{Sink: SinkWorkspace, Action: "write", Target: "secrets/a/b/c.txt", Origin: OriginRuntime},
			want{VerdictRefuse, RefuseDeploymentRule, "no-deep-secrets", true, []Refusal{RefuseDeploymentRule}, ""}},
		{"rules: do not apply to other sinks", ModeStrict, Authority{}, Effect{Sink: SinkOutput, Action: "deliver", Provider: "stripe", Declared: EffectWrite, Origin: OriginRuntime},
			want{verdict: VerdictAllow}},
		{"verified: false matches an unverifiable call", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "jira", Method: "GET", Atom: "j", Declared: EffectRead, Origin: OriginModel,
			Contract: &Contract{Operations: []Operation{{Method: "GET", Template: "/issue/{id}"}}}, Path: "/search"},
			want{VerdictRefuse, RefuseDeploymentRule, "no-unverified-jira", true, []Refusal{RefuseDeploymentRule}, ""}},
		{"verified: false misses a verified call", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "jira", Method: "GET", Atom: "j", Declared: EffectRead, Origin: OriginModel,
			Contract: &Contract{Operations: []Operation{{Method: "GET", Template: "/issue/{id}"}}}, Path: "/issue/7"},
			want{verdict: VerdictAllow}},

		// Built-ins: mutation-without-atom.
		{"atomless POST", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "github", Method: "POST", Origin: OriginDirect},
			want{VerdictRefuse, RefuseMutationWithoutAtom, "mutation-without-atom", true, []Refusal{RefuseMutationWithoutAtom}, ""}},
		{"atomless POST recorded in report", ModeReport, Authority{}, Effect{Sink: SinkProvider, Provider: "github", Method: "POST", Origin: OriginDirect},
			want{VerdictAllow, RefuseMutationWithoutAtom, "mutation-without-atom", false, []Refusal{RefuseMutationWithoutAtom}, ""}},
		{"atom without declared effect", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "github", Method: "PATCH", Atom: "gh", Origin: OriginShipped},
			want{VerdictRefuse, RefuseMutationWithoutAtom, "mutation-without-atom", true, []Refusal{RefuseMutationWithoutAtom}, ""}},
		{"allow rule lifts atomless mutation", ModeStrict, Authority{Scopes: []string{"crm.read"}}, Effect{Sink: SinkProvider, Provider: "hubspot", Method: "POST", Origin: OriginDirect},
			want{verdict: VerdictAllow, allowed: "our-crm-client"}},
		{"atomless GET is fine", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "github", Method: "GET", Origin: OriginDirect},
			want{verdict: VerdictAllow}},

		// beyond-declared-effect, not liftable.
		{"read that PUTs", ModeStrict, Authority{}, with(read(), func(e *Effect) { e.Method = "PUT" }),
			want{VerdictRefuse, RefuseBeyondDeclaredEffect, "beyond-declared-effect", true, []Refusal{RefuseBeyondDeclaredEffect}, ""}},
		{"read may POST", ModeStrict, Authority{}, with(read(), func(e *Effect) { e.Method = "POST" }), want{verdict: VerdictAllow}},
		{"notify may POST", ModeStrict, Authority{}, with(read(), func(e *Effect) { e.Method = "POST"; e.Declared = EffectNotify }), want{verdict: VerdictAllow}},
		{"write that DELETEs", ModeStrict, Authority{}, with(read(), func(e *Effect) { e.Provider = "gitlab"; e.Method = "DELETE"; e.Declared = EffectWrite }),
			want{VerdictRefuse, RefuseBeyondDeclaredEffect, "beyond-declared-effect", true, []Refusal{RefuseBeyondDeclaredEffect}, ""}},
		{"destructive may DELETE", ModeStrict, Authority{}, with(read(), func(e *Effect) { e.Provider = "gitlab"; e.Method = "DELETE"; e.Declared = EffectDestructive }), want{verdict: VerdictAllow}},
		{"unknown declared class allows nothing", ModeStrict, Authority{}, with(read(), func(e *Effect) { e.Declared = "admin" }),
			want{VerdictRefuse, RefuseBeyondDeclaredEffect, "beyond-declared-effect", true, []Refusal{RefuseBeyondDeclaredEffect}, ""}},
		{"allow rule does not lift beyond-declared", ModeStrict, Authority{}, with(read(), func(e *Effect) { e.Provider = "evil"; e.Method = "DELETE" }),
			want{VerdictRefuse, RefuseBeyondDeclaredEffect, "beyond-declared-effect", true, []Refusal{RefuseBeyondDeclaredEffect}, ""}},

		// Contracts.
		{"model code inside its contract", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "erp", Method: "post", Path: "/invoices/7/pay?x=1", Atom: "erp.pay", Declared: EffectWrite, Origin: OriginModel,
			Contract: &Contract{Operations: []Operation{{Method: "GET", Template: "/invoices"}, {Method: "POST", Template: "/invoices/{id}/pay"}}}},
			want{verdict: VerdictAllow}},
		{"model code outside its contract", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "erp", Method: "POST", Path: "/invoices/7/refund", Atom: "erp.pay", Declared: EffectWrite, Origin: OriginModel,
			Contract: &Contract{Operations: []Operation{{Method: "POST", Template: "/invoices/{id}/pay"}}}},
			want{VerdictRefuse, RefuseOutsideContract, "outside-contract", true, []Refusal{RefuseOutsideContract}, ""}},
		{"template var needs a non-empty segment", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "erp", Method: "POST", Path: "/invoices//pay", Atom: "erp.pay", Declared: EffectWrite, Origin: OriginRegistry,
			Contract: &Contract{Operations: []Operation{{Method: "POST", Template: "/invoices/{id}/pay"}}}},
			want{VerdictRefuse, RefuseOutsideContract, "outside-contract", true, []Refusal{RefuseOutsideContract}, ""}},
		{"template var is one segment", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "erp", Method: "POST", Path: "/invoices/7/8/pay", Atom: "erp.pay", Declared: EffectWrite, Origin: OriginRegistry,
			Contract: &Contract{Operations: []Operation{{Method: "POST", Template: "/invoices/{id}/pay"}}}},
			want{VerdictRefuse, RefuseOutsideContract, "outside-contract", true, []Refusal{RefuseOutsideContract}, ""}},
		{"model code without a contract", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "erp", Method: "PUT", Path: "/x", Atom: "erp.pay", Declared: EffectWrite, Origin: OriginModel},
			want{VerdictRefuse, RefuseUnverifiedModelCode, "unverified-model-code", true, []Refusal{RefuseUnverifiedModelCode}, ""}},
		{"model code without a contract may read", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "erp", Method: "GET", Path: "/x", Atom: "erp.read", Declared: EffectRead, Origin: OriginModel},
			want{verdict: VerdictAllow}},
		{"unknown origin held like model code", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "erp", Method: "PUT", Path: "/x", Atom: "erp.pay", Declared: EffectWrite},
			want{VerdictRefuse, RefuseUnverifiedModelCode, "unverified-model-code", true, []Refusal{RefuseUnverifiedModelCode}, ""}},
		{"allow rule lifts atomless only, not unverified", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "evil", Method: "POST", Origin: OriginModel},
			want{VerdictRefuse, RefuseUnverifiedModelCode, "unverified-model-code", true, []Refusal{RefuseUnverifiedModelCode}, "lift-everything-on-evil"}},
		{"allow rule does not lift outside-contract", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "evil", Method: "POST", Path: "/b", Atom: "e", Declared: EffectWrite, Origin: OriginModel,
			Contract: &Contract{Operations: []Operation{{Method: "POST", Template: "/a"}}}},
			want{VerdictRefuse, RefuseOutsideContract, "outside-contract", true, []Refusal{RefuseOutsideContract}, ""}},
		{"allow rule does not lift scope-missing", ModeStrict, Authority{}, Effect{Sink: SinkProvider, Provider: "hubspot", Method: "POST", Origin: OriginDirect},
			want{verdict: VerdictAllow, allowed: "our-crm-client"}}, // placeholder, replaced below
		{"allow rule does not lift a mandate", ModeStrict, Authority{Mandate: &Mandate{Systems: []string{"erp"}}}, Effect{Sink: SinkProvider, Provider: "evil", Method: "POST", Origin: OriginDirect},
			want{VerdictRefuse, RefuseOutsideMandate, "mandate.systems", true, []Refusal{RefuseOutsideMandate}, "lift-everything-on-evil"}},

		// unconfined-execution.
		{"model code unconfined", ModeStrict, Authority{}, Effect{Sink: SinkCode, Action: "run", Origin: OriginModel},
			want{VerdictRefuse, RefuseUnconfinedExecution, "unconfined-execution", true, []Refusal{RefuseUnconfinedExecution}, ""}},
		{"registry code unconfined, report", ModeReport, Authority{}, Effect{Sink: SinkCode, Action: "run", Origin: OriginRegistry},
			want{VerdictAllow, RefuseUnconfinedExecution, "unconfined-execution", false, []Refusal{RefuseUnconfinedExecution}, ""}},
		{"model code confined", ModeStrict, Authority{}, Effect{Sink: SinkCode, Action: "run", Origin: OriginModel, Confined: true}, want{verdict: VerdictAllow}},
		{"shipped code unconfined runs", ModeStrict, Authority{}, Effect{Sink: SinkCode, Action: "run", Origin: OriginShipped}, want{verdict: VerdictAllow}},
		{"allow rule lifts unconfined", ModeStrict, Authority{Agent: "free-bot"}, Effect{Sink: SinkCode, Action: "run", Origin: OriginModel},
			want{verdict: VerdictAllow}}, // free-bot is not ci-bot: replaced below
		{"model host command", ModeStrict, Authority{}, Effect{Sink: SinkProcess, Action: "run", Origin: OriginModel, Confined: true},
			want{VerdictRefuse, RefuseUnconfinedExecution, "unconfined-execution", true, []Refusal{RefuseUnconfinedExecution}, ""}},
		{"runtime host command", ModeStrict, Authority{}, Effect{Sink: SinkProcess, Action: "run", Origin: OriginRuntime}, want{verdict: VerdictAllow}},

		// browser-send-off-site.
		{"browser posts to its own site", ModeStrict, Authority{}, Effect{Sink: SinkBrowser, Action: "send", Method: "POST", Host: "Shop.example", PageHost: "shop.example", Target: "shop.example/cart"},
			want{verdict: VerdictAllow}},
		{"browser posts off site", ModeStrict, Authority{}, Effect{Sink: SinkBrowser, Action: "send", Method: "POST", Host: "evil.example", PageHost: "shop.example", Target: "evil.example/collect"},
			want{VerdictRefuse, RefuseBrowserSendOffSite, "browser-send-off-site", true, []Refusal{RefuseBrowserSendOffSite}, ""}},
		{"browser GET off site is a read", ModeStrict, Authority{}, Effect{Sink: SinkBrowser, Action: "send", Method: "GET", Host: "cdn.example", PageHost: "shop.example", Target: "cdn.example/x"},
			want{verdict: VerdictAllow}},
		{"browser allow rule with target lifts", ModeStrict, Authority{}, Effect{Sink: SinkBrowser, Action: "send", Method: "POST", Host: "api.example.com", PageHost: "shop.example", Target: "api.example.com/orders"},
			want{verdict: VerdictAllow, allowed: "our-app-api"}},
		{"browser target * does not cross /", ModeStrict, Authority{}, Effect{Sink: SinkBrowser, Action: "send", Method: "POST", Host: "api.example.com", PageHost: "shop.example", Target: "api.example.com/v1/orders"},
			want{VerdictRefuse, RefuseBrowserSendOffSite, "browser-send-off-site", true, []Refusal{RefuseBrowserSendOffSite}, ""}},
		{"browser without page host", ModeStrict, Authority{}, Effect{Sink: SinkBrowser, Action: "send", Method: "POST", Target: "x/y"},
			want{VerdictRefuse, RefuseBrowserSendOffSite, "browser-send-off-site", true, []Refusal{RefuseBrowserSendOffSite}, ""}},

		// Order: mandate, scopes, cards, deployment, built-ins.
		{"findings in order", ModeReport, Authority{Agent: "stranger", Mandate: &Mandate{Systems: []string{"erp"}}}, Effect{Sink: SinkProvider, Provider: "stripe", Method: "DELETE", Atom: "s", Declared: EffectWrite, Origin: OriginModel},
			want{VerdictRefuse, RefuseOutsideMandate, "mandate.systems", true,
				[]Refusal{RefuseOutsideMandate, RefuseAgentUnregistered, RefuseDeploymentRule, RefuseBeyondDeclaredEffect, RefuseUnverifiedModelCode}, ""}},
	}
	// Two cases need their own authority to say what they test.
	for i := range tests {
		switch tests[i].name {
		case "allow rule does not lift scope-missing":
			// hubspot needs crm.read; the allow rule lifts the atomless
			// mutation but not the missing scope.
			tests[i].want = want{VerdictRefuse, RefuseScopeMissing, "scope:crm.read", true, []Refusal{RefuseScopeMissing}, "our-crm-client"}
		case "allow rule lifts unconfined":
			tests[i].auth = Authority{Agent: "ci-bot"}
			tests[i].want = want{VerdictRefuse, RefuseAgentUnregistered, "agent:ci-bot", true, []Refusal{RefuseAgentUnregistered}, "ci-without-bubblewrap"}
		}
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Decide(Input{Mode: tt.mode, Authority: tt.auth, Effect: tt.eff, Now: now})
			check(t, d, tt.want)
			if d.Mode == "" {
				t.Errorf("Decision.Mode is empty")
			}
			for _, r := range d.Reasons {
				if r.Detail == "" || !strings.HasSuffix(r.Detail, ".") {
					t.Errorf("reason %s has no sentence for a person: %q", r.Refusal, r.Detail)
				}
			}
		})
	}
}

func check(t *testing.T, d Decision, w want) {
	t.Helper()
	if d.Verdict != w.verdict || d.Refusal != w.refusal || d.Rule != w.rule || d.Enforced != w.enforced || d.Allowed != w.allowed {
		t.Errorf("got verdict=%v refusal=%q rule=%q enforced=%v allowed=%q\nwant verdict=%v refusal=%q rule=%q enforced=%v allowed=%q\nreasons: %+v",
			d.Verdict, d.Refusal, d.Rule, d.Enforced, d.Allowed, w.verdict, w.refusal, w.rule, w.enforced, w.allowed, d.Reasons)
	}
	var got []Refusal
	for _, r := range d.Reasons {
		got = append(got, r.Refusal)
	}
	if strings.Join(refusals(got), ",") != strings.Join(refusals(w.reasons), ",") {
		t.Errorf("reasons %v, want %v", got, w.reasons)
	}
	if w.reasons == nil && d.Reasons != nil {
		t.Errorf("Reasons is %#v, want nil", d.Reasons)
	}
}

func refusals(rs []Refusal) []string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return s
}

// Mandate and scope findings are enforced in report mode; everything else
// only in strict.
func TestReasonEnforcement(t *testing.T) {
	p := mustParse(t, testRules)
	in := Input{Mode: ModeReport, Now: now,
		Authority: Authority{Agent: "stranger", Mandate: &Mandate{Systems: []string{"erp"}}},
		Effect:    Effect{Sink: SinkProvider, Provider: "bank", Method: "POST", Path: "/payments/1", Origin: OriginModel}}
	for _, mode := range []Mode{ModeReport, ModeStrict} {
		in.Mode = mode
		d := p.Decide(in)
		for _, r := range d.Reasons {
			personal := r.Refusal == RefuseOutsideMandate || r.Refusal == RefuseScopeMissing || r.Refusal == RefuseOverScopeLimit
			if r.Enforced != (personal || mode == ModeStrict) {
				t.Errorf("%s: %s enforced=%v", mode, r.Refusal, r.Enforced)
			}
		}
		if d.Verdict != VerdictRefuse || d.Refusal != RefuseOutsideMandate {
			t.Errorf("%s: %v %s", mode, d.Verdict, d.Refusal)
		}
	}
}

func TestZeroAndNilPolicyRefuse(t *testing.T) {
	var zero Policy
	var nilp *Policy
	for _, p := range []*Policy{&zero, nilp, Unreadable("rules.yaml", errors.New("line 3: bad"))} {
		for _, mode := range []Mode{"", ModeReport, ModeStrict} {
			d := p.Decide(Input{Mode: mode, Effect: read(), Now: now})
			if d.Verdict != VerdictRefuse || d.Refusal != RefusePolicyUnreadable || !d.Enforced || len(d.Reasons) != 1 {
				t.Errorf("%q: %+v", mode, d)
			}
		}
	}
	d := Unreadable("rules.yaml", errors.New("line 3: bad")).Decide(Input{Mode: ModeReport, Effect: read()})
	if !strings.Contains(d.Reasons[0].Detail, "rules.yaml") || !strings.Contains(d.Reasons[0].Detail, "line 3: bad") {
		t.Errorf("detail does not name the file and problem: %q", d.Reasons[0].Detail)
	}
	if (&zero).Digest() != "" || nilp.Digest() != "" || nilp.Name() != "" {
		t.Errorf("zero or nil policy has a digest or name")
	}
	var zd Decision
	if zd.Verdict != VerdictRefuse {
		t.Errorf("the zero Decision does not refuse")
	}
}

func TestDefault(t *testing.T) {
	p := Default()
	if p.Digest() != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" || p.Name() != "" {
		t.Errorf("Default: digest %s name %q", p.Digest(), p.Name())
	}
	if d := p.Decide(Input{Mode: ModeStrict, Effect: read()}); d.Verdict != VerdictAllow || d.Reasons != nil {
		t.Errorf("Default refused a read: %+v", d)
	}
	d := p.Decide(Input{Mode: ModeStrict, Effect: Effect{Sink: SinkProvider, Method: "POST", Origin: OriginDirect}})
	if d.Verdict != VerdictRefuse || d.Refusal != RefuseMutationWithoutAtom {
		t.Errorf("Default allowed an atomless POST: %+v", d)
	}
	d = p.Decide(Input{Mode: ModeStrict, Authority: Authority{Agent: "a"}, Effect: read()})
	if d.Refusal != RefuseAgentUnregistered {
		t.Errorf("Default without cards let an agent act: %+v", d)
	}
}

func TestScopesChecked(t *testing.T) {
	p := mustParse(t, testRules)
	e := Effect{Sink: SinkProvider, Provider: "bank", Method: "POST", Host: "api.bank.example", Path: "/payments/1",
		Atom: "b", Declared: EffectWrite, Origin: OriginShipped, Values: map[string]string{"amount": "1"},
		Contract: &Contract{Operations: []Operation{{Method: "POST", Template: "/payments/{id}"}}}}
	d := p.Decide(Input{Mode: ModeStrict, Authority: Authority{Scopes: []string{"payments.write"}}, Effect: e})
	if d.Verdict != VerdictAllow || len(d.ScopesChecked) != 1 || d.ScopesChecked[0] != "payments.write" {
		t.Errorf("got %v %v", d.Verdict, d.ScopesChecked)
	}
	if d := p.Decide(Input{Mode: ModeStrict, Effect: read()}); d.ScopesChecked != nil {
		t.Errorf("ScopesChecked = %v for an effect no scope applies to", d.ScopesChecked)
	}
}

func TestVerified(t *testing.T) {
	e := Effect{Sink: SinkProvider, Provider: "erp", Method: "GET", Path: "/invoices/1", Atom: "a", Declared: EffectRead, Origin: OriginShipped,
		Contract: &Contract{Operations: []Operation{{Method: "GET", Template: "/invoices/{id}"}}}}
	if d := Default().Decide(Input{Mode: ModeStrict, Effect: e}); !d.Verified {
		t.Errorf("a call in the contract is not Verified")
	}
	e.Path = "/invoices"
	if d := Default().Decide(Input{Mode: ModeStrict, Effect: e}); d.Verified {
		t.Errorf("a call outside the contract is Verified")
	}
}

func TestTemplateMatch(t *testing.T) {
	tests := []struct {
		tmpl, path string
		want       bool
	}{
		{"/invoices/{id}", "/invoices/42", true},
		{"/invoices/{id}", "/invoices/", false},
		{"/invoices/{id}", "/invoices", false},
		{"/invoices/{id}", "/invoices/42/x", false},
		{"/invoices", "/invoices/", false},
		{"/a/{x}/b/{y}", "/a/1/b/2", true},
		{"/a/{x}/b/{y}", "/a/1/c/2", false},
		{"", "", true},
		{"/", "/", true},
		{"/{}", "/x", true},
	}
	for _, tt := range tests {
		if got := templateMatch(tt.tmpl, tt.path); got != tt.want {
			t.Errorf("templateMatch(%q, %q) = %v", tt.tmpl, tt.path, got)
		}
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeReport, "off": ModeOff, " Report ": ModeReport, "STRICT": ModeStrict} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseMode("enforce"); !errors.Is(err, ErrUnknownMode) {
		t.Errorf("ParseMode(enforce): %v", err)
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{VerdictRefuse: "refuse", VerdictAllow: "allow", VerdictHold: "hold", 9: "verdict(9)"} {
		if v.String() != want {
			t.Errorf("%d: %q", v, v.String())
		}
	}
}

func TestMandateDigest(t *testing.T) {
	a := &Mandate{Systems: []string{"erp"}, Effects: []EffectClass{EffectRead}, ExpiresAt: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	b := &Mandate{Systems: []string{"erp"}, Effects: []EffectClass{EffectRead}, Scopes: []string{},
		ExpiresAt: time.Date(2026, 11, 1, 2, 0, 0, 0, time.FixedZone("CEST", 2*3600))}
	if a.Digest() != b.Digest() || !strings.HasPrefix(a.Digest(), "sha256:") || len(a.Digest()) != 7+64 {
		t.Errorf("same mandate, different digests: %s %s", a.Digest(), b.Digest())
	}
	c := *a
	c.Systems = []string{"crm"}
	if c.Digest() == a.Digest() {
		t.Errorf("different mandates, same digest")
	}
	var nilm *Mandate
	if nilm.Digest() != "" {
		t.Errorf("nil mandate has a digest")
	}
	// The digest is over canonical JSON: keys sorted, no spaces.
	if got, want := (&Mandate{Systems: []string{"erp"}}).Digest(), "sha256:"+sha256hex(`{"systems":["erp"]}`); got != want {
		t.Errorf("digest %s, want %s", got, want)
	}
}

// An allowed effect allocates nothing.
func TestDecideAllowedAllocatesNothing(t *testing.T) {
	p := mustParse(t, testRules)
	in := Input{Mode: ModeStrict, Now: now, Authority: Authority{Mandate: &Mandate{Systems: []string{"github"}, ExpiresAt: now.Add(time.Hour)}},
		Effect: read()}
	if d := p.Decide(in); d.Verdict != VerdictAllow {
		t.Fatalf("not allowed: %+v", d)
	}
	if n := testing.AllocsPerRun(100, func() { p.Decide(in) }); n != 0 {
		t.Errorf("Decide of an allowed effect allocates %v times", n)
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// The prefix shortcut must agree with doublestar on every pattern.
func TestGlobShortcut(t *testing.T) {
	patterns := []string{"api.example.com/*", "api.example.com/**", "literal/path", "", "*", "**", "a/{b,c}/d", `a\*b`, "a?c", "[ab]/x", "secrets/**/key"}
	names := []string{"", "api.example.com/", "api.example.com/v1", "api.example.com/v1/x", "api.example.com", "literal/path", "literal/path/", "a/b/d", "a/c/d", "a*b", "abc", "a/x", "secrets/key", "secrets/a/b/key", "x"}
	for _, pat := range patterns {
		g := newGlob(pat)
		for _, n := range names {
			want, _ := doublestar.Match(pat, n)
			if got := doubleAny([]glob{g}, n); got != want {
				t.Errorf("%q vs %q: shortcut %v, doublestar %v", pat, n, got, want)
			}
		}
	}
}
