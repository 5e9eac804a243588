// Command gatehouse is the one Gatehouse binary: the server (serve), the
// journal writer on its own (writer), the application and agent side at a
// terminal (work, effect) and the offline checker (verify).
//
// main only calls run; tests call run too.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gatehouse/gatehouse/sandbox"
)

func main() {
	sandbox.MaybeHelper() // the sandbox re-executes this binary as its helper
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitError carries a process exit status; its message, if any, has been
// printed already or is printed by exitCode.
type exitError struct {
	code int
	err  error
	// usage marks a mistake in the command line (usageError): run ends
	// its message with which help to read, unless it names one already.
	usage bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// Exit statuses shared by every subcommand.
const (
	exitOK       = 0
	exitFindings = 1 // verify found tampering; an effect was refused
	exitUsage    = 2 // bad flags or arguments, unusable input
)

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "gatehouse:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "gatehouse:", err)
	return exitFindings
}

// usageError marks bad arguments (exit status 2).
func usageError(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...), usage: true}
}

// groups are the commands whose subcommands have help of their own
// (gatehouse work open --help); mcp's only for these words.
var groups = map[string]bool{"work": true, "agents": true, "apps": true, "approve": true, "users": true,
	"policy": true, "mcp": true, "sandbox": true, "contract": true}

// withHelpHint ends a usage mistake's message by naming the help to read
// (Run 'gatehouse work open --help' for usage.), as the README promises
// of every mistake; other errors, and messages that name a help already,
// pass as they are.
func withHelpHint(args []string, err error) error {
	var ee *exitError
	if !errors.As(err, &ee) || !ee.usage || ee.err == nil || strings.Contains(ee.err.Error(), "\nRun 'gatehouse") {
		return err
	}
	name := args[0]
	if len(args) > 1 && groups[name] && !strings.HasPrefix(args[1], "-") &&
		(name != "mcp" || args[1] == "upstream" || args[1] == "token") {
		name += " " + args[1]
	}
	return usageHint(name, ee.err.Error())
}

const topUsage = `gatehouse decides, records and carries out the effects AI agents propose.

Usage:
  gatehouse <command> [flags] [args]

Commands:
  serve      run Gatehouse: embedded NATS, broker, journal writer, web status page
  writer     run only the journal writer against an existing NATS
  work       open or close work on behalf of a person (an application's side)
  effect     propose an effect for a run (an agent's side)
  mcp        serve Gatehouse to an agent's MCP client (stdio); MCP tokens; upstream MCP servers' pinned tools
  agents     named agents: add, rotate, remove, list (each its own NATS credential)
  apps       named applications: add, rotate, remove, list
  approve    list, show, approve, refuse or reconcile approval requests (a backend's side, signed)
  verify     check a journal: hashes, chains, signatures, checkpoints (offline but for --witness)
  checkpoint sign a checkpoint of the journal's head log now and have witnesses cosign it
  witness    run a checkpoint witness: cosigns a log's checkpoints, refuses forks and rollbacks
  keygen     make an Ed25519 key: journal signing, a witness, an approvals backend
  policy     policy review: what strict mode would refuse, with rules to copy;
             policy check: the policy, catalogue and grounding rules checked together
  users      dashboard users: add, passwd, totp, remove, list
  evidence   what agents did for a person; a tenant's evidence export; erase a person's content
  replay     decide recorded effects again from their recorded inputs (and under a candidate policy)
  status     show a deployment as an operator sees it: NATS servers, streams, brokers, the writer's lag
  bench      drive many agents over NATS and report decisions/s, latency and journal lag
  sandbox    self-test the sandbox tiers on this machine (sandbox check)
  sinks      every sink's actions and the params each takes (sinks/REFERENCE.md)
  contract   read the operations a Python program can send (contract read FILE)
  version    print the version

Run 'gatehouse <command> --help' (or 'gatehouse help <command>') for a
command's flags, examples and exit statuses. Every command that reports
takes --json: one JSON value on one line, snake_case fields.
`

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	env := &cliEnv{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		renderHelp(stderr, "gatehouse", topUsage, nil)
		return &exitError{code: exitUsage}
	}
	return withHelpHint(args, dispatch(ctx, env, args))
}

// dispatch runs the command args name.
func dispatch(ctx context.Context, env *cliEnv, args []string) error {
	getenv, stdin, stdout, stderr := env.getenv, env.stdin, env.stdout, env.stderr
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return cmdServe(ctx, env, rest)
	case "writer":
		return cmdWriter(ctx, env, rest)
	case "work":
		return cmdWork(ctx, env, rest)
	case "effect":
		return cmdEffect(ctx, env, rest)
	case "mcp":
		return cmdMCP(ctx, env, rest)
	case "approve":
		return cmdApprove(ctx, env, rest)
	case "agents":
		return cmdAgents(ctx, env, rest)
	case "apps":
		return cmdApps(ctx, env, rest)
	case "policy":
		return cmdPolicy(ctx, env, rest)
	case "users":
		return cmdUsers(ctx, env, rest)
	case "verify":
		return cmdVerify(ctx, env, rest)
	case "checkpoint":
		return cmdCheckpoint(ctx, env, rest)
	case "witness":
		return cmdWitness(ctx, env, rest)
	case "keygen":
		return cmdKeygen(ctx, env, rest)
	case "evidence":
		return cmdEvidence(ctx, env, rest)
	case "replay":
		return cmdReplay(ctx, env, rest)
	case "status":
		return cmdStatus(ctx, env, rest)
	case "bench":
		return cmdBench(ctx, env, rest)
	case "sandbox":
		return cmdSandbox(ctx, env, rest)
	case "sinks":
		return cmdSinks(ctx, env, rest)
	case "contract":
		return cmdContract(ctx, env, rest)
	case "version", "--version":
		return cmdVersion(env, rest)
	case "help", "-h", "--help":
		if len(rest) > 0 && cmd == "help" {
			return run(ctx, append(rest, "--help"), getenv, stdin, stdout, stderr) // gatehouse help CMD [SUB]
		}
		renderHelp(stdout, "gatehouse", topUsage, nil)
		return nil
	default:
		return usageError("unknown command %q\nRun 'gatehouse --help' for the list of commands.", cmd)
	}
}

const version = "0.1.0"

const versionUsage = `Usage: gatehouse version [--json]

Prints the version of this binary.
`

func cmdVersion(env *cliEnv, args []string) error {
	var asJSON bool
	fs := newFlags(env, "version", versionUsage)
	fs.BoolVar(&asJSON, "json", false, "print the version as JSON")
	if _, err := parse(env, fs, args); err != nil {
		return err
	}
	if asJSON {
		return printJSON(env, struct {
			Version string `json:"version"`
		}{version})
	}
	fmt.Fprintln(env.stdout, "gatehouse", version)
	return nil
}

// cliEnv is what a subcommand may touch of the outside world.
type cliEnv struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}
