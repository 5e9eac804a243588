package mcpserver_test

import (
	"context"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	env, run := outputWorld(b)
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
		call(b, listed(b, session(b, env, run, &mcp.IOTransport{Reader: toSrvR, Writer: toCliW}, &mcp.IOTransport{Reader: toCliR, Writer: toSrvW})))
	})
	b.Run("mcp-memory", func(b *testing.B) {
		st, ct := mcp.NewInMemoryTransports()
		call(b, listed(b, session(b, env, run, st, ct)))
	})
}

// listed lists the tools first, as a client does, so the loop measures
// calls only.
func listed(b *testing.B, cs *mcp.ClientSession) *mcp.ClientSession {
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	return cs
}
