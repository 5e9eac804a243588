package review

import (
	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/journal"
)

// ErrNoJournal is returned when the directory is not a journal: missing, or
// holding no runs folder (and no head log). It is evidence.ErrNoJournal:
// review reads run files with package evidence's reader.
var ErrNoJournal = evidence.ErrNoJournal

// run is one run file as review needs it.
type run = evidence.JournalRun

// eachRun calls fn for every run file under dir/runs, in name order, with
// its parsable events. Lines that do not parse are counted, not returned.
func eachRun(dir string, fn func(r *run) error) (skipped int, err error) {
	return evidence.EachRun(dir, fn)
}

// targetOf names what a decision touched, for grouping: the same name a
// person's timeline shows.
func targetOf(d *journal.Decision) string { return evidence.TargetOf(d) }
