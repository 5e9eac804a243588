package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gatehouse/gatehouse/broker/replay"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
)

const replayUsage = `Usage: gatehouse replay [DIR] [RUN] [--policy FILE] [--grounding FILE] [--mode MODE] [--json]
                        [--content-store objectstore [--nats-url URL --nats-creds FILE]]

Decides every recorded effect of a run again from its recorded inputs (the
request kept in the content store, the run's authority from run.open, the
decision time) under the policy recorded with it, runs the grounding check
of each provider call again from the records it read (kept in the content
store) under the grounding rules recorded with it, replays approval gates
from the approval events in the run, and reports per run:
reproduced, diverged (at which event, and why), changed (recorded content
fails its digest) or not replayable (content not captured or erased).
Nothing is called and nothing acts. DIR defaults to DATA_DIR/journal; the
content store is DATA_DIR/content (or --content). Without RUN every run is
replayed. With --content-store objectstore the content is read from the
NATS Object Store bucket gatehouse_content (serve --content-store
objectstore), reached with --nats-url and --nats-creds or, without them,
the NATS of the 'gatehouse serve' running in --data-dir.

--policy FILE replays under a candidate rules file instead and reports what
it would decide differently, grouped by rule (the what-if before switching
modes); --grounding FILE checks provider calls under a candidate grounding
rules file instead; --mode decides in another mode than the recorded one
(e.g. strict).
`

func cmdReplay(ctx context.Context, env *cliEnv, args []string) error {
	var (
		dataDir, contentDir, policyFile, groundingFile, mode string
		asJSON                                               bool
		store                                                contentStoreFlags
	)
	fs := newEnvFlags(env, "replay", replayUsage)
	fs.stringVar(&dataDir, "data-dir", ".gatehouse", "data dir whose journal and content to read")
	fs.StringVar(&contentDir, "content", "", "content store folder (default DATA_DIR/content)")
	store.register(fs)
	fs.StringVar(&policyFile, "policy", "", "replay under this candidate rules file instead of the recorded policies")
	fs.StringVar(&groundingFile, "grounding", "", "check provider calls under this candidate grounding rules file instead of the recorded rules")
	fs.StringVar(&mode, "mode", "", "decide in this mode instead of the recorded one (off, report, strict)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	dir, run := filepath.Join(dataDir, "journal"), ""
	switch len(pos) {
	case 0:
	case 1:
		if validRun(pos[0]) {
			run = pos[0]
		} else {
			dir = pos[0]
		}
	case 2:
		dir, run = pos[0], pos[1]
	default:
		return usageError("replay takes at most a directory and a run")
	}
	if contentDir == "" {
		contentDir = filepath.Join(dataDir, "content")
		if len(pos) > 0 && run != pos[0] {
			contentDir = filepath.Join(filepath.Dir(filepath.Clean(dir)), "content")
		}
	}
	var opts replay.Options
	if mode != "" {
		m, err := policy.ParseMode(mode)
		if err != nil {
			return usageError("--mode: %v", err)
		}
		opts.Mode = m
	}
	if policyFile != "" {
		p, err := policy.Load(policyFile)
		if err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("--policy: %w", err)}
		}
		opts.Policy = p
	}
	if groundingFile != "" {
		g, err := grounding.Load(groundingFile)
		if err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("--grounding: %w", err)}
		}
		opts.Grounding = g
	}
	cs, closeStore, err := store.open(ctx, dataDir, contentDir)
	if err != nil {
		return err
	}
	defer closeStore()
	opts.Content = cs

	var rep *replay.Report
	if run != "" {
		rep, err = replay.Runs(dir, []string{run}, opts)
	} else {
		rep, err = replay.All(dir, opts)
	}
	if err != nil {
		if errors.Is(err, replay.ErrNoJournal) || errors.Is(err, replay.ErrNoRun) {
			return &exitError{code: exitUsage, err: err}
		}
		return err
	}
	if asJSON {
		if err := printJSON(env, rep); err != nil {
			return err
		}
	} else {
		printReplay(env, rep, candidateName(policyFile, groundingFile))
	}
	if !rep.OK {
		return &exitError{code: exitFindings}
	}
	return nil
}

// candidateName names a what-if's candidate files, "" for none.
func candidateName(policyFile, groundingFile string) string {
	switch {
	case policyFile != "" && groundingFile != "":
		return policyFile + " and " + groundingFile
	case groundingFile != "":
		return groundingFile
	}
	return policyFile
}

func validRun(s string) bool {
	return len(s) > 2 && s[:2] == "r_" && filepath.Base(s) == s
}

func printReplay(env *cliEnv, rep *replay.Report, policyFile string) {
	w := env.stdout
	if policyFile == "" {
		for _, r := range rep.Runs {
			fmt.Fprintln(w, r)
		}
		if len(rep.Runs) == 0 {
			fmt.Fprintln(w, "no runs to replay")
		}
		return
	}
	n := 0
	for _, g := range rep.Groups {
		n += len(g.Decisions)
	}
	digest := rep.Candidate
	if digest == "" {
		digest = rep.CandidateGrounding
	}
	fmt.Fprintf(w, "under %s (%s): %d decision(s) would be decided differently\n", policyFile, digest, n)
	for _, g := range rep.Groups {
		fmt.Fprintf(w, "  rule %s", g.Rule)
		if g.Refusal != "" && string(g.Refusal) != g.Rule {
			fmt.Fprintf(w, " (%s)", g.Refusal)
		}
		fmt.Fprintf(w, ": %d decision(s) in %d run(s)\n", len(g.Decisions), len(g.Runs))
		for _, d := range g.Decisions {
			fmt.Fprintf(w, "    %s event %d %s.%s %s: recorded %s, would be %s", d.Run, d.Seq, d.Sink, d.Action, d.Target, d.Recorded, d.Replayed)
			if why, ok := strings.CutPrefix(d.Detail, "decided differently: "); ok {
				fmt.Fprintf(w, " (%s)", why) // what the candidate grounding found
			}
			fmt.Fprintln(w)
		}
	}
	for _, r := range rep.Runs {
		if r.Status == replay.StatusNotReplayable || r.Status == replay.StatusChanged {
			fmt.Fprintln(w, r)
		}
	}
}
