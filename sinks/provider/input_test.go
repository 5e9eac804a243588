package provider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// pinnedYAML takes the invoice from the caller's input, never from the
// request: the model chooses the call, not which invoice it pays.
const pinnedYAML = `grounding:
  - name: pinned-payment
    match: {provider: erp, method: POST, path: /payments}
    selectors_from: [input]
    bind:
      - {name: invoice, read: {provider: erp, path: "/invoices/{id}"}, where: {id: input.invoice}}
      - {name: supplier, read: {provider: erp, path: "/suppliers/{id}"}, where: {id: invoice.supplier_id}}
    require:
      - {field: request.json.invoice, equals: invoice.id, as: id}
      - {field: request.json.iban, equals: supplier.iban, as: iban}
      - {field: request.json.amount, at_most: invoice.amount_due, as: money}
      - {field: request.json.payee, equals: supplier.name, as: text}
      - {field: request.json.currency, equals: invoice.currency, as: exact}
    other_fields: deny
`

// TestSelectorsFromTheCallersInput pins the invoice through the input the
// application gave when it opened the work. The payment of the pinned
// invoice goes through; work opened without input, or an agent trying to
// bring its own input, gets nothing paid.
func TestSelectorsFromTheCallersInput(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{grounding: pinnedYAML})
	run := s.env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada", Input: json.RawMessage(`{"invoice":"INV-7"}`)})
	s.readBoth(t, run)
	before := s.erp.count("POST", "/payments")
	mustAllow(t, s.call(t, run, policy.OriginShipped, pay(honest)))
	if got := s.erp.count("POST", "/payments"); got != before+1 {
		t.Fatalf("payments %d, want %d", got, before+1)
	}

	// No input: the rule has no selector and refuses.
	bare := s.open(t, "ada")
	s.readBoth(t, bare)
	r := s.call(t, bare, policy.OriginShipped, pay(honest))
	mustRefuse(t, r, policy.RefuseUngrounded)
	if !strings.Contains(r.Decision.Reasons[0].Detail, "input") {
		t.Fatalf("reason does not say the input is missing: %q", r.Decision.Reasons[0].Detail)
	}

	// The agent cannot supply the input itself.
	raw := []byte(`{"run":"` + bare + `","action":"call","input":{"invoice":"INV-7"},"params":{}}`)
	msg, err := s.env.Agent.Conn().Request(subject.Effect(subject.Shared, policy.SinkProvider), raw, 5e9)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(msg.Data), "FORBIDDEN_FIELD") {
		t.Fatalf("an agent's input was not refused: %s", msg.Data)
	}
	if got := s.erp.count("POST", "/payments"); got != before+1 {
		t.Fatalf("payments %d, want %d", got, before+1)
	}
}
