package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/sandbox"
	mcpsink "github.com/gatehouse/gatehouse/sinks/mcp"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// mcpFlags are serve's MCP flags: the streamable HTTP transport agents
// reach Gatehouse on, and the catalogue of upstream MCP servers.
type mcpFlags struct {
	httpAddr string
	wait     time.Duration
	servers  string
}

func (m *mcpFlags) register(fs *flagSet) {
	fs.stringVar(&m.httpAddr, "mcp-http", "", "serve Gatehouse to agents as an MCP server (streamable HTTP) on this address, e.g. 127.0.0.1:8090; each named agent (--agents) authenticates with its token (DATA_DIR/mcp/tokens)")
	fs.DurationVar(&m.wait, "mcp-approval-wait", 10*time.Minute, "how long an MCP call held for approval waits for a person when the client sent a progress token (0: never)")
	fs.stringVar(&m.servers, "mcp-servers", "", "catalogue of upstream MCP servers (YAML or JSON) agents call through Gatehouse (sink mcp); tool lists pinned in DATA_DIR/mcp/pins")
}

// startHTTP starts the streamable HTTP transport when --mcp-http is set
// (nil otherwise). Agents' connections are dialed in process on the
// embedded server, else on natsURL with their credentials under the data
// dir.
func (m *mcpFlags) startHTTP(c *serveConfig, ns *embedded.Server, natsURL string, b *broker.Broker, log *slog.Logger) (*mcpHTTP, error) {
	if m.httpAddr == "" {
		return nil, nil
	}
	agents, err := parseAgentsFlag(c.agents)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = a.Name
	}
	toks, err := loadMCPTokens(c.dataDir, names, log)
	if err != nil {
		return nil, err
	}
	dial := func(agent string) (*client.Client, error) {
		if ns != nil {
			nc, err := ns.ConnectAgent(agent)
			if err != nil {
				return nil, err
			}
			return client.Own(nc, client.Agent, agent), nil
		}
		return client.DialAgent(natsURL, agent, embedded.AgentCredsPath(filepath.Join(c.dataDir, "nats"), agent))
	}
	return startMCPHTTP(m.httpAddr, toks, b.LookupRun, b, dial, m.wait, log)
}

func (h *mcpHTTP) stop() {
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.close(ctx)
}

// openSink opens the mcp sink when --mcp-servers names a catalogue: pins in
// DATA_DIR/mcp/pins, stdio servers in the sandbox, people's credentials
// from --credentials or the credential store, grounding by the provider
// sink's rules and records (when there is one).
func (m *mcpFlags) openSink(ctx context.Context, js jetstream.JetStream, c *serveConfig, sb *sandbox.Sandbox, prov *provider.Sink, s *sinkSet, log *slog.Logger) error {
	if m.servers == "" {
		return nil
	}
	cat, err := mcpsink.LoadCatalogue(m.servers)
	if err != nil {
		return fmt.Errorf("--mcp-servers: %w", err)
	}
	pins, err := mcpsink.NewPins(filepath.Join(c.dataDir, "mcp", "pins"))
	if err != nil {
		return fmt.Errorf("mcp pins: %w", err)
	}
	cfg := mcpsink.Config{Catalogue: cat, Pins: pins, Sandbox: sb, Logger: log}
	if c.credentials != "" {
		if cfg.Credentials, err = provider.LoadCredentials(c.credentials); err != nil {
			return fmt.Errorf("--credentials: %w", err)
		}
	} else if cfg.Credentials, err = provider.OpenKVCredentials(ctx, js, provider.KVConfig{Replicas: c.replicas}); err != nil {
		return fmt.Errorf("credential store: %w", err)
	}
	if prov != nil {
		cfg.Grounding = prov
	}
	sink, err := mcpsink.New(ctx, cfg)
	if err != nil {
		return err
	}
	s.closers = append(s.closers, sink.Close)
	s.sinks = append(s.sinks, sink)
	return nil
}
