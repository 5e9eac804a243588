package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/dashboard/reveal"
	"github.com/gatehouse/gatehouse/policy"
)

const evidenceUsage = `Usage:
  gatehouse evidence TENANT/PERSON [--json]           what agents did for one person
  gatehouse evidence TENANT/ [--json]                 the same for every person of a tenant
  gatehouse evidence TENANT/ --export DIR             write a tenant's evidence export
  gatehouse evidence TENANT/PERSON --export DIR       ... of one person's runs
  gatehouse evidence TENANT/PERSON --erase [--yes]    erase one person's captured content
      [--content-store objectstore [--nats-url URL --nats-creds FILE]]

Reads the journal (and content store) under --data-dir, offline. The export
holds the runs exactly as written plus the head log and, when the journal
has a signed checkpoint (serve or writer with --signing-key-file, cosigned
with --witness; or 'gatehouse checkpoint'), the inclusion proof of every
head entry of its runs against it (proofs/). An auditor checks it with
only public keys: 'gatehouse verify --export DIR --log-key K --witness-key W'.
Without a checkpoint the export says so and a warning tells how to get one.

--erase removes the person's request content from DATA_DIR/content (never
journal events, so verify still passes; each erasure is logged in
content/erasures.jsonl); without --yes it only says what it would erase.
With --content-store objectstore it erases from the NATS Object Store
bucket gatehouse_content instead (serve --content-store objectstore;
logged there under erasures/), reached with --nats-url and --nats-creds
or the NATS of the 'gatehouse serve' running in --data-dir. A blob another
person's run also references is kept, in either store.
`

func cmdEvidence(ctx context.Context, env *cliEnv, args []string) error {
	var (
		dataDir, journalDir, exportDir string
		asJSON, erase, yes             bool
		store                          contentStoreFlags
	)
	fs := newEnvFlags(env, "evidence", evidenceUsage)
	fs.stringVar(&dataDir, "data-dir", ".gatehouse", "data dir whose journal and content to read")
	fs.StringVar(&journalDir, "journal", "", "journal directory (default DATA_DIR/journal)")
	fs.StringVar(&exportDir, "export", "", "write the evidence export into this folder")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	fs.BoolVar(&erase, "erase", false, "erase the person's captured content")
	fs.BoolVar(&yes, "yes", false, "with --erase: really erase")
	store.register(fs)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("evidence takes one TENANT/PERSON or TENANT/")
	}
	sel, err := evidence.ParseSelector(pos[0])
	if err != nil {
		return usageError("%v", err)
	}
	if journalDir == "" {
		journalDir = filepath.Join(dataDir, "journal")
	}
	switch {
	case erase && exportDir != "":
		return usageError("--erase and --export do not go together")
	case erase:
		return evidenceErase(ctx, env, &store, dataDir, journalDir, sel, yes, asJSON)
	case exportDir != "":
		sum, err := evidence.Export(exportDir, journalDir, sel)
		if err != nil {
			return evidenceErr(err)
		}
		warnProofs(env, journalDir, &sum.Manifest)
		if asJSON {
			return printJSON(env, sum)
		}
		m := sum.Manifest
		fmt.Fprintf(env.stdout, "exported %d run(s) of %s to %s\n", len(m.Runs), sel, exportDir)
		for _, l := range m.LeftOut {
			fmt.Fprintf(env.stdout, "  left out %s: %s\n", l.Run, l.Reason)
		}
		if c := m.Checkpoint; c != nil {
			fmt.Fprintf(env.stdout, "proofs: %d head entries proved against checkpoint %s %d, cosigned by %s\n",
				c.Proved, c.Origin, c.Size, orNone(c.Witnesses))
			fmt.Fprintf(env.stdout, "check it with: gatehouse verify --export %s --log-key LOG_KEY --witness-key WITNESS_KEY\n", exportDir)
		} else {
			fmt.Fprintf(env.stdout, "check it with: gatehouse verify --export %s\n", exportDir)
		}
		return nil
	}
	tl, err := evidence.Timeline(journalDir, sel.Tenant, sel.Person)
	if err != nil {
		return evidenceErr(err)
	}
	if asJSON {
		if err := printJSON(env, tl); err != nil {
			return err
		}
	} else {
		printTimeline(env, sel, tl)
	}
	if tl.Verify == nil || !tl.Verify.OK {
		return &exitError{code: exitFindings}
	}
	return nil
}

// warnProofs warns on stderr when the export cannot be checked against a
// witnessed checkpoint, or only in part, and says how to fix it.
func warnProofs(env *cliEnv, journalDir string, m *evidence.Manifest) {
	c := m.Checkpoint
	switch {
	case c == nil:
		fmt.Fprintf(env.stderr, "warning: %s has no signed checkpoint, so this export carries no inclusion proofs and an auditor\n"+
			"  cannot check it against a witnessed checkpoint. Run serve (or writer) with --signing-key-file and\n"+
			"  --witness URL --witness-key KEY, or 'gatehouse checkpoint --signing-key-file FILE --witness URL' while no\n"+
			"  writer runs, then export again.\n", journalDir)
		return
	case len(c.Witnesses) == 0:
		fmt.Fprintf(env.stderr, "warning: checkpoint %s %d carries no witness cosignature: the proofs tie the export to the log's\n"+
			"  own signature only. Run serve (or writer) with --witness URL, then export again.\n", c.Origin, c.Size)
	}
	if n := len(c.NotCovered); n > 0 {
		fmt.Fprintf(env.stderr, "warning: %d head entries of the exported runs came after checkpoint %s %d and are not proved yet;\n"+
			"  get a fresh checkpoint (GET /checkpoint?fresh=1 on serve, or 'gatehouse checkpoint' while no writer runs)\n"+
			"  and export again to prove them.\n", n, c.Origin, c.Size)
	}
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "no witness"
	}
	return strings.Join(names, ", ")
}

