package journal

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// FindingKind names what a finding found. The names are a contract.
type FindingKind string

// Finding kinds. Each is evidence that the journal is not as written.
const (
	// A line that is not a well-formed v1 event or head entry.
	FindingMalformedLine FindingKind = "malformed-line"
	// An event whose content does not match its hash, or whose hash differs
	// from the one the head log registered for it.
	FindingEditedEvent FindingKind = "edited-event"
	// An event whose prev is not the hash of the event before it.
	FindingBrokenChain FindingKind = "broken-chain"
	// Events missing inside a run: removed.
	FindingSequenceGap FindingKind = "sequence-gap"
	// An event placed after one with a higher seq.
	FindingReordered FindingKind = "reordered"
	// A seq that occurs twice in a run.
	FindingDuplicateEvent FindingKind = "duplicate-event"
	// An event naming another run than its file.
	FindingMisplacedEvent FindingKind = "misplaced-event"
	// An event after the run's run.close, other than the outcome (and
	// approval settlement) of an effect attempted before the close.
	FindingEventAfterClose FindingKind = "event-after-close"
	// The head log registered a later event than the run file holds.
	FindingRunCutShort FindingKind = "run-cut-short"
	// The head log registered a run that has no file.
	FindingRunRemoved FindingKind = "run-removed"
	// A run file the head log never registered.
	FindingUnregisteredRun FindingKind = "unregistered-run"
	// A file in runs/ that is not a run file (bad name, not a regular
	// file, unreadable).
	FindingBadRunFile FindingKind = "bad-run-file"
	// An effect.attempt with no earlier policy.decision for its effect.
	FindingAttemptWithoutDecision FindingKind = "attempt-without-decision"
	// An effect.attempt whose latest earlier decision was not "allowed".
	FindingAttemptAfterRefusal FindingKind = "attempt-after-refusal"
	// A grounded decision cites a record (a provider response recorded as
	// an effect.outcome) that is not in the journal with that digest.
	FindingBadCitation FindingKind = "bad-citation"
	// A head log entry edited, removed, reordered or malformed.
	FindingHeadLogEdited FindingKind = "head-log-edited"
	// Run files exist but the head log does not.
	FindingHeadLogMissing FindingKind = "head-log-missing"
	// An allowed effect names an approval no approval.decision before it
	// in its run approved (an approval.reopened sets aside the decisions
	// before it).
	FindingApprovalMissing FindingKind = "approval-missing"
	// An allowed effect's approval was given for another action digest.
	FindingApprovalMismatch FindingKind = "approval-mismatch"
	// A file had more findings than VerifyOptions.MaxFindings; the rest
	// were not listed.
	FindingTooMany FindingKind = "too-many-findings"
)

// NoteKind names a note: a state that is not tampering.
type NoteKind string

const (
	// A run with no run.close: still being written.
	NoteRunOpen NoteKind = "run-open"
	// Complete events after the run's registered head: a write whose head
	// entry was interrupted. The writer registers them when JetStream
	// redelivers the batch.
	NoteAfterHead NoteKind = "after-head"
	// A partial last line (no '\n'): an interrupted write, never
	// acknowledged; the writer truncates it.
	NotePartialLine NoteKind = "partial-line"
	// An empty run file nobody registered: a write interrupted right after
	// the file was created.
	NoteEmptyRun NoteKind = "empty-run"
	// Lines the writer made durable in its log (wal/) and had not yet
	// written to their files: a writer that stopped without closing, or
	// one writing right now. Verify checks them as if they were in their
	// files, which is where the writer puts them when it next opens the
	// journal.
	NoteUnappliedLog NoteKind = "unapplied-log"
)

// Finding is one piece of evidence of tampering or of a policy breach.
type Finding struct {
	Kind   FindingKind `json:"kind"`
	Run    string      `json:"run,omitempty"`
	Seq    uint64      `json:"seq,omitempty"`  // the event (run_seq for run-level kinds)
	File   string      `json:"file,omitempty"` // relative to the journal directory
	Line   int         `json:"line,omitempty"` // 1-based line in File
	Detail string      `json:"detail"`
}

