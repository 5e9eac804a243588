package broker_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// TestPeerWaitEndsWithItsRegistration: the old bob waits for a peer
// message (a PeerNext with a wait) when bob is removed and registered
// again. A message then sent to the new bob is the new bob's: the old
// bob's waiting request, whose requester is gone, must not take it (it
// used to: the message was acknowledged and answered into the removed
// agent's inbox, lost to the new bob). The new bob reads it, and the
// stream holds nothing after.
func TestPeerWaitEndsWithItsRegistration(t *testing.T) {
	w := startReuseWorld(t, 0)
	alice, oldBob := w.agent(t, "alice"), w.agent(t, "bob")
	aliceRun := w.open(t, "alice")
	if got := next(t, oldBob, "bob"); got.Error != nil || got.Message != nil { // makes bob's consumer
		t.Fatalf("bob's first ask: %+v", got)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := oldBob.Conn().Request(subject.PeerNext("bob"), []byte(`{"wait_ms": 10000}`), 15*time.Second)
		waited <- err
	}()
	// The old bob's request is waiting on bob's consumer.
	cons, err := w.js.Consumer(ctxT(t), subject.PeerStream, subject.PeerConsumer("bob"))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := cons.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if info.NumWaiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the old bob's request never waited on the consumer")
		}
		time.Sleep(10 * time.Millisecond)
	}

	w.reAdd(t, "bob")
	bob := w.agent(t, "bob")
	// The new bob's credential may read bob's inbox space: nothing meant
	// for the old bob may come there (the reply to its waiting request).
	leaked, err := bob.Conn().SubscribeSync(subject.AgentInboxOf("bob") + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := bob.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	if r, err := alice.Send(ctxT(t), aliceRun, "bob", "for the new bob"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("alice to the new bob: %+v %v", r, err)
	}
	msg, err := bob.Conn().Request(subject.PeerNext("bob"), []byte(`{"wait_ms": 5000}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got broker.PeerNextReply
	if err := json.Unmarshal(msg.Data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Error != nil || got.Message == nil || !strings.Contains(string(got.Message.Body), "for the new bob") {
		t.Fatalf("the new bob did not get the message sent to it (the old bob's waiting request took it): %+v", got)
	}
	if got.Message.Incarnation != w.holder.AgentRegistration("bob").Incarnation {
		t.Fatalf("the message is stamped %q", got.Message.Incarnation)
	}
	if n := w.count(t, subject.PeerStream, subject.Peer("bob", aliceRun)); n != 0 {
		t.Fatalf("%d messages still queued for bob", n)
	}
	<-waited // answered or cut off with the old bob's connection
	// The old request was answered (or dropped) when it gave the message
	// back; give a reply in flight a moment to arrive, then look.
	time.Sleep(500 * time.Millisecond)
	own := msg.Subject[:strings.LastIndexByte(msg.Subject, '.')] // the new bob's replies
	for {
		m, err := leaked.NextMsg(10 * time.Millisecond)
		if err != nil {
			break
		}
		if !strings.HasPrefix(m.Subject, own+".") {
			t.Fatalf("an answer to the old bob's request reached the new bob's inbox space: %s %s", m.Subject, m.Data)
		}
	}
}

// TestOrphanedRunActsNoMore: what an agent set going in its run acts for
// the run as Gatehouse itself (sandboxed code's gateway calls, a browser
// session's requests: internal proposals). Once bob is removed and
// registered again, nothing acts in the old bob's run any more, not even
// so: an internal proposal there is refused (NOT_RUN_AGENT,
// run-of-another-agent, recorded in that run, nothing delivered), while
// in the new bob's run it goes through.
func TestOrphanedRunActsNoMore(t *testing.T) {
	w := startReuseWorld(t, 0)
	oldRun := w.open(t, "bob")
	internal := func(run string) *broker.EffectReply {
		t.Helper()
		data, err := json.Marshal(broker.EffectRequest{Run: run, Action: "deliver", Params: json.RawMessage(`{"status":"ok","result":"from the sandbox"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return w.b.Propose(ctxT(t), broker.Internal(policy.OriginRuntime), policy.SinkOutput, data)
	}
	if r := internal(oldRun); r.Error != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("Gatehouse acting in bob's run: %+v %+v", r.Decision, r.Error)
	}
	w.reAdd(t, "bob")
	before := w.count(t, subject.OutputStream, subject.Output(subject.Shared, oldRun))
	r := internal(oldRun)
	if r.Error == nil || r.Error.Code != broker.CodeNotRunAgent || r.Decision == nil || r.Decision.Refusal != broker.RefuseRunOfAnotherAgent {
		t.Fatalf("Gatehouse acting in the old bob's run after bob was registered again: %+v %+v", r.Decision, r.Error)
	}
	if n := w.count(t, subject.OutputStream, subject.Output(subject.Shared, oldRun)); n != before {
		t.Fatal("delivered into the old bob's run")
	}
	if d := w.lastDecision(t, oldRun); d.Refusal != broker.RefuseRunOfAnotherAgent || d.Rule != journal.RuleIdentity {
		t.Fatalf("the refusal is not on the old run's record: %+v", d)
	}
	if r := internal(w.open(t, "bob")); r.Error != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("Gatehouse acting in the new bob's run: %+v %+v", r.Decision, r.Error)
	}
}

// reAdd removes agent name and registers it again in one edit of the
// register (a new seed, a new incarnation), as two CLI commands between
// two reloads of serve do.
func (w *reuseWorld) reAdd(t *testing.T, name string) {
	t.Helper()
	w.edit(t, func(r *identity.Registry) error {
		if err := r.RemoveAgent(name); err != nil {
			return err
		}
		if err := r.AddAgent(identity.Agent{Name: name, Added: time.Now().UTC()}); err != nil {
			return err
		}
		_, err := embedded.NewSeed(embedded.AgentCredsPath(w.nats, name))
		return err
	})
}
