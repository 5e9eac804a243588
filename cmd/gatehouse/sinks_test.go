package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gatehouse/gatehouse/policy"
)

// sinks/REFERENCE.md is what the sinks' descriptions generate: when a
// params type, a field's description or an action changes, this fails
// until `go generate ./cmd/gatehouse` writes the file again.
// (TestEverySinkDescribesWhatItDecodes proves each description is what
// its sink decodes.)
func TestSinkReferenceIsCurrent(t *testing.T) {
	acts, err := referenceActions()
	if err != nil {
		t.Fatal(err)
	}
	var sinks []policy.Sink
	for _, a := range acts {
		if !slices.Contains(sinks, a.Sink) {
			sinks = append(sinks, a.Sink)
		}
		if len(a.Examples) == 0 && a.Sink != policy.SinkMCP {
			t.Errorf("%s.%s has no example", a.Sink, a.Action)
		}
	}
	for _, want := range []policy.Sink{policy.SinkOutput, policy.SinkCode, policy.SinkProcess, policy.SinkArtifact,
		policy.SinkWorkspace, policy.SinkMemory, policy.SinkPeer, policy.SinkProvider, policy.SinkBrowser, policy.SinkMCP} {
		if !slices.Contains(sinks, want) {
			t.Errorf("the reference has no %s sink", want)
		}
	}
	var got bytes.Buffer
	writeReference(&got, acts)
	path := filepath.Join("..", "..", referencePath)
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, got.Bytes()) {
		t.Fatalf("%s is not what the sinks describe: run go generate ./cmd/gatehouse", referencePath)
	}
}

// A sink with one action needs no --action; the others list theirs.
func TestActionsOf(t *testing.T) {
	for sink, want := range map[policy.Sink][]string{policy.SinkOutput: {"deliver"}, policy.SinkCode: {"register", "run"},
		policy.SinkProcess: {"exec"}, policy.SinkMemory: {"delete", "get", "put"}} {
		if got := actionsOf(sink); !slices.Equal(got, want) {
			t.Errorf("actionsOf(%s) = %v, want %v", sink, got, want)
		}
	}
}