// String renders the finding for a person: where, what kind, and why.
func (f Finding) String() string {
	var b strings.Builder
	if f.Run != "" {
		b.WriteString("run " + f.Run)
		if f.Seq > 0 {
			b.WriteString(" event " + strconv.FormatUint(f.Seq, 10))
		}
	} else if f.File != "" {
		b.WriteString(f.File)
	}
	if f.File != "" && f.Line > 0 {
		fmt.Fprintf(&b, " (%s line %d)", f.File, f.Line)
	}
	fmt.Fprintf(&b, ": %s: %s", f.Kind, f.Detail)
	return b.String()
}

// Note is a state worth knowing that is not tampering.
type Note struct {
	Kind   NoteKind `json:"kind"`
	Run    string   `json:"run,omitempty"`
	File   string   `json:"file,omitempty"`
	Detail string   `json:"detail"`
}

// String renders the note for a person.
func (n Note) String() string {
	where := n.Run
	if where == "" {
		where = n.File
	}
	if where == "" {
		return fmt.Sprintf("%s: %s", n.Kind, n.Detail)
	}
	return fmt.Sprintf("%s: %s: %s", where, n.Kind, n.Detail)
}

// Report is what Verify found. It marshals to JSON as is.
type Report struct {
	OK          bool      `json:"ok"` // no findings
	Runs        int       `json:"runs"`
	Events      int       `json:"events"`
	HeadEntries int       `json:"head_entries"`
	Signed      int       `json:"signed_events"` // events carrying a signature
	Findings    []Finding `json:"findings"`
	Notes       []Note    `json:"notes"`
}

// VerifyOptions tune Verify. The zero value is usable.
type VerifyOptions struct {
	// Workers verifying run files at once. Default GOMAXPROCS.
	Workers int
	// MaxFindings per file; beyond it one too-many-findings is listed.
	// Default 1000.
	MaxFindings int
	// Keys, when set, checks every signed event's signature (see
	// integrity.go); nil leaves signatures unchecked (a note says so).
	Keys *TrustedKeys
	// RequireSignatures reports every unsigned event (unsigned-event).
	RequireSignatures bool
	// Checkpoint, when set, checks the head log against it (rolled-back,
	// checkpoint-mismatch). Open it with OpenCheckpoint first.
	Checkpoint *Checkpoint
	// Export, when set, verifies dir as an evidence export holding the
	// runs it names (see ExportScope). When nil, a directory holding
	// ExportManifestFile is refused with ErrExport.
	Export *ExportScope
}

// ExportManifestFile is the file that marks a directory as an evidence
// export (a slice of a journal: some runs and the whole head log) rather
// than a journal. Its content is read by broker/evidence.
const ExportManifestFile = "export.json"

// ErrExport: Verify was pointed at an evidence export without
// VerifyOptions.Export; an export lacks other tenants' runs, which a plain
// verify would report as removed.
var ErrExport = errors.New("journal: directory is an evidence export (verify it as an export)")

// ExportScope is what an export says it holds. Verify then expects the
// runs the head log registered but Runs does not name to be absent (no
// run-removed finding for them, and citations of them are not checked);
// a named run without a file is still run-removed, and every file present
// is checked against the head log as in a journal.
type ExportScope struct {
	Runs []string
}

// headReg is one head log registration of a run's event.
type headReg struct {
	runSeq uint64
	event  [32]byte
	line   int
}

