package broker_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/sinks/output"
)

// streamOrder keeps the order in which events of any broker's journal
// reached the stream.
type streamOrder struct {
	mu    sync.Mutex
	order []journal.Type
}

func (o *streamOrder) note(events ...*journal.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range events {
		o.order = append(o.order, e.Type)
	}
}

func (o *streamOrder) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.order)
}

// orderedJournal records through a real Recorder into a shared
// streamOrder; with held set, the first decision and attempt it records
// wait for release before they are published.
type orderedJournal struct {
	*broker.Recorder
	o             *streamOrder
	held, release chan struct{}
	once          sync.Once
}

func (j *orderedJournal) Record(ctx context.Context, e *journal.Event) error {
	err := j.Recorder.Record(ctx, e)
	j.o.note(e)
	return err
}

func (j *orderedJournal) RecordGroup(ctx context.Context, events ...*journal.Event) error {
	if len(events) > 1 && j.held != nil {
		j.once.Do(func() { close(j.held); <-j.release })
	}
	err := j.Recorder.RecordGroup(ctx, events...)
	j.o.note(events...)
	return err
}

// startEmbedded starts an embedded NATS with its store in dir/nats.
func startEmbedded(t *testing.T, dir string) *embedded.Server {
	t.Helper()
	ns, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, "nats"), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

// fencedBroker is one of several strict brokers on one NATS server, each
// on its own connection with its own run store (one bucket) and fence.
type fencedBroker struct {
	b     *broker.Broker
	nc    *nats.Conn
	j     *orderedJournal
	fence *broker.Fence
}

