// Package content keeps, beside the journal, what each decision depended
// on: the request as the agent proposed it and as the sink described it,
// the source of the policy in force, the records a grounding rule read
// and the grounding rules in force. The journal's chain holds only
// their digests (journal.Decision's request_digest and policy_digest), so
// content can be erased, for a retention limit or for one person, without
// breaking `gatehouse verify`. Replay (broker/replay) reads it back to
// decide every recorded effect again.
//
// # Layout
//
// A content directory (DATA_DIR/content) holds:
//
//	segments/*.seg      append-only segment files, one being written per
//	                    Store (per process): a record per blob kept (a
//	                    header line naming the digest, its kind, run,
//	                    effect, tenant and person and the time, then the
//	                    bytes), per further reference to a blob, and per
//	                    touch (segments.go has the format)
//	erasures.jsonl      one line per erased blob (Erasure): which, whose,
//	                    why and when
//	sha256/ab/cdef...,  the layout before segments (a file per blob, its
//	index.jsonl         references one per line): still read, listed and
//	                    erased, never written
//
// A blob's bytes hash to its digest; Get reports a blob whose bytes do not
// as ErrChanged. A blob's last use is the latest time of its records (or
// an old-layout file's modification time): it is written or referenced
// again, or touched, when a decision uses it. Reading a blob (replay,
// evidence) does not count as use, so an audit never extends retention.
//
// Why segments: a file per blob made capture the largest cost of an
// effect (creating files was 43% of serve's CPU under load); one append
// per blob is a few microseconds. The index (which digest is where, every
// reference, last uses) is not stored: a Store reads it from the segments
// the first time something asks (replay, evidence, erasure), and reads
// only what was appended since each time after. A broker that only keeps
// content never reads it.
//
// # Kinds
//
// A request blob is a Request encoded as JSON: the run, the effect id, the
// agent's params verbatim, the policy.Effect the sink described (with the
// grounding outcome, the contract and the values scope limits read), the
// policy digest and the decision time, and for a provider call a grounding
// rule applied to, Grounding: the rules' digest, the call as it was about
// to leave, the caller's input, the check's time and every answer the
// record store and rereads gave (records without their bodies, by digest).
// It names one effect, so it belongs to exactly one person.
//
// A record blob (KindRecord) is the body of a provider response the
// provider sink kept as a grounding record, as received; its digest is
// the digest the reading effect's outcome and every decision citing it
// record (journal.Citation), so the chain needs nothing more. The sink
// keeps it (Capturer.KeepRecord) right after the record store, indexed to
// the run, effect and person that read it. A grounding blob
// (KindGrounding) is a grounding rules file's bytes, kept like a policy. A policy blob is a rules file's bytes exactly as
// read, so its digest is the policy digest the journal records; it belongs
// to nobody and is erased only by the retention limit. The run's authority
// (person, mandate, scopes, agent) is not stored here: run.open records it
// in the journal in full.
//
// What each approval gate returned is not stored here: the approval
// events (approval.decision, approval.refused, approval.claim,
// approval.reopened) are in the run's chain in full, and replay reads them
// there.
//
// # Capture modes
//
// ModeFull stores blobs and records digests; ModeDigests records the same
// digests and stores nothing (verifiable, not replayable); ModeOff records
// neither. The broker stores a request's blob before it records the
// decision naming its digest (content first, then the chain).
//
// # Sharing and concurrency
//
// A Store is safe for concurrent use, and several processes on one machine
// may share a directory: each appends to a segment of its own (named by
// its start time and a random suffix, so they never interleave), and
// reads the others'. Erasure lines are appended with one write each on an
// O_APPEND file. On a cluster the shared option is the NATS Object Store
// (OpenObjectStore), which every broker host reads and writes; see
// objstore.go for how it differs.
//
// # Erasure
//
// EraseUnused removes blobs unused for longer than a duration (serve runs
// it daily through an Eraser, JOURNAL_CONTENT_DAYS; a decision citing a
// record marks it used); ErasePerson removes one person's request and
// record blobs, found from the index and, given the journal, from the
// request digests and citations of the person's decisions. A blob the
// index also names for another person (identical bytes both read) is
// kept: it is theirs too. Erasing a blob punches every copy of its bytes
// out of its segment (a hole, or zeros written over them where the
// filesystem cannot punch holes, fsynced), removes an old-layout file,
// and then appends the erasure to erasures.jsonl; the records' headers
// stay. An erasure cut short between the two leaves zeros, which Get
// reports as not kept (ErrNotFound), never as changed; running it again
// completes it. Erasure never touches the journal, so verify passes
// before and after.
package content
