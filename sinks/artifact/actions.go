package artifact

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

var _ broker.ActionDescriber = (*Sink)(nil)

// Actions implements broker.ActionDescriber.
func (s *Sink) Actions() []broker.Action {
	return []broker.Action{{
		Sink: policy.SinkArtifact, Name: ActionPublish, Title: "Publish an artifact",
		Description: "Store a file (a report, an image, a dataset) as an artifact of this tenant under a key, replacing " +
			"what was there. The reply names the key, size and digest. The target is the key, so deployment rules " +
			"can allow or deny key patterns. A tenant's artifacts together have a budget; a publish past it is " +
			"refused with QUOTA_EXCEEDED.",
		Params: PublishParams{},
		Fields: map[string]string{
			"key":          "the artifact's name within the tenant, a relative path such as reports/q3.pdf",
			"content":      "the artifact's bytes, base64",
			"content_type": "its media type, such as application/pdf (default application/octet-stream)",
		},
		Mutates: true, Class: policy.EffectWrite, System: string(policy.SinkArtifact),
		Examples: []json.RawMessage{json.RawMessage(`{"key": "reports/q3.txt", "content": "aGk=", "content_type": "text/plain"}`)},
	}, {
		Sink: policy.SinkArtifact, Name: ActionGet, Title: "Read an artifact",
		Description: "Read an artifact of this tenant back by its key (browser screenshots are stored as " +
			"screenshots/<run>/<sha256>.png). The reply carries its content (base64), media type, size and digest.",
		Params: GetParams{},
		Fields: map[string]string{
			"key": "the artifact's name within the tenant",
		},
		Mutates: false, Class: policy.EffectRead, System: string(policy.SinkArtifact),
		Examples: []json.RawMessage{json.RawMessage(`{"key": "reports/q3.txt"}`)},
	}, {
		Sink: policy.SinkArtifact, Name: ActionDelete, Title: "Delete an artifact",
		Description: "Delete an artifact of this tenant by its key, giving its room in the tenant's artifact budget " +
			"back. The reply says whether it existed. Decided as a destructive effect.",
		Params: GetParams{},
		Fields: map[string]string{
			"key": "the artifact's name within the tenant",
		},
		Mutates: true, Class: policy.EffectDestructive, System: string(policy.SinkArtifact),
		Examples: []json.RawMessage{json.RawMessage(`{"key": "reports/q3.txt"}`)},
	}}
}
