package provider

import (
	"errors"

	"github.com/gatehouse/gatehouse/grounding"
)

// ErrNoRecordStore: grounding rules were given to a sink that was built
// without them and so has no record store to check them against.
var ErrNoRecordStore = errors.New("provider sink: grounding rules need a record store; start it with grounding rules")

// SetGrounding puts rules in force for every call described from now on,
// atomically: a check under way finishes under the rules it started with.
// Rules from grounding.Unreadable refuse every call (fail closed), as at
// start. nil turns grounding off. It returns ErrNoRecordStore, and changes
// nothing, when rules are given to a sink New built without grounding rules
// and without Config.Records; and the error of grounding.Rules.Resolve,
// changing nothing, when the rules do not fit the sink's catalogue (read
// them with LoadGrounding to get that error first).
func (s *Sink) SetGrounding(rules *grounding.Rules) error {
	if rules != nil && s.records == nil {
		return ErrNoRecordStore
	}
	rules, err := rules.Resolve(s.gcat)
	if err != nil {
		return err
	}
	s.rules.Store(rules)
	return nil
}

// Grounding returns the grounding rules in force; nil when none.
func (s *Sink) Grounding() *grounding.Rules { return s.rules.Load() }
