package mcpserver

import (
	"encoding/json"
	"errors"
	"testing"

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
