package provider

import (
	"context"

	"github.com/gatehouse/gatehouse/grounding"
)

// GroundingRules returns the grounding rules in force (swapped by
// SetGrounding), so other sinks (mcp) ground their calls by the same rules.
func (s *Sink) GroundingRules() *grounding.Rules { return s.rules.Load() }

// GroundingRecords returns the shared record store grounding reads: the
// records read through this sink, for every broker of the deployment.
func (s *Sink) GroundingRecords() grounding.Records { return s.records }

// SpendRecords marks the records a grounded call of another sink (mcp)
// relies on as spent, before the call is carried out, as the provider
// sink does for its own calls (see grounding.Spend): ErrSpent when another
// call of the workflow spent one first, another error when the store
// cannot mark them. Either way the call must not be carried out.
func (s *Sink) SpendRecords(ctx context.Context, workflow string, spends []grounding.Spend) error {
	for _, sp := range spends {
		if err := s.records.Spend(ctx, workflow, sp.Provider, sp.Path, sp.ReadAt); err != nil {
			return err
		}
	}
	return nil
}
