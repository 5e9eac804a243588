package code

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

var _ broker.ActionDescriber = (*Sink)(nil)

// Actions implements broker.ActionDescriber.
func (s *Sink) Actions() []broker.Action {
	return []broker.Action{{
		Sink: policy.SinkCode, Name: ActionRun, Title: "Run code in the sandbox",
		Description: "Run a short program (python3 or sh) in Gatehouse's sandbox: it sees only its own workspace, gets " +
			"no network when the sandbox is confined, and is killed at its limits. Input comes only through these " +
			"params and output only through the reply (exit code, stdout, stderr, the files it left). The program " +
			"may call providers through Gatehouse on its gateway (fd 3 and 4), each call decided on its own. The " +
			"target is the program's name.",
		Params: Params{},
		Fields: map[string]string{
			"program":    "the interpreter: python3 or sh (or another the deployment offers)",
			"source":     "the program's source, written to its entry file (main.py, main.sh)",
			"args":       "arguments given to the program after its entry file",
			"stdin":      "text given to the program on its standard input",
			"files":      "files written into the workspace beside the source: name to base64 content",
			"timeout_ms": "wall-clock limit in milliseconds, at most the deployment's limit (0: the deployment's)",
		},
		Mutates: true, Class: policy.EffectWrite, System: string(policy.SinkCode),
		Examples: []json.RawMessage{json.RawMessage(`{"program": "python3", "source": "print(1+1)", "args": ["a"], "stdin": "x", "files": {"data.csv": "YSxiCg=="}, "timeout_ms": 5000}`)},
	}}
}
