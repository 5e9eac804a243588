package process

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

var _ broker.ActionDescriber = (*Sink)(nil)

// Actions implements broker.ActionDescriber.
func (s *Sink) Actions() []broker.Action {
	return []broker.Action{{
		Sink: policy.SinkProcess, Name: ActionExec, Title: "Run a host command",
		Description: "Run one command on the host, outside the sandbox, with limits on time, memory and processes and " +
			"its whole process tree killed at the end. The reply carries the exit code, stdout and stderr. The target " +
			"is the program's absolute path; in strict mode a command the model chose is refused " +
			"(unconfined-execution) unless a deployment rule allows it, so prefer the code sink's run.",
		Params: Params{},
		Fields: map[string]string{
			"argv":       "the program and its arguments; the program is an absolute path or a name found in the host's PATH",
			"stdin":      "text given to the program on its standard input",
			"timeout_ms": "wall-clock limit in milliseconds, at most the deployment's limit (0: the deployment's)",
		},
		Mutates: true, Class: policy.EffectWrite, System: string(policy.SinkProcess),
		Examples: []json.RawMessage{json.RawMessage(`{"argv": ["/bin/echo", "hi"], "stdin": "", "timeout_ms": 2000}`)},
	}}
}
