package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// startupPatience is how long serve and writer keep asking JetStream for
// the journal stream at start. Each JetStream API call times out after
// seconds; on a cluster that is still electing leaders, or on a busy
// machine, creating an R3 stream can take longer than one call waits, and
// giving up at the first timeout made the process exit at start.
const startupPatience = 2 * time.Minute

// ensureJournalStream is journal.EnsureStream, asked again after a
// timeout until startupPatience has passed, saying so in the log.
func ensureJournalStream(ctx context.Context, js jetstream.JetStream, replicas int, log *slog.Logger) error {
	deadline := time.Now().Add(startupPatience)
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err := journal.EnsureStream(actx, js, replicas)
		cancel()
		if err == nil {
			return nil
		}
		timedOut := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
			errors.Is(err, nats.ErrNoResponders)
		if !timedOut || ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("journal stream: %w", err)
		}
		log.Warn("JetStream did not answer in time for the journal stream; asking again", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("journal stream: %w", ctx.Err())
		case <-time.After(time.Duration(min(attempt, 5)) * time.Second):
		}
	}
}
