package provider_test

import (
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// TestCheckPolicy: approvals and scopes about provider calls must fit a
// declared operation (paths as sent), and every provider, atom and host a
// rule names must be in the catalogue; deny rules may name undeclared
// paths.
func TestCheckPolicy(t *testing.T) {
	cat, err := provider.ParseCatalogue("providers.yaml", []byte(`providers:
  - {name: erp, base_url: "https://erp.example.com:8443/api", auth: {type: none}}
  - {name: erp-alt, base_url: "https://erp.example.com:8443/api", auth: {type: none}}
  - {name: crm, base_url: "https://crm.example.com/", auth: {type: none}}
integrations:
  - {name: erp.pay, provider: erp, effect: write, origin: shipped, operations: [{method: POST, template: /payments}, {method: GET, template: "/invoices/{id}"}]}
  - {name: erp-alt.pay, provider: erp-alt, effect: write, origin: shipped, operations: [{method: POST, template: /payments}]}
  - {name: crm.pay, provider: crm, effect: write, origin: shipped, operations: [{method: POST, template: /api/payments}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse("policy.yaml", []byte(`rules:
  - {name: no-admin, decision: deny, match: {provider: erp, method: DELETE}}
  - {name: typo, decision: deny, match: {provider: epr}}
effects:
  - {name: bare-path, decision: deny, match: {sink: provider, target: /api/payments}}
  - {name: no-base, decision: deny, match: {sink: provider, target: "erp.example.com:8443/payments"}}
  - {name: any-host, decision: deny, match: {sink: provider, target: "**/api/payments"}}
  - {name: whole-host, decision: deny, match: {sink: provider, target: "erp.example.com:8443/**"}}
  - {name: output-target, decision: deny, match: {sink: output, target: /leak}}
  - {name: every-sink, decision: deny, match: {target: "erp.example.com:8443/payments"}}
  - {name: every-sink-path, decision: deny, match: {target: "/tmp/x"}}
scopes:
  require:
    - {scope: payments.write, match: {provider: erp, method: POST, path: /api/payments}}
    - {scope: invoices.read, match: {provider: erp, path: "/api/invoices/*"}}
    - {scope: relative, match: {provider: erp, path: /payments}}
approvals:
  - {name: payments, match: {provider: erp, method: POST, path: /api/payments}, roles: [finance]}
  - {name: relative, match: {provider: erp, method: POST, path: /payments}, roles: [finance]}
  - {name: no-such-method, match: {provider: erp, method: PUT}, roles: [finance]}
  - {name: unknown-atom, match: {atom: erp.refund}, roles: [finance]}
  - {name: host, match: {host: erp.example.com, method: POST}, roles: [finance]}
  - {name: host-with-port, match: {host: "ERP.example.com:8443", method: POST}, roles: [finance]}
  - {name: outputs, match: {sink: output}, roles: [finance]}
  - {name: both-entries, match: {provider: [erp, erp-alt], method: POST, path: /api/payments}, roles: [finance]}
  - {name: by-atom, match: {atom: erp.pay, method: POST}, roles: [finance]}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range cat.CheckPolicy(pol) {
		got = append(got, p.String())
	}
	want := []string{
		`rules[1] "typo" match.provider: provider "epr" is not in the provider catalogue providers.yaml`,
		`effects[0] "bare-path" match.target: target /api/payments is a path, but a provider call's target is its host and path (such as erp.example.com:8443/api/...), so the rule matches no provider call; fix: write **/api/payments for any host, or the host and the path`,
		`effects[1] "no-base" match.target: target erp.example.com:8443/payments can match no provider call: every path sent starts with its provider's base path; fix: targets are host and path as sent: write erp.example.com:8443/api/payments`,
		`effects[5] "every-sink" match.target: target erp.example.com:8443/payments can match no provider call`,
		`scopes.require[0] "payments.write" match.provider: provider erp-alt has the server of erp (erp.example.com:8443) and declares POST /api/payments, which`,
		`scopes.require[2] "relative" match: the match fits no operation`,
		`approvals[0] "payments" match.provider: provider erp-alt has the server of erp (erp.example.com:8443) and declares POST /api/payments, which this rule does not reach, so a call through erp-alt skips it; fix: add erp-alt to match.provider, or match the server with host: erp.example.com:8443`,
		`approvals[1] "relative" match: the match fits no operation the catalogue declares, so it reaches no call made through an integration (paths are matched as sent); fix: provider erp's base_url has the path /api and paths are matched as sent: write /api/payments`,
		`approvals[2] "no-such-method" match: the match fits no operation`,
		`approvals[3] "unknown-atom" match.atom: integration "erp.refund" is not in the provider catalogue`,
		`approvals[4] "host" match.host: no provider of the catalogue has host "erp.example.com"`,
	}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s", strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// TestToolServers: grounding rules may match an upstream MCP server's tool
// calls (POST /tools/<tool> on provider <server>) once the server is
// named; without it the rule names an unknown provider.
func TestToolServers(t *testing.T) {
	cat, err := provider.ParseCatalogue("providers.yaml", []byte(catalogue("http://127.0.0.1:1")))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := grounding.Parse("g.yaml", []byte(`grounding:
  - name: upstream-transfer
    match: {provider: bank, path: /tools/transfer}
    bind: [{name: supplier, read: {provider: erp, path: "/suppliers/{id}"}, where: {id: request.json.supplier}}]
    require: [{field: request.json.iban, equals: supplier.iban, as: iban}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rules.Resolve(cat); err == nil || !strings.Contains(err.Error(), `provider "bank" is not in the provider catalogue`) {
		t.Fatalf("without the server: %v", err)
	}
	r, err := rules.Resolve(cat.WithToolServers("bank", "notes"))
	if err != nil || r.Resolved()[0].Operations[0].String() != "bank (MCP server) POST /tools/{tool}" {
		t.Fatalf("with the server: %v %+v", err, r.Resolved())
	}
	bad, err := grounding.Parse("g.yaml", []byte(`grounding:
  - name: t
    match: {provider: bank, path: /tool/transfer}
    selectors_from: [input]
    require: [{field: request.json.iban, equals: input.iban, as: iban}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Resolve(cat.WithToolServers("bank")); err == nil || !strings.Contains(err.Error(), "/tool/transfer fits no operation") {
		t.Fatalf("a misspelt tool path: %v", err)
	}
}

// TestSameServer: providers whose base URLs may reach one server are one
// server, whatever their base path, a final dot, the form of an IP
// literal, a loopback name or the web port (80 and 443); another host or
// port is another server.
func TestSameServer(t *testing.T) {
	cat, err := provider.ParseCatalogue("providers.yaml", []byte(`providers:
  - {name: a, base_url: "https://erp.example.com/api", auth: {type: none}}
  - {name: b, base_url: "http://ERP.example.com./", auth: {type: none}}
  - {name: c, base_url: "https://erp.example.com:8443", auth: {type: none}}
  - {name: d, base_url: "https://crm.example.com", auth: {type: none}}
  - {name: l1, base_url: "http://127.0.0.1:8080", auth: {type: none}}
  - {name: l2, base_url: "http://localhost:8080/v1", auth: {type: none}}
  - {name: l3, base_url: "http://[::ffff:127.0.0.1]:8080", auth: {type: none}}
  - {name: l4, base_url: "http://[::1]:8080", auth: {type: none}}
  - {name: l5, base_url: "http://127.0.0.1:8081", auth: {type: none}}
  - {name: ip, base_url: "http://10.0.0.1:8080", auth: {type: none}}
  - {name: ip6, base_url: "http://[::ffff:10.0.0.1]:8080", auth: {type: none}}
`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a": "a b", "c": "c", "d": "d", "l1": "l1 l2 l3 l4", "l5": "l5", "ip": "ip ip6"} {
		p, _ := cat.Provider(name)
		if got := strings.Join(cat.SameServer(p), " "); got != want {
			t.Errorf("SameServer(%s) = %s, want %s", name, got, want)
		}
	}
}
