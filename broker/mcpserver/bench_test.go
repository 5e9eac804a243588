package mcpserver_test

import (
	"context"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/mcpserver"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// BenchmarkRoundTrip measures what an MCP tool call adds over the same
// effect proposed on NATS: one output delivery (strict mode, journal on,
// decision, attempt and outcome acknowledged by JetStream) proposed by the
// Go client on NATS, and the same delivery as an MCP tools/call from the
// official SDK's client to Gatehouse's MCP server, over OS pipes (what
// `gatehouse mcp` on stdio does, less the process) and in memory. Compare
// the three within one run:
//
//	go test -run '^$' -bench RoundTrip -benchtime 2000x ./broker/mcpserver/
func BenchmarkRoundTrip(b *testing.B) {
	env := sinktest.Start(b, policy.ModeStrict, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
		out, err := output.New(context.Background(), env.JS, 1)
		if err != nil {
			t.Fatal(err)
		}
		return []broker.Sink{out}
	})
	run := env.Open(b, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := context.Background()
	args := map[string]any{"status": "ok", "result": map[string]int{"rows": 3}}

	b.Run("nats", func(b *testing.B) {
		for b.Loop() {
			rep, err := env.Agent.Output(ctx, run, "ok", args["result"])
			if err != nil || rep.Decision.Outcome != "allowed" {
				b.Fatalf("%+v %v", rep, err)
			}
		}
	})
	session := func(b *testing.B, st, ct mcp.Transport) *mcp.ClientSession {
		srv, err := mcpserver.New(mcpserver.Config{Run: run, Agent: env.Agent})
		if err != nil {
			b.Fatal(err)
		}
		ss, err := srv.MCP().Connect(ctx, st, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		if _, err := cs.ListTools(ctx, nil); err != nil {
			b.Fatal(err)
		}
		return cs
	}
	call := func(b *testing.B, cs *mcp.ClientSession) {
		for b.Loop() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "output_deliver", Arguments: args})
			if err != nil || res.IsError {
				b.Fatalf("%+v %v", res, err)
			}
		}
	}
	b.Run("mcp-pipes", func(b *testing.B) {
		toSrvR, toSrvW, _ := os.Pipe()
		toCliR, toCliW, _ := os.Pipe()
		b.Cleanup(func() { toSrvW.Close(); toCliW.Close() })
		call(b, session(b, &mcp.IOTransport{Reader: toSrvR, Writer: toCliW}, &mcp.IOTransport{Reader: toCliR, Writer: toSrvW}))
	})
	b.Run("mcp-memory", func(b *testing.B) {
		st, ct := mcp.NewInMemoryTransports()
		call(b, session(b, st, ct))
	})
}
