package provider

import "github.com/gatehouse/gatehouse/grounding"

// GroundingRules returns the grounding rules in force (swapped by
// SetGrounding), so other sinks (mcp) ground their calls by the same rules.
func (s *Sink) GroundingRules() *grounding.Rules { return s.rules.Load() }

// GroundingRecords returns the shared record store grounding reads: the
// records read through this sink, for every broker of the deployment.
func (s *Sink) GroundingRecords() grounding.Records { return s.records }
