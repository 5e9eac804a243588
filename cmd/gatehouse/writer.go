package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/journal"
)

const writerUsage = `Usage: gatehouse writer --nats-url URL [--nats-creds FILE] [--journal-dir DIR]

Runs only the journal writer: it consumes the journal stream durably,
appends each run's events to its run file and the head log, fsyncs, and
only then acknowledges. Run exactly one writer per journal directory.
`

func cmdWriter(ctx context.Context, env *cliEnv, args []string) error {
	var natsURL, creds, dir, logFormat, logLevel string
	var replicas int
	fs := newEnvFlags(env, "writer", writerUsage)
	fs.stringVar(&natsURL, "nats-url", "", "NATS with JetStream (required)")
	fs.stringVar(&creds, "nats-creds", "", "nkey seed file")
	fs.stringVar(&dir, "journal-dir", ".gatehouse/journal", "the journal directory")
	fs.intVar(&replicas, "replicas", 1, "JetStream replicas for the journal stream")
	fs.stringVar(&logFormat, "log-format", "text", "text or json")
	fs.stringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	if _, err := fs.parse(args); err != nil {
		return err
	}
	if natsURL == "" {
		return usageError("--nats-url is required")
	}
	log, err := newLogger(env, logFormat, logLevel)
	if err != nil {
		return err
	}
	nc, err := connectNATS(natsURL, creds, "gatehouse-writer")
	if err != nil {
		return fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := journal.EnsureStream(ctx, js, replicas); err != nil {
		return fmt.Errorf("journal stream: %w", err)
	}
	w, err := journal.Open(dir, journal.WriterOptions{Logger: log})
	if err != nil {
		return err
	}
	log.Info("journal writer running", "dir", dir, "nats", natsURL)
	err = journal.Consume(ctx, js, w, journal.ConsumeOptions{Logger: log})
	if cerr := w.Close(); err == nil || errors.Is(err, context.Canceled) {
		err = cerr
	}
	return err
}
