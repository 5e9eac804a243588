package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker/mcpserver"
)

// wire is a server on a StdioTransport, fed and read line by line as a
// client's pipes would be.
type wire struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
	logs chan string
	// release ends every "wait" call still waiting.
	release chan struct{}
}

// logTo sends each log record's message to ch.
type logTo struct{ ch chan string }

func (l logTo) Enabled(context.Context, slog.Level) bool { return true }
func (l logTo) Handle(_ context.Context, r slog.Record) error {
	select {
	case l.ch <- r.Message:
	default:
	}
	return nil
}
func (l logTo) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logTo) WithGroup(string) slog.Handler      { return l }

// newWire serves an SDK server with one tool, wait, that returns when its
// call is cancelled or the test releases it, on a StdioTransport.
func newWire(t *testing.T, max int) *wire {
	w := &wire{t: t, done: make(chan error, 1), logs: make(chan string, 64), release: make(chan struct{})}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "wait", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-w.release:
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "waited"}}}, nil
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	w.in, w.out = inW, bufio.NewReader(outR)
	tr := &mcpserver.StdioTransport{In: inR, Out: outW, MaxMessageBytes: max, Logger: slog.New(logTo{w.logs})}
	go func() { w.done <- srv.Run(context.Background(), tr); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			t.Error("the server did not end at the end of its input")
		}
	})
	return w
}

func (w *wire) send(lines ...string) {
	w.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(w.in, l+"\n"); err != nil {
			w.t.Fatalf("write %q: %v", l, err)
		}
	}
}

// recv reads the next line, which must be JSON.
func (w *wire) recv() map[string]any {
	w.t.Helper()
	type line struct {
		s   string
		err error
	}
	ch := make(chan line, 1)
	go func() { s, err := w.out.ReadString('\n'); ch <- line{s, err} }()
	select {
	case l := <-ch:
		if l.err != nil {
			w.t.Fatalf("the server's output ended: %v (the session died)", l.err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l.s), &m); err != nil {
			var batch []any
			if json.Unmarshal([]byte(l.s), &batch) == nil {
				return map[string]any{"batch": batch}
			}
			w.t.Fatalf("the server wrote a line that is not JSON: %q", l.s)
		}
		return m
	case <-time.After(20 * time.Second):
		w.t.Fatal("no line from the server")
		return nil
	}
}

func (w *wire) initialize(version string) {
	w.t.Helper()
	w.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if m := w.recv(); m["id"] != "init" || m["result"] == nil {
		w.t.Fatalf("initialize: %v", m)
	}
}

