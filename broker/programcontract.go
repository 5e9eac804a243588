package broker

import (
	"context"

	"github.com/gatehouse/gatehouse/policy"
)

type programContractKey struct{}

// programContract is what ContextWithProgramContract puts on a context; a
// struct so that a nil contract ("could not be read") is still present.
type programContract struct{ c *policy.Contract }

// ContextWithProgramContract returns ctx carrying the contract of the
// sandboxed program whose provider calls are proposed with it: the
// operations (method and path template, relative to the base_url of the
// provider each call names, as the program writes paths) its own code can
// send, read from that code before it ran; nil means they could not be
// read. The code sink sets it, in this process, on the context it passes
// to Broker.Propose for each call a program makes through its gateway;
// the provider sink reads it with ProgramContractFrom and holds every
// mutating call to it (outside-contract; for registry or model code a nil
// contract is unverified-model-code), on top of the contract of the
// integration the call names. Nothing an agent sends over NATS can set or
// change it.
func ContextWithProgramContract(ctx context.Context, c *policy.Contract) context.Context {
	return context.WithValue(ctx, programContractKey{}, programContract{c})
}

// ProgramContractFrom returns the contract ContextWithProgramContract put
// on ctx; ok is false when the call does not come from a sandboxed
// program.
func ProgramContractFrom(ctx context.Context) (c *policy.Contract, ok bool) {
	pc, ok := ctx.Value(programContractKey{}).(programContract)
	return pc.c, ok
}
