package broker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
)

// idBrokers returns n more brokers on w's NATS, sharing its runs, journal
// and a request-id bucket with a short lease and wait.
// shared is the shared agent credential, the identity of runs opened
// without an agent.
var shared = broker.AgentCaller(subject.Shared)

func (w *world) idBrokers(t *testing.T, n int) []*broker.Broker {
	t.Helper()
	ctx := ctxT(t)
	runs, err := broker.OpenKVRuns(ctx, w.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := broker.OpenRequestIDs(ctx, w.js, broker.RequestIDsConfig{Lease: 300 * time.Millisecond, Wait: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*broker.Broker, n)
	for i := range out {
		sink, err := output.New(ctx, w.js, 1)
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = broker.New(broker.Config{Mode: policy.ModeStrict, Requests: ids}, runs,
			broker.NewRecorder(w.js, 5*time.Second), w.b.Policy(), sink); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func outputRequest(t *testing.T, run, id string, n int) []byte {
	t.Helper()
	b, err := json.Marshal(broker.EffectRequest{Run: run, Action: "deliver", RequestID: id,
		Params: json.RawMessage(`{"status":"ok","result":{"n":` + string(rune('0'+n)) + `}}`)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decisions(evs []journal.Event) int {
	n := 0
	for _, e := range evs {
		if e.Type == journal.TypeDecision {
			n++
		}
	}
	return n
}

// Two brokers racing on one request id: exactly one decides (KV create is
// the claim); every other answer is the recorded reply or, while the
// winner is still deciding, REQUEST_IN_PROGRESS. The same id for a
// different request is refused.
func TestRequestIDDecidedOnce(t *testing.T) {
	w := start(t, policy.ModeStrict, "")
	bs := w.idBrokers(t, 2)
	ctx := ctxT(t)
	run, err := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	req := outputRequest(t, run, "req-1", 1)
	replies := make([]*broker.EffectReply, 8)
	var wg sync.WaitGroup
	for i := range replies {
		wg.Go(func() { replies[i] = bs[i%2].Propose(ctx, shared, policy.SinkOutput, req) })
	}
	wg.Wait()
	fresh, effect := 0, ""
	for _, r := range replies {
		switch {
		case r.Error != nil && r.Error.Code == broker.CodeRequestInProgress:
		case r.Error != nil:
			t.Fatalf("reply error %+v", r.Error)
		case !r.Replayed:
			fresh++
			effect = r.Effect
		}
	}
	if fresh != 1 {
		t.Fatalf("%d brokers decided request req-1, want exactly 1", fresh)
	}
	again := bs[1].Propose(ctx, shared, policy.SinkOutput, req)
	if !again.Replayed || again.Effect != effect || again.Decision == nil || again.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("request sent again: %+v, want the recorded reply of %s", again, effect)
	}
	if n := decisions(w.journalEvents(t, run)); n != 1 {
		t.Fatalf("journal holds %d decisions, want 1", n)
	}
	other := bs[0].Propose(ctx, shared, policy.SinkOutput, outputRequest(t, run, "req-1", 2))
	if other.Error == nil || other.Error.Code != broker.CodeRequestIDReused {
		t.Fatalf("a different request under req-1: %+v", other.Error)
	}
	// Without an id, the same request is decided each time.
	plain := outputRequest(t, run, "", 1)
	if a, b := bs[0].Propose(ctx, shared, policy.SinkOutput, plain), bs[1].Propose(ctx, shared, policy.SinkOutput, plain); a.Effect == b.Effect || a.Replayed || b.Replayed {
		t.Fatalf("requests without an id: %s and %s", a.Effect, b.Effect)
	}
}

// claimAs writes the entry a broker leaves when it dies holding req (an
// output request) in state, as RequestIDs does (the digest of the sink and
// the decoded request as admitted: with the origin Gatehouse established
// for the shared agent).
func claimAs(t *testing.T, w *world, req []byte, state string) {
	t.Helper()
	r, err := broker.DecodeEffectRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Origin = policy.OriginModel
	canon, _ := json.Marshal(struct {
		Sink policy.Sink `json:"sink"`
		*broker.EffectRequest
	}{policy.SinkOutput, r})
	sum := sha256.Sum256(canon)
	kv, err := w.js.KeyValue(ctxT(t), broker.RequestsBucket)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := json.Marshal(map[string]string{"state": state, "digest": "sha256:" + hex.EncodeToString(sum[:])})
	if _, err := kv.Create(ctxT(t), r.Run+"."+r.RequestID, v); err != nil {
		t.Fatal(err)
	}
}

// A broker that died after claiming, before recording anything, is taken
// over once its claim is unchanged for the lease; one that died after it
// started recording is never decided again: REQUEST_IN_PROGRESS.
func TestRequestIDAfterADeadBroker(t *testing.T) {
	w := start(t, policy.ModeStrict, "")
	bs := w.idBrokers(t, 1)
	ctx := ctxT(t)
	run, err := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	claimed := outputRequest(t, run, "died-claimed", 1)
	claimAs(t, w, claimed, "claimed")
	r := bs[0].Propose(ctx, shared, policy.SinkOutput, claimed)
	if r.Error != nil || r.Replayed || r.Decision == nil || !r.Decision.Recorded {
		t.Fatalf("taking over a claim with nothing recorded: %+v %+v", r.Error, r.Decision)
	}

	recording := outputRequest(t, run, "died-recording", 2)
	claimAs(t, w, recording, "recording")
	r = bs[0].Propose(ctx, shared, policy.SinkOutput, recording)
	if r.Error == nil || r.Error.Code != broker.CodeRequestInProgress || r.Decision != nil {
		t.Fatalf("a request whose decision may be recorded: %+v %+v", r.Error, r.Decision)
	}
	if n := decisions(w.journalEvents(t, run)); n != 1 {
		t.Fatalf("journal holds %d decisions, want 1", n)
	}
}

// A request refused before anything is recorded releases its id: sent
// again (fixed), it is decided.
func TestRequestIDReleasedWhenNothingRecorded(t *testing.T) {
	w := start(t, policy.ModeStrict, "")
	bs := w.idBrokers(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run, err := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := json.Marshal(broker.EffectRequest{Run: run, Action: "deliver", RequestID: "r-1", Params: json.RawMessage(`{"nope":1}`)})
	if r := bs[0].Propose(ctx, shared, policy.SinkOutput, bad); r.Error == nil || r.Error.Code != broker.CodeBadRequest {
		t.Fatalf("bad params: %+v", r.Error)
	}
	if r := bs[0].Propose(ctx, shared, policy.SinkOutput, bad); r.Error == nil || r.Error.Code != broker.CodeBadRequest || r.Replayed {
		t.Fatalf("bad params again: %+v replayed %v", r.Error, r.Replayed)
	}
}
