package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/mcpserver"
	mcpsink "github.com/gatehouse/gatehouse/sinks/mcp"
)

const mcpUsage = `Usage:
  gatehouse mcp --run RUN [--agent NAME] [--approval-wait 10m] [--log-level warn]
                                                                 serve Gatehouse to an agent's MCP client on stdio
  gatehouse mcp token NAME [--data-dir DIR]                      make (or remake) a named agent's bearer token for serve --mcp-http
  gatehouse mcp upstream list|show|accept ...                    the pinned tool lists of upstream MCP servers (serve --mcp-servers)

An agent's MCP client launches 'gatehouse mcp --run RUN' with the agent's own
credential (found like 'gatehouse effect' finds it: --agent NAME or --creds,
and the local serve's endpoints file, or --nats-url). Every tool is a sink
action or an upstream MCP tool; each call is proposed over NATS as the
agent's effect request, decided, recorded and carried out by Gatehouse.
Nothing but MCP goes to stdout; logs go to stderr.
`

func cmdMCP(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "token":
			return cmdMCPToken(env, args[1:])
		case "upstream":
			return cmdMCPUpstream(ctx, env, args[1:])
		}
	}
	var (
		cf   connFlags
		run  string
		wait time.Duration
	)
	fs := newEnvFlags(env, "mcp", mcpUsage)
	cf.registerConn(fs) // no --json: stdout is the MCP session
	// A tool call may run code or a browser action: give it a minute.
	if tf := fs.Lookup("timeout"); tf != nil {
		_ = tf.Value.Set("60s")
		tf.DefValue, tf.Usage = "60s", "how long one tool call may wait for Gatehouse's answer"
	}
	fs.StringVar(&run, "run", "", "the run id the application opened for this agent (required)")
	fs.StringVar(&cf.agent, "agent", "", "connect as this named agent, with its own credential (serve --agents)")
	fs.DurationVar(&wait, "approval-wait", 10*time.Minute, "how long a call held for approval waits for a person when the client sent a progress token (0: never waits)")
	logLevel := fs.String("log-level", "warn", "what is logged on stderr: debug, info, warn or error")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("unexpected arguments %q", pos)
	}
	if run == "" {
		return usageError("--run is required")
	}
	c, err := cf.dial(client.Agent)
	if err != nil {
		return err
	}
	defer c.Close()
	log, err := newLogger(env, "text", *logLevel)
	if err != nil {
		return err
	}
	srv, err := mcpserver.New(mcpserver.Config{Run: run, Agent: c, ApprovalWait: wait, CallTimeout: cf.timeout, Version: version, Logger: log})
	if err != nil {
		return usageError("%v", err)
	}
	// Not the SDK's bare IOTransport: one bad line from the client would
	// end the session (see mcpserver.StdioTransport).
	t := &mcpserver.StdioTransport{In: env.stdin, Out: env.stdout, Logger: log}
	err = srv.MCP().Run(ctx, t)
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return fmt.Errorf("mcp: %w", err)
}

const mcpUpstreamUsage = `Usage:
  gatehouse mcp upstream list [--data-dir DIR] [--json]
  gatehouse mcp upstream show SERVER [--data-dir DIR] [--json]
  gatehouse mcp upstream accept SERVER [--tool T]... [--note TEXT] [--data-dir DIR]

An upstream MCP server's tool list is pinned (DATA_DIR/mcp/pins). A tool whose
description, schemas or annotations changed, or that is new, is refused
(tool-changed) until it is accepted here: show prints what changed between the
pin and the latest listing Gatehouse kept, accept makes that listing (or only
the named tools of it) the pin.
`

