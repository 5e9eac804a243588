package evidence

import (
	"fmt"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// ErrNoRun: the journal has no readable run of that id.
var ErrNoRun = fmt.Errorf("%w: no such run", ErrBadSelector)

// RunOf reads one run of the journal in dir as the timeline shows it
// (without verifying the journal: the caller shows the run, not a verdict
// on it). It returns ErrNoRun for an id that is not a run, has no file or
// no readable run.open; it reads only the complete lines of the file, so
// a run being written is read as far as it is written.
func RunOf(dir, run string) (*RunEntry, error) {
	if !journal.ValidRunID(run) {
		return nil, ErrNoRun
	}
	rd := readRun(dir, run)
	if rd.readErr != "" || rd.open == nil {
		return nil, ErrNoRun
	}
	e := entry(rd, nil)
	return &e, nil
}

// RunOfTenant is RunOf for a reader bound to one tenant: a run that does
// not act for tenant, or that an export of the tenant leaves out (it also
// worked for someone else: a decision acting for another principal, a
// delegation chain crossing to another one), is ErrNoRun, exactly as a run
// that does not exist, so the answer names no other tenant's run.
func RunOfTenant(dir, run, tenant string) (*RunEntry, error) {
	if !journal.ValidRunID(run) || tenant == "" {
		return nil, ErrNoRun
	}
	jr := &journalRuns{dir: dir, cache: map[string]*runData{}}
	rd := jr.get(run)
	if rd.readErr != "" || rd.open == nil || rd.open.ActingFor.Tenant != tenant || jr.leftOut(rd) != "" {
		return nil, ErrNoRun
	}
	e := entry(rd, nil)
	return &e, nil
}
