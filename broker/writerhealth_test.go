package broker_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// TestJournalGateRefusesWhileTheWriterCannotWrite: a writer reporting it
// cannot write makes the gate refuse to record (strict mode then refuses
// the effect) without telling the agent the operator's reason; a writer
// reporting ok again lets records through. The journal lag reaches 0 once
// the writer has everything.
func TestJournalGateRefusesWhileTheWriterCannotWrite(t *testing.T) {
	w := start(t, policy.ModeStrict, "")
	ctx := ctxT(t)
	gate, err := broker.NewJournalGate(ctx, w.js, broker.NewRecorder(w.js, 0), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close()
	kv, err := broker.OpenWriterHealth(ctx, w.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	ev := func() *journal.Event {
		return &journal.Event{V: journal.Version, ID: "ev_" + time.Now().Format("150405.000000000"), Run: "r_gatetest",
			Type: journal.TypeRunClose, Time: time.Now().UTC(), Data: []byte(`{"status":"done"}`)}
	}
	if err := gate.Record(ctx, ev()); err != nil {
		t.Fatalf("no health reported: %v", err)
	}
	set := func(h broker.WriterHealth) {
		t.Helper()
		if err := broker.PutWriterHealth(ctx, kv, h); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for gate.Healthy() == nil || gate.Healthy().State != h.State {
			if time.Now().After(deadline) {
				t.Fatalf("the gate never saw %s", h.State)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	set(broker.WriterHealth{State: broker.WriterFailing, Reason: "write /srv/journal/runs/x.jsonl: no space left on device", Since: time.Now()})
	err = gate.Record(ctx, ev())
	if !errors.Is(err, broker.ErrJournal) {
		t.Fatalf("writer failing: Record = %v, want ErrJournal", err)
	}
	if code, _ := broker.CodeOf(err); code != broker.CodeJournal {
		t.Fatalf("code %s, want %s", code, broker.CodeJournal)
	}
	if strings.Contains(err.Error(), "/srv/journal") {
		t.Fatalf("the operator's reason reached the agent: %v", err)
	}
	set(broker.WriterHealth{State: broker.WriterOK, Since: time.Now()})
	if err := gate.Record(ctx, ev()); err != nil {
		t.Fatalf("writer ok again: %v", err)
	}

	// The harness runs a journal writer: the lag reaches 0 with the ack
	// floor at the stream's last sequence.
	deadline := time.Now().Add(10 * time.Second)
	for {
		lag, err := broker.ReadJournalLag(ctx, w.js)
		if err != nil {
			t.Fatal(err)
		}
		if lag.LastSeq > 0 && lag.Lag == 0 && lag.AckFloor == lag.LastSeq && lag.Pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal lag never reached 0: %+v", lag)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReadWriterHealth: what the writer put last is what status reads
// (from the bucket stream's leader), and no health at all is
// ErrWriterHealthUnknown, not a healthy writer.
func TestReadWriterHealth(t *testing.T) {
	w := start(t, policy.ModeStrict, "")
	ctx := ctxT(t)
	if _, err := broker.ReadWriterHealth(ctx, w.js); !errors.Is(err, broker.ErrWriterHealthUnknown) {
		t.Fatalf("no bucket: %v, want ErrWriterHealthUnknown", err)
	}
	kv, err := broker.OpenWriterHealth(ctx, w.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := broker.ReadWriterHealth(ctx, w.js); !errors.Is(err, broker.ErrWriterHealthUnknown) {
		t.Fatalf("empty bucket: %v, want ErrWriterHealthUnknown", err)
	}
	since := time.Date(2026, 12, 1, 14, 42, 25, 0, time.UTC)
	for _, h := range []broker.WriterHealth{{State: broker.WriterOK, Since: since}, {State: broker.WriterFailing, Reason: "no space left on device", Since: since.Add(time.Second)}} {
		if err := broker.PutWriterHealth(ctx, kv, h); err != nil {
			t.Fatal(err)
		}
		got, err := broker.ReadWriterHealth(ctx, w.js)
		if err != nil || got.State != h.State || got.Reason != h.Reason || !got.Since.Equal(h.Since) {
			t.Fatalf("read %+v %v, want %+v", got, err, h)
		}
	}
}
