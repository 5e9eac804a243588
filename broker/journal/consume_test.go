package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/natstest"
	"github.com/gatehouse/gatehouse/broker/subject"
)

func startNATS(t *testing.T) jetstream.JetStream { return natstest.JetStream(t) }

func publish(t *testing.T, js jetstream.JetStream, msgID string, e Event) {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), subject.Journal(e.Run), b, jetstream.WithMsgID(msgID)); err != nil {
		t.Fatal(err)
	}
}

// consume runs Consume until stop is called, which waits for it.
func consume(t *testing.T, js jetstream.JetStream, dir string) (w *Writer, stop func()) {
	t.Helper()
	w, err := Open(dir, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Consume(ctx, js, w, ConsumeOptions{Batch: 64, AckWait: time.Second, Logger: slog.New(slog.DiscardHandler)})
	}()
	return w, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
		w.Close()
	}
}

// waitEvents waits until the journal holds n events.
func waitEvents(t *testing.T, dir string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := Verify(dir, VerifyOptions{})
		if err == nil && rep.Events >= n {
			if rep.Events > n {
				t.Fatalf("journal holds %d events, want %d", rep.Events, n)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal did not reach %d events", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConsumeEndToEnd(t *testing.T) {
	js := startNATS(t)
	if _, err := EnsureStream(context.Background(), js, 1); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var events []Event
	for i := range 300 {
		run := fmt.Sprintf("r_%026d", i%7)
		events = append(events, ev(t, run, fmt.Sprintf("e%d", i), TypeRunOpen, "", i, RunOpen{}))
	}
	for _, e := range events[:200] {
		publish(t, js, e.ID, e)
	}
	// Garbage and a misrouted event are terminated, not written.
	if _, err := js.Publish(context.Background(), subject.Journal("r_x"), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	mis, _ := json.Marshal(Event{ID: "m", Run: "r_other", Type: TypeRunOpen, Time: epoch, Data: json.RawMessage(`{}`)})
	if _, err := js.Publish(context.Background(), subject.Journal("r_x"), mis); err != nil {
		t.Fatal(err)
	}

	_, stop := consume(t, js, dir)
	waitEvents(t, dir, 200)
	stop()

	for _, e := range events[200:] {
		publish(t, js, e.ID, e)
	}
	// Redelivery of written events, under new message ids so JetStream's
	// own dedupe does not catch them: the writer must.
	for _, e := range events[50:80] {
		publish(t, js, "again-"+e.ID, e)
	}
	_, stop = consume(t, js, dir)
	waitEvents(t, dir, 300)
	stop()

	rep := verify(t, dir)
	if !rep.OK || rep.Events != 300 || rep.Runs != 7 {
		t.Fatalf("journal: %s", dump(rep))
	}
	for _, n := range rep.Notes {
		if n.Kind != NoteRunOpen {
			t.Errorf("unexpected note %+v", n)
		}
	}
	// Every message is settled by a running writer. (After a stop, messages
	// the server had already handed to the stopped pull may stay unacked
	// until a writer resumes from the ack floor; that is not a loss.)
	_, stop = consume(t, js, dir)
	defer stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ci *jetstream.ConsumerInfo
		cons, err := js.Consumer(context.Background(), subject.JournalStream, subject.JournalConsumer)
		if err == nil { // not found while the writer recreates it
			if ci, err = cons.Info(context.Background()); err == nil && ci.NumAckPending == 0 && ci.NumPending == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer not settled: %+v %v", ci, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rep := verify(t, dir); !rep.OK || rep.Events != 300 {
		t.Fatalf("journal after the last writer: %s", dump(rep))
	}
}