// Verify checks the journal in dir, offline, with no keys. It returns an
// error only when dir cannot be used as a journal (missing, not a
// directory, holding neither head.jsonl nor runs/) or when it is an
// evidence export and opts.Export is nil (ErrExport); everything wrong
// inside the journal is a Finding. Verify never modifies dir, and reads
// run files in parallel.
func Verify(dir string, opts VerifyOptions) (*Report, error) {
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.MaxFindings <= 0 {
		opts.MaxFindings = 1000
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotJournal, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrNotJournal, dir)
	}
	headPath, runsPath := filepath.Join(dir, headFile), filepath.Join(dir, runsDir)
	hfi, herr := os.Lstat(headPath)
	rfi, rerr := os.Lstat(runsPath)
	if herr != nil && rerr != nil {
		return nil, fmt.Errorf("%w: %s holds neither %s nor %s", ErrNotJournal, dir, headFile, runsDir)
	}

	var inExport map[string]bool
	if opts.Export == nil {
		if _, err := os.Lstat(filepath.Join(dir, ExportManifestFile)); err == nil {
			return nil, fmt.Errorf("%w: %s holds %s", ErrExport, dir, ExportManifestFile)
		}
	} else {
		inExport = make(map[string]bool, len(opts.Export.Runs))
		for _, r := range opts.Export.Runs {
			inExport[r] = true
		}
	}

	rep := &Report{Findings: []Finding{}, Notes: []Note{}}
	ov := readLog(dir)
	var regs map[string][]headReg
	headFindings := newFindings(opts.MaxFindings, headFile)
	switch {
	case herr != nil:
		headFindings.add(Finding{Kind: FindingHeadLogMissing, Detail: "no head log: no run can be checked against it"})
	case !hfi.Mode().IsRegular():
		headFindings.add(Finding{Kind: FindingHeadLogMissing, Detail: "head log is not a regular file"})
	default:
		regs = verifyHead(headPath, rep, headFindings, ov)
	}
	rep.Findings = append(rep.Findings, headFindings.list...)

	var runs []string
	if rerr == nil {
		if !rfi.IsDir() {
			rep.Findings = append(rep.Findings, Finding{Kind: FindingBadRunFile, File: runsDir, Detail: "runs is not a directory"})
		} else {
			entries, err := os.ReadDir(runsPath)
			if err != nil {
				rep.Findings = append(rep.Findings, Finding{Kind: FindingBadRunFile, File: runsDir, Detail: "cannot list: " + err.Error()})
			}
			for _, e := range entries {
				name := e.Name()
				id, ok := strings.CutSuffix(name, runExt)
				switch {
				case !ok || !ValidRunID(id):
					rep.Findings = append(rep.Findings, Finding{Kind: FindingBadRunFile, File: runsDir + "/" + name, Detail: "not a run file name"})
				case !e.Type().IsRegular():
					rep.Findings = append(rep.Findings, Finding{Kind: FindingBadRunFile, Run: id, File: runsDir + "/" + name, Detail: "not a regular file"})
				default:
					runs = append(runs, id)
				}
			}
		}
	}
	for _, id := range ov.newRuns(runs) {
		runs = append(runs, id) // created by a write the log holds, its name not yet durable
	}
	have := make(map[string]bool, len(runs))
	for _, r := range runs {
		have[r] = true
	}
	for run, rs := range regs {
		if !have[run] && (inExport == nil || inExport[run]) {
			last := rs[len(rs)-1]
			rep.Findings = append(rep.Findings, Finding{Kind: FindingRunRemoved, Run: run, Seq: last.runSeq, File: headFile, Line: last.line,
				Detail: fmt.Sprintf("head log registered event %d of run %s, which has no file", last.runSeq, run)})
		}
	}

	results := make([]runResult, len(runs))
	jobs := make(chan int)
	var wg sync.WaitGroup
	var pool *sigPool
	if opts.Keys != nil && opts.Workers > 1 {
		// Signatures are checked on every core, whatever the runs they
		// are in: a journal of one long run verifies as fast as many.
		pool = newSigPool(opts.Workers)
		defer pool.close()
	}
	for range min(opts.Workers, max(len(runs), 1)) {
		wg.Go(func() {
			v := runVerifier{sigs: sigChecker{keys: opts.Keys, require: opts.RequireSignatures, pool: pool}}
			for i := range jobs {
				results[i] = v.verify(dir, runs[i], regs[runs[i]], opts.MaxFindings, ov)
			}
		})
	}
	for i := range runs {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	rep.Runs = len(runs)
	var cites []citing
	for _, r := range results {
		rep.Events += r.events
		rep.Signed += r.signed
		rep.Findings = append(rep.Findings, r.findings...)
		rep.Notes = append(rep.Notes, r.notes...)
		for _, c := range r.citations {
			if inExport == nil || have[c.Run] || inExport[c.Run] {
				cites = append(cites, c)
			}
		}
	}
	rep.Findings = append(rep.Findings, checkCitations(dir, have, cites)...)
	if opts.Checkpoint != nil {
		rep.Findings = append(rep.Findings, CheckCheckpoint(dir, opts.Checkpoint)...)
	}
	if rep.Signed > 0 && opts.Keys == nil {
		rep.Notes = append(rep.Notes, Note{Kind: NoteSignaturesUnchecked,
			Detail: fmt.Sprintf("%d signed event(s); no trusted keys given, so signatures were not checked", rep.Signed)})
	}
	slices.SortStableFunc(rep.Findings, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Kind, b.Kind))
	})
	slices.SortStableFunc(rep.Notes, func(a, b Note) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Kind, b.Kind))
	})
	rep.OK = len(rep.Findings) == 0
	return rep, nil
}

