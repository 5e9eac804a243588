package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/journal"
)

const verifyUsage = `Usage: gatehouse verify [DIR] [--json]
       gatehouse verify [DIR] --trusted-key FILE [--require-signatures]
       gatehouse verify [DIR] --log-key K --witness-key W (--checkpoint FILE | --witness URL...)
       gatehouse verify --export DIR [--log-key K --witness-key W [--witness-quorum N]] [--json]

Checks a journal; the first form needs no keys and no network: every event
against its hash and its run's chain, every run against the head log, and
every effect.attempt against an allowed policy.decision before it. DIR
defaults to the journal of --data-dir (./.gatehouse/journal). It reads only
regular files (a link, a pipe or a device is a finding, never followed or
waited on), bounds what it reads, says on success what it checked and what
not, and stops at once on Ctrl-C or SIGTERM (exit status 130).

--export DIR checks an evidence export (gatehouse evidence TENANT/ --export,
or the dashboard's download unpacked: DIR is the TENANT-evidence folder or
the folder it was unpacked into): the files against its manifest, and each
run it holds against the head log; runs of others are expected to be
absent. A plain verify refuses an export.
With --log-key (and --witness-key for each witness) it also checks, offline,
the checkpoint the export carries (bad-checkpoint), its head log against it
(checkpoint-mismatch, rolled-back) and the inclusion proof of every head
entry of its runs (bad-inclusion-proof); an export without proofs is then
proofs-missing. Without keys a note says the proofs were not checked.

With keys it also checks what no one holding the folder can forge:
--trusted-key FILE checks every event signature strictly (old keys stay
usable: pass every key file); --checkpoint FILE or --witness URL with
--log-key (and --witness-key) checks the head log against a witnessed
checkpoint, catching a rewrite of the whole journal (checkpoint-mismatch)
and a rolled-back one (rolled-back).
`

func cmdVerify(ctx context.Context, env *cliEnv, args []string) error {
	var (
		dataDir string
		asJSON  bool
		export  string
		vi      verifyIntegrity
	)
	fs := newEnvFlags(env, "verify", verifyUsage)
	fs.stringVar(&dataDir, "data-dir", ".gatehouse", "data dir whose journal to check when DIR is not given")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&export, "export", "", "check this evidence export instead of a journal")
	vi.register(fs)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if export != "" {
		if len(pos) > 0 {
			return usageError("verify --export takes the export's directory only")
		}
		opts, err := vi.exportOptions()
		if err != nil {
			return err
		}
		return verifyExport(ctx, env, export, asJSON, opts)
	}
	dir, err := journalDirArg(dataDir, pos, "verify")
	if err != nil {
		return err
	}
	sc := &verifyScope{require: vi.require}
	var rep *journal.Report
	err = interruptible(ctx, func() (err error) {
		rep, err = vi.verify(ctx, dir, sc)
		return err
	})
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	if errors.Is(err, journal.ErrExport) {
		err = fmt.Errorf("%w; check it with: gatehouse verify --export %s", err, dir)
	}
	if err != nil {
		if asJSON {
			_ = printJSON(env, map[string]any{"dir": dir, "ok": false, "error": err.Error()})
		}
		return &exitError{code: exitUsage, err: fmt.Errorf("verify %s: %w", dir, err)}
	}
	return reportVerify(env, dir, dir, rep, sc, asJSON)
}

// reportVerify prints a verify's report (name is how the text names the
// folder) and gives its exit status.
func reportVerify(env *cliEnv, dir, name string, rep *journal.Report, sc *verifyScope, asJSON bool) error {
	collapseUnsigned(rep)
	checked, notChecked := sc.describe(rep)
	if asJSON {
		if err := printJSON(env, verifyOutput{Dir: dir, Report: rep, Checked: checked, NotChecked: nonNilStrings(notChecked)}); err != nil {
			return err
		}
	} else {
		printReport(env, name, rep, checked, notChecked)
	}
	if !rep.OK {
		return &exitError{code: exitFindings}
	}
	return nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func printReport(env *cliEnv, dir string, r *journal.Report, checked, notChecked []string) {
	state := "intact"
	if !r.OK {
		state = fmt.Sprintf("TAMPERING FOUND (%d finding(s))", len(r.Findings))
	}
	fmt.Fprintf(env.stdout, "%s: %d run(s), %d event(s), %d head log entries: %s\n", dir, r.Runs, r.Events, r.HeadEntries, state)
	for _, f := range r.Findings {
		fmt.Fprintf(env.stdout, "  %s\n", f)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(env.stdout, "  note: %s\n", n)
	}
	for _, c := range checked {
		fmt.Fprintf(env.stdout, "  checked: %s\n", c)
	}
	for _, c := range notChecked {
		fmt.Fprintf(env.stdout, "  not checked: %s\n", c)
	}
}

// verifyExport checks an evidence export (evidence.VerifyExportWith).
func verifyExport(ctx context.Context, env *cliEnv, dir string, asJSON bool, opts evidence.VerifyOptions) error {
	var rep *journal.Report
	err := interruptible(ctx, func() (err error) {
		rep, err = evidence.VerifyExportWith(dir, opts)
		return err
	})
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	if err != nil {
		if asJSON {
			_ = printJSON(env, map[string]any{"dir": dir, "ok": false, "error": err.Error()})
		}
		return &exitError{code: exitUsage, err: fmt.Errorf("verify --export %s: %w", dir, err)}
	}
	return reportVerify(env, dir, dir+" (export)", rep, verifyExportScope(opts), asJSON)
}
