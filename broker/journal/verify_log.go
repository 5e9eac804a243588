package journal

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
)

// logOverlay is what the writer's log (wal/) holds: per run and for the
// head log, lines by seq. Verify checks the lines a file lacks as if they
// were in it (NoteUnappliedLog), because that is where the writer puts
// them when it next opens the journal. A nil overlay holds nothing.
type logOverlay struct {
	runs map[string][]seqLine
	hd   []seqLine
}

type seqLine struct {
	seq  uint64
	line []byte
}

// readLog reads the log of the journal in dir; nil when it holds nothing
// (no log, or unreadable: a log that cannot be read adds nothing, and a
// file it should have completed shows as it is).
func readLog(dir string) *logOverlay {
	if fi, err := os.Lstat(filepath.Join(dir, walDir)); err != nil || !fi.IsDir() {
		return nil // no log; or not a folder of the journal's own (a link out of it is not followed)
	}
	names, nums, err := walSegments(OSFS{}, filepath.Join(dir, walDir))
	if err != nil || len(names) == 0 {
		return nil
	}
	ov := &logOverlay{runs: map[string][]seqLine{}}
	for i, name := range names {
		b, err := ReadRegular(filepath.Join(dir, walDir, name), maxWALSegmentRead) // safefile.go
		if err != nil {
			continue
		}
		_, _ = readRecords(b, nums[i], func(entries []walEntry) error {
			for _, e := range entries {
				seq := e.first
				_ = eachLine(e.lines, func(l []byte) error {
					sl := seqLine{seq: seq, line: l}
					if e.kind == walHead {
						ov.hd = append(ov.hd, sl)
					} else {
						ov.runs[e.run] = append(ov.runs[e.run], sl)
					}
					seq++
					return nil
				})
			}
			return nil
		})
	}
	order := func(a, b seqLine) int { return cmp.Compare(a.seq, b.seq) }
	for run, ls := range ov.runs {
		slices.SortStableFunc(ls, order)
		ov.runs[run] = ls
	}
	slices.SortStableFunc(ov.hd, order)
	return ov
}

func (ov *logOverlay) run(id string) []seqLine {
	if ov == nil {
		return nil
	}
	return ov.runs[id]
}

func (ov *logOverlay) head() []seqLine {
	if ov == nil {
		return nil
	}
	return ov.hd
}

// newRuns lists the runs the log holds lines of that are not in have.
func (ov *logOverlay) newRuns(have []string) []string {
	if ov == nil {
		return nil
	}
	known := make(map[string]bool, len(have))
	for _, id := range have {
		known[id] = true
	}
	var out []string
	for id := range ov.runs {
		if !known[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// feed passes handle the lines with a seq beyond after, once each, in
// order, and returns how many.
func (ov *logOverlay) feed(ls []seqLine, after uint64, handle func(line []byte, long bool) error) int {
	n := 0
	for _, l := range ls {
		if l.seq <= after {
			continue
		}
		after = l.seq
		_ = handle(l.line, false)
		n++
	}
	return n
}
