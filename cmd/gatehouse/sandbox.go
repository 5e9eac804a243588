package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
)

const sandboxUsage = `Usage: gatehouse sandbox check [--tiers T,T] [--all] [--sandbox-uid N|FIRST-LAST] [--json]

Self-tests, on this machine, how host commands run (the process sink and
unconfined code: as a uid of --sandbox-uid, never this process's, with no
group, capability or way to regain privilege, in a pid namespace of their
own), then the sandbox tiers in order (bubblewrap as an unprivileged uid,
Go namespaces, Landlock with seccomp) until one proves confined: that is
the tier the code sink uses, as serve chooses it at start. --all goes on
and tests every tier. For each tier tried it prints what each probe found:
a probe inside the sandbox tries to reach listeners on 127.0.0.1, write a
canary and read files outside its workspace (one of them 0600, as
DATA_DIR's are), see, signal or ptrace a host process of its own uid and
the broker, read another process's command line or environment from
/proc, and reads its capabilities; it must fail at all of those and
succeed in writing its workspace.
`

func cmdSandbox(ctx context.Context, env *cliEnv, args []string) error {
	if done, err := subcommandHelp(env, args, "sandbox", sandboxUsage); done {
		return err
	}
	if args[0] != "check" {
		return unknownSubcommand("sandbox", args[0], "check")
	}
	var (
		tiers  listFlag
		uids   string
		asJSON bool
		all    bool
	)
	fs := newEnvFlags(env, "sandbox check", sandboxUsage)
	fs.Var(&tiers, "tiers", "tiers to try, in order (bubblewrap, namespaces, landlock, unconfined)")
	fs.stringVar(&uids, "sandbox-uid", defaultSandboxUIDs, sandboxUIDUsage)
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&all, "all", false, "test every tier, also those after the one chosen")
	if _, err := fs.parse(args[1:]); err != nil {
		return err
	}
	cfg, err := sandboxConfig(tiers, uids)
	if err != nil {
		return err
	}
	cfg.Logger = slog.New(slog.DiscardHandler) // the report below says it all
	_, rep := sandbox.Detect(ctx, cfg)
	if all {
		testRemainingTiers(ctx, cfg, rep)
	}
	if asJSON {
		if err := printJSON(env, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.stdout, "sandbox: %s (confined: %v)\n", rep.Chosen, rep.Confined)
		h := rep.Host
		state := fmt.Sprintf("uids %s, one per run", h.UIDs)
		if !strings.Contains(h.UIDs, "-") {
			state = fmt.Sprintf("uid %s, shared by every run", h.UIDs)
		}
		switch {
		case !h.SeparateUID:
			state = "AS THIS PROCESS'S OWN USER (serve refuses them in strict mode): " + h.Err
		case h.OwnPID:
			state += ", own pid namespace"
		default:
			state += ", host processes visible"
		}
		fmt.Fprintf(env.stdout, "  host commands: %s\n", state)
		printProbes(env, h.Probes)
		for _, t := range rep.Tiers {
			state := "not confined"
			if t.Confined {
				state = "confined"
			}
			if t.Err != "" {
				state = "cannot start: " + t.Err
			}
			if t.Tier == rep.Chosen {
				state += " (chosen: the code sink runs here)"
			}
			fmt.Fprintf(env.stdout, "  %-11s %s\n", t.Tier, state)
			printProbes(env, t.Probes)
		}
	}
	if !rep.Confined {
		return &exitError{code: exitFindings}
	}
	return nil
}

// testRemainingTiers self-tests the tiers Detect did not reach (it stops
// at the first confined one) and adds them to rep; the choice stays
// Detect's.
func testRemainingTiers(ctx context.Context, cfg sandbox.Config, rep *sandbox.Report) {
	tried := map[sandbox.Tier]bool{}
	for _, t := range rep.Tiers {
		tried[t.Tier] = true
	}
	order := cfg.Tiers
	if len(order) == 0 {
		order = sandbox.DefaultTiers
	}
	for _, t := range order {
		if tried[t] || t == sandbox.TierUnconfined {
			continue
		}
		one := cfg
		one.Tiers = []sandbox.Tier{t}
		if _, r := sandbox.Detect(ctx, one); len(r.Tiers) > 0 {
			rep.Tiers = append(rep.Tiers, r.Tiers[0])
		}
	}
}

func printProbes(env *cliEnv, probes []sandbox.Probe) {
	for _, p := range probes {
		mark := "ok  "
		if !p.Contained {
			mark = "FAIL"
		}
		fmt.Fprintf(env.stdout, "    %s %-16s %s\n", mark, p.Name, p.Detail)
	}
}

// The --sandbox-uid flag of serve and sandbox check.
var defaultSandboxUIDs = fmt.Sprintf("%d-%d", sandbox.DefaultFirstUID, sandbox.DefaultFirstUID+sandbox.DefaultUIDCount-1)

const sandboxUIDUsage = "uids programs run as (never root or this process's own): FIRST-LAST gives each concurrent run a uid of its own (gid = the same number); one uid N is shared by every run; no account may hold a uid of a range"

// sandboxConfig builds the sandbox configuration from flags.
func sandboxConfig(tiers []string, uids string) (sandbox.Config, error) {
	first, count, err := sandbox.ParseUIDs(uids)
	if err != nil {
		return sandbox.Config{}, usageError("--sandbox-uid: %v", err)
	}
	if count > 1 {
		// Whatever is left of a run's uid is killed as the run's: a range must be Gatehouse's alone.
		if acc := sandbox.Accounts(first, count); len(acc) > 0 {
			return sandbox.Config{}, usageError("--sandbox-uid %s holds the uids of accounts %s; pick a range no account uses", uids, strings.Join(acc, ", "))
		}
	}
	cfg := sandbox.Config{UID: first, GID: first, UIDs: count}
	for _, t := range tiers {
		switch tier := sandbox.Tier(strings.TrimSpace(t)); tier {
		case sandbox.TierBwrap, sandbox.TierNamespaces, sandbox.TierLandlock, sandbox.TierUnconfined:
			cfg.Tiers = append(cfg.Tiers, tier)
		default:
			return cfg, usageError("unknown sandbox tier %q (bubblewrap, namespaces, landlock, unconfined)", t)
		}
	}
	return cfg, nil
}

// sameUIDAllowed reports whether host commands and unconfined code may run as
// serve's own user where it cannot switch uids: never in strict mode, which
// answers them UNAVAILABLE instead; in report and off mode they run, and
// their outcomes record uid and separate_uid false.
func sameUIDAllowed(mode string) bool {
	m, err := policy.ParseMode(mode)
	return err == nil && m != policy.ModeStrict
}

// logHostIdentity says, at start, who host commands run as, loudly when it
// is serve's own user.
func logHostIdentity(sb *sandbox.Sandbox, mode string, log *slog.Logger) {
	h := sb.Report().Host
	switch {
	case sb.SeparateUID():
		log.Info("host commands and unconfined code run as sandbox uids", "uids", h.UIDs, "own_pid_namespace", h.OwnPID)
	case sameUIDAllowed(mode):
		log.Warn("HOST COMMANDS RUN AS GATEHOUSE'S OWN USER and can read DATA_DIR (keys, credentials, journal): this process cannot switch uids; run serve as root, or strict mode refuses them", "why", h.Err, "mode", mode)
	default:
		log.Warn("host commands and unconfined code are refused (UNAVAILABLE): this process cannot switch uids, and they would run as Gatehouse's own user; run serve as root to allow them", "why", h.Err)
	}
}