func startFencedBroker(t *testing.T, ns *embedded.Server, o *streamOrder) *fencedBroker {
	t.Helper()
	var j *orderedJournal
	b, nc, _ := strictBroker(t, ns, func(js jetstream.JetStream) broker.Journal {
		j = &orderedJournal{Recorder: broker.NewRecorder(js, 5*time.Second), o: o}
		return j
	}, func(out *output.Sink) broker.Sink { return out })
	f, err := broker.StartFence(nc, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return &fencedBroker{b: b, nc: nc, j: j, fence: f}
}

// waitPeers waits until each fence has heard from n other brokers.
func waitPeers(t *testing.T, n int, bs ...*fencedBroker) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, fb := range bs {
		for len(fb.fence.Peers()) != n {
			if time.Now().After(deadline) {
				t.Fatalf("a fence hears from %d brokers, want %d", len(fb.fence.Peers()), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestCloseFencesAnotherBrokersDecision: the application's close reaches
// one broker while another is recording an agent's effect for the run
// (brokers share requests in a queue group; a record in doubt can take
// seconds). The run.close must still follow that decision in the journal,
// and the run is refused from then on by both brokers.
func TestCloseFencesAnotherBrokersDecision(t *testing.T) {
	dir := t.TempDir()
	ns := startEmbedded(t, dir)
	o := &streamOrder{}
	closer := startFencedBroker(t, ns, o)
	decider := startFencedBroker(t, ns, o)
	decider.j.held, decider.j.release = make(chan struct{}), make(chan struct{})
	waitPeers(t, 1, closer, decider)
	// Only the decider answers agents; the test closes through the closer.
	app, agent := serveAndDial(t, ns, dir, decider.nc, decider.b)

	ctx := context.Background()
	run, err := app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		_, err := agent.Output(ctx, run, "ok", 1)
		answered <- err
	}()
	<-decider.j.held // decided by the decider, its record under way
	closed := make(chan error, 1)
	go func() {
		closed <- closer.b.CloseRun(ctx, broker.AppCaller(subject.Shared), &broker.CloseWork{Run: run, Status: "done"})
	}()
	// Nothing outside can see the close waiting; give it the moment the
	// unfenced close needed to record run.close.
	time.Sleep(500 * time.Millisecond)
	close(decider.j.release)
	if err := <-answered; err != nil {
		t.Fatalf("the effect under way: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	want := fmt.Sprint([]journal.Type{journal.TypeRunOpen, journal.TypeDecision, journal.TypeAttempt, journal.TypeRunClose})
	if got := o.String(); got != want {
		t.Fatalf("recorded in the order %v, want %v", got, want)
	}
	if _, err := agent.Output(ctx, run, "late", 1); errCode(err) != broker.CodeRunClosed {
		t.Fatalf("an effect after the close: %v, want %s", err, broker.CodeRunClosed)
	}
}

// peerHello connects as a broker that sends one heartbeat as id, waits
// until fb has heard it, and returns the connection and the heartbeat.
func peerHello(t *testing.T, ns *embedded.Server, fb *fencedBroker, id string) (*nats.Conn, []byte) {
	t.Helper()
	nc, err := ns.Connect(embedded.RoleBroker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	hello := fmt.Appendf(nil, `{"id":%q}`, id)
	if err := nc.Publish(subject.BrokersHello, hello); err != nil {
		t.Fatal(err)
	}
	waitPeers(t, 1, fb)
	return nc, hello
}

// TestCloseGivesUpOnASilentBroker: a broker that is heard from but does
// not answer the close's ask (killed since its last heartbeat) does not
// hold the close: it is given up after a moment and the run closes.
func TestCloseGivesUpOnASilentBroker(t *testing.T) {
	ns := startEmbedded(t, t.TempDir())
	o := &streamOrder{}
	fb := startFencedBroker(t, ns, o)
	peerHello(t, ns, fb, "b_silent") // a heartbeat of a broker that answers nothing

	ctx := context.Background()
	run, err := fb.b.Open(ctx, broker.AppCaller(subject.Shared), &broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := fb.b.CloseRun(cctx, broker.AppCaller(subject.Shared), &broker.CloseWork{Run: run.ID, Status: "done"}); err != nil {
		t.Fatalf("close with a silent broker: %v", err)
	}
	want := fmt.Sprint([]journal.Type{journal.TypeRunOpen, journal.TypeRunClose})
	if got := o.String(); got != want {
		t.Fatalf("recorded %v, want %v", got, want)
	}
}

// TestAnAgentCannotFenceARun: the close fence's subjects are the brokers'.
// An agent that forges an ask to quiesce a run (to have the brokers refuse
// its effects) is refused by the NATS server, and the run goes on.
func TestAnAgentCannotFenceARun(t *testing.T) {
	dir := t.TempDir()
	ns := startEmbedded(t, dir)
	fb := startFencedBroker(t, ns, &streamOrder{})
	app, agent := serveAndDial(t, ns, dir, fb.nc, fb.b)
	ctx := context.Background()
	run, err := app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	nc := agent.Conn()
	ask := []byte(`{"run":"` + run + `","from":"b_forged"}`)
	_ = nc.PublishRequest(subject.RunQuiesce, nats.NewInbox(), ask)
	_ = nc.Publish(subject.BrokersHello, []byte(`{"id":"b_forged"}`))
	_ = nc.Flush()
	deadline := time.Now().Add(5 * time.Second)
	for nc.LastError() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := nc.LastError(); err == nil || !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
		t.Fatalf("the server let an agent publish on the brokers' fence subjects: %v", err)
	}
	if len(fb.fence.Peers()) != 0 {
		t.Fatalf("a forged heartbeat made a peer: %v", fb.fence.Peers())
	}
	if _, err := agent.Output(ctx, run, "ok", 1); err != nil {
		t.Fatalf("an effect after a forged ask: %v", err)
	}
}

// TestCloseWaitsForASlowBroker: a broker that is alive (its heartbeat
// comes during the close) but answers the close's ask late, as a starved
// machine does, is waited for: it still records a decision for the run
// before it answers, and run.close follows that decision. (Given up after
// fenceAckWait, as a silent one is, its decision followed the close.)
func TestCloseWaitsForASlowBroker(t *testing.T) {
	ns := startEmbedded(t, t.TempDir())
	o := &streamOrder{}
	fb := startFencedBroker(t, ns, o)
	nc, hello := peerHello(t, ns, fb, "b_slow")
	js, _ := jetstream.New(nc)
	rec := broker.NewRecorder(js, 5*time.Second)

	ctx := context.Background()
	run, err := fb.b.Open(ctx, broker.AppCaller(subject.Shared), &broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan *nats.Msg, 4)
	sub, err := nc.ChanSubscribe(subject.RunQuiesce, asked)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	slow := make(chan error, 1)
	go func() {
		m := <-asked
		// Alive: its heartbeats go on. Slow: it answers nothing for twice
		// the time a silent broker is given, then records its decision.
		for range 3 {
			_ = nc.Publish(subject.BrokersHello, hello)
			time.Sleep(time.Second)
		}
		ev := &journal.Event{V: journal.Version, ID: "ev_slow_decision", Run: run.ID, Type: journal.TypeDecision,
			Time: time.Now().UTC(), Effect: "e_slow", Data: []byte(`{"outcome":"refused"}`)}
		err := rec.Record(ctx, ev)
		if err == nil {
			o.note(ev)
			err = nc.Publish(m.Reply, fmt.Appendf(nil, `{"run":%q,"id":"b_slow","state":"drained"}`, run.ID))
		}
		slow <- err
	}()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := fb.b.CloseRun(cctx, broker.AppCaller(subject.Shared), &broker.CloseWork{Run: run.ID, Status: "done"}); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]journal.Type{journal.TypeRunOpen, journal.TypeDecision, journal.TypeRunClose})
	if got := o.String(); got != want {
		t.Fatalf("recorded %v, want %v", got, want)
	}
}
