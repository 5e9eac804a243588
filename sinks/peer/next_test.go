package peer_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/natstest"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/peer"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// An agent's next peer message, served by the broker from the sink's
// queue, on a NATS that enforces nothing (an external NATS without
// Gatehouse's permissions): the broker's own checks alone decide who gets
// what, and the stream shows what was taken.
func TestPeerNextServedByTheBroker(t *testing.T) {
	js := natstest.JetStream(t)
	nc := js.Conn()
	ctx := sinktest.Ctx(t)
	ps := servePeer(t, js, nc)
	run := &broker.Run{ID: broker.NewRunID(time.Now()), Agent: "carol"}
	sendToBob(t, ps, run, "for bob")
	queued := func(want uint64) uint64 { return queuedPeer(t, js, want) }
	ask := func(id, reply, body string) *broker.PeerNextReply {
		t.Helper()
		sub, err := nc.SubscribeSync(reply)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := nc.PublishRequest(subject.PeerNext(id), reply, []byte(body)); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("%s asking %s: %v", id, body, err)
		}
		var r broker.PeerNextReply
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	// Dropped: a reply outside the asker's inbox takes nothing.
	elsewhere, err := nc.SubscribeSync(subject.AgentInboxOf("alice") + ".stolen")
	if err != nil {
		t.Fatal(err)
	}
	for _, reply := range []string{subject.AgentInboxOf("alice") + ".stolen", "$KV." + subject.RunsBucket + ".x", subject.Peer("alice", run.ID)} {
		if err := nc.PublishRequest(subject.PeerNext("bob"), reply, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Refused, and nothing taken either.
	for body, code := range map[string]broker.Code{`{"wait_ms":-1}`: broker.CodeBadRequest, `{"agent":"bob"}`: broker.CodeBadRequest} {
		if r := ask("bob", subject.AgentInboxOf("bob")+".1", body); r.Error == nil || r.Error.Code != code || r.Message != nil {
			t.Fatalf("bob asking %s: %+v", body, r)
		}
	}
	if r := ask(subject.Shared, subject.AgentInboxOf(subject.Shared)+".1", ""); r.Error == nil || r.Error.Code != broker.CodeNotRunAgent || r.Message != nil {
		t.Fatalf("the shared agent asking: %+v", r)
	}
	if r := ask("alice", subject.AgentInboxOf("alice")+".1", ""); r.Error != nil || r.Message != nil {
		t.Fatalf("alice asking for her own (none): %+v", r)
	}
	if n := queued(1); n != 1 {
		t.Fatalf("the queue holds %d messages, want bob's one", n)
	}
	if m, err := elsewhere.NextMsg(0); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("alice's inbox received %s", m.Data)
	}
	// bob gets his, once.
	r := ask("bob", subject.AgentInboxOf("bob")+".2", `{"wait_ms":2000}`)
	if r.Error != nil || r.Message == nil || r.Message.From != "carol" || string(r.Message.Body) != `"for bob"` || r.Message.FromRun != run.ID {
		t.Fatalf("bob's message: %+v", r)
	}
	if n := queued(0); n != 0 {
		t.Fatalf("the queue holds %d messages after bob took his", n)
	}
	if r := ask("bob", subject.AgentInboxOf("bob")+".3", ""); r.Error != nil || r.Message != nil {
		t.Fatalf("bob asking again: %+v", r)
	}
	// What is not a peer message (nothing but a broker publishes here) is
	// dropped, never handed out.
	if _, err := js.Publish(ctx, subject.Peer("bob", run.ID), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	// Waited for (a second): with no wait Next may ask before the
	// message is there, and leave it queued.
	if m, _, err := ps.Next(ctx, "bob", time.Second, nil); err != nil || m != nil {
		t.Fatalf("a malformed message: %+v %v", m, err)
	}
	if n := queued(0); n != 0 {
		t.Fatalf("the malformed message is still queued: %d", n)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := ps.Next(cctx, "bob", time.Second, nil); err == nil {
		t.Fatal("Next on a cancelled context")
	}
}

// A message its judge leaves stays queued and is delivered to the next
// Next; one it drops is gone; one it takes is handed out once.
func TestPeerNextJudge(t *testing.T) {
	js := natstest.JetStream(t)
	ctx := sinktest.Ctx(t)
	ps := servePeer(t, js, js.Conn())
	run := &broker.Run{ID: broker.NewRunID(time.Now()), Agent: "carol"}
	send := func(body string) { sendToBob(t, ps, run, body) }
	queued := func(want uint64) uint64 { return queuedPeer(t, js, want) }
	verdict := func(v broker.PeerVerdict) func(*broker.PeerMessage) broker.PeerVerdict {
		return func(*broker.PeerMessage) broker.PeerVerdict { return v }
	}
	send("one")
	send("two")
	m, v, err := ps.Next(ctx, "bob", time.Second, verdict(broker.PeerLeave))
	if err != nil || m == nil || v != broker.PeerLeave || string(m.Body) != `"one"` {
		t.Fatalf("left: %+v %v %v", m, v, err)
	}
	if n := queued(2); n != 2 {
		t.Fatalf("after a leave the queue holds %d messages, want 2", n)
	}
	m, v, err = ps.Next(ctx, "bob", time.Second, verdict(broker.PeerDrop))
	if err != nil || m == nil || v != broker.PeerDrop || string(m.Body) != `"one"` {
		t.Fatalf("the left message is not the next one: %+v %v %v", m, v, err)
	}
	if n := queued(1); n != 1 {
		t.Fatalf("after a drop the queue holds %d messages, want 1", n)
	}
	m, v, err = ps.Next(ctx, "bob", time.Second, verdict(broker.PeerTake))
	if err != nil || m == nil || v != broker.PeerTake || string(m.Body) != `"two"` {
		t.Fatalf("taken: %+v %v %v", m, v, err)
	}
	if n := queued(0); n != 0 {
		t.Fatalf("after a take the queue holds %d messages", n)
	}
}

// sendToBob has the run's agent send body to bob through ps.
func sendToBob(t *testing.T, ps *peer.Sink, run *broker.Run, body string) {
	t.Helper()
	ctx := sinktest.Ctx(t)
	b, _ := json.Marshal(map[string]string{"to": "bob", "body": body})
	req := &broker.EffectRequest{Run: run.ID, Action: "send", Params: b}
	prop, err := ps.Describe(ctx, run, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ps.Perform(ctx, run, req, prop); err != nil {
		t.Fatal(err)
	}
}

// queuedPeer is the number of messages the peer stream holds.
func queuedPeer(t *testing.T, js jetstream.JetStream, want uint64) uint64 {
	t.Helper()
	ctx := sinktest.Ctx(t)
	st, err := js.Stream(ctx, subject.PeerStream)
	if err != nil {
		t.Fatal(err)
	}
	// A work queue removes an acknowledged message after the ack is
	// confirmed, not with it: the count is read until it is want (or
	// 10 s have passed, and the count then is what it is).
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := info.State.Msgs; n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// servePeer makes the peer sink on js and a broker serving it, with no
// other sink, on nc (the connection it answers on), and returns the sink.
func servePeer(t *testing.T, js jetstream.JetStream, nc *nats.Conn) *peer.Sink {
	t.Helper()
	ctx := sinktest.Ctx(t)
	ps, err := peer.New(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := broker.OpenKVRuns(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Config{}, runs, broker.NewRecorder(js, 5*time.Second), policy.Default(), ps)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := broker.Serve(nc, b, broker.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return ps
}

// A send creates nothing for its recipient: only the agent itself, asking
// for its own messages, makes its consumer. Otherwise any agent could make
// the peer stream carry a durable consumer per name it cares to send to.
// Messages sent before wait in the stream for the recipient's first read.
func TestSendCreatesNoConsumer(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	st, err := env.JS.Stream(ctx, subject.PeerStream)
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() int {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	before := consumers()
	for i := 0; i < 20; i++ {
		if r, err := env.Agent.Send(ctx, run, "ghost-"+string(rune('a'+i)), "boo"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Fatalf("send: %+v %v", r, err)
		}
	}
	if r, err := env.Agent.Send(ctx, run, "bob", "early"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("send to bob: %+v %v", r, err)
	}
	if n := consumers(); n != before {
		t.Fatalf("sends made %d consumers", n-before)
	}
	if m := receive(t, env.NamedAgent(t, "bob", ""), "bob", 5*time.Second); m == nil || string(m.Body) != `"early"` {
		t.Fatalf("bob's message sent before he had a consumer: %+v", m)
	}
	if n := consumers(); n != before+1 {
		t.Fatalf("bob's read made %d consumers, want 1", n-before)
	}
}
