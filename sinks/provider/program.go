package provider

import (
	"context"
	"strings"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

// programContract applies the contract of the sandboxed program making
// this call (broker.ContextWithProgramContract, set in process by the
// code sink for each call a program makes through its gateway, never from
// a param): for code of origin registry or model, the contract the call is
// held to is the operations read from the program's own code, templates
// joined to this provider's base path, and none (nil) when they could not
// be read; the catalogue's operations were read from the integration's
// original code, not this program's. Code of other origins keeps the
// catalogue's contract.
func (s *Sink) programContract(ctx context.Context, e *policy.Effect, prov *Provider) {
	pc, ok := broker.ProgramContractFrom(ctx)
	if !ok || !untrusted(e.Origin) {
		return
	}
	if pc == nil {
		e.Contract = nil
		return
	}
	c := &policy.Contract{Operations: make([]policy.Operation, 0, len(pc.Operations))}
	for _, op := range pc.Operations {
		t := op.Template
		if !strings.HasPrefix(t, "/") {
			t = "/" + t
		}
		full := prov.basePath + t
		if t == "/" && prov.basePath != "" {
			full = prov.basePath
		}
		c.Operations = append(c.Operations, policy.Operation{Method: strings.ToUpper(op.Method), Template: full})
	}
	e.Contract = c
}
