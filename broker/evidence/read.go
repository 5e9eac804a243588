// Package evidence answers for one person or one tenant from a journal:
// what agents did for a person (Timeline, with People and Tenants for an
// index), and a tenant's evidence export (Export, WriteArchive), which its
// auditor checks offline (VerifyExport, `gatehouse verify --export`).
// Timeline is the one reader of a person's evidence: the CLI prints it
// and the dashboard renders it; both leave out the runs an export leaves
// out (see below), naming them with the reason. EachRun is its run-file
// reader for other whole-journal readers (policy review).
//
// # Export layout
//
// An export is a folder (or the same files in a tar.gz archive):
//
//	export.json        the manifest (Manifest): marks the folder as an
//	                   export, names the tenant, the person filter, when it
//	                   was made, and every run it holds with its size and
//	                   SHA-256, and the head log's
//	head.jsonl         the deployment's head log, byte for byte (complete
//	                   lines as of the export): it names other runs by id
//	                   and hash only, never their content
//	runs/<run>.jsonl   each run of the tenant, byte for byte
//	proofs/checkpoint  the journal's latest signed checkpoint, with its
//	                   witnesses' cosignatures
//	proofs/proofs.json the inclusion proof of every head log entry of an
//	                   exported run against it (journal.Proofs)
//
// # Proofs
//
// The checkpoint is read before the head log, so the head log copy holds
// every entry it covers; the copy is not cut to the checkpoint. Entries of
// exported runs within the checkpoint are proved; those after it (written
// since the checkpoint) are listed in Manifest.Checkpoint.NotCovered and
// stay protected by the hash chain only, until an export made after a
// later checkpoint proves them. Without a stored checkpoint there is no
// proofs/ folder and Manifest.NoProofs says why. A journal whose head log
// does not hash to its own latest checkpoint is not exported
// (ErrCheckpoint). The exporter trusts its journal folder and checks no
// signature; VerifyExportWith checks the checkpoint and every proof with
// only the log's and the witnesses' public keys, so a tenant's auditor
// checks its own slice alone. The format is broker/journal/FORMAT.md,
// section 7.
//
// A run is exported when its run.open acts for the tenant (and the person,
// when one is given), every decision in it acts for that same principal,
// and each run it was delegated from does too. Any other run of the
// tenant is left out and named in the manifest with the reason; a run of
// another tenant is never written or named. The head log is copied before
// the runs, so a run being written while the export is made is at least as
// long as the head log says.
//
// Each run is cut after the last event the copied head log registers
// (events written since are left to a later export; a run it does not
// register at all is left out, NotRegistered), so an export holds
// registered events only.
//
// Verifying an export checks each run it holds against the head log as
// verify checks a journal; runs the head log names that the export does
// not hold are expected to be absent. Events after a run's registered
// head, which verify notes in a journal as an interrupted write, are a
// finding in an export (FindingAfterHead): they were appended to it. A plain verify refuses an export
// (journal.ErrExport), so a journal with runs missing cannot pass as one.
package evidence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

var (
	// ErrNoJournal: the directory is not a journal.
	ErrNoJournal = errors.New("evidence: not a journal directory")
	// ErrBadSelector: a tenant or person that cannot be one.
	ErrBadSelector = errors.New("evidence: bad selector")
	// ErrNotExport: a directory without a readable export manifest.
	ErrNotExport = errors.New("evidence: not an evidence export")
	// ErrExists: the export destination exists and is not empty.
	ErrExists = errors.New("evidence: destination is not empty")
	// ErrCheckpoint: the journal's latest checkpoint cannot be read, or
	// its head log does not match it (rewritten or rolled back since it
	// was signed): no export is made; verify the journal.
	ErrCheckpoint = errors.New("evidence: the journal's latest checkpoint cannot be read or does not match its head log")
)

// Selector names whose evidence: a tenant, and optionally one person.
type Selector struct {
	Tenant string `json:"tenant"`
	Person string `json:"person,omitempty"` // "" for every person of the tenant
}

// ParseSelector reads "TENANT/PERSON" or "TENANT/" (the whole tenant).
func ParseSelector(s string) (Selector, error) {
	t, p, ok := strings.Cut(s, "/")
	sel := Selector{Tenant: t, Person: p}
	if !ok {
		return sel, fmt.Errorf("%w: %q: write TENANT/PERSON, or TENANT/ for a whole tenant", ErrBadSelector, s)
	}
	return sel, sel.Validate()
}

// Validate checks the selector names a tenant and at most one person.
func (s Selector) Validate() error {
	if s.Tenant == "" || strings.ContainsAny(s.Tenant, "/\n\x00") || strings.ContainsAny(s.Person, "/\n\x00") {
		return fmt.Errorf("%w: tenant %q person %q", ErrBadSelector, s.Tenant, s.Person)
	}
	return nil
}

// String is "TENANT/PERSON" or "TENANT/".
func (s Selector) String() string { return s.Tenant + "/" + s.Person }

func (s Selector) matches(p policy.Principal) bool {
	return p.Tenant == s.Tenant && (s.Person == "" || p.Person == s.Person)
}

// runData is what one pass over a run file found.
type runData struct {
	id      string
	raw     []byte // complete lines only
	events  []journal.Event
	open    *journal.RunOpen
	opened  time.Time
	closed  *time.Time
	status  string
	foreign string // why the run also worked for someone else, "" if not
	readErr string
	skipped int // complete lines that do not parse
}

