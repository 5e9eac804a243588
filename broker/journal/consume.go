package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/subject"
)

// Stream settings. Events stay in the stream for StreamMaxAge after they
// are written, for other readers (a dashboard); that is also how long the
// journal writer may be down before events are lost.
const (
	StreamMaxAge     = 7 * 24 * time.Hour
	StreamDuplicates = 2 * time.Minute
	// ConsumerMaxAckPending bounds events delivered but not yet acked.
	ConsumerMaxAckPending = 4096
)

// EnsureStream creates the journal stream, or updates it to these
// settings: subjects subject.JournalAll, file storage, limits retention
// with StreamMaxAge (not work-queue, so other consumers can read the same
// events), a duplicate window of StreamDuplicates (brokers set
// Nats-Msg-Id to the event id, so a retried publish is stored once),
// deletes and purges denied, and replicas copies (at least 1).
func EnsureStream(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.Stream, error) {
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        subject.JournalStream,
		Description: "Gatehouse journal events, from brokers to the journal writer",
		Subjects:    []string{subject.JournalAll},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      StreamMaxAge,
		Duplicates:  StreamDuplicates,
		Discard:     jetstream.DiscardOld,
		Replicas:    max(replicas, 1),
		DenyDelete:  true,
		DenyPurge:   true,
	})
	if err != nil {
		return nil, fmt.Errorf("journal: ensure stream %s: %w", subject.JournalStream, err)
	}
	return s, nil
}

// ConsumeOptions configure Consume. The zero value is usable.
type ConsumeOptions struct {
	// Batch is the most events passed to one Append (one group fsync).
	// Default 256; at most ConsumerMaxAckPending.
	Batch int
	// Logger receives per-message problems. Default slog.Default().
	Logger *slog.Logger
	// RetryDelay is how long a message whose run cannot be written now
	// (ErrCorruptRun, an I/O error opening it) waits before redelivery.
	// Default 30s.
	RetryDelay time.Duration
	// AckWait is how long the server waits for an ack before redelivering.
	// It bounds how late events come when a writer stops or crashes with
	// events delivered to it but not written: JetStream may also deliver to
	// the stopped writer's last pull request until it expires. Default 30s.
	AckWait time.Duration
}

