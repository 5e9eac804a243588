package provider_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// TestProgramContractFromTheCodeSink: the contract the code sink puts on
// the context, in process, is what registry and model code is held to
// (templates joined to the base path; nil when it could not be read);
// code of other origins, and calls without one, keep the catalogue's.
func TestProgramContractFromTheCodeSink(t *testing.T) {
	cat, err := provider.ParseCatalogue("c.yaml", []byte(catalogue("https://erp.example.com/api")))
	if err != nil {
		t.Fatal(err)
	}
	s, err := provider.New(context.Background(), nil, provider.Config{Catalogue: cat})
	if err != nil {
		t.Fatal(err)
	}
	run := &broker.Run{ID: broker.NewRunID(time.Now())}
	params := json.RawMessage(`{"provider":"erp","method":"POST","path":"/payments","atom":"erp.pay","body":{}}`)
	program := &policy.Contract{Operations: []policy.Operation{{Method: "post", Template: "/invoices/{id}/pay"}, {Method: "GET", Template: "/"}}}
	catalogued := &policy.Contract{Operations: []policy.Operation{{Method: "POST", Template: "/api/payments"}}}
	for _, tc := range []struct {
		name   string
		origin policy.Origin
		ctx    context.Context
		want   *policy.Contract
	}{
		{"model, read contract", policy.OriginModel, broker.ContextWithProgramContract(context.Background(), program),
			&policy.Contract{Operations: []policy.Operation{{Method: "POST", Template: "/api/invoices/{id}/pay"}, {Method: "GET", Template: "/api"}}}},
		{"registry, unreadable contract", policy.OriginRegistry, broker.ContextWithProgramContract(context.Background(), nil), nil},
		{"shipped keeps the catalogue's", policy.OriginShipped, broker.ContextWithProgramContract(context.Background(), program), catalogued},
		{"model without a program keeps the catalogue's rule", policy.OriginModel, context.Background(), nil},
	} {
		prop, err := s.Describe(tc.ctx, run, &broker.EffectRequest{Run: run.ID, Action: "call", Origin: tc.origin, Params: params})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(prop.Effect.Contract, tc.want) {
			t.Errorf("%s: contract %+v, want %+v", tc.name, prop.Effect.Contract, tc.want)
		}
	}
}