func evidenceErr(err error) error {
	if errors.Is(err, evidence.ErrCheckpoint) {
		return &exitError{code: exitFindings, err: fmt.Errorf("%w; no export was made: run 'gatehouse verify' with the witness's checkpoint", err)}
	}
	if errors.Is(err, evidence.ErrNoJournal) || errors.Is(err, evidence.ErrBadSelector) || errors.Is(err, evidence.ErrExists) {
		return &exitError{code: exitUsage, err: err}
	}
	return err
}

func printTimeline(env *cliEnv, sel evidence.Selector, tl *evidence.TimelineReport) {
	w := env.stdout
	switch {
	case tl.VerifyError != "":
		fmt.Fprintf(w, "%s: journal could not be verified: %s\n", sel, tl.VerifyError)
	case tl.Verify.OK:
		fmt.Fprintf(w, "%s: %d run(s); journal intact (%d run(s), %d event(s))\n", sel, len(tl.Runs), tl.Verify.Runs, tl.Verify.Events)
	default:
		fmt.Fprintf(w, "%s: %d run(s); journal TAMPERING FOUND (%d finding(s)); run 'gatehouse verify'\n", sel, len(tl.Runs), len(tl.Verify.Findings))
	}
	for _, l := range tl.LeftOut {
		fmt.Fprintf(w, "  left out %s: %s\n", l.Run, l.Reason)
	}
	for _, r := range tl.Runs {
		state := "open"
		if r.Closed != nil {
			state = "closed " + r.Closed.Format("2006-01-02 15:04:05Z")
		}
		fmt.Fprintf(w, "\nrun %s for %s/%s", r.Run, reveal.Line(r.For.Tenant), reveal.Line(r.For.Person))
		if r.Agent != "" {
			fmt.Fprintf(w, " agent %s", reveal.Line(r.Agent))
		}
		if r.Parent != "" {
			fmt.Fprintf(w, " delegated from %s", r.Parent)
		}
		fmt.Fprintf(w, "\n  opened %s, %s, scopes [%s]\n", r.Opened.Format("2006-01-02 15:04:05Z"), state, strings.Join(r.Scopes, ", "))
		for _, f := range r.Findings {
			fmt.Fprintf(w, "  FINDING %s\n", f)
		}
		approvals := r.Approvals // printed in journal order among the decisions
		for _, d := range r.Decisions {
			for len(approvals) > 0 && approvals[0].Seq < d.Seq {
				printApproval(w, approvals[0])
				approvals = approvals[1:]
			}
			target := ""
			if d.Target != "" {
				target = " " + reveal.Line(d.Target)
			}
			verdict := string(d.Outcome)
			if d.Rule != "" {
				verdict += fmt.Sprintf(" (%s, rule %s, enforced %v)", d.Refusal, d.Rule, d.Enforced)
			}
			fmt.Fprintf(w, "  %s  %s.%s%s: %s, %s mode", d.Time.Format("15:04:05"), d.Sink, d.Action, target, verdict, d.Mode)
			if d.Result != nil {
				fmt.Fprintf(w, "; outcome %s, %d bytes", reveal.Line(d.Result.Status), d.Result.Size)
			}
			fmt.Fprintln(w)
			for _, r := range d.Reasons {
				fmt.Fprintf(w, "      - %s (%s): %s\n", r.Refusal, reveal.Line(r.Rule), reveal.Line(r.Detail))
			}
		}
		for _, a := range approvals {
			printApproval(w, a)
		}
	}
}

func printApproval(w io.Writer, a evidence.ApprovalEntry) {
	fmt.Fprintf(w, "  %s  approval of %s: %s by %s", a.Time.Format("15:04:05"), a.Effect, a.Outcome, reveal.Line(a.Approver))
	if how := a.How(); how != "" {
		fmt.Fprintf(w, " (%s)", how)
	}
	if a.Reason != "" {
		fmt.Fprintf(w, ": %s", reveal.Line(a.Reason))
	}
	fmt.Fprintln(w)
}

func evidenceErase(ctx context.Context, env *cliEnv, csf *contentStoreFlags, dataDir, journalDir string, sel evidence.Selector, yes, asJSON bool) error {
	if sel.Person == "" {
		return usageError("--erase erases one person's content: write TENANT/PERSON")
	}
	store, closeStore, err := csf.open(ctx, dataDir, filepath.Join(dataDir, "content"))
	if err != nil {
		return err
	}
	defer closeStore()
	who := policy.Principal{Tenant: sel.Tenant, Person: sel.Person}
	if !yes {
		plan, err := store.PersonContent(who, journalDir)
		if err != nil {
			return err
		}
		if asJSON {
			_ = printJSON(env, map[string]any{"would_erase": plan, "erased": false})
		} else {
			fmt.Fprintf(env.stdout, "would erase %d blob(s) of %s's captured content (journal events stay; verify still passes):\n", len(plan), sel)
			for _, e := range plan {
				fmt.Fprintf(env.stdout, "  %s %s run %s\n", e.Kind, e.Digest, e.Run)
			}
		}
		return usageError("--erase needs --yes to erase")
	}
	done, err := store.ErasePerson(who, journalDir)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(env, map[string]any{"erased": done})
	}
	fmt.Fprintf(env.stdout, "erased %d blob(s) of %s's captured content; logged in %s\n", len(done), sel, csf.erasureLog(store))
	return nil
}
