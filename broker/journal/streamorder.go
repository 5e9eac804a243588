package journal

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streamOrder keeps the writer's appends in the stream's order.
//
// JetStream delivers a consumer's messages in stream order, except
// redeliveries: a message delivered but never acknowledged (its delivery
// lost when a stream or consumer leader was replaced, or cut off with a
// connection) comes again only after AckWait, after newer ones. Written
// as delivered, a decision a broker had recorded (acknowledged by the
// stream) could then follow a run.close the application made after it,
// and verify would rightly report an event after close on an honest
// journal. So when a message comes after a gap in the stream sequence,
// the messages of the gap are read from the stream itself and written
// first; their redelivery later is a duplicate the writer drops.
//
// The consumer takes every subject of the stream, so its sequences are
// contiguous: a gap is always messages delivered out of order, never
// messages of another consumer.
type streamOrder struct {
	stream jetstream.Stream
	log    *slog.Logger
	next   uint64 // the stream sequence expected next; 0 before the first message
}

const (
	// maxGapFill bounds the messages of one gap read from the stream: a
	// gap wider than what can be delivered and not acknowledged
	// (ConsumerMaxAckPending) is no lost delivery (the consumer was reset).
	maxGapFill = ConsumerMaxAckPending
	// gapFillWait bounds the time spent reading a gap's message from a
	// stream that is not answering (a leader being elected); past it the
	// gap is left to redelivery.
	gapFillWait = 10 * time.Second
)

// arrange returns batch in stream order, preceded by the messages of any
// gap before it. A message at or below a sequence already seen (a
// redelivery) is kept: the writer's dedupe drops it, or writes it if it
// was not written (one that waited for a retry).
func (o *streamOrder) arrange(ctx context.Context, batch []jetstream.Msg) []jetstream.Msg {
	seqs := make(map[jetstream.Msg]uint64, len(batch))
	for _, m := range batch {
		if md, err := m.Metadata(); err == nil {
			seqs[m] = md.Sequence.Stream
		}
	}
	slices.SortStableFunc(batch, func(a, b jetstream.Msg) int { return cmp.Compare(seqs[a], seqs[b]) })
	var out []jetstream.Msg
	for _, m := range batch {
		seq := seqs[m]
		if seq == 0 { // no metadata: nothing to order it by
			out = append(out, m)
			continue
		}
		if o.next != 0 && seq > o.next {
			out = append(out, o.fill(ctx, o.next, seq)...)
		}
		out = append(out, m)
		o.next = max(o.next, seq+1)
	}
	return out
}

// fill reads stream messages from..to-1 (a gap) from the stream.
func (o *streamOrder) fill(ctx context.Context, from, to uint64) []jetstream.Msg {
	if to-from > maxGapFill {
		o.log.Warn("journal: a gap in the stream too wide to be lost deliveries; left to redelivery", "from_seq", from, "to_seq", to-1)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, gapFillWait)
	defer cancel()
	var out []jetstream.Msg
	for seq := from; seq < to; seq++ {
		for {
			raw, err := o.stream.GetMsg(ctx, seq)
			if err == nil {
				out = append(out, &storedMsg{raw: raw})
				break
			}
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break // aged out: nothing to write
			}
			if ctx.Err() != nil {
				o.log.Warn("journal: could not read a gap in the stream; its messages are written when redelivered, after newer ones",
					"from_seq", seq, "to_seq", to-1, "err", err)
				return out
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	o.log.Info("journal: messages delivered out of order; read from the stream to write them in order", "from_seq", from, "to_seq", to-1, "read", len(out))
	return out
}

// storedMsg is a message read from the stream, not delivered by the
// consumer: settling it settles nothing, since its delivery is still
// pending on the consumer and will come again (a duplicate then, acked).
type storedMsg struct{ raw *jetstream.RawStreamMsg }

var _ jetstream.Msg = (*storedMsg)(nil)

func (m *storedMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.raw.Sequence}, Timestamp: m.raw.Time}, nil
}
func (m *storedMsg) Data() []byte                     { return m.raw.Data }
func (m *storedMsg) Headers() nats.Header             { return m.raw.Header }
func (m *storedMsg) Subject() string                  { return m.raw.Subject }
func (m *storedMsg) Reply() string                    { return "" }
func (m *storedMsg) Ack() error                       { return nil }
func (m *storedMsg) DoubleAck(context.Context) error  { return nil }
func (m *storedMsg) Nak() error                       { return nil }
func (m *storedMsg) NakWithDelay(time.Duration) error { return nil }
func (m *storedMsg) InProgress() error                { return nil }
func (m *storedMsg) Term() error                      { return nil }
func (m *storedMsg) TermWithReason(string) error      { return nil }
