package journal

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrLocked: another Writer holds the journal directory.
	ErrLocked = errors.New("journal: directory is locked by another writer")
	// ErrClosed: the Writer was closed.
	ErrClosed = errors.New("journal: writer closed")
	// ErrFailed: a write or fsync failed earlier; the Writer refuses further
	// appends because what reached the disk is unknown. Close it and Open
	// the directory again, which recovers from the files.
	ErrFailed = errors.New("journal: writer failed")
	// ErrInvalidEvent: an event can never be written (bad run id, empty id,
	// unknown type, data that is not JSON, too large). Retrying is useless.
	ErrInvalidEvent = errors.New("journal: invalid event")
	// ErrBadRunID: a run id that may not name a file. Wrapped with
	// ErrInvalidEvent when it comes from an event.
	ErrBadRunID = errors.New("journal: bad run id")
	// ErrCorruptRun: a run file the writer cannot continue (a complete line
	// it cannot read, or a broken sequence). The run's events are refused
	// until an operator repairs the file; Verify says what is wrong.
	ErrCorruptRun = errors.New("journal: run file is corrupt")
	// ErrCorruptHead: the head log's last entry cannot be read.
	ErrCorruptHead = errors.New("journal: head log is corrupt")
	// ErrMalformed: a line that is not a well-formed v1 journal line.
	ErrMalformed = errors.New("journal: malformed line")
	// ErrNotJournal: Verify was pointed at something that is not a journal
	// directory.
	ErrNotJournal = errors.New("journal: not a journal directory")
)

// EventError is the error of one event of a batch passed to Append.
type EventError struct {
	Index int    // position in the batch
	ID    string // the event's id, possibly empty
	Err   error  // wraps ErrInvalidEvent, ErrCorruptRun or an I/O error
}

func (e EventError) Error() string {
	return fmt.Sprintf("event %d (id %q): %v", e.Index, e.ID, e.Err)
}

func (e EventError) Unwrap() error { return e.Err }

// EventErrors is returned by Append when some events of a batch were not
// written. Every other event of the batch was written and is durable.
type EventErrors []EventError

func (es EventErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "journal: %d event(s) not written", len(es))
	for i, e := range es {
		if i == 3 {
			b.WriteString("; ...")
			break
		}
		b.WriteString("; ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is see each event's error.
func (es EventErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}
