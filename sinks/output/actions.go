package output

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

var _ broker.ActionDescriber = (*Sink)(nil)

// Actions implements broker.ActionDescriber.
func (s *Sink) Actions() []broker.Action {
	return []broker.Action{{
		Sink: policy.SinkOutput, Name: ActionDeliver, Title: "Deliver a result",
		Description: "Deliver this step's result to the application that opened the work, and to the steps after it " +
			"(published on gatehouse.v1.output.<run> and kept in the GATEHOUSE_OUTPUTS stream). Use it for the answer " +
			"the person asked for. The policy decides it as a notify effect whose target is the status; the journal " +
			"keeps the result's size and digest, never the result.",
		Params: Params{},
		Fields: map[string]string{
			"status": "how the step ended, a short word such as ok, partial or failed; deployment rules match it as the target",
			"result": "the result itself, any JSON value (an object, a list, a string, a number)",
		},
		Mutates: true, Class: policy.EffectNotify, System: string(policy.SinkOutput),
		Examples: []json.RawMessage{json.RawMessage(`{"status": "ok", "result": {"rows": 3}}`)},
	}}
}