// Consume runs the journal writer's durable pull consumer
// (subject.JournalConsumer, created or updated here, explicit acks) on the
// stream EnsureStream made, and writes what it delivers with w until ctx
// is done; then it returns nil. It returns an error when the consumer
// cannot be set up or stops delivering, or when w fails (ErrFailed); the
// unacked messages are then redelivered to the next Consume.
//
// Each message is acked only after the Append holding it returned: it is
// durable, or it was a duplicate of an event already durable. A message
// that is not a journal event (bad JSON, subject and run disagreeing, an
// event Append finds invalid) is terminated and logged: it can never be
// placed in a run. A message whose run cannot be written now is nak'ed
// with RetryDelay.
//
// Messages are acked one by one (explicit policy) rather than with
// ack-all, so that one terminated or delayed message never acks or holds
// back its neighbours. Consume owns one goroutine, which pulls messages,
// and stops it before returning. Run one Consume per Writer.
func Consume(ctx context.Context, js jetstream.JetStream, w *Writer, opts ConsumeOptions) error {
	if opts.Batch <= 0 {
		opts.Batch = 256
	}
	opts.Batch = min(opts.Batch, ConsumerMaxAckPending)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.AckWait <= 0 {
		opts.AckWait = 30 * time.Second
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = 30 * time.Second
	}
	log := opts.Logger.With("consumer", subject.JournalConsumer)

	cons, err := resumeConsumer(ctx, js, jetstream.ConsumerConfig{
		Durable:       subject.JournalConsumer,
		Description:   "Gatehouse journal writer",
		FilterSubject: subject.JournalAll,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       opts.AckWait,
		MaxAckPending: ConsumerMaxAckPending,
	}, log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("journal: consumer %s: %w", subject.JournalConsumer, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(2*opts.Batch), jetstream.PullExpiry(5*time.Second))
	if err != nil {
		return fmt.Errorf("journal: consumer %s: %w", subject.JournalConsumer, err)
	}

	stream, err := js.Stream(ctx, subject.JournalStream)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("journal: stream %s: %w", subject.JournalStream, err)
	}
	order := &streamOrder{stream: stream, log: log}

	// The puller moves messages from the iterator into msgs, so the loop
	// below can take whatever is ready without waiting.
	msgs := make(chan jetstream.Msg, opts.Batch)
	pullErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(msgs)
		for {
			m, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				if ctx.Err() == nil {
					pullErr <- err
				}
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	})
	defer func() {
		it.Stop()
		for m := range msgs { // pulled but not written: redeliver now
			_ = m.Nak()
		}
		wg.Wait()
	}()

	batch := make([]jetstream.Msg, 0, opts.Batch)
	for {
		batch = batch[:0]
		m, ok := <-msgs
		if !ok {
			select {
			case err := <-pullErr:
				return fmt.Errorf("journal: consumer %s: %w", subject.JournalConsumer, err)
			default:
				return nil
			}
		}
		batch = append(batch, m)
	fill:
		for len(batch) < opts.Batch {
			select {
			case m, ok := <-msgs:
				if !ok {
					break fill
				}
				batch = append(batch, m)
			default:
				break fill
			}
		}
		if err := writeBatch(w, order.arrange(ctx, batch), log, opts.RetryDelay); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// resumeConsumer (re)creates the writer's durable consumer so that it
// delivers, in stream order, everything after its ack floor.
//
// Why: a writer that stopped or crashed leaves messages delivered but not
// acked. JetStream redelivers those only after AckWait, after newer ones,
// so a restarted writer would see an effect.attempt before the
// policy.decision published before it. Starting again from the ack floor
// delivers every unacked message in the order brokers published it; those
// already written are dropped by the writer's dedupe. Only one writer
// consumes (it holds the journal directory's lock), so nothing else is
// using the consumer while it is replaced.
func resumeConsumer(ctx context.Context, js jetstream.JetStream, cfg jetstream.ConsumerConfig, log *slog.Logger) (jetstream.Consumer, error) {
	old, err := js.Consumer(ctx, subject.JournalStream, cfg.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return js.CreateOrUpdateConsumer(ctx, subject.JournalStream, cfg)
	case err != nil:
		return nil, err
	}
	info, err := old.Info(ctx)
	if err != nil {
		return nil, err
	}
	if err := js.DeleteConsumer(ctx, subject.JournalStream, cfg.Durable); err != nil {
		return nil, err
	}
	cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
	cfg.OptStartSeq = info.AckFloor.Stream + 1
	log.Info("journal: resuming after the ack floor, in stream order",
		"start_seq", cfg.OptStartSeq, "unacked", info.NumAckPending, "pending", info.NumPending)
	return js.CreateOrUpdateConsumer(ctx, subject.JournalStream, cfg)
}

// DecodeMessage reads a journal stream message: one event as a JSON
// object, or a group of events of one run recorded together (a
// decision and its attempt) as a JSON array. Every event must name the
// run the subject names.
func DecodeMessage(subj string, data []byte) ([]Event, error) {
	var events []Event
	var err error
	if d := bytes.TrimLeft(data, " \t\r\n"); len(d) > 0 && d[0] == '[' {
		err = json.Unmarshal(d, &events)
		if err == nil && len(events) == 0 {
			err = errors.New("empty group")
		}
	} else {
		var e Event
		err = json.Unmarshal(data, &e)
		events = []Event{e}
	}
	if err != nil {
		return nil, err
	}
	run, ok := strings.CutPrefix(subj, subject.JournalPrefix+".")
	for _, e := range events {
		if !ok || run != e.Run {
			return nil, fmt.Errorf("subject %q does not name run %q", subj, e.Run)
		}
	}
	return events, nil
}

// writeBatch decodes, appends and settles one batch of messages. A
// message holding a group is acked when every event of it is written, and
// otherwise settled as its worst event: terminated when one can never be
// written, else redelivered.
func writeBatch(w *Writer, batch []jetstream.Msg, log *slog.Logger, retry time.Duration) error {
	events := make([]Event, 0, len(batch))
	held := make([]int, 0, len(batch)) // message of events[i], an index into msgs
	msgs := make([]jetstream.Msg, 0, len(batch))
	for _, m := range batch {
		evs, err := DecodeMessage(m.Subject(), m.Data())
		if err != nil {
			terminate(m, log, err)
			continue
		}
		for _, e := range evs {
			events = append(events, e)
			held = append(held, len(msgs))
		}
		msgs = append(msgs, m)
	}
	if len(events) == 0 {
		return nil
	}
	_, err := w.Append(events)
	failed := make(map[int]error) // by message
	if es, ok := errors.AsType[EventErrors](err); ok {
		for _, e := range es {
			mi := held[e.Index]
			if prev, seen := failed[mi]; !seen || errors.Is(prev, ErrInvalidEvent) && !errors.Is(e.Err, ErrInvalidEvent) {
				failed[mi] = e.Err // a retryable failure wins: retry rather than drop the group
			}
		}
	} else if err != nil {
		for _, m := range msgs {
			_ = m.Nak()
		}
		return fmt.Errorf("journal: append: %w", err)
	}
	for i, m := range msgs {
		err, bad := failed[i]
		switch {
		case !bad:
			if err := m.Ack(); err != nil {
				// Redelivery is deduped; nothing is lost.
				log.Warn("journal: ack failed", "subject", m.Subject(), "err", err)
			}
		case errors.Is(err, ErrInvalidEvent):
			terminate(m, log, err)
		default:
			log.Error("journal: event not written, will retry", "subject", m.Subject(), "err", err)
			_ = m.NakWithDelay(retry)
		}
	}
	return nil
}

func terminate(m jetstream.Msg, log *slog.Logger, why error) {
	attrs := []any{"subject", m.Subject(), "err", why}
	if md, err := m.Metadata(); err == nil {
		attrs = append(attrs, "stream_seq", md.Sequence.Stream)
	}
	log.Error("journal: message is not a writable event; terminated", attrs...)
	if err := m.TermWithReason(why.Error()); err != nil {
		log.Warn("journal: term failed", "subject", m.Subject(), "err", err)
	}
}
