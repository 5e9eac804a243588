package main

import (
	"context"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/code"
	"github.com/gatehouse/gatehouse/sinks/code/contract"
)

// storeExampleIntegration stores the integration the code sink's run
// example names, in the registry serve opened, so the example is a
// request Describe accepts.
func storeExampleIntegration(t *testing.T, sinks []broker.Sink) {
	t.Helper()
	for _, s := range sinks {
		if cs, ok := s.(*code.Sink); ok {
			// Stored by acme's work, as the examples' run is: an entry is
			// found, and may be stored again, only from its tenant's work.
			in := &code.Integration{Name: code.ExampleIntegration, Program: "python3", Effect: policy.EffectWrite,
				StoredBy: code.StoredBy{Tenant: "acme", Origin: policy.OriginModel}}
			if _, err := cs.Registry().Put(context.Background(), in, []byte("print(1)"), contract.Unverified(contract.ReasonReaderFailed, "example")); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("serve runs no code sink")
}
