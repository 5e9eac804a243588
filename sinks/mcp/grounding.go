package mcp

import (
	"context"
	"fmt"
	"net/url"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

// Writes an upstream can make, for grounding. An MCP server's write tool
// can change what a provider's records say (an ERP server whose
// update_supplier tool changes the IBAN the ERP answers with), and a
// record read through the provider sink after that change must not ground
// a payment. Before a tools/call is forwarded, the providers the server
// can reach are marked written as a whole, in the workflow and for the
// agent, exactly as an ungrounded provider write marks them
// (provider.Sink.NoteWriteToProviders):
//
//   - What a server reaches is the operator's word (Server.Reaches), never
//     the server's: tool annotations (readOnlyHint) come from the upstream
//     and are not trusted for this. A server without reaches reaches every
//     provider (fail closed); reaches: [] reaches none. An HTTP server's
//     own URL counts too: a provider on its host and port is marked.
//   - A tool the catalogue itself declares effect: read (the operator's
//     word again) marks nothing.
//   - A mark that cannot be stored stops the call unsent (the provider
//     sink's record-store error).
//
// The noting is done only when the sink's Grounding is the provider sink
// (it implements writeNoter); with no grounding rules there is nothing to
// launder and nothing is marked.

// writeNoter notes writes for grounding: *provider.Sink.
type writeNoter interface {
	NoteWriteTo(ctx context.Context, run *broker.Run, target *url.URL) error
	NoteWriteToProviders(ctx context.Context, run *broker.Run, names []string) error
	NoteWriteAnywhere(ctx context.Context, run *broker.Run) error
	HasProvider(name string) bool
}

// checkReaches checks, at start, that every provider a server's reaches
// names is in the provider catalogue.
func (k *Sink) checkReaches() error {
	n, _ := k.grd.(writeNoter)
	for i := range k.cat.Servers {
		srv := &k.cat.Servers[i]
		if srv.Reaches == nil {
			continue
		}
		for _, p := range *srv.Reaches {
			if n == nil || !n.HasProvider(p) {
				return fmt.Errorf("%w: server %s: reaches names provider %q, which is not in the provider catalogue (--providers)", ErrCatalogue, srv.Name, p)
			}
		}
	}
	return nil
}

// noteWrite marks, before a call of tool on srv is forwarded, what srv
// reaches as written; an error means the call must not be sent.
func (k *Sink) noteWrite(ctx context.Context, run *broker.Run, srv *Server, tool string) error {
	n, ok := k.grd.(writeNoter)
	if !ok || srv.Tools[tool].Effect == policy.EffectRead {
		return nil
	}
	var err error
	if srv.Reaches == nil {
		err = n.NoteWriteAnywhere(ctx, run)
	} else if err = n.NoteWriteToProviders(ctx, run, *srv.Reaches); err == nil && !srv.Stdio() {
		var u *url.URL
		if u, err = url.Parse(srv.URL); err == nil {
			err = n.NoteWriteTo(ctx, run, u)
		}
	}
	if err != nil {
		return &CallError{Type: "record-store", Detail: fmt.Sprintf("MCP server %s: the call could not be noted for grounding (%v), so it was not sent. Operator: make the grounding record store reachable", srv.Name, err)}
	}
	return nil
}