// findings collects one file's findings up to a limit.
type findings struct {
	file  string
	limit int
	list  []Finding
	over  bool
}

func newFindings(limit int, file string) *findings { return &findings{file: file, limit: limit} }

func (f *findings) add(x Finding) {
	if f.over {
		return
	}
	if x.File == "" {
		x.File = f.file
	}
	if len(f.list) == f.limit {
		f.over = true
		x = Finding{Kind: FindingTooMany, Run: x.Run, File: x.File, Detail: fmt.Sprintf("more than %d findings; the rest are not listed", f.limit)}
	}
	f.list = append(f.list, x)
}

// verifyHead checks the head log's chain and returns the registrations of
// entries whose own hash holds, per run in head log order.
func verifyHead(path string, rep *Report, fs *findings, ov *logOverlay) map[string][]headReg {
	regs := make(map[string][]headReg)
	f, err := OpenRegular(path)
	if err != nil {
		fs.add(Finding{Kind: FindingHeadLogEdited, Detail: "cannot read head log: " + err.Error()})
		return regs
	}
	defer f.Close()
	var lastSeq uint64
	var (
		o         obj
		buf       []byte
		lineNo    int
		wantSeq   uint64 = 1 // 0: unknown after a malformed line
		last      [32]byte
		lastKnown bool
	)
	handle := func(line []byte, long bool) error {
		lineNo++
		if long {
			fs.add(Finding{Kind: FindingHeadLogEdited, Line: lineNo, Detail: "malformed entry: line too long"})
			wantSeq, lastKnown = 0, false
			return nil
		}
		var p parsedHead
		p, buf, err = parseHead(line, &o, buf)
		if err != nil {
			fs.add(Finding{Kind: FindingHeadLogEdited, Line: lineNo, Detail: "malformed entry: " + err.Error()})
			wantSeq, lastKnown = 0, false
			return nil
		}
		rep.HeadEntries++
		var why []string
		valid := p.hash == p.computed
		if !valid {
			why = append(why, "content does not match its hash")
		}
		if wantSeq != 0 && p.h.Seq != wantSeq {
			why = append(why, fmt.Sprintf("seq %d where %d was expected: entries removed or reordered", p.h.Seq, wantSeq))
		}
		switch {
		case lineNo == 1 && p.hasPrev:
			why = append(why, "first entry names a previous entry")
		case lineNo > 1 && lastKnown && (!p.hasPrev || p.prev != last):
			why = append(why, "prev does not match the entry before it")
		}
		rs := regs[p.h.Run]
		if valid && len(rs) > 0 && p.h.RunSeq <= rs[len(rs)-1].runSeq {
			why = append(why, fmt.Sprintf("run %s registered at event %d after event %d", p.h.Run, p.h.RunSeq, rs[len(rs)-1].runSeq))
		}
		if len(why) > 0 {
			fs.add(Finding{Kind: FindingHeadLogEdited, Run: p.h.Run, Seq: p.h.RunSeq, Line: lineNo, Detail: strings.Join(why, "; ")})
		}
		if valid {
			regs[p.h.Run] = append(rs, headReg{runSeq: p.h.RunSeq, event: p.event, line: lineNo})
		}
		wantSeq, last, lastKnown = p.h.Seq+1, p.hash, true
		lastSeq = max(lastSeq, p.h.Seq)
		return nil
	}
	off, err := scanLines(f, bufio.NewReaderSize(f, 1<<20), handle)
	if err != nil {
		fs.add(Finding{Kind: FindingHeadLogEdited, Detail: "cannot read head log: " + err.Error()})
		return regs
	}
	if n := ov.feed(ov.head(), lastSeq, handle); n > 0 {
		rep.Notes = append(rep.Notes, Note{Kind: NoteUnappliedLog, File: headFile,
			Detail: fmt.Sprintf("%d entries after line %d are in the writer's log, not yet in the file; checked as if written", n, lineNo-n)})
	} else if fi, err := f.Stat(); err == nil && fi.Size()-off > MaxLineBytes {
		fs.add(Finding{Kind: FindingHeadLogEdited, Line: lineNo + 1, Detail: oversizeTail(fi.Size()-off, lineNo)})
	} else if err == nil && fi.Size() > off {
		rep.Notes = append(rep.Notes, Note{Kind: NotePartialLine, File: headFile,
			Detail: fmt.Sprintf("partial last line of %d bytes after entry %d: an interrupted write", fi.Size()-off, lineNo)})
	}
	return regs
}