func cmdMCPUpstream(_ context.Context, env *cliEnv, args []string) error {
	if done, err := subcommandHelp(env, args, "mcp upstream", mcpUpstreamUsage); done {
		return err
	}
	var (
		dataDir, note string
		tools         listFlag
		asJSON        bool
	)
	fs := newEnvFlags(env, "mcp upstream "+args[0], mcpUpstreamUsage)
	fs.stringVar(&dataDir, "data-dir", ".gatehouse", "the data dir of 'gatehouse serve'")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	if args[0] == "accept" {
		fs.Var(&tools, "tool", "accept only this tool's change (repeat; default: the whole listing)")
		fs.StringVar(&note, "note", "", "who accepted it and why, kept in the pin")
	}
	pos, err := fs.parse(args[1:])
	if err != nil {
		return err
	}
	pins, err := mcpsink.NewPins(filepath.Join(dataDir, "mcp", "pins"))
	if err != nil {
		return err
	}
	out := func(v any) error { return printJSON(env, v) }
	switch args[0] {
	case "list":
		ents, err := os.ReadDir(pins.Dir)
		if err != nil {
			return err
		}
		type row struct {
			Server   string    `json:"server"`
			Tools    int       `json:"tools"`
			Accepted time.Time `json:"accepted"`
			By       string    `json:"by"`
			Changes  int       `json:"changes"`
		}
		rows := []row{} // [] in --json when none is pinned, not null
		for _, e := range ents {
			name, ok := strings.CutSuffix(e.Name(), ".json")
			if !ok || strings.HasSuffix(name, ".listed") {
				continue
			}
			pin, err := pins.Load(name)
			if err != nil || pin == nil {
				return fmt.Errorf("pin %s: %v", name, err)
			}
			r := row{Server: name, Tools: len(pin.Tools), Accepted: pin.Accepted, By: pin.By}
			if l, err := pins.LoadListed(name); err == nil && l != nil {
				r.Changes = len(mcpsink.Diff(pin, l.Tools))
			}
			rows = append(rows, r)
		}
		if asJSON {
			return out(rows)
		}
		if len(rows) == 0 {
			fmt.Fprintf(env.stdout, "no upstream MCP server pinned in %s (serve --mcp-servers pins a server's tools the first time it lists them)\n", pins.Dir)
		}
		for _, r := range rows {
			fmt.Fprintf(env.stdout, "%-20s %3d tools  accepted %s (%s)  %d change(s) waiting\n", r.Server, r.Tools, r.Accepted.Format(time.RFC3339), r.By, r.Changes)
		}
		return nil
	case "show", "accept":
		if len(pos) != 1 {
			return usageError("mcp upstream %s takes one server name", args[0])
		}
	default:
		return unknownSubcommand("mcp upstream", args[0], "list", "show", "accept")
	}
	server := pos[0]
	if args[0] == "accept" {
		if note == "" {
			note = "accepted with gatehouse mcp upstream accept"
		}
		pin, changes, err := pins.Accept(server, note, tools, time.Now())
		if err != nil {
			return err
		}
		if asJSON {
			return out(map[string]any{"pin": pin, "accepted": changes})
		}
		for _, c := range changes {
			fmt.Fprintf(env.stdout, "accepted %s %s/%s\n", c.Kind, server, visible(c.Tool))
		}
		fmt.Fprintf(env.stdout, "%s: %d tools pinned; calls use the new pin at once\n", server, len(pin.Tools))
		return nil
	}
	pin, err := pins.Load(server)
	if err != nil {
		return err
	}
	if pin == nil {
		return fmt.Errorf("%s has no pin yet: serve pins it on its first listing", server)
	}
	l, err := pins.LoadListed(server)
	if err != nil {
		return err
	}
	changes := []mcpsink.Change{} // [] in --json when nothing changed, not null
	if l != nil {
		changes = append(changes, mcpsink.Diff(pin, l.Tools)...)
	}
	if asJSON {
		if err := out(changes); err != nil {
			return err
		}
	} else {
		printChanges(env, server, changes)
	}
	if len(changes) > 0 {
		return &exitError{code: exitFindings}
	}
	return nil
}

func printChanges(env *cliEnv, server string, changes []mcpsink.Change) {
	if len(changes) == 0 {
		fmt.Fprintf(env.stdout, "%s: every listed tool is as pinned\n", server)
		return
	}
	for _, c := range changes {
		fmt.Fprintf(env.stdout, "%s %s/%s", strings.ToUpper(c.Kind), server, visible(c.Tool))
		if len(c.Fields) > 0 {
			fmt.Fprintf(env.stdout, " (%s)", strings.Join(c.Fields, ", "))
		}
		fmt.Fprintln(env.stdout)
		show := func(label, old, new string) {
			if old != new {
				fmt.Fprintf(env.stdout, "  %s\n    pinned: %s\n    listed: %s\n", label, visible(noneIfEmpty(old)), visible(noneIfEmpty(new)))
			}
		}
		var p, l mcpsink.PinnedTool
		if c.Pinned != nil {
			p = *c.Pinned
		}
		if c.Listed != nil {
			l = *c.Listed
		}
		show("title", p.Title, l.Title)
		show("description", p.Description, l.Description)
		show("input schema", string(p.InputSchema), string(l.InputSchema))
		show("output schema", string(p.OutputSchema), string(l.OutputSchema))
		show("annotations", string(p.Annotations), string(l.Annotations))
	}
	fmt.Fprintf(env.stdout, "accept with: gatehouse mcp upstream accept %s [--tool NAME]\n", server)
}

// visible is text an upstream server wrote as an operator reviewing it
// must see it: control characters (an escape sequence that hides text or
// clears the line, a carriage return that overwrites it) and invisible
// format characters (a right-to-left override that reorders it, a
// zero-width space) are written as \x1b, \r, \u202e; a line break
// starts an indented line, so no line can pass for one of show's own.
func visible(s string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '\n':
			b.WriteString("\n            ")
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
