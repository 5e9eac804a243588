package memory

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

var _ broker.ActionDescriber = (*Sink)(nil)

const (
	visibilityField = "private (default): only the person this work is for, within their tenant; shared: everyone in the tenant"
	keyField        = "the memory's name, up to 256 bytes"
)

// Actions implements broker.ActionDescriber.
func (s *Sink) Actions() []broker.Action {
	return []broker.Action{{
		Sink: policy.SinkMemory, Name: ActionPut, Title: "Remember something",
		Description: "Keep a memory (a fact, a preference, a note) under a key, for later work for the same person " +
			"(private) or anyone in the tenant (shared), replacing what was there. The target is private/<key> or " +
			"shared/<key>. A tenant's memories together have a budget; a put past it is refused with QUOTA_EXCEEDED.",
		Params: PutParams{},
		Fields: map[string]string{
			"key":        keyField,
			"value":      "what to remember, any JSON value (64 KiB at most by default)",
			"kind":       "what sort of memory it is, such as fact or preference (default fact)",
			"visibility": visibilityField,
		},
		Mutates: true, Class: policy.EffectWrite, System: string(policy.SinkMemory),
		Examples: []json.RawMessage{json.RawMessage(`{"key": "tz", "value": "Europe/Paris", "kind": "preference", "visibility": "private"}`)},
	}, {
		Sink: policy.SinkMemory, Name: ActionGet, Title: "Recall a memory",
		Description: "Read a memory back by its key. The reply says whether it was found and carries its value, kind " +
			"and when it was last updated.",
		Params:  KeyParams{},
		Fields:  map[string]string{"key": keyField, "visibility": visibilityField},
		Mutates: false, Class: policy.EffectRead, System: string(policy.SinkMemory),
		Examples: []json.RawMessage{json.RawMessage(`{"key": "tz", "visibility": "shared"}`)},
	}, {
		Sink: policy.SinkMemory, Name: ActionDelete, Title: "Forget a memory",
		Description: "Delete a memory by its key. The reply says whether it existed. Decided as a destructive effect.",
		Params:      KeyParams{},
		Fields:      map[string]string{"key": keyField, "visibility": visibilityField},
		Mutates:     true, Class: policy.EffectDestructive, System: string(policy.SinkMemory),
		Examples: []json.RawMessage{json.RawMessage(`{"key": "tz", "visibility": "private"}`)},
	}}
}
