package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/code"
	"github.com/gatehouse/gatehouse/sinks/code/contract"
)

const contractUsage = `Usage: gatehouse contract read FILE [--json] [--files a.py,data.csv] [--entry NAME]

Reads, the way Gatehouse does before a code effect runs, every operation
the Python program FILE ("-" for stdin) can send through the gatehouse
client module: provider, method and path template. CPython's own parser
runs confined in the sandbox; nothing of the program runs. The contract
is verified when every call the program can make is one of those
operations; otherwise each reason is given with its line, so an
integration's author can see what to change (keep providers, methods and
the fixed parts of paths in the code).

--files names the files that would be written beside the program (a
Python module among them shadows a module it imports); --entry names a
function the runner calls with its input after the module's body ran.
`

func cmdContract(ctx context.Context, env *cliEnv, args []string) error {
	if done, err := subcommandHelp(env, args, "contract", contractUsage); done {
		return err
	}
	if args[0] != "read" {
		return unknownSubcommand("contract", args[0], "read")
	}
	var (
		asJSON bool
		files  listFlag
		entry  string
		tiers  listFlag
		uids   string
		python string
	)
	fs := newEnvFlags(env, "contract read", contractUsage)
	fs.BoolVar(&asJSON, "json", false, "print the contract as JSON")
	fs.Var(&files, "files", "names of the files written beside the program")
	fs.StringVar(&entry, "entry", "", "a function the runner calls after the module's body")
	fs.Var(&tiers, "sandbox-tiers", "sandbox tiers to try for the parser (default bubblewrap,namespaces,landlock,unconfined)")
	fs.stringVar(&uids, "sandbox-uid", defaultSandboxUIDs, sandboxUIDUsage)
	fs.StringVar(&python, "python", "/usr/bin/python3", "the Python interpreter, as the sandbox sees it")
	pos, err := fs.parse(args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("contract read takes one FILE")
	}
	name := pos[0]
	var src []byte
	if name == "-" {
		src, err = io.ReadAll(io.LimitReader(env.stdin, 8<<20))
		name = "stdin"
	} else {
		src, err = readUserFile(name, 8<<20)
	}
	if err != nil {
		return usageError("contract read: %v", err)
	}
	cfg, err := sandboxConfig(tiers, uids)
	if err != nil {
		return err
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	sb, _ := sandbox.Detect(ctx, cfg)
	r := code.NewReader(sb, code.ReaderConfig{})
	c := r.Read(ctx, python, src, contract.Options{Files: files, Entry: entry})
	if asJSON {
		if err := printJSON(env, c); err != nil {
			return err
		}
	} else {
		printContract(env.stdout, filepath.Base(name), c)
	}
	if !c.Verified {
		return &exitError{code: exitFindings}
	}
	return nil
}

func printContract(w io.Writer, name string, c *contract.Contract) {
	if c.Verified {
		fmt.Fprintf(w, "%s: verified, %d operation(s)\n", name, len(c.Operations))
	} else {
		fmt.Fprintf(w, "%s: not verified (%d reason(s)): as model or registry code, every mutating call it makes is refused in strict mode (unverified-model-code)\n", name, len(c.Problems))
		if len(c.Operations) > 0 {
			fmt.Fprintln(w, "  operations read so far (not a contract):")
		}
	}
	for _, op := range c.Operations {
		fmt.Fprintf(w, "  %-7s %s %s\n", op.Method, op.Provider, op.Template)
	}
	if len(c.Problems) > 0 {
		fmt.Fprintln(w, "  why:")
	}
	for _, p := range c.Problems {
		fmt.Fprintf(w, "    %s\n", p)
	}
	if len(c.Entries) > 0 {
		fmt.Fprintf(w, "  read as a library (its body sends nothing): entries %v, each called with its input\n", c.Entries)
	}
	if len(c.Unreached) > 0 {
		fmt.Fprintf(w, "  never called, so not in the contract: %v\n", c.Unreached)
	}
	fmt.Fprintf(w, "  (%s)\n", c.Reader)
}

// openCode builds the code sink: its contract reader in sb and the
// registry of stored integrations on js, closed with the sink set.
func openCode(ctx context.Context, js jetstream.JetStream, c *serveConfig, sb *sandbox.Sandbox, log *slog.Logger, s *sinkSet, sameUID bool) (*code.Sink, error) {
	reader := code.NewReader(sb, code.ReaderConfig{Logger: log})
	reg, err := code.OpenRegistry(ctx, js, code.RegistryConfig{Reader: reader, Replicas: c.replicas, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("integration registry: %w", err)
	}
	s.closers = append(s.closers, reg.Close)
	return code.New(sb, code.Config{Reader: reader, Registry: reg, AllowSameUID: sameUID}), nil
}
