// Package dashboard holds Gatehouse's pages as templ components and the
// values they show. It renders; it does not serve (package web does) and
// it reads nothing itself: handlers hand it values. Every string that an
// agent, a provider or an application chose is shown through package
// reveal (invisible, bidirectional and control characters by code point,
// long values folded, JSON pretty-printed with keys in order), the same
// rule the CLI's human output uses. Pages carry no inline script or
// style; the page script (web/static/gatehouse-2.js) follows the live
// stream, the keyboard and the copy buttons, and everything works without
// it except live updates and shortcuts.
package dashboard

import "time"

// Status is what the status page shows about one gatehouse process.
type Status struct {
	Version      string
	Mode         string
	PolicyName   string
	PolicyDigest string
	PolicyError  string // non-empty: the policy could not be read and every effect is refused
	NATSURL      string
	Embedded     bool
	CredsDir     string
	JournalDir   string
	Sinks        []string

	// GroundingError, non-empty: the grounding rules file (serve
	// --grounding) could not be read, at start or at the last reload, and
	// every provider call is refused until a reload succeeds.
	GroundingError string

	SandboxTier     string
	SandboxConfined bool
	Started         time.Time
	Now             time.Time

	// Journal writer figures; WriterRunning false when this process runs no
	// writer.
	WriterRunning bool
	EventsWritten uint64
	Pending       uint64 // messages in the stream not yet written
}

// Uptime is how long the process has run, rounded to seconds.
func (s Status) Uptime() string { return s.Now.Sub(s.Started).Round(time.Second).String() }
