package broker

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
)

// TestRecorderPublishInDoubt: events published while the NATS server is
// down get no acknowledgement, yet nats.go sends them once it reconnects,
// so they may be stored. Record and RecordLater must not give up on such
// a publish (the broker would refuse an effect whose decision then lands
// in the journal, perhaps after its run's close): they send it again,
// under the same message id, until the stream answers. Each event is
// stored once, and both report success.
func TestRecorderPublishInDoubt(t *testing.T) {
	store := t.TempDir()
	start := func(port int) *server.Server {
		t.Helper()
		ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: store, NoLog: true, NoSigs: true})
		if err != nil {
			t.Fatal(err)
		}
		go ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats-server not ready")
		}
		return ns
	}
	ns := start(-1)
	port := ns.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { ns.Shutdown() })

	nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := journal.EnsureStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(js, 300*time.Millisecond)
	r.settle = time.Minute // the test restarts the server well within it

	ev := func(id string) *journal.Event {
		return &journal.Event{V: journal.Version, ID: id, Run: "r_doubt", Type: journal.TypeOutcome, Time: time.Now().UTC(),
			Effect: "x_" + id, Data: json.RawMessage(`{"status":"ok","size":0}`)}
	}

	ns.Shutdown()
	ns.WaitForShutdown()
	recorded := make(chan error, 1)
	go func() { recorded <- r.Record(ctx, ev("ev_record")) }()
	later := make(chan error, 1)
	r.RecordLater(ev("ev_later"), func(err error) { later <- err })

	// Longer than a publish's wait: both have timed out at least once, so
	// they are in doubt. Then, for a while, a server on the same address
	// answers with the stream's error (another stream holds the journal's
	// subjects), as a leader being elected answers "not available": no
	// answer but an acknowledgement may end a publish in doubt. Then the
	// server comes back on its store.
	time.Sleep(time.Second)
	other, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go other.Start()
	if !other.ReadyForConnections(10 * time.Second) {
		t.Fatal("the other nats-server is not ready")
	}
	onc, err := nats.Connect(other.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	ojs, _ := jetstream.New(onc)
	if _, err := ojs.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{subject.JournalAll}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); nc.ConnectedUrl() != other.ClientURL(); {
		if time.Now().After(deadline) {
			t.Fatal("the recorder's connection never reached the other server")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // a few publishes answered with the stream's error
	onc.Close()
	other.Shutdown()
	other.WaitForShutdown()
	ns = start(port)

	for name, c := range map[string]chan error{"Record": recorded, "RecordLater": later} {
		select {
		case err := <-c:
			if err != nil {
				t.Errorf("%s of an event published while the server was down: %v", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not return", name)
		}
	}
	r.Close()

	s, err := js.Stream(ctx, subject.JournalStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("the stream holds %d messages, want the 2 events once each", info.State.Msgs)
	}
}
