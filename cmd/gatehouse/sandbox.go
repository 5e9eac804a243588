package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/gatehouse/gatehouse/sandbox"
)

const sandboxUsage = `Usage: gatehouse sandbox check [--tiers T,T] [--json]

Self-tests every sandbox tier on this machine, in order (bubblewrap as an
unprivileged uid, Go namespaces, Landlock with seccomp), and prints which
one the code sink would use and what each probe found: a probe inside the
sandbox tries to reach a listener on 127.0.0.1, write a canary and read a
file outside its workspace, and reads its capabilities; it must fail at
all of those and succeed in writing its workspace.

Exit status: 0 a confined tier works, 1 only "unconfined" is left.
`

func cmdSandbox(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
			fmt.Fprint(env.stdout, sandboxUsage)
			return nil
		}
		fmt.Fprint(env.stderr, sandboxUsage)
		return usageError("sandbox: the only command is check")
	}
	var (
		tiers  listFlag
		uid    int
		asJSON bool
	)
	fs := newEnvFlags(env, "sandbox check", sandboxUsage)
	fs.Var(&tiers, "tiers", "tiers to try, in order (bubblewrap, namespaces, landlock, unconfined)")
	fs.intVar(&uid, "sandbox-uid", 65534, "the unprivileged uid the child runs as")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	if _, err := fs.parse(args[1:]); err != nil {
		return err
	}
	cfg, err := sandboxConfig(tiers, uid)
	if err != nil {
		return err
	}
	cfg.Logger = slog.New(slog.DiscardHandler) // the report below says it all
	_, rep := sandbox.Detect(ctx, cfg)
	if asJSON {
		if err := json.NewEncoder(env.stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.stdout, "sandbox: %s (confined: %v)\n", rep.Chosen, rep.Confined)
		for _, t := range rep.Tiers {
			state := "not confined"
			if t.Confined {
				state = "confined"
			}
			if t.Err != "" {
				state = "cannot start: " + t.Err
			}
			fmt.Fprintf(env.stdout, "  %-11s %s\n", t.Tier, state)
			for _, p := range t.Probes {
				mark := "ok  "
				if !p.Contained {
					mark = "FAIL"
				}
				fmt.Fprintf(env.stdout, "    %s %-16s %s\n", mark, p.Name, p.Detail)
			}
		}
	}
	if !rep.Confined {
		return &exitError{code: exitFindings}
	}
	return nil
}

// sandboxConfig builds the sandbox configuration from flags.
func sandboxConfig(tiers []string, uid int) (sandbox.Config, error) {
	cfg := sandbox.Config{UID: uid, GID: uid}
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
