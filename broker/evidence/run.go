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
