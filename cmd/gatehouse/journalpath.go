package main

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

// serve --journal-durability: what a decision waits for before its effect.
const (
	durabilityAuto   = "auto"
	durabilityFsync  = "fsync"
	durabilityStream = "stream"
	durabilityUsage  = "what a decision waits for before its effect: fsync (fsynced in this process's journal, group-committed; needs the writer here), stream (acknowledged by JetStream: a quorum with --replicas 3, no fsync on one server) or auto (fsync with the writer here and one replica, else stream)"
)

// serveJournal is how serve's broker records, and what to close at the
// end:
//
//   - fsync: through the writer in this process (broker.Committed): every
//     decision is in the journal's log, fsynced, before its effect, with
//     the fsync shared by every effect recorded at the moment. When that
//     writer cannot write (a full disk), strict mode refuses, and report
//     mode records the run through the stream instead (broker.Fallback),
//     where the writer finds it once it can write again.
//   - stream: through JetStream (broker.Recorder), acknowledged by a quorum
//     of the stream's replicas; strict mode also refuses while the writer
//     (wherever it runs) reports it cannot write (broker.JournalGate). On
//     one server JetStream acknowledges before it fsyncs, so a power cut
//     can lose a decision whose effect happened: serve says so.
//
// auto is fsync when this process runs the writer and the stream has one
// replica (the single-node shape), else stream (a cluster, --no-writer).
func serveJournal(ctx context.Context, js jetstream.JetStream, c *serveConfig, mode policy.Mode, loop *writerLoop, log *slog.Logger) (broker.Journal, func(), error) {
	stream := broker.NewRecorder(js, 0)
	d := c.journalDurability
	if d == durabilityAuto {
		d = durabilityStream
		if loop != nil && c.replicas <= 1 {
			d = durabilityFsync
		}
	}
	switch d {
	case durabilityFsync:
		if loop == nil {
			return nil, nil, usageError("--journal-durability fsync needs the journal writer in this process (drop --no-writer)")
		}
		direct := broker.NewCommitted(loop.Committer)
		log.Info("decisions are fsynced in the journal before their effects (group commit)", "journal", c.journalDir())
		if mode == policy.ModeReport {
			return &broker.Fallback{Primary: direct, Secondary: stream, Logger: log}, stream.Close, nil
		}
		return direct, stream.Close, nil
	case durabilityStream:
		if c.replicas <= 1 {
			log.Warn("decisions are acknowledged by one JetStream server, which does not fsync each message: a power cut can lose decisions whose effects happened (--journal-durability fsync, with the writer in this process, waits for the fsync)")
		}
		var rec broker.Journal = stream
		closers := []func(){stream.Close}
		if mode == policy.ModeStrict {
			// Strict mode also refuses while the journal writer reports it
			// cannot write (a full disk): see broker.JournalGate.
			gate, err := broker.NewJournalGate(ctx, js, stream, c.replicas, log)
			if err != nil {
				return nil, nil, err
			}
			rec = gate
			closers = append([]func(){gate.Close}, closers...)
		}
		return rec, func() {
			for _, f := range closers {
				f()
			}
		}, nil
	}
	return nil, nil, usageError("--journal-durability must be auto, fsync or stream, not %q", c.journalDurability)
}
