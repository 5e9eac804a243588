package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gatehouse/gatehouse/broker/review"
)

const policyUsage = `Usage: gatehouse policy review [DIR] [--json]
       gatehouse policy check [--policy F] [--providers F] [--grounding F] [--json]

Reads a journal (DIR, default DATA_DIR/journal) and lists what strict mode
would have refused or held while Gatehouse ran in report mode, grouped by
refusal, rule and target, with counts, first and last seen, example runs
and what to do about each: the rule text to copy into the policy file.
Every suggested rule was checked: it loads, and in strict mode it lets the
recorded effect through (or holds it for a reviewer's approval).

The same review is on the dashboard's Policy review page.

policy check loads the policy, the provider catalogue and the grounding
rules as serve does and checks them against each other; see
'gatehouse policy check --help'.
`

func cmdPolicy(ctx context.Context, env *cliEnv, args []string) error {
	if done, err := subcommandHelp(env, args, "policy", policyUsage); done {
		return err
	}
	if args[0] == "check" {
		return cmdPolicyCheck(ctx, env, args[1:])
	}
	if args[0] != "review" {
		return unknownSubcommand("policy", args[0], "review", "check")
	}
	var (
		dataDir string
		asJSON  bool
	)
	fs := newEnvFlags(env, "policy review", policyUsage)
	fs.stringVar(&dataDir, "data-dir", ".gatehouse", "data dir whose journal to review when DIR is not given")
	fs.BoolVar(&asJSON, "json", false, "print the review as JSON")
	pos, err := fs.parse(args[1:])
	if err != nil {
		return err
	}
	dir, err := journalDirArg(dataDir, pos, "policy review")
	if err != nil {
		return err
	}
	rep, err := review.Review(dir)
	if err != nil {
		if errors.Is(err, review.ErrNoJournal) {
			// Its text names the reader review borrows (evidence's).
			return &exitError{code: exitUsage, err: fmt.Errorf("policy review: %s is not a journal directory (no runs folder): give a journal's folder, or the data dir with --data-dir", dir)}
		}
		return err
	}
	if err := writeReport(env.stdout, asJSON, rep, func() { printReview(env.stdout, rep) }); err != nil {
		return err
	}
	if len(rep.Findings) > 0 {
		return &exitError{code: exitFindings}
	}
	return nil
}

func printReview(w io.Writer, rep *review.Report) {
	fmt.Fprintf(w, "Policy review of %s: %d runs, %d decisions (%d in report mode).\n", rep.Journal, rep.Runs, rep.Decisions, rep.Report)
	if rep.Skipped > 0 {
		fmt.Fprintf(w, "%d journal lines could not be read (run 'gatehouse verify').\n", rep.Skipped)
	}
	if len(rep.Findings) == 0 {
		fmt.Fprintln(w, "Nothing strict mode would refuse: you can switch to --mode strict.")
		return
	}
	fmt.Fprintf(w, "%d decisions would have been refused or held in strict mode, in %d groups:\n", rep.Would, len(rep.Findings))
	for i, f := range rep.Findings {
		fmt.Fprintf(w, "\n%d. %s  x%d  (%s %s)\n", i+1, f.Refusal, f.Count, f.Sink, f.Target)
		fmt.Fprintf(w, "   rule %s", f.Rule)
		if f.Agent != "" {
			fmt.Fprintf(w, ", agent %s", f.Agent)
		}
		fmt.Fprintf(w, "; first %s, last %s; runs %s\n", f.First.UTC().Format("2006-01-02 15:04"), f.Last.UTC().Format("2006-01-02 15:04"), strings.Join(f.Examples, " "))
		if f.Detail != "" {
			fmt.Fprintf(w, "   %s\n", f.Detail)
		}
		for _, s := range f.Suggestions {
			fmt.Fprintf(w, "   - [%s] %s\n", s.Kind, s.Text)
			if s.Rules != "" {
				for _, line := range strings.Split(strings.TrimRight(s.Rules, "\n"), "\n") {
					fmt.Fprintf(w, "       %s\n", line)
				}
			}
		}
	}
}