// runResult is one run file's outcome.
type runResult struct {
	events    int
	signed    int
	findings  []Finding
	notes     []Note
	citations []citing
}

// citing is one citation made by a decision, where it was made.
type citing struct {
	Citation
	run  string
	seq  uint64
	line int
}

// rec is what the chain checks keep of one event.
type rec struct {
	seq     uint64
	hash    [32]byte
	prev    [32]byte
	hasPrev bool
	ok      bool // content matches hash
	line    int
}

// runVerifier holds one worker's scratch space.
type runVerifier struct {
	sigs sigChecker
	r    *bufio.Reader
	o    obj
	buf  []byte
	recs []rec
	// malformed are the lines of the run file that could not be read as
	// events: a gap they explain is reported by them, not again as
	// missing events (explainedGap).
	malformed []int
}

func (v *runVerifier) verify(dir, run string, regs []headReg, limit int, ov *logOverlay) (res runResult) {
	file := runsDir + "/" + run + runExt
	fs := newFindings(limit, file)
	defer func() { res.findings = fs.list }()
	var r io.Reader
	f, err := OpenRegular(filepath.Join(dir, file))
	switch {
	case err == nil:
		defer f.Close()
		r = f
	case errors.Is(err, os.ErrNotExist) && len(ov.run(run)) > 0:
		r = bytes.NewReader(nil) // created by a write the log holds
	default:
		fs.add(Finding{Kind: FindingBadRunFile, Run: run, Detail: "cannot read: " + err.Error()})
		return res
	}

	v.recs, v.malformed = v.recs[:0], v.malformed[:0]
	var sigFindings pendingFindings
	defer func() { sigFindings.wg.Wait() }() // every early return too: the pool writes into it
	var (
		lineNo    int
		maxSeq    uint64
		closedAt  uint64
		seen      = make(map[uint64]int)
		decisions = make(map[string]Outcome)
		approvals = make(map[string]string) // approval id -> action digest it approved
		// attemptedBefore: effects attempted before the run's close
		attemptedBefore = make(map[string]bool)
	)
	if v.r == nil {
		v.r = bufio.NewReaderSize(r, 256<<10)
	}
	handle := func(line []byte, long bool) error {
		lineNo++
		if long {
			v.malformed = append(v.malformed, lineNo)
			fs.add(Finding{Kind: FindingMalformedLine, Run: run, Line: lineNo, Detail: fmt.Sprintf("line longer than %d bytes", MaxLineBytes)})
			return nil
		}
		var p parsedLine
		p, v.buf, err = parseEvent(line, &v.o, v.buf)
		if err != nil {
			v.malformed = append(v.malformed, lineNo)
			fs.add(Finding{Kind: FindingMalformedLine, Run: run, Line: lineNo, Detail: err.Error()})
			return nil
		}
		res.events++
		e := &p.ev
		at := Finding{Run: run, Seq: e.Seq, Line: lineNo}
		ok := p.hash == p.computed
		if !ok {
			at.Kind, at.Detail = FindingEditedEvent, fmt.Sprintf("event %d (%s) does not match its hash", e.Seq, e.Type)
			fs.add(at)
		}
		if p.sig != nil {
			res.signed++
		}
		v.sigs.check(&p, at, &sigFindings)
		if e.Run != run {
			at.Kind, at.Detail = FindingMisplacedEvent, fmt.Sprintf("event %d names run %q", e.Seq, e.Run)
			fs.add(at)
		}
		if first, dup := seen[e.Seq]; dup {
			at.Kind, at.Detail = FindingDuplicateEvent, fmt.Sprintf("event %d also on line %d", e.Seq, first)
			fs.add(at)
		} else {
			seen[e.Seq] = lineNo
			if e.Seq < maxSeq {
				at.Kind, at.Detail = FindingReordered, fmt.Sprintf("event %d placed after event %d", e.Seq, maxSeq)
				fs.add(at)
			}
			v.recs = append(v.recs, rec{seq: e.Seq, hash: p.hash, prev: p.prev, hasPrev: p.hasPrev, ok: ok, line: lineNo})
		}
		maxSeq = max(maxSeq, e.Seq)
		// After run.close only the end of an effect already under way may
		// follow: its outcome and approval settlement, when its attempt
		// came before the close (the application closed the work while it
		// ran).
		if closedAt != 0 && !((e.Type == TypeOutcome || e.Type == TypeApprovalSettle) && attemptedBefore[e.Effect]) {
			at.Kind, at.Detail = FindingEventAfterClose, fmt.Sprintf("event %d (%s) after run.close (event %d)", e.Seq, e.Type, closedAt)
			fs.add(at)
		}
		switch e.Type {
		case TypeRunClose:
			if closedAt == 0 {
				closedAt = e.Seq
			}
		case TypeApprovalDecision:
			var ad ApprovalDecision
			if json.Unmarshal(e.Data, &ad) == nil && ad.Approved {
				approvals[ad.Approval] = ad.ActionDigest
			}
		case TypeApprovalReopened:
			// Back with a person: the decisions before it no longer stand,
			// so an effect under it needs a decision after the reopen.
			var ro ApprovalReopened
			if json.Unmarshal(e.Data, &ro) == nil {
				delete(approvals, ro.Approval)
			}
		case TypeDecision:
			decisions[e.Effect] = decisionOutcome(e.Data)
			if decisions[e.Effect] == OutcomeAllowed && bytes.Contains(e.Data, []byte(`"approval"`)) {
				if f, bad := checkApproval(e.Data, approvals); bad {
					at.Kind, at.Detail = f.Kind, f.Detail
					fs.add(at)
				}
			}
			if bytes.Contains(e.Data, []byte(`"citations"`)) {
				var d struct{ Citations []Citation }
				if err := json.Unmarshal(e.Data, &d); err != nil {
					at.Kind, at.Detail = FindingBadCitation, "citations cannot be read: "+err.Error()
					fs.add(at)
				}
				for _, c := range d.Citations {
					res.citations = append(res.citations, citing{Citation: c, run: run, seq: e.Seq, line: lineNo})
				}
			}
		case TypeAttempt:
			if closedAt == 0 && e.Effect != "" {
				attemptedBefore[e.Effect] = true
			}
			out, decided := decisions[e.Effect]
			switch {
			case e.Effect == "":
				at.Kind, at.Detail = FindingAttemptWithoutDecision, fmt.Sprintf("attempt %d names no effect", e.Seq)
				fs.add(at)
			case !decided:
				at.Kind, at.Detail = FindingAttemptWithoutDecision, fmt.Sprintf("attempt %d of effect %q has no decision before it", e.Seq, e.Effect)
				fs.add(at)
			case out != OutcomeAllowed:
				at.Kind, at.Detail = FindingAttemptAfterRefusal, fmt.Sprintf("attempt %d of effect %q follows a decision with outcome %q", e.Seq, e.Effect, out)
				fs.add(at)
			}
		}
		return nil
	}
	off, err := scanLines(r, v.r, handle)
	if err != nil {
		fs.add(Finding{Kind: FindingBadRunFile, Run: run, Detail: "cannot read: " + err.Error()})
		return res
	}
	defer func() { // after the chain's findings: sorted with them at the end
		sigFindings.wg.Wait()
		for _, f := range sigFindings.list {
			fs.add(f)
		}
		res.findings = fs.list
	}()
	if n := ov.feed(ov.run(run), maxSeq, handle); n > 0 {
		res.notes = append(res.notes, Note{Kind: NoteUnappliedLog, Run: run, File: file,
			Detail: fmt.Sprintf("events %d to %d are in the writer's log, not yet in the file; checked as if written", maxSeq-uint64(n)+1, maxSeq)})
	} else if fi, err := f.Stat(); f != nil && err == nil && fi.Size()-off > MaxLineBytes {
		fs.add(Finding{Kind: FindingMalformedLine, Run: run, Line: lineNo + 1, Detail: oversizeTail(fi.Size()-off, lineNo)})
	} else if f != nil && err == nil && fi.Size() > off {
		res.notes = append(res.notes, Note{Kind: NotePartialLine, Run: run, File: file,
			Detail: fmt.Sprintf("partial last line of %d bytes after line %d: an interrupted write", fi.Size()-off, lineNo)})
	}

	recs := v.recs
	slices.SortFunc(recs, func(a, b rec) int { return cmp.Compare(a.seq, b.seq) })
	want := uint64(1)
	for i, r := range recs {
		prevLine := 0
		if i > 0 {
			prevLine = recs[i-1].line
		}
		if r.seq > want && !explainedGap(v.malformed, prevLine, r.line, r.seq-want) {
			d := fmt.Sprintf("event %d missing", want)
			if r.seq-1 > want {
				d = fmt.Sprintf("events %d to %d missing", want, r.seq-1)
			}
			fs.add(Finding{Kind: FindingSequenceGap, Run: run, Seq: want, Line: r.line, Detail: d})
		}
		want = r.seq + 1
		switch {
		case r.seq == 1 && r.hasPrev:
			fs.add(Finding{Kind: FindingBrokenChain, Run: run, Seq: 1, Line: r.line, Detail: "first event names a previous hash"})
		case i > 0 && recs[i-1].seq == r.seq-1 && (!r.hasPrev || r.prev != recs[i-1].hash):
			fs.add(Finding{Kind: FindingBrokenChain, Run: run, Seq: r.seq, Line: r.line,
				Detail: fmt.Sprintf("prev of event %d is not the hash of event %d: one of them was rewritten or replaced", r.seq, r.seq-1)})
		}
	}

	var maxReg uint64
	var cut *headReg
	for i, reg := range regs {
		maxReg = max(maxReg, reg.runSeq)
		j, found := slices.BinarySearchFunc(recs, reg.runSeq, func(r rec, s uint64) int { return cmp.Compare(r.seq, s) })
		switch {
		case !found && reg.runSeq > maxSeq:
			if cut == nil || reg.runSeq > cut.runSeq {
				cut = &regs[i]
			}
		case found && recs[j].ok && recs[j].hash != reg.event:
			fs.add(Finding{Kind: FindingEditedEvent, Run: run, Seq: reg.runSeq, Line: recs[j].line,
				Detail: fmt.Sprintf("event %d differs from the one head log line %d registered: rewritten", reg.runSeq, reg.line)})
		}
	}
	if cut != nil {
		fs.add(Finding{Kind: FindingRunCutShort, Run: run, Seq: cut.runSeq,
			Detail: fmt.Sprintf("head log line %d registered event %d; the file ends at event %d", cut.line, cut.runSeq, maxSeq)})
	}
	switch {
	case len(regs) == 0 && lineNo == 0 && off == 0:
		res.notes = append(res.notes, Note{Kind: NoteEmptyRun, Run: run, File: file, Detail: "empty run file, never registered"})
	case len(regs) == 0:
		fs.add(Finding{Kind: FindingUnregisteredRun, Run: run, Detail: fmt.Sprintf("the head log never registered run %s (%d lines)", run, lineNo)})
	case maxSeq > maxReg:
		res.notes = append(res.notes, Note{Kind: NoteAfterHead, Run: run, File: file,
			Detail: fmt.Sprintf("events %d to %d follow the registered head (event %d): an interrupted write", maxReg+1, maxSeq, maxReg)})
	}
	if closedAt == 0 && res.events > 0 {
		res.notes = append(res.notes, Note{Kind: NoteRunOpen, Run: run, File: file, Detail: "no run.close: the run is still open"})
	}
	return res
}

