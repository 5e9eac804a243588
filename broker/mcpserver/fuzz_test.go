package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/gatehouse/gatehouse/broker"
)

// FuzzParams: whatever arguments an MCP client sends, Params never panics
// and gives either ErrArguments (or a bound-params error) or one JSON
// object: the arguments themselves, or the bound params with the
// arguments, unchanged, in their field.
func FuzzParams(f *testing.F) {
	for _, s := range []string{``, `null`, `{}`, `{"status":"ok"}`, `[1]`, `"x"`, `{"a":`, `{"server":"evil"}`, " \n{\"a\":1}", `{"a":1}{"b":2}`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	bound := broker.ToolInfo{Tool: "bank/transfer", Bind: json.RawMessage(`{"server":"bank","tool":"transfer"}`), ArgumentsField: "arguments"}
	f.Fuzz(func(t *testing.T, args []byte, bind bool) {
		ti := broker.ToolInfo{Tool: "output.deliver"}
		if bind {
			ti = bound
		}
		p, err := Params(ti, args)
		if err != nil {
			if !errors.Is(err, ErrArguments) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(p, &obj); err != nil {
			t.Fatalf("params %q are not a JSON object: %v", p, err)
		}
		if bind {
			if string(obj["server"]) != `"bank"` || string(obj["tool"]) != `"transfer"` || len(obj) != 3 {
				t.Fatalf("arguments changed the bound params: %s", p)
			}
			var inner map[string]json.RawMessage
			if err := json.Unmarshal(obj["arguments"], &inner); err != nil {
				t.Fatalf("bound arguments %s: %v", obj["arguments"], err)
			}
		}
	})
}

// FuzzStdioGuard: whatever bytes a client writes on stdio, the guard never
// panics; it hands the SDK only whole JSON-RPC messages (or, where the
// version has them, batches of them) of at most its limit, one a line, and
// writes only JSON-RPC error responses.
func FuzzStdioGuard(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "not json\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n", `[]`, `[1,2]`,
		`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":1,"method":"b"}]`, `{"jsonrpc":"1.0","id":"x"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "\r\n\n  \n", `{"jsonrpc":"2.0","id":2,"result":{}}`, `"str"`,
		`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`,
	} {
		for _, v := range []string{"", "2025-03-26", "2025-11-25"} {
			f.Add([]byte(s), v)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, version string) {
		var out bytes.Buffer
		st := &stdioState{out: &lockedWriter{w: &out}, log: slog.New(slog.DiscardHandler), version: version,
			inflight: map[jsonrpc.ID]bool{}, batched: map[jsonrpc.ID]bool{}, cancelled: map[jsonrpc.ID]bool{}}
		const max = 256
		g := &guard{st: st, br: bufio.NewReaderSize(bytes.NewReader(in), 16), max: max}
		passed, err := io.ReadAll(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(bytes.TrimSuffix(passed, []byte("\n")), []byte("\n")) {
			if len(passed) == 0 {
				break
			}
			if len(line) == 0 || len(line) > max {
				t.Fatalf("passed a line of %d bytes", len(line))
			}
			if line[0] == '[' {
				var raws []json.RawMessage
				if !st.batches() || json.Unmarshal(line, &raws) != nil || len(raws) < 2 {
					t.Fatalf("passed a batch it should not: %q", line)
				}
				for _, r := range raws {
					if _, err := jsonrpc.DecodeMessage(r); err != nil {
						t.Fatalf("passed a bad batch member %q: %v", r, err)
					}
				}
			} else if _, err := jsonrpc.DecodeMessage(line); err != nil {
				t.Fatalf("passed %q: %v", line, err)
			}
		}
		for _, line := range bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")) {
			if out.Len() == 0 {
				break
			}
			var e struct {
				JSONRPC string              `json:"jsonrpc"`
				ID      json.RawMessage     `json:"id"`
				Error   *struct{ Code int } `json:"error"`
			}
			if json.Unmarshal(line, &e) != nil || e.JSONRPC != "2.0" || e.Error == nil || (e.Error.Code != -32700 && e.Error.Code != -32600) {
				t.Fatalf("wrote %q", line)
			}
			if _, err := jsonrpc.DecodeMessage(line); err != nil && string(e.ID) != "null" {
				t.Fatalf("wrote an error response the SDK cannot read: %q: %v", line, err)
			}
		}
	})
}

// FuzzIDScanner: fed a JSON object in pieces of any size, the scanner
// finds its top-level id, as a decoder reads it, when that id is a short
// string or number (and nothing else); it never panics on any input.
func FuzzIDScanner(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"x","params":{"id":"inner","a":[{"id":1}]},"id":"outer"}`, `{"id":-12.5e3}`, `{"id":"a\"b\\"}`,
		`{"i":1,"idx":2,"id":3}`, `{"id":null}`, `[{"id":1}]`, `{"a":"\"id\":5","id":6}`, `{"id":{"x":1}}`, `{"id"  :  "sp" }`,
	} {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(7))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		var sc idScanner
		n := int(chunk%16) + 1
		for i := 0; i < len(in); i += n {
			sc.feed(in[i:min(i+n, len(in))])
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(in, &m) != nil {
			return
		}
		var want any
		raw, ok := m["id"]
		if ok {
			_ = json.Unmarshal(raw, &want)
		}
		_, isStr := want.(string)
		_, isNum := want.(float64)
		short := len(bytes.TrimSpace(raw)) <= 40 || isStr && len(raw) <= 250
		if strings.Count(string(in), `"id"`) > 1 || bytes.Contains(in, []byte(`\u`)) {
			return // a repeated key (the decoder keeps the last) or escaped key names: either answer is fine
		}
		switch {
		case (isStr || isNum) && short:
			var got any
			if err := json.Unmarshal(sc.id, &got); err != nil || got != want {
				t.Fatalf("id %s, scanner found %q", raw, sc.id)
			}
		case sc.id != nil:
			var got any
			if err := json.Unmarshal(sc.id, &got); err != nil {
				t.Fatalf("scanner found %q, not JSON, for id %s", sc.id, raw)
			}
		}
	})
}
