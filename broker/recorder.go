package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
)

// Recorder publishes journal events to the journal stream and returns only
// once JetStream has acknowledged them: an acknowledged event is stored
// (replicated, in a cluster) and will reach the journal writer. Safe for
// concurrent use.
type Recorder struct {
	js      jetstream.JetStream
	timeout time.Duration
}

// NewRecorder returns a Recorder; timeout bounds each publish (default 5 s).
func NewRecorder(js jetstream.JetStream, timeout time.Duration) *Recorder {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Recorder{js: js, timeout: timeout}
}

// Record publishes e and waits for the stream's acknowledgement. The event
// id is the message id, so a retried publish is stored once.
func (r *Recorder) Record(ctx context.Context, e *journal.Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("%w: encode %s: %v", ErrJournal, e.Type, err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if _, err := r.js.Publish(ctx, subject.Journal(e.Run), b, jetstream.WithMsgID(e.ID), jetstream.WithExpectStream(subject.JournalStream)); err != nil {
		return fmt.Errorf("%w: publish %s for run %s: %v", ErrJournal, e.Type, e.Run, err)
	}
	return nil
}
