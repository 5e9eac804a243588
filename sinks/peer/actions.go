package peer

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

var _ broker.ActionDescriber = (*Sink)(nil)

// The params of each action, as the schema describes them: Params decodes
// all three (and names, to refuse them, the fields an agent may never send).
type (
	// SendParams are a send's params.
	SendParams struct {
		To   string          `json:"to"`
		Body json.RawMessage `json:"body"`
	}
	// DelegateParams are a delegation's params.
	DelegateParams struct {
		To   string          `json:"to"`
		Task json.RawMessage `json:"task"`
	}
	// BroadcastParams are a broadcast's params.
	BroadcastParams struct {
		Body json.RawMessage `json:"body"`
	}
)

const toField = "the recipient agent's name (letters, digits, '-' and '_')"

// Actions implements broker.ActionDescriber.
func (s *Sink) Actions() []broker.Action {
	return []broker.Action{{
		Sink: policy.SinkPeer, Name: broker.PeerSend, Title: "Message another agent",
		Description: "Send a message to another agent working on the same piece of work; it reads it from its own " +
			"peer inbox. The target is the recipient.",
		Params:  SendParams{},
		Fields:  map[string]string{"to": toField, "body": "the message, any JSON value"},
		Mutates: true, Class: policy.EffectNotify, System: string(policy.SinkPeer),
		Examples: []json.RawMessage{json.RawMessage(`{"to": "worker", "body": {"hello": 1}}`)},
	}, {
		Sink: policy.SinkPeer, Name: broker.PeerDelegate, Title: "Delegate a task to another agent",
		Description: "Hand a task to another agent in a sub-run of this work: the same person, mandate and scopes, " +
			"never wider. The reply names the sub-run. Agent cards' allowed_delegations apply.",
		Params:  DelegateParams{},
		Fields:  map[string]string{"to": toField, "task": "the task, any JSON value"},
		Mutates: true, Class: policy.EffectNotify, System: string(policy.SinkPeer),
		Examples: []json.RawMessage{json.RawMessage(`{"to": "worker", "task": "summarise"}`)},
	}, {
		Sink: policy.SinkPeer, Name: broker.PeerBroadcast, Title: "Message every agent of this work",
		Description: "Send a message to every other agent taking part in this piece of work. The target is *.",
		Params:      BroadcastParams{},
		Fields:      map[string]string{"body": "the message, any JSON value"},
		Mutates:     true, Class: policy.EffectNotify, System: string(policy.SinkPeer),
		Examples: []json.RawMessage{json.RawMessage(`{"body": ["done"]}`)},
	}}
}
