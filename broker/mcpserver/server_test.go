package mcpserver_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/mcpserver"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// outputWorld is a strict Gatehouse serving the output sink, and a run.
func outputWorld(t testing.TB) (*sinktest.Env, string) {
	env := sinktest.Start(t, policy.ModeStrict, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
		out, err := output.New(context.Background(), env.JS, 1)
		if err != nil {
			t.Fatal(err)
		}
		return []broker.Sink{out}
	})
	return env, env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
}

// session connects an SDK client to a Gatehouse MCP server for run, over
// the transports given; both end with the test.
func session(t testing.TB, env *sinktest.Env, run string, st, ct mcp.Transport) *mcp.ClientSession {
	ctx := context.Background()
	srv, err := mcpserver.New(mcpserver.Config{Run: run, Agent: env.Agent})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// Calls made at once on one session are each their own effect, decided
// and recorded, and the journal verifies.
func TestConcurrentCallsAreEachAnEffect(t *testing.T) {
	env, run := outputWorld(t)
	ctx := sinktest.Ctx(t)
	st, ct := mcp.NewInMemoryTransports()
	cs := session(t, env, run, st, ct)
	var mu sync.Mutex
	effects := map[string]bool{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 4 {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "output_deliver", Arguments: map[string]any{"status": "ok", "result": []int{i, j}}})
				if err != nil || res.IsError {
					t.Errorf("call: %v %+v", err, res)
					return
				}
				var rep broker.EffectReply
				b, _ := json.Marshal(res.StructuredContent)
				if err := json.Unmarshal(b, &rep); err != nil || rep.Decision.Outcome != "allowed" || !rep.Decision.Recorded {
					t.Errorf("reply %s: %v", b, err)
					return
				}
				mu.Lock()
				effects[rep.Effect] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(effects) != 32 {
		t.Fatalf("%d distinct effects, want 32", len(effects))
	}
	env.Verify(t)
	if n := len(env.Events(t, run)); n != 1+3*32 {
		t.Fatalf("%d journal events, want run.open and three for each of 32 effects", n)
	}
}
