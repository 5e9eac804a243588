package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

func TestMain(m *testing.M) {
	sandbox.MaybeHelper() // the sandbox re-executes this test binary as its helper
	os.Exit(m.Run())
}

// Every sink serve runs describes its actions, and each description is
// what the sink really decodes (sinktest.CheckActions): the schemas the
// MCP server offers and the README's params reference cannot drift from
// the sinks.
func TestEverySinkDescribesWhatItDecodes(t *testing.T) {
	dir := t.TempDir()
	cat := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(cat, []byte(`providers:
  - {name: erp, base_url: "http://127.0.0.1:1/api", auth: {type: none}, headers_allowed: [Accept], idempotency_header: Idempotency-Key}
integrations:
  - {name: erp.pay, provider: erp, effect: write, origin: shipped, operations: [{method: POST, template: /payments}]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	servers := filepath.Join(dir, "mcp-servers.yaml")
	if err := os.WriteFile(servers, []byte("servers:\n  - {name: files, url: \"http://127.0.0.1:1/mcp\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := serveConfig{dataDir: dir, replicas: 1, artifactStore: "objectstore", providers: cat, sandboxTiers: listFlag{"unconfined"}, sandboxUIDs: defaultSandboxUIDs,
		mcp: mcpFlags{servers: servers}}
	var set *sinkSet
	sinktest.Start(t, policy.ModeReport, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
		sb := detectSandbox(context.Background(), &c, slog.New(slog.DiscardHandler))
		s, err := openSinks(context.Background(), env.JS, &c, sb, slog.New(slog.DiscardHandler))
		t.Cleanup(s.close)
		if err != nil {
			t.Fatal(err)
		}
		set = s
		return s.sinks
	})
	storeExampleIntegration(t, set.sinks)
	run := &broker.Run{ID: broker.NewRunID(time.Now()), For: policy.Principal{Tenant: "acme", Person: "ada"}, Scopes: []string{}}
	seen := map[policy.Sink]bool{}
	for _, s := range set.sinks {
		seen[s.Name()] = true
		t.Run(string(s.Name()), func(t *testing.T) { sinktest.CheckActions(t, s, run) })
	}
	for _, want := range []policy.Sink{policy.SinkOutput, policy.SinkCode, policy.SinkProcess, policy.SinkArtifact,
		policy.SinkWorkspace, policy.SinkMemory, policy.SinkPeer, policy.SinkProvider, policy.SinkBrowser, policy.SinkMCP} {
		if !seen[want] {
			t.Errorf("serve runs no %s sink", want)
		}
	}
}
