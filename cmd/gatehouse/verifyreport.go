package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/journal"
)

// exitInterrupted is the exit status of a command stopped by SIGINT or
// SIGTERM, as shells report a process a signal ended (128 + SIGINT).
const exitInterrupted = 130

// interruptible runs fn and returns its error, or returns at once with
// exit status 130 when ctx ends (SIGINT, SIGTERM): verify only reads, so
// nothing is left half done, and a read that does not end (a file on a
// mount that stopped answering) must not hold the terminal. fn's goroutine
// is abandoned then; the process exits right after.
func interruptible(ctx context.Context, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return &exitError{code: exitInterrupted, err: errors.New("interrupted: the verification did not finish")}
	}
}

// readUserFile reads a file a user named on the command line (a
// checkpoint, a key): symbolic links are followed, as the user chose the
// path, but it must be a regular file, the open never blocks (a named
// pipe) and at most max bytes are read.
func readUserFile(path string, max int64) ([]byte, error) {
	b, _, err := readUserFileInfo(path, max)
	return b, err
}

func readUserFileInfo(path string, max int64) ([]byte, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(b)) > max {
		return nil, nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, fi, nil
}

// verifyScope is what a verify was asked to check, to say on success what
// was checked and what was not.
type verifyScope struct {
	export      bool
	keys        *journal.TrustedKeys
	require     bool
	checkpoints []usedCheckpoint // plain verify: those that opened
	proofKeys   bool             // --export with --log-key
}

type usedCheckpoint struct {
	from string // the file or witness URL
	cp   *journal.Checkpoint
}

// verifyOutput is verify's report as --json prints it: the journal's
// report, the folder, and what was (not) checked.
type verifyOutput struct {
	Dir string `json:"dir"`
	*journal.Report
	Checked    []string `json:"checked"`
	NotChecked []string `json:"not_checked"`
}

// describe says what a verify with scope sc checked, given its report.
func (sc *verifyScope) describe(rep *journal.Report) (checked, notChecked []string) {
	checked = []string{fmt.Sprintf("%d events against their hashes and their runs' hash chains (%s)", rep.Events, plural(rep.Runs, "run"))}
	if slices.ContainsFunc(rep.Findings, func(f journal.Finding) bool { return f.Kind == journal.FindingHeadLogMissing }) {
		notChecked = append(notChecked, "the head log's chain, and the runs against it: the head log is missing or not a regular file (see the finding)")
	} else {
		checked = append(checked, fmt.Sprintf("the head log's chain (%d entries) and every run against it", rep.HeadEntries))
	}
	checked = append(checked, "every effect.attempt against an allowed policy.decision before it")
	if sc.export {
		checked = append(checked, "every exported file against export.json (size, SHA-256), and no run of anyone else")
	}
	if sc.keys != nil {
		what := fmt.Sprintf("signatures: %d of %d events signed, each checked against the %d trusted key(s)", rep.Signed, rep.Events, sc.keys.Len())
		if sc.require {
			what += "; every event must be signed"
		}
		checked = append(checked, what)
	} else {
		notChecked = append(notChecked, "signatures (--trusted-key FILE)")
	}
	switch {
	case sc.export && sc.proofKeys:
		checked = append(checked, "the export's checkpoint (the log's signature, the cosignatures) and the inclusion proof of every head entry of its runs")
	case sc.export:
		notChecked = append(notChecked, "the export's checkpoint and inclusion proofs (--log-key and --witness-key)")
	case len(sc.checkpoints) > 0:
		for _, u := range sc.checkpoints {
			by := "signed by the log's key"
			if len(u.cp.Witnesses) > 0 {
				by += ", cosigned by " + strings.Join(u.cp.Witnesses, ", ")
			}
			checked = append(checked, fmt.Sprintf("the head log's first %d entries against checkpoint %s %d from %s (%s)", u.cp.Size, u.cp.Origin, u.cp.Size, u.from, by))
		}
	default:
		notChecked = append(notChecked, "a witnessed checkpoint, which catches a rewrite of the whole journal (--witness URL or --checkpoint FILE, with --log-key and --witness-key)")
	}
	return checked, notChecked
}

// collapseUnsigned makes the unsigned-event findings of --require-signatures
// readable: one finding for a journal none of whose events is signed (it
// was written without a signing key), one per run otherwise, naming how
// many and which events, instead of one per event.
func collapseUnsigned(rep *journal.Report) {
	type span struct {
		first, last uint64
		n           int
		at          journal.Finding
	}
	runs := map[string]*span{}
	var order []string
	kept := rep.Findings[:0]
	total := 0
	for _, f := range rep.Findings {
		if f.Kind != journal.FindingUnsignedEvent {
			kept = append(kept, f)
			continue
		}
		total++
		s := runs[f.Run]
		if s == nil {
			s = &span{first: f.Seq, last: f.Seq, at: f}
			runs[f.Run] = s
			order = append(order, f.Run)
		}
		s.first, s.last, s.n = min(s.first, f.Seq), max(s.last, f.Seq), s.n+1
	}
	if total == 0 {
		return
	}
	if rep.Signed == 0 && total == rep.Events {
		rep.Findings = append(kept, journal.Finding{Kind: journal.FindingUnsignedEvent, File: "runs",
			Detail: fmt.Sprintf("none of the journal's %d events is signed: it was written without a signing key (serve or writer --signing-key-file)", total)})
		rep.OK = false
		return
	}
	for _, run := range order {
		s := runs[run]
		f := s.at
		f.Line = 0
		if s.n > 1 {
			f.Seq = s.first
			f.Detail = fmt.Sprintf("%d events are not signed (events %d to %d)", s.n, s.first, s.last)
		}
		kept = append(kept, f)
	}
	rep.Findings = kept
	rep.OK = false
}

// verifyExportScope is the scope of verify --export with opts.
func verifyExportScope(opts evidence.VerifyOptions) *verifyScope {
	return &verifyScope{export: true, keys: opts.Keys, require: opts.RequireSignatures, proofKeys: opts.Checkpoint.Log != nil}
}
