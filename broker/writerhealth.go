package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// WriterHealthBucket is the JetStream KV bucket where the journal writer
// says whether it can write (key WriterHealthKey). Brokers in strict mode
// read it through a JournalGate.
const (
	WriterHealthBucket = "gatehouse_writer"
	WriterHealthKey    = "health"
)

// WriterState is what the journal writer reports about itself.
type WriterState string

const (
	// WriterOK: the writer is writing (or has nothing to write).
	WriterOK WriterState = "ok"
	// WriterFailing: the writer cannot write the journal (a full disk, an
	// unwritable folder); events wait in the stream until it can.
	WriterFailing WriterState = "failing"
)

// WriterHealth is the value under WriterHealthKey. Reason says what failed,
// as the operating system said it (a path and an errno, never content).
type WriterHealth struct {
	State  WriterState `json:"state"`
	Reason string      `json:"reason,omitempty"`
	Since  time.Time   `json:"since"`
}

// OpenWriterHealth opens (creating if needed) the writer health bucket.
func OpenWriterHealth(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: WriterHealthBucket, Description: "Gatehouse journal writer health: can it write the journal",
		Storage: jetstream.FileStorage, Replicas: max(replicas, 1), History: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %v", ErrJournal, WriterHealthBucket, err)
	}
	return kv, nil
}

// PutWriterHealth records the writer's health.
func PutWriterHealth(ctx context.Context, kv jetstream.KeyValue, h WriterHealth) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, WriterHealthKey, b)
	return err
}

// JournalGate is a Journal that refuses to record while the journal writer
// reports it cannot write (WriterFailing), so strict mode refuses effects
// whose record would sit in the stream with nowhere to go (a full disk).
// Otherwise it hands every event to the Journal it wraps. A missing or
// unreadable health value is taken as healthy: a writer that is merely
// down or restarting leaves events durable in the stream, which is the
// promise strict mode keeps.
//
// Its one goroutine watches the bucket; Close stops it. Safe for
// concurrent use.
type JournalGate struct {
	j      Journal
	state  atomic.Pointer[WriterHealth]
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	_ GroupJournal     = (*JournalGate)(nil)
	_ PipelinedJournal = (*JournalGate)(nil)
)

// NewJournalGate wraps j and starts watching the writer's health.
func NewJournalGate(ctx context.Context, js jetstream.JetStream, j Journal, replicas int, log *slog.Logger) (*JournalGate, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kv, err := OpenWriterHealth(ctx, js, replicas)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := kv.Watch(wctx, WriterHealthKey)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%w: watch %s: %v", ErrJournal, WriterHealthBucket, err)
	}
	g := &JournalGate{j: j, cancel: cancel}
	g.wg.Go(func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-wctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					// The watch ended without Close: forget the last state
					// rather than keep refusing (or allowing) on news that
					// can no longer change. JetStream's acks still gate
					// every record.
					g.state.Store(nil)
					log.Warn("journal writer health: watch ended; no longer gating on it")
					return
				}
				if e == nil {
					continue // the initial values have been delivered
				}
				if e.Operation() != jetstream.KeyValuePut {
					g.state.Store(nil) // deleted or purged: no word from the writer
					continue
				}
				var h WriterHealth
				if json.Unmarshal(e.Value(), &h) != nil {
					continue
				}
				if prev := g.state.Swap(&h); prev == nil || prev.State != h.State {
					log.Info("journal writer health", "state", h.State, "reason", h.Reason)
				}
			}
		}
	})
	return g, nil
}

// errWriterFailing is wrapped in ErrJournal by Record.
var errWriterFailing = errors.New("the journal writer reports it cannot write")

// refusing is the error while the writer reports it cannot write, else
// nil. The reason (a path, an errno) is for operators: it is logged when
// the state changes and shown by status, not sent to agents.
func (g *JournalGate) refusing() error {
	if h := g.state.Load(); h != nil && h.State == WriterFailing {
		return fmt.Errorf("%w: %w (since %s)", ErrJournal, errWriterFailing, h.Since.UTC().Format(time.RFC3339))
	}
	return nil
}

// Record records e unless the writer reports it cannot write.
func (g *JournalGate) Record(ctx context.Context, e *journal.Event) error {
	if err := g.refusing(); err != nil {
		return err
	}
	return g.j.Record(ctx, e)
}

// RecordGroup records events together unless the writer reports it
// cannot write.
func (g *JournalGate) RecordGroup(ctx context.Context, events ...*journal.Event) error {
	if err := g.refusing(); err != nil {
		return err
	}
	return recordGroup(ctx, g.j, events)
}

// RecordLater records e without waiting unless the writer reports it
// cannot write. An outcome is of an effect that happened: it is handed
// on even then, since it waits in the stream rather than piling up more
// effects.
func (g *JournalGate) RecordLater(e *journal.Event, done func(error)) {
	recordLater(g.j, e, done)
}

// Healthy reports the writer's last known health (nil: none reported).
func (g *JournalGate) Healthy() *WriterHealth { return g.state.Load() }

// Close stops watching.
func (g *JournalGate) Close() {
	g.cancel()
	g.wg.Wait()
}

// ReadWriterHealth reads the writer's health from the leader of its
// bucket's stream. A KV Get may be answered by any replica (direct get),
// and a replica that has not yet applied the latest put answers the one
// before: on a cluster, an operator asking right after the writer failed
// could be told it is fine. ErrWriterHealthUnknown: no health recorded.
func ReadWriterHealth(ctx context.Context, js jetstream.JetStream) (WriterHealth, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + WriterHealthBucket + "." + WriterHealthKey})
	msg, err := js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+WriterHealthBucket, req)
	if err != nil {
		return WriterHealth{}, fmt.Errorf("writer health: %w", err)
	}
	var resp struct {
		Message *struct {
			Data []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return WriterHealth{}, fmt.Errorf("writer health: %w", err)
	}
	switch {
	case resp.Error != nil && (resp.Error.Code == 404 || resp.Error.ErrCode == int(jetstream.JSErrCodeMessageNotFound) || resp.Error.ErrCode == int(jetstream.JSErrCodeStreamNotFound)):
		return WriterHealth{}, ErrWriterHealthUnknown
	case resp.Error != nil:
		return WriterHealth{}, fmt.Errorf("writer health: %s", resp.Error.Description)
	case resp.Message == nil:
		return WriterHealth{}, ErrWriterHealthUnknown
	}
	var h WriterHealth
	if err := json.Unmarshal(resp.Message.Data, &h); err != nil {
		return WriterHealth{}, fmt.Errorf("writer health: %w", err)
	}
	return h, nil
}

// ErrWriterHealthUnknown: no writer has recorded its health yet.
var ErrWriterHealthUnknown = errors.New("no writer health recorded")
