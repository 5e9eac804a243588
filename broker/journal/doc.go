// Package journal keeps Gatehouse's record of what agents did: the journal
// format, the durable writer, the JetStream consumer feeding it, and the
// offline verifier. The format below is a contract: a third party can check
// a journal with nothing but this description, SHA-256 and an RFC 8785
// canonicaliser.
//
// # Layout
//
// A journal directory holds:
//
//	runs/<run>.jsonl   one file per run: its events, one per line
//	head.jsonl         the head log
//	LOCK               the writer's lock file; not part of the record
//	wal/               the writer's log of lines not yet fsynced in their
//	                   files (wal.go); not part of the record
//	tiles/             the head log's Merkle tree as C2SP tlog-tiles hash
//	                   tiles (tiles.go); derived, not part of the record
//
// A run id is 1 to 64 ASCII letters, digits, '_' or '-' (brokers make
// r_ plus 26 lowercase base-32 characters); no other name is ever joined
// into a path. Every line of every file is one JSON object followed by
// '\n', at most MaxLineBytes long, written in RFC 8785 canonical form.
//
// # Events
//
// An event line has exactly the members v, id, run, seq, type, time, data,
// prev, hash and, when the event belongs to one effect, effect (see Event),
// and, when the writer signs, sig (an Ed25519 signature; see sign.go).
// Member names are never escaped and never repeated. v is 1. seq numbers
// the run's events 1, 2, 3... in file order. type is one of run.open,
// policy.decision, effect.attempt, effect.outcome, run.close.
//
// hash is the lowercase hex SHA-256 of the RFC 8785 canonical JSON of the
// line's object with the "hash" and "sig" members taken out. The hash covers
// the line as written, so a verifier needs no knowledge of the data's schema:
// parse, drop "hash" and "sig", canonicalise, hash, compare. prev is the hash of the run's
// previous event, "" for seq 1, so each run is a hash chain.
//
// # Head log
//
// head.jsonl registers, as they are written, each run's latest event. An
// entry has exactly the members seq (1, 2, 3... over the whole log), run,
// run_seq (the registered event's seq), event (that event's hash), time
// (UTC, when the writer registered it), prev and hash, chained and hashed
// the same way as events. The writer appends one entry per run whose
// latest event changed in a group commit; a run's run_seq only increases.
// The head log is what makes a removed run or a run cut short visible.
// Signed checkpoints over it (checkpoint.go, checkpointer.go: an RFC 6962
// tree over its lines, C2SP signed notes cosigned by witnesses) catch a
// rewrite of the whole directory, which the chains alone cannot.
//
// FORMAT.md is the complete format, signatures, checkpoints, the witness
// protocol and inclusion proofs included, with test vectors in
// testdata/vectors.
//
// # Writing
//
// One Writer owns a directory (an flock on LOCK). Append takes a batch of
// events from brokers, drops those already written (the dedupe key is the
// pair run and event id, and holds across restarts because a run's ids are
// read back from its file), numbers and chains the rest per run in batch
// order, and adds the head log entries registering each touched run's new
// latest event. It writes all of those lines as one record of its log,
// wal/, and fsyncs that one file: one fsync per batch, however many runs
// the batch touches, which is the group commit (a Committer gathers
// concurrent callers' events into one batch). Only then does it append
// the lines to the run files and the head log, and only then may the
// events be acknowledged. The run files and the head log are fsynced in
// the background every SyncInterval (runs first, then the runs folder,
// then the head log), after which the log segments holding their lines
// are removed; Close does it once more, so a clean close leaves the log
// empty.
//
// A crash, a kill -9 or a power cut at any point loses nothing Append
// returned: Open re-applies whatever the log holds beyond the files
// (idempotently: a line whose seq a file already has is skipped), after
// truncating a partial last line. Events not yet acknowledged are
// redelivered by JetStream and deduped. Why a log of the writer's own
// rather than an fsync of every touched file per batch: on this project's
// machine sixteen runs' files fsynced in parallel cost 1.35 ms and 0.9 ms
// of CPU a batch, one log record 0.18 ms and 0.08 ms. Verify reads the
// log too (NoteUnappliedLog), so a journal copied right after a power cut
// verifies with every acknowledged event before any writer opened it.
//
// Consume feeds a Writer from the JetStream stream made by EnsureStream.
//
// # Verifying
//
// Verify reads a journal and reports Findings (evidence that the journal is
// not as written, or that an effect was attempted without an allowing
// decision) and Notes (interrupted writes and open runs, which are not
// tampering). Verify checks, per run: each line's form and hash; that
// events name their run; that seqs are unique, in order and without gaps;
// that each prev is the hash of the event before it; that no event follows
// run.close; that every effect.attempt has a policy.decision for the same
// effect earlier in the run whose latest outcome is "allowed"; and against
// the head log, that every registered event exists with the registered
// hash. It checks the head log's own chain, and that every registered run
// has a file and every run file was registered, and that every record a
// grounded decision cites is an effect.outcome in the journal with the
// cited digest. See FindingKind and
// NoteKind for the names it reports.
package journal
