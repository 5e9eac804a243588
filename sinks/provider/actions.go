package provider

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

var _ broker.ActionDescriber = (*Sink)(nil)

// Actions implements broker.ActionDescriber.
func (s *Sink) Actions() []broker.Action {
	return []broker.Action{{
		Sink: policy.SinkProvider, Name: ActionCall, Title: "Call a connected provider",
		Description: "Send one HTTP request to a provider the deployment connected (an ERP, a CRM, a payment API), " +
			"with the credential of the person this work is for, which Gatehouse adds after the decision and never " +
			"shows you. The reply carries the provider's status, headers and body. The policy decides it on what is " +
			"about to be sent: the provider, method, host and path, the integration (atom) and its declared effect, " +
			"scopes and their limits on the body, and grounding of the values it sends in records read earlier in " +
			"this work. A write without an integration is refused in strict mode (mutation-without-atom).",
		Params: Params{},
		Fields: map[string]string{
			"provider":     "the provider's name in the deployment's catalogue, such as erp",
			"method":       "GET, HEAD, OPTIONS, POST, PUT, PATCH or DELETE",
			"path":         "the path under the provider's base URL, such as /invoices/7; it cannot leave the base path",
			"query":        "query parameters: name to a list of values",
			"headers":      "extra request headers, only those the provider's headers_allowed lists",
			"body":         "a JSON body, sent byte for byte as given",
			"body_base64":  "any other body, base64, with content_type",
			"content_type": "the body's media type (default application/json for body)",
			"atom":         "the integration this call belongs to, such as erp.pay; it brings the catalogue's declared effect and contract",
			"declared":     "the integration's declared effect (read, write, destructive, notify); must match the catalogue's, it can never widen it",
			"operation_id": "an idempotency key sent in the provider's idempotency header, so a retried payment is made once",
		},
		Mutates: true, Class: "", System: "",
		Examples: []json.RawMessage{
			json.RawMessage(`{"provider": "erp", "method": "POST", "path": "/payments", "query": {"x": ["1"]}, "headers": {"Accept": "application/json"}, "body": {"amount": "10"}, "atom": "erp.pay", "declared": "write", "operation_id": "pay-1"}`),
			json.RawMessage(`{"provider": "erp", "method": "PUT", "path": "/files/1", "body_base64": "aGk=", "content_type": "text/plain"}`),
		},
	}}
}
