package main

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

const writerUsage = `Usage: gatehouse writer --nats-url URL [--nats-creds FILE] [--journal-dir DIR] [--http ADDR] [--pprof ADDR]
                        [--signing-key-file FILE --log-origin NAME [--witness URL]... [--checkpoint-interval D]]

Runs only the journal writer: it consumes the journal stream durably,
appends each run's events to its run file and the head log, fsyncs, and
only then acknowledges. Run exactly one writer per journal directory.
When the journal cannot be written (a full disk) it says so in the
gatehouse_writer bucket (strict brokers then refuse effects) and retries.

With a signing key it signs every event, and signs a checkpoint of the
head log every --checkpoint-interval when it grew, submitting each to
every --witness for a cosignature.

With --http it listens there at once, before it connects to NATS, and
logs the address ("writer health, metrics and checkpoints", url=...; so
--http 127.0.0.1:0 picks a free port): /healthz answers from the start,
/readyz and the rest 503 until the writer is up. It serves /healthz,
/readyz, /metrics (events written,
journal lag) and, with a signing key, the checkpoints: GET /checkpoint
(the latest; ?fresh=1 signs one first when the log grew), POST
/checkpoint (sign one now, witnesses cosign it; replies with it),
/checkpoint/key, /checkpoint/proof?old=N&new=M and /.well-known/did.json.
With --pprof it serves Go's /debug/pprof/ profiles on that address (an
operator's; keep it private).
`

func cmdWriter(ctx context.Context, env *cliEnv, args []string) error {
	var natsURL, creds, dir, logFormat, logLevel, httpAddr, pprofAddr string
	var integrity integrityFlags
	var replicas int
	fs := newEnvFlags(env, "writer", writerUsage)
	fs.envAll = true
	fs.stringVar(&natsURL, "nats-url", "", "NATS with JetStream (required)")
	fs.stringVar(&creds, "nats-creds", "", "nkey seed file")
	fs.stringVar(&dir, "journal-dir", ".gatehouse/journal", "the journal directory")
	fs.intVar(&replicas, "replicas", 1, "JetStream replicas for the journal stream")
	fs.stringVar(&httpAddr, "http", "", "serve /healthz, /readyz and /metrics on this address (empty: off)")
	fs.stringVar(&pprofAddr, "pprof", "", pprofUsage)
	integrity.register(fs)
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
	// Listen first: the writer is alive (and says where) while it connects
	// to NATS and opens the journal, which on a busy cluster takes a while.
	var h *healthServer
	if httpAddr != "" {
		if h, err = listenHealth(httpAddr, log); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		defer h.Shutdown()
		log.Info("writer health, metrics and checkpoints", "url", h.URL())
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
	if err := ensureJournalStream(ctx, js, replicas, log); err != nil { // startup.go: asks again on a timeout
		return err
	}
	stopPprof, err := startPprof(pprofAddr, log)
	if err != nil {
		return err
	}
	defer stopPprof()
	signKey := integrity.signingKey(env, log)
	loop, err := newWriterLoop(ctx, js, dir, replicas, &integrity, signKey, log)
	if err != nil {
		return err
	}
	if h != nil {
		installWriterHealth(h, nc, js, loop, writerIntegrity(&integrity, signKey, loop, log))
	}
	log.Info("journal writer running", "dir", dir, "nats", natsURL)
	return loop.run(ctx)
}
