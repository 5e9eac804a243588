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
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/sinks/output"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// violates connects with auth and reports whether act draws a permissions
// violation from the server.
func violates(t *testing.T, url string, auth nats.Option, inbox string, act func(nc *nats.Conn)) bool {
	t.Helper()
	errs := make(chan error, 4)
	nc, err := nats.Connect(url, auth, nats.CustomInboxPrefix(inbox),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	act(nc)
	_ = nc.Flush()
	select {
	case err := <-errs:
		return errors.Is(err, nats.ErrPermissionViolation)
	case <-time.After(time.Second):
		return false
	}
}

func nkey(t *testing.T, path string) nats.Option {
	t.Helper()
	o, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// What the design promises about who reads what, held by the embedded
// server's permissions: an agent with its own credential reads only its own
// peer messages (through a broker) and inbox; no agent makes any JetStream
// request (JetStream would answer on any reply subject it named), forges a
// peer message, or reads the journal or outputs; the shared agent
// credential asks for no named agent's messages and reads no named agent's
// replies (its inbox space does not contain theirs).
func TestNATSPermissions(t *testing.T) {
	dir := t.TempDir()
	ns, err := embedded.Start(embedded.Config{Dir: dir, Port: -1, Agents: []string{"alice", "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	bnc, err := ns.Connect(embedded.RoleBroker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bnc.Close)
	js, _ := jetstream.New(bnc)
	ctx := sinktest.Ctx(t)
	if _, err := journal.EnsureStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := output.New(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	// A broker serving the peer sink on the replies connection, as serve
	// runs it: agents read their messages through it.
	replies, err := ns.Connect(embedded.RoleReplies)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(replies.Close)
	ps := servePeer(t, js, replies)
	// The broker's side of a send, as Propose calls it once decided.
	run := &broker.Run{ID: broker.NewRunID(time.Now()), Agent: "carol"}
	send := func(to, body string) {
		t.Helper()
		req := &broker.EffectRequest{Run: run.ID, Action: "send", Params: json.RawMessage(`{"to":"` + to + `","body":"` + body + `"}`)}
		prop, err := ps.Describe(context.Background(), run, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ps.Perform(ctx, run, req, prop); err != nil {
			t.Fatal(err)
		}
	}
	send("alice", "for-alice-1")

	alice, err := client.DialAgent(ns.URL, "alice", embedded.AgentCredsPath(dir, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(alice.Close)
	bob, err := client.DialAgent(ns.URL, "bob", embedded.AgentCredsPath(dir, "bob"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bob.Close)

	// alice fetches her message, sent before she listened; fetching
	// acknowledges it, which removes it from the work queue.
	if m := receive(t, alice, "alice", 5*time.Second); m == nil || string(m.Body) != `"for-alice-1"` || m.From != "carol" {
		t.Fatalf("alice received %+v", m)
	}
	if n := queuedPeer(t, js, 0); n != 0 {
		t.Fatalf("the peer stream still holds %d messages after alice acknowledged", n)
	}

	// bob cannot fetch alice's messages through her consumer.
	send("alice", "for-alice-2")
	in, _ := bob.Peer("alice")
	short, cancel := context.WithTimeout(ctx, time.Second)
	m, err := in.Next(short)
	cancel()
	if err == nil || m != nil {
		t.Fatalf("bob fetched alice's message %+v", m)
	}
	if m := receive(t, alice, "alice", 5*time.Second); m == nil || string(m.Body) != `"for-alice-2"` {
		t.Fatalf("alice's second message: %+v", m)
	}

	bobAuth, bobInbox := nkey(t, embedded.AgentCredsPath(dir, "bob")), subject.AgentInboxOf("bob")
	sharedAuth, sharedInbox := nkey(t, embedded.CredsPath(dir, embedded.RoleAgent)), subject.AgentInboxOf(subject.Shared)
	sub := func(subj string) func(*nats.Conn) {
		return func(nc *nats.Conn) { _, _ = nc.SubscribeSync(subj) }
	}
	pub := func(subj string) func(*nats.Conn) {
		return func(nc *nats.Conn) { _ = nc.Publish(subj, []byte(`{}`)) }
	}
	forged := subject.Peer("alice", run.ID)
	for _, tc := range []struct {
		name    string
		auth    nats.Option
		inbox   string
		act     func(*nats.Conn)
		refused bool
	}{
		{"bob subscribes to alice's peer subject", bobAuth, bobInbox, sub(subject.PeerFilter("alice")), true},
		{"bob subscribes to every peer subject", bobAuth, bobInbox, sub(subject.PeerAll), true},
		{"bob reads alice's replies", bobAuth, bobInbox, sub(subject.AgentInboxOf("alice") + ".>"), true},
		{"bob reads the shared agents' replies", bobAuth, bobInbox, sub(sharedInbox + ".>"), true},
		{"bob reads every agent's replies", bobAuth, bobInbox, sub(subject.AgentInbox + ".>"), true},
		{"bob proposes as alice", bobAuth, bobInbox, pub(subject.Effect("alice", "output")), true},
		{"bob proposes as the shared agent", bobAuth, bobInbox, pub(subject.Effect(subject.Shared, "output")), true},
		{"bob proposes as himself", bobAuth, bobInbox, pub(subject.Effect("bob", "output")), false},
		{"bob opens work", bobAuth, bobInbox, pub(subject.WorkOpen(subject.Shared)), true},
		{"bob pulls from alice's consumer", bobAuth, bobInbox, pub("$JS.API.CONSUMER.MSG.NEXT." + subject.PeerStream + "." + subject.PeerConsumer("alice")), true},
		{"bob acks on alice's consumer", bobAuth, bobInbox, pub("$JS.ACK." + subject.PeerStream + "." + subject.PeerConsumer("alice") + ".1.1.1.1.0"), true},
		{"bob asks for alice's next message", bobAuth, bobInbox, pub(subject.PeerNext("alice")), true},
		{"bob reads his own inbox", bobAuth, bobInbox, sub(bobInbox + ".x"), false},
		{"bob asks for his own next message", bobAuth, bobInbox, pub(subject.PeerNext("bob")), false},
		// JetStream answers on any reply subject: not even his own consumer.
		{"bob pulls from his own consumer", bobAuth, bobInbox, pub("$JS.API.CONSUMER.MSG.NEXT." + subject.PeerStream + "." + subject.PeerConsumer("bob")), true},
		{"bob reads his own consumer", bobAuth, bobInbox, pub("$JS.API.CONSUMER.INFO." + subject.PeerStream + "." + subject.PeerConsumer("bob")), true},
		{"bob acks on his own consumer", bobAuth, bobInbox, pub("$JS.ACK." + subject.PeerStream + "." + subject.PeerConsumer("bob") + ".1.1.1.1.0"), true},
		{"bob asks JetStream anything", bobAuth, bobInbox, pub("$JS.API.INFO"), true},
		{"bob asks micro discovery", bobAuth, bobInbox, pub("$SRV.PING"), true},
		{"bob forges a peer message", bobAuth, bobInbox, pub(forged), true},
		{"bob creates a consumer", bobAuth, bobInbox, pub("$JS.API.CONSUMER.CREATE." + subject.PeerStream + ".mine"), true},
		{"bob reads the peer stream directly", bobAuth, bobInbox, pub("$JS.API.STREAM.MSG.GET." + subject.PeerStream), true},
		{"bob direct-gets from the peer stream", bobAuth, bobInbox, pub("$JS.API.DIRECT.GET." + subject.PeerStream), true},
		{"bob reads the journal", bobAuth, bobInbox, sub(subject.JournalAll), true},
		{"bob reads outputs", bobAuth, bobInbox, sub(subject.OutputPrefix + ".>"), true},
		{"bob reads the shared app's outputs", bobAuth, bobInbox, sub(subject.OutputsOf(subject.Shared)), true},

		{"shared agent reads the journal", sharedAuth, sharedInbox, sub(subject.JournalAll), true},
		{"shared agent pulls from the journal writer's consumer", sharedAuth, sharedInbox, pub("$JS.API.CONSUMER.MSG.NEXT." + subject.JournalStream + "." + subject.JournalConsumer), true},
		{"shared agent reads outputs", sharedAuth, sharedInbox, sub(subject.OutputPrefix + ".>"), true},
		{"shared agent pulls outputs", sharedAuth, sharedInbox, pub("$JS.API.CONSUMER.MSG.NEXT." + subject.OutputStream + ".x"), true},
		{"shared agent subscribes to peer subjects", sharedAuth, sharedInbox, sub(subject.PeerAll), true},
		{"shared agent forges a peer message", sharedAuth, sharedInbox, pub(forged), true},
		{"shared agent creates a consumer", sharedAuth, sharedInbox, pub("$JS.API.CONSUMER.CREATE." + subject.PeerStream + ".mine"), true},
		{"shared agent reads the peer stream directly", sharedAuth, sharedInbox, pub("$JS.API.STREAM.MSG.GET." + subject.PeerStream), true},
		{"shared agent reads the runs bucket", sharedAuth, sharedInbox, pub("$JS.API.DIRECT.GET.KV_" + subject.RunsBucket), true},
		{"shared agent pulls from alice's consumer", sharedAuth, sharedInbox, pub("$JS.API.CONSUMER.MSG.NEXT." + subject.PeerStream + "." + subject.PeerConsumer("alice")), true},
		{"shared agent reads alice's consumer", sharedAuth, sharedInbox, pub("$JS.API.CONSUMER.INFO." + subject.PeerStream + "." + subject.PeerConsumer("alice")), true},
		{"shared agent acks on alice's consumer", sharedAuth, sharedInbox, pub("$JS.ACK." + subject.PeerStream + "." + subject.PeerConsumer("alice") + ".1.1.1.1.0"), true},
		{"shared agent asks for alice's next message", sharedAuth, sharedInbox, pub(subject.PeerNext("alice")), true},
		{"shared agent asks for its own next message", sharedAuth, sharedInbox, pub(subject.PeerNext(subject.Shared)), true},
		{"shared agent reads alice's replies", sharedAuth, sharedInbox, sub(subject.AgentInboxOf("alice") + ".>"), true},
		{"shared agent reads every agent's replies", sharedAuth, sharedInbox, sub(subject.AgentInbox + ".>"), true},
		{"shared agent proposes as alice", sharedAuth, sharedInbox, pub(subject.Effect("alice", "output")), true},
		{"shared agent proposes as itself", sharedAuth, sharedInbox, pub(subject.Effect(subject.Shared, "output")), false},
		{"shared agent reads its own inbox", sharedAuth, sharedInbox, sub(sharedInbox + ".x"), false},
	} {
		if got := violates(t, ns.URL, tc.auth, tc.inbox, tc.act); got != tc.refused {
			t.Errorf("%s: refused = %v, want %v", tc.name, got, tc.refused)
		}
	}

	// The shared credential cannot fetch alice's messages through the
	// client either; they stay for her.
	shared, err := client.Dial(ns.URL, client.Agent, embedded.CredsPath(dir, embedded.RoleAgent))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shared.Close)
	send("alice", "for-alice-3")
	sharedIn, err := shared.Peer("alice")
	if err != nil {
		t.Fatal(err)
	}
	nctx, ncancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ncancel()
	if m, err := sharedIn.Next(nctx); !errors.Is(err, broker.ErrCredentialRefused) {
		t.Fatalf("the shared credential asking for alice's peer messages: %+v %v, want the server's refusal", m, err)
	}
	if m := receive(t, alice, "alice", 5*time.Second); m == nil || string(m.Body) != `"for-alice-3"` {
		t.Fatalf("alice's third message: %+v", m)
	}
}
