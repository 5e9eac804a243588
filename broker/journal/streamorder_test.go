package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// TestStreamOrderFillsLostDeliveries: a run's decision and attempt were
// stored by the stream, but their delivery to the writer was lost (a
// leader replaced); the outcome and the run.close after them are
// delivered first. The writer must still write the run in the stream's
// order, reading the gap from the stream, so verify finds no event after
// the close; the late redelivery is then a duplicate.
func TestStreamOrderFillsLostDeliveries(t *testing.T) {
	js := startNATS(t)
	ctx := context.Background()
	stream, err := EnsureStream(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	const run = "r_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	open := RunOpen{ActingFor: policy.Principal{Tenant: "acme", Person: "u_123"}, Agent: "clerk"}
	events := []Event{
		ev(t, run, "e_1", TypeRunOpen, "", 1, open),
		ev(t, run, "e_2", TypeDecision, "x_1", 2, decision(OutcomeAllowed)),
		ev(t, run, "e_3", TypeAttempt, "x_1", 3, Attempt{Sink: "provider", Action: "call"}),
		ev(t, run, "e_4", TypeOutcome, "x_1", 4, Result{Status: "ok"}),
		ev(t, run, "e_5", TypeRunClose, "", 5, RunClose{Status: "done"}),
	}
	for _, e := range events {
		publish(t, js, e.ID, e)
	}
	cons, err := js.CreateConsumer(ctx, subject.JournalStream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	fetched, err := cons.Fetch(len(events), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var delivered []jetstream.Msg // by stream sequence - 1
	for m := range fetched.Messages() {
		delivered = append(delivered, m)
	}
	if len(delivered) != len(events) {
		t.Fatalf("fetched %d messages, want %d", len(delivered), len(events))
	}

	o := &streamOrder{stream: stream, log: slog.New(slog.DiscardHandler)}
	dir := t.TempDir()
	w, err := Open(dir, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write := func(batch ...jetstream.Msg) []string {
		t.Helper()
		arranged := o.arrange(ctx, batch)
		var ids []string
		for _, m := range arranged {
			var e Event
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, e.ID)
		}
		if err := writeBatch(w, arranged, o.log, time.Second); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if got := fmt.Sprint(write(delivered[0])); got != "[e_1]" {
		t.Fatalf("first batch %s", got)
	}
	// The close and the outcome, delivered out of order; the decision and
	// attempt lost in flight.
	if got := fmt.Sprint(write(delivered[4], delivered[3])); got != "[e_2 e_3 e_4 e_5]" {
		t.Fatalf("a batch after a gap is written as %s, want the gap read from the stream first", got)
	}
	// Their redelivery, after AckWait: duplicates.
	if got := fmt.Sprint(write(delivered[1], delivered[2])); got != "[e_2 e_3]" {
		t.Fatalf("redelivery arranged as %s", got)
	}
	rep := verify(t, dir)
	if !rep.OK || rep.Events != len(events) {
		t.Fatalf("verify: %s", dump(rep))
	}
	var got []string
	for _, l := range readLines(t, runPath(dir, run)) {
		var e Event
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, e.ID)
	}
	if fmt.Sprint(got) != "[e_1 e_2 e_3 e_4 e_5]" {
		t.Fatalf("run file holds %v", got)
	}
}
