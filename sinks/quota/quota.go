// Package quota holds what the memory and artifact sinks share about a
// tenant's budget of stored bytes: the error a put over budget returns.
// Each sink keeps its own accounting in its own store (see their package
// docs); this package has no state.
package quota

import (
	"fmt"

	"github.com/gatehouse/gatehouse/broker"
)

// ErrorType is the journal's outcome error of a put the store refused
// for the tenant's quota.
const ErrorType = "quota-exceeded"

// Error is a put refused because it would take its tenant past its
// budget. Nothing was stored. It matches broker.ErrQuotaExceeded
// (QUOTA_EXCEEDED at the edge); its message names the numbers, never the
// tenant or the content, and says what to do.
type Error struct {
	What  string // "memory" or "artifact"
	Flag  string // the serve flag that sets the budget, "--memory-quota-mb"
	Help  string // how the tenant makes room, "delete memories it no longer needs (memory delete)"
	Used  int64  // bytes the tenant holds now
	Limit int64  // its budget
	Need  int64  // bytes this put adds
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s quota exceeded: this tenant holds %d of its %d bytes of %s and this put needs %d more, so nothing was stored; %s, store less, or ask the operator to raise serve %s",
		e.What, e.Used, e.Limit, e.What, e.Need, e.Help, e.Flag)
}

// ErrorType names the failure for the journal.
func (e *Error) ErrorType() string { return ErrorType }

// Unwrap makes the error match broker.ErrQuotaExceeded.
func (e *Error) Unwrap() error { return broker.ErrQuotaExceeded }

// Check returns an *Error when adding delta bytes to used would pass
// limit. A put that shrinks what is stored (delta <= 0) always fits, so a
// tenant at its budget can still overwrite with less.
func Check(what, flag, help string, used, delta, limit int64) error {
	if delta > 0 && used+delta > limit {
		return &Error{What: what, Flag: flag, Help: help, Used: used, Limit: limit, Need: delta}
	}
	return nil
}
