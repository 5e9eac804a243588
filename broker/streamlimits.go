package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamLimits bound a JetStream stream that agents fill through a sink
// (the peer queue, outputs), so no agent can fill JetStream's storage or
// push out what others stored.
//
// Apply sets them with discard-new: a stream at its bytes bound, or a
// subject at its message bound, refuses the new message; nothing stored is
// ever deleted to make room (discard-old would let one agent evict another
// tenant's unread messages). Where that is and is not a guarantee:
//
//   - MaxMsgsPerSubject bounds one subject: for the peer stream one
//     recipient's queue from one run (gatehouse.v1.peer.<agent>.<run>),
//     for outputs one run's outputs. One run cannot pile more than that on
//     a recipient, and a full subject refuses only its own new messages.
//   - MaxBytes bounds the whole stream. Once it is full every new message
//     is refused, whoever sends it, until recipients read theirs (the peer
//     queue) or they age out: a flood from one tenant can deny others new
//     messages, never take their stored ones. JetStream has no byte bound
//     per subject or per tenant.
//   - MaxMsgSize bounds one message; CheckSize refuses a request whose
//     content would not fit before anything is decided (TOO_LARGE).
type StreamLimits struct {
	MaxBytes          int64
	MaxMsgSize        int32
	MaxMsgsPerSubject int64
}

// DefaultStreamLimits: 1 GiB a stream, 1 MiB a message (NATS's default
// payload), 10000 messages a subject.
var DefaultStreamLimits = StreamLimits{MaxBytes: 1 << 30, MaxMsgSize: 1 << 20, MaxMsgsPerSubject: 10000}

// StreamEnvelope is the room CheckSize leaves for what a sink wraps
// content in (run, sender, time, kind).
const StreamEnvelope = 1 << 10

// ErrTooLarge: the request's content would not fit in one message of the
// stream it goes to; nothing was decided.
var ErrTooLarge = errors.New("content larger than this broker's message bound")

// ErrStreamFull is the failure of an effect the stream refused to store:
// the stream or the subject is at its bound. Its outcome's error is
// "stream-full".
var ErrStreamFull = NewOutcomeError("stream-full", "the stream is at its bound and refuses new messages")

// OrDefault returns l with each zero (or negative) bound DefaultStreamLimits'.
func (l StreamLimits) OrDefault() StreamLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultStreamLimits.MaxBytes
	}
	if l.MaxMsgSize <= 0 {
		l.MaxMsgSize = DefaultStreamLimits.MaxMsgSize
	}
	if l.MaxMsgsPerSubject <= 0 {
		l.MaxMsgsPerSubject = DefaultStreamLimits.MaxMsgsPerSubject
	}
	return l
}

// Apply sets l (OrDefault) on c, with discard-new for the stream and per
// subject.
func (l StreamLimits) Apply(c *jetstream.StreamConfig) {
	l = l.OrDefault()
	c.MaxBytes, c.MaxMsgSize, c.MaxMsgsPerSubject = l.MaxBytes, l.MaxMsgSize, l.MaxMsgsPerSubject
	c.Discard, c.DiscardNewPerSubject = jetstream.DiscardNew, true
}

// CheckSize refuses content of n bytes that would not fit in one message
// with its envelope (ErrTooLarge, wrapping ErrBadRequest too).
func (l StreamLimits) CheckSize(what string, n int) error {
	l = l.OrDefault()
	if most := int(l.MaxMsgSize) - StreamEnvelope; n > most {
		return fmt.Errorf("%w: %w: the %s is %d bytes, the most this broker keeps in one message is %d", ErrTooLarge, ErrBadRequest, what, n, max(most, 0))
	}
	return nil
}

// StreamFull wraps err from a publish into a limited stream with
// ErrStreamFull when JetStream refused the message for a bound; other
// errors come back as they are.
func StreamFull(err error) error {
	var apiErr *jetstream.APIError
	if err == nil || !errors.As(err, &apiErr) {
		return err
	}
	msg := strings.ToLower(apiErr.Description)
	if apiErr.ErrorCode == 10054 || // JSStreamMessageExceedsMaximumErr

		strings.Contains(msg, "maximum bytes exceeded") || strings.Contains(msg, "maximum messages") {
		return fmt.Errorf("%w: %v", ErrStreamFull, err)
	}
	return err
}

// MinStreamBytes is the smallest bound CreateLimitedStream falls back to.
const MinStreamBytes = 16 << 20

// CreateLimitedStream creates or updates the stream cfg (its bounds set by
// Apply). JetStream reserves a stream's MaxBytes against the storage it
// may use (75% of the free disk on the embedded server, an account's
// max_file_store on another): when the bound cannot be reserved, it is
// halved, down to MinStreamBytes, and the stream made with the largest
// that fits, so a small disk gives a smaller bound, not a serve that
// cannot start. It returns the bound the stream has.
func CreateLimitedStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (int64, error) {
	for {
		_, err := js.CreateOrUpdateStream(ctx, cfg)
		if err == nil || !insufficientStorage(err) || cfg.MaxBytes <= MinStreamBytes {
			return cfg.MaxBytes, err
		}
		cfg.MaxBytes = max(cfg.MaxBytes/2, MinStreamBytes)
	}
}

// insufficientStorage reports whether err is JetStream refusing a stream
// whose bounds it cannot reserve.
func insufficientStorage(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == 10047 || apiErr.ErrorCode == 10023 || strings.Contains(strings.ToLower(apiErr.Description), "insufficient")
}