// checkCitations checks that every cited record is in the journal: the
// cited run holds an effect.outcome of the cited effect whose digest is
// the cited digest. Only cited runs are read again, so a journal without
// grounded decisions pays nothing.
func checkCitations(dir string, have map[string]bool, cites []citing) []Finding {
	if len(cites) == 0 {
		return nil
	}
	want := map[string]map[string]bool{} // run -> effects cited
	for _, c := range cites {
		if have[c.Run] {
			if want[c.Run] == nil {
				want[c.Run] = map[string]bool{}
			}
			want[c.Run][c.Effect] = true
		}
	}
	digests := map[string]map[string]string{} // run -> effect -> outcome digest
	for run, effects := range want {
		digests[run] = outcomeDigests(filepath.Join(dir, runsDir, run+runExt), effects)
	}
	var out []Finding
	for _, c := range cites {
		f := Finding{Kind: FindingBadCitation, Run: c.run, Seq: c.seq, File: runsDir + "/" + c.run + runExt, Line: c.line}
		switch got, ok := digests[c.Run][c.Effect]; {
		case !have[c.Run]:
			f.Detail = fmt.Sprintf("cites a record in run %s, which is not in the journal", c.Run)
		case !ok:
			f.Detail = fmt.Sprintf("cites effect %q of run %s, which has no outcome there", c.Effect, c.Run)
		case got != c.Digest:
			f.Detail = fmt.Sprintf("cites effect %q of run %s with a digest its outcome does not have", c.Effect, c.Run)
		default:
			continue
		}
		out = append(out, f)
	}
	return out
}

