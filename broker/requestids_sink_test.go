package broker_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/natstest"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/artifact"
	"github.com/gatehouse/gatehouse/sinks/memory"
)

// A request id names one request of a run, and a request includes its
// sink: the same bytes proposed to another sink (memory get and artifact
// get both take {"key": ...}) are a different request, refused as
// REQUEST_ID_REUSED, never answered with the first sink's recorded reply
// as if the second had decided it.
func TestRequestIDIsBoundToItsSink(t *testing.T) {
	js := natstest.JetStream(t)
	ctx := ctxT(t)
	if _, err := journal.EnsureStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	runs, err := broker.OpenKVRuns(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := broker.OpenRequestIDs(ctx, js, broker.RequestIDsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memory.OpenKV(ctx, js, memory.KVConfig{})
	if err != nil {
		t.Fatal(err)
	}
	art, err := artifact.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Config{Mode: policy.ModeReport, Requests: ids}, runs, broker.NewRecorder(js, 5*time.Second),
		policy.Default(), memory.New(mem, memory.Config{}), artifact.New(art, artifact.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.Open(ctx, broker.AppCaller("crm"), &broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(broker.EffectRequest{Run: run.ID, Action: "get", RequestID: "once", Params: json.RawMessage(`{"key":"notes"}`)})
	first := b.Propose(ctx, shared, policy.SinkMemory, req)
	if first.Error != nil || first.Decision == nil || first.Replayed {
		t.Fatalf("memory get: %+v", first)
	}
	again := b.Propose(ctx, shared, policy.SinkMemory, req)
	if !again.Replayed || again.Effect != first.Effect {
		t.Fatalf("the same memory get again: %+v", again)
	}
	other := b.Propose(ctx, shared, policy.SinkArtifact, req)
	if other.Replayed || other.Error == nil || other.Error.Code != broker.CodeRequestIDReused {
		t.Fatalf("the same bytes to the artifact sink: %+v %+v", other, other.Error)
	}
}
