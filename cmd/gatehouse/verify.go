package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/gatehouse/gatehouse/broker/journal"
)

const verifyUsage = `Usage: gatehouse verify [DIR] [--json]

Checks a journal offline, with no keys and no network: every event against
its hash and its run's chain, every run against the head log, and every
effect.attempt against an allowed policy.decision before it. DIR defaults
to the journal of --data-dir (./.gatehouse/journal).

Exit status: 0 intact, 1 tampering found, 2 unusable input.
`

func cmdVerify(ctx context.Context, env *cliEnv, args []string) error {
	var (
		dataDir string
		asJSON  bool
	)
	fs := newEnvFlags(env, "verify", verifyUsage)
	fs.stringVar(&dataDir, "data-dir", ".gatehouse", "data dir whose journal to check when DIR is not given")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	dir := filepath.Join(dataDir, "journal")
	switch len(pos) {
	case 0:
	case 1:
		dir = pos[0]
	default:
		return usageError("verify takes at most one directory")
	}
	rep, err := journal.Verify(dir, journal.VerifyOptions{})
	if err != nil {
		if asJSON {
			_ = json.NewEncoder(env.stdout).Encode(map[string]any{"dir": dir, "ok": false, "error": err.Error()})
		}
		return &exitError{code: exitUsage, err: fmt.Errorf("verify %s: %w", dir, err)}
	}
	if asJSON {
		if err := json.NewEncoder(env.stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		printReport(env, dir, rep)
	}
	if !rep.OK {
		return &exitError{code: exitFindings}
	}
	return nil
}

func printReport(env *cliEnv, dir string, r *journal.Report) {
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
}