// outcomeDigests reads the digests of the effect.outcome events of the
// given effects in one run file; lines that do not parse are skipped (the
// run's own checks report them).
func outcomeDigests(path string, effects map[string]bool) map[string]string {
	out := map[string]string{}
	f, err := OpenRegular(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes+1)
	for sc.Scan() {
		e, err := ParseLine(sc.Bytes())
		if err != nil || e.Type != TypeOutcome || !effects[e.Effect] {
			continue
		}
		var r struct{ Digest string }
		if json.Unmarshal(e.Data, &r) == nil {
			out[e.Effect] = r.Digest
		}
	}
	return out
}

// decisionOutcome reads Outcome from a policy.decision's data; anything
// unreadable counts as not allowed.
func decisionOutcome(data []byte) Outcome {
	v, ok := lookup(data, "outcome")
	if !ok {
		return ""
	}
	s, err := parseString(v)
	if err != nil {
		return ""
	}
	return Outcome(s)
}

// checkApproval checks an allowed decision that names an approval against
// the approvals recorded before it in the run.
func checkApproval(data []byte, approvals map[string]string) (Finding, bool) {
	var d struct {
		Approval     string `json:"approval"`
		ActionDigest string `json:"action_digest"`
	}
	if err := json.Unmarshal(data, &d); err != nil || d.Approval == "" {
		return Finding{}, false
	}
	got, ok := approvals[d.Approval]
	switch {
	case !ok:
		return Finding{Kind: FindingApprovalMissing, Detail: fmt.Sprintf("effect runs under approval %s, which no approval.decision before it (and after any approval.reopened of it) approved", d.Approval)}, true
	case got != d.ActionDigest:
		return Finding{Kind: FindingApprovalMismatch, Detail: fmt.Sprintf("effect runs under approval %s for action %s, but the approval was for %s", d.Approval, d.ActionDigest, got)}, true
	}
	return Finding{}, false
}
