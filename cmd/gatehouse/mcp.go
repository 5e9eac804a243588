package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/mcpserver"
)

const mcpUsage = `Usage:
  gatehouse mcp --run RUN [--agent NAME] [--approval-wait 10m]   serve Gatehouse to an agent's MCP client on stdio
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
	cf.register(fs)
	fs.StringVar(&run, "run", "", "the run id the application opened for this agent (required)")
	fs.StringVar(&cf.agent, "agent", "", "connect as this named agent, with its own credential (serve --agents)")
	fs.DurationVar(&wait, "approval-wait", 10*time.Minute, "how long a call held for approval waits for a person when the client sent a progress token (0: never waits)")
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
	log, err := newLogger(env, "text", "warn")
	if err != nil {
		return err
	}
	srv, err := mcpserver.New(mcpserver.Config{Run: run, Agent: c, ApprovalWait: wait, CallTimeout: cf.timeout, Version: version, Logger: log})
	if err != nil {
		return usageError("%v", err)
	}
	t := &mcp.IOTransport{Reader: nopReadCloser{env.stdin}, Writer: nopWriteCloser{env.stdout}, MaxLineLength: 4 << 20}
	err = srv.MCP().Run(ctx, t)
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return fmt.Errorf("mcp: %w", err)
}

func cmdMCPUpstream(ctx context.Context, env *cliEnv, args []string) error {
	return usageError("mcp upstream: not built yet")
}
