package main

import (
	"errors"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/gatehouse/gatehouse/broker/subject"
)

// logNATSErrors sends a connection's asynchronous errors to the log,
// instead of nats.go's default of printing them on stderr. The server
// refusing the start-up probe of the replies connection
// (broker.ProbeReplies) is what the probe wants, so it is a debug line,
// not the "permissions violation" every start used to print.
func logNATSErrors(log *slog.Logger, conns ...*nats.Conn) {
	for _, c := range conns {
		if c == nil {
			continue
		}
		c.SetErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject.ProbeSubject) {
				log.Debug("NATS refused the replies connection's probe, as it should", "err", err)
				return
			}
			args := []any{"err", err}
			if sub != nil {
				args = append(args, "subject", sub.Subject)
			}
			log.Warn("NATS connection error", args...)
		})
	}
}