// listRuns returns the run ids with a file in dir's runs folder. A journal
// with a head log and no runs folder yet has no runs.
func listRuns(dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "runs"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if st, serr := os.Stat(filepath.Join(dir, "head.jsonl")); serr == nil && st.Mode().IsRegular() {
				return nil, nil
			}
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrNoJournal, dir, err)
	}
	var out []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".jsonl"); ok && journal.ValidRunID(id) && e.Type().IsRegular() {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// maxRunBytes bounds one run file read whole (readRun, the head log in
// Export): the evidence readers hold a run in memory.
const maxRunBytes = 1 << 30

// readRun reads a run file up to its last complete line and parses it.
// Lines that do not parse are skipped (verify reports them).
func readRun(dir, id string) *runData {
	rd := &runData{id: id}
	b, err := journal.ReadRegular(filepath.Join(dir, "runs", id+".jsonl"), maxRunBytes)
	if err != nil {
		rd.readErr = err.Error()
		return rd
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		rd.raw = b[:i+1]
	} else {
		rd.raw = nil
	}
	for line := range bytes.Lines(rd.raw) {
		ev, err := journal.ParseLine(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			rd.skipped++
			continue
		}
		rd.events = append(rd.events, ev)
		switch ev.Type {
		case journal.TypeRunOpen:
			if rd.open == nil {
				var o journal.RunOpen
				if json.Unmarshal(ev.Data, &o) == nil {
					rd.open, rd.opened = &o, ev.Time
				}
			}
		case journal.TypeRunClose:
			t := ev.Time
			rd.closed = &t
			var c journal.RunClose
			if json.Unmarshal(ev.Data, &c) == nil {
				rd.status = c.Status
			}
		case journal.TypeDecision:
			var d journal.Decision
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				if rd.foreign == "" {
					rd.foreign = fmt.Sprintf("decision at event %d cannot be read", ev.Seq)
				}
			} else if rd.open != nil && d.ActingFor != rd.open.ActingFor && rd.foreign == "" {
				rd.foreign = fmt.Sprintf("decision at event %d acts for another principal", ev.Seq)
			}
		}
	}
	if rd.open == nil && rd.foreign == "" {
		rd.foreign = "no readable run.open"
	}
	return rd
}

// journalRuns reads every run of dir once, lazily, with lineage checks.
type journalRuns struct {
	dir   string
	cache map[string]*runData
}

func (j *journalRuns) get(id string) *runData {
	if rd, ok := j.cache[id]; ok {
		return rd
	}
	rd := readRun(j.dir, id)
	j.cache[id] = rd
	return rd
}

// lineage returns why run rd's delegation chain leaves its principal,
// "" when every ancestor acts for the same one. An ancestor of another
// tenant is not named (the reason goes into the tenant's manifest and
// timeline); one of the same tenant is.
func (j *journalRuns) lineage(rd *runData) string {
	seen := map[string]bool{rd.id: true}
	for cur := rd; cur.open != nil && cur.open.Parent != ""; {
		pid := cur.open.Parent
		if seen[pid] || !journal.ValidRunID(pid) {
			return "its delegation chain cannot be followed"
		}
		seen[pid] = true
		parent := j.get(pid)
		if parent.open == nil {
			return fmt.Sprintf("it was delegated from run %s, which is not in the journal", pid)
		}
		if parent.open.ActingFor.Tenant != rd.open.ActingFor.Tenant {
			// Never named: another tenant's run id is not the reader's.
			return "it was delegated from a run of another tenant"
		}
		if parent.open.ActingFor != rd.open.ActingFor {
			return fmt.Sprintf("it was delegated from run %s, which acts for another principal", pid)
		}
		cur = parent
	}
	return ""
}

// JournalRun is one run file as read, for readers that walk a whole
// journal (policy review): its events in file order.
type JournalRun struct {
	ID     string
	Open   *journal.RunOpen // nil without a readable run.open
	Closed bool
	// Events are the complete lines that parse and belong to this run.
	Events []journal.Event
	// Skipped counts complete lines that do not parse or name another
	// run; a trailing line without its newline (being written) is not read.
	Skipped int
}

// EachRun calls fn for every run file of the journal in dir, in run id
// order, and stops at fn's first error. A run file that cannot be read
// counts one skipped line. It returns ErrNoJournal when dir is not a
// journal, and the lines skipped across all runs.
func EachRun(dir string, fn func(r *JournalRun) error) (skipped int, err error) {
	ids, err := listRuns(dir)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		rd := readRun(dir, id)
		if rd.readErr != "" {
			skipped++
			continue
		}
		jr := rd.journalRun()
		skipped += jr.Skipped
		if err := fn(jr); err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}

func (rd *runData) journalRun() *JournalRun {
	jr := &JournalRun{ID: rd.id, Open: rd.open, Closed: rd.closed != nil, Skipped: rd.skipped, Events: make([]journal.Event, 0, len(rd.events))}
	for _, ev := range rd.events {
		if ev.Run != rd.id {
			jr.Skipped++
			continue
		}
		jr.Events = append(jr.Events, ev)
	}
	return jr
}

// leftOut returns why run rd is left out of its principal's evidence (an
// export or a timeline): it also worked for someone else. "" when not.
func (j *journalRuns) leftOut(rd *runData) string {
	why := rd.foreign
	if why == "" {
		why = j.lineage(rd)
	}
	if why == "" {
		return ""
	}
	return "it also worked for someone else: " + why
}
