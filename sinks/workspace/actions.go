package workspace

import (
	"encoding/json"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

var _ broker.ActionDescriber = (*Sink)(nil)

const pathField = "a relative path inside this run's workspace folder, such as notes/plan.md; no '..', no absolute paths, no symbolic links"

// Actions implements broker.ActionDescriber.
func (s *Sink) Actions() []broker.Action {
	return []broker.Action{{
		Sink: policy.SinkWorkspace, Name: ActionWrite, Title: "Write a workspace file",
		Description: "Write one file in this run's own workspace folder on the host, replacing it. The target is the " +
			"path; the reply carries its size and digest.",
		Params:  WriteParams{},
		Fields:  map[string]string{"path": pathField, "content": "the file's bytes, base64"},
		Mutates: true, Class: policy.EffectWrite, System: string(policy.SinkWorkspace),
		Examples: []json.RawMessage{json.RawMessage(`{"path": "notes/plan.md", "content": "aGk="}`)},
	}, {
		Sink: policy.SinkWorkspace, Name: ActionRead, Title: "Read a workspace file",
		Description: "Read one file of this run's workspace folder. The reply carries its content (base64), size and " +
			"digest; a missing file fails with not-found.",
		Params:  ReadParams{},
		Fields:  map[string]string{"path": pathField},
		Mutates: false, Class: policy.EffectRead, System: string(policy.SinkWorkspace),
		Examples: []json.RawMessage{json.RawMessage(`{"path": "notes/plan.md"}`)},
	}, {
		Sink: policy.SinkWorkspace, Name: ActionExport, Title: "Apply a batch of file changes",
		Description: "Apply a step's changes to the workspace as one batch: each path is written, or deleted when its " +
			"value is null. The target is export; the effect is destructive when the batch deletes. The reply counts " +
			"files added, changed, unchanged and deleted and carries a digest over the batch.",
		Params:  ExportParams{},
		Fields:  map[string]string{"files": "path to the file's new content (base64), or null to delete it"},
		Mutates: true, Class: "", System: string(policy.SinkWorkspace),
		Examples: []json.RawMessage{json.RawMessage(`{"files": {"a.txt": "aGk=", "old.txt": null}}`)},
	}}
}