// alive checks the session still answers, returning what came before the
// answer.
func (w *wire) alive(id int) []map[string]any {
	w.t.Helper()
	w.send(`{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"ping"}`)
	var before []map[string]any
	for {
		m := w.recv()
		if v, ok := m["id"].(float64); ok && int(v) == id && m["result"] != nil {
			return before
		}
		before = append(before, m)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func errorOf(t *testing.T, m map[string]any, code float64, id any) string {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	if e == nil || e["code"] != code || m["id"] != id || m["jsonrpc"] != "2.0" {
		t.Fatalf("want a JSON-RPC error %v for id %v, got %v", code, id, m)
	}
	return e["message"].(string)
}

// Every line a client may get wrong is answered with a JSON-RPC error and
// the session goes on; the SDK's own transport ends the session (and
// `gatehouse mcp`) on each of them.
func TestStdioAnswersBadMessagesAndGoesOn(t *testing.T) {
	w := newWire(t, 1<<10)
	w.initialize("2025-11-25")
	for _, tc := range []struct {
		line string
		code float64
		id   any
		want string
	}{
		{`this is not json`, -32700, nil, "not JSON"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"`, -32700, nil, "not JSON"},
		{`{"jsonrpc":"1.0","id":8,"method":"ping"}`, -32600, 8.0, "version"},
		{`{"jsonrpc":"1.0","id":"s","method":"ping"}`, -32600, "s", "version"},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil, "invalid request"},
		{`"just a string"`, -32600, nil, "invalid request"},
		{`42`, -32600, nil, "invalid request"},
		{`[]`, -32600, nil, "empty"},
		{`{"jsonrpc":"2.0","id":9,"method":"x","params":"` + strings.Repeat("a", 2<<10) + `"}`, -32600, 9.0, "more than 1024 bytes"},
		{`{"jsonrpc":"2.0","method":"x","params":{"id":1,"p":"` + strings.Repeat("a", 2<<10) + `"},"id":"last"}`, -32600, "last", "more than 1024 bytes"},
		{`[{"jsonrpc":"2.0","id":3,"method":"x","params":"` + strings.Repeat("a", 2<<10) + `"}]`, -32600, nil, "more than 1024 bytes"},
	} {
		w.send(tc.line)
		if msg := errorOf(t, w.recv(), tc.code, tc.id); !strings.Contains(msg, tc.want) {
			t.Errorf("%.40s: message %q lacks %q", tc.line, msg, tc.want)
		}
		if got := w.alive(100); len(got) > 0 {
			t.Errorf("%.40s: more lines than one error: %v", tc.line, got)
		}
	}
	// Blank lines and CRLF endings are fine.
	w.send("", "   ", `{"jsonrpc":"2.0","id":101,"method":"ping"}`+"\r")
	if m := w.recv(); m["id"] != 101.0 || m["result"] == nil {
		t.Fatalf("ping after blank lines: %v", m)
	}
}

// Batches: refused, one error per request, in the versions without them;
// answered as a batch in those with them, their bad members answered one
// by one.
func TestStdioBatchesByVersion(t *testing.T) {
	t.Run("2025-06-18", func(t *testing.T) {
		w := newWire(t, 0)
		w.initialize("2025-06-18")
		w.send(`[{"jsonrpc":"2.0","id":6,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"seven","method":"ping"}]`)
		if msg := errorOf(t, w.recv(), -32600, 6.0); !strings.Contains(msg, "not part of MCP 2025-06-18") {
			t.Errorf("batch refusal: %q", msg)
		}
		errorOf(t, w.recv(), -32600, "seven")
		if got := w.alive(100); len(got) > 0 {
			t.Fatalf("more lines: %v", got)
		}
	})
	t.Run("2025-03-26", func(t *testing.T) {
		w := newWire(t, 0)
		w.initialize("2025-03-26")
		w.send(`[{"jsonrpc":"2.0","id":6,"method":"ping"},{"jsonrpc":"1.0","id":66,"method":"ping"},{"jsonrpc":"2.0","id":7,"method":"ping"}]`)
		errorOf(t, w.recv(), -32600, 66.0)
		b, _ := w.recv()["batch"].([]any)
		if len(b) != 2 {
			t.Fatalf("batch response: %v", b)
		}
		for i, want := range []float64{6, 7} {
			if m := b[i].(map[string]any); m["id"] != want || m["result"] == nil {
				t.Fatalf("batch member %d: %v", i, m)
			}
		}
	})
}

// A cancelled call gets no response; a request reusing an id in flight is
// refused; the call that owns the id still gets its one response.
func TestStdioCancelledAndRepeatedIDs(t *testing.T) {
	w := newWire(t, 0)
	w.initialize("2025-11-25")
	w.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"wait","arguments":{}}}`)
	w.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if msg := errorOf(t, w.recv(), -32600, 5.0); !strings.Contains(msg, "still in flight") {
		t.Fatalf("repeated id: %q", msg)
	}
	w.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"the person stopped"}}`)
	for msg := range w.logs {
		if strings.Contains(msg, "no response sent for a request the client cancelled") {
			break
		}
	}
	if got := w.alive(100); len(got) > 0 {
		t.Fatalf("lines for the cancelled call: %v", got)
	}
	// Once answered, an id may be used again; a call not cancelled is
	// answered.
	w.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"wait","arguments":{}}}`)
	close(w.release)
	if m := w.recv(); m["id"] != 5.0 || m["result"] == nil {
		t.Fatalf("the second call 5: %v", m)
	}
}

// Many clients' calls at once on one stdio session: every line whole.
func TestStdioConcurrentWritesStayWhole(t *testing.T) {
	w := newWire(t, 0)
	w.initialize("2025-11-25")
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 50 {
			w.send(`{"jsonrpc":"2.0","id":` + itoa(1000+i) + `,"method":"ping"}`)
			w.send(`not json ` + itoa(i))
		}
	})
	seen := map[float64]bool{}
	refusals := 0
	for len(seen) < 50 || refusals < 50 {
		m := w.recv()
		if id, ok := m["id"].(float64); ok && m["result"] != nil {
			seen[id] = true
		} else {
			errorOf(t, m, -32700, nil)
			refusals++
		}
	}
	wg.Wait()
}
