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
			in := &code.Integration{Name: code.ExampleIntegration, Program: "python3", Effect: policy.EffectWrite}
			if _, err := cs.Registry().Put(context.Background(), in, []byte("print(1)"), contract.Unverified(contract.ReasonReaderFailed, "example")); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("serve runs no code sink")
}
