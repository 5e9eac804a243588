package journal

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
)

// Finding kinds of the integrity checks: signatures and checkpoints.
const (
	// A signed event whose signature does not verify strictly, or whose
	// "sig" member cannot be read.
	FindingBadSignature FindingKind = "bad-signature"
	// A signed event whose key id is not among the trusted keys.
	FindingUnknownKey FindingKind = "unknown-key"
	// An event with no signature, when signatures are required.
	FindingUnsignedEvent FindingKind = "unsigned-event"
	// The head log's first checkpoint-size entries do not hash to the
	// checkpoint's root: the journal was rewritten after it was witnessed.
	FindingCheckpointMismatch FindingKind = "checkpoint-mismatch"
	// The head log has fewer entries than a checkpoint registered.
	FindingRolledBack FindingKind = "rolled-back"
	// A checkpoint given to verify that does not open: malformed, not
	// signed by the log's key, or without the witness cosignatures asked for.
	FindingBadCheckpoint FindingKind = "bad-checkpoint"
	// An inclusion proof that does not prove its head entry in the
	// checkpoint, or names an entry the export does not hold as proved.
	FindingBadInclusionProof FindingKind = "bad-inclusion-proof"
)

// NoteSignaturesUnchecked: signed events were read but no trusted keys
// were given, so their signatures were not checked.
const NoteSignaturesUnchecked NoteKind = "signatures-unchecked"

// sigChecker checks event signatures for Verify: the cheap checks at once,
// the curve arithmetic on the pool's goroutines.
type sigChecker struct {
	keys    *TrustedKeys // nil: signatures are not checked
	require bool
	pool    *sigPool // nil: verified on the caller's goroutine
}

// pendingFindings collects the findings of one run's signatures checked
// on the pool. Wait for wg before reading list.
type pendingFindings struct {
	mu   sync.Mutex
	list []Finding
	wg   sync.WaitGroup
}

// check adds to out the finding for one parsed event line, if any; the
// signature itself may be checked later, on the pool (out.wg).
func (c sigChecker) check(p *parsedLine, at Finding, out *pendingFindings) {
	add := func(f Finding) {
		out.mu.Lock()
		out.list = append(out.list, f)
		out.mu.Unlock()
	}
	if p.sig == nil {
		if c.require {
			at.Kind, at.Detail = FindingUnsignedEvent, fmt.Sprintf("event %d (%s) is not signed", p.ev.Seq, p.ev.Type)
			add(at)
		}
		return
	}
	s, err := parseSig(p.sig)
	if err != nil {
		at.Kind, at.Detail = FindingBadSignature, fmt.Sprintf("event %d: sig cannot be read: %v", p.ev.Seq, err)
		add(at)
		return
	}
	if c.keys == nil {
		return
	}
	bad := func(err error) {
		if errors.Is(err, ErrUnknownKey) {
			at.Kind, at.Detail = FindingUnknownKey, fmt.Sprintf("event %d signed by key %q, which is not trusted", p.ev.Seq, s.KeyID)
		} else {
			at.Kind, at.Detail = FindingBadSignature, fmt.Sprintf("event %d: %v", p.ev.Seq, err)
		}
		add(at)
	}
	k, msg, sig, err := c.keys.prepare(hex.EncodeToString(p.hash[:]), s)
	switch {
	case err != nil:
		bad(err)
	case c.pool == nil:
		if err := k.verify(msg, sig); err != nil {
			bad(err)
		}
	default:
		c.pool.submit(sigJobV{key: k, msg: msg, sig: sig, bad: bad, wg: &out.wg})
	}
}

// CheckCheckpoint checks the head log of the journal in dir against a
// checkpoint (already opened with OpenCheckpoint): the head log must have
// at least cp.Size entries (else rolled-back), and its first cp.Size
// entries must hash to cp.Hash (else checkpoint-mismatch). A journal
// rewritten consistently, every event and the head log recomputed, fails
// the second check; only the checkpoint's signers could make it pass.
func CheckCheckpoint(dir string, cp *Checkpoint) []Finding {
	t := &Tree{}
	err := ReadHeadLines(dir, func(line []byte) error { t.Append(line); return nil })
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return []Finding{{Kind: FindingCheckpointMismatch, File: headFile, Detail: "cannot read head log: " + err.Error()}}
	}
	if t.Size() < cp.Size {
		return []Finding{{Kind: FindingRolledBack, File: headFile, Line: int(t.Size()),
			Detail: fmt.Sprintf("the head log has %d entries; checkpoint %s %d (witnessed by %v) registered %d: entries were removed",
				t.Size(), cp.Origin, cp.Size, cp.Witnesses, cp.Size)}}
	}
	root, _ := t.Root(cp.Size)
	if root != cp.Hash {
		return []Finding{{Kind: FindingCheckpointMismatch, File: headFile,
			Detail: fmt.Sprintf("the first %d head log entries do not hash to the root of checkpoint %s %d: the journal was rewritten after it was checkpointed",
				cp.Size, cp.Origin, cp.Size)}}
	}
	return nil
}

// InclusionProof proves that one head log entry is in a checkpoint's
// tree: Line is the entry's line (without '\n'), HeadSeq its seq (leaf
// HeadSeq-1), Proof the RFC 6962 audit path (base64 in JSON).
type InclusionProof struct {
	HeadSeq uint64      `json:"head_seq"`
	Line    string      `json:"line"`
	Proof   []tlog.Hash `json:"proof"`
}

// Proofs is the file layout of an export's proofs (proofs.json): the
// checkpoint note the proofs are against, and one proof per head entry.
type Proofs struct {
	Checkpoint string           `json:"checkpoint"`
	Proofs     []InclusionProof `json:"proofs"`
}

// InclusionProofs returns, for each head log seq in headSeqs, its
// inclusion proof against cp, computed from the head log of the journal
// in dir. It fails when the head log does not match cp (see
// CheckCheckpoint) or a seq is beyond cp.Size.
func InclusionProofs(dir string, headSeqs []uint64, cp *Checkpoint) ([]InclusionProof, error) {
	t := &Tree{}
	lines := map[uint64]string{}
	want := map[uint64]bool{}
	for _, s := range headSeqs {
		if s == 0 || int64(s) > cp.Size {
			return nil, fmt.Errorf("%w: head entry %d is not in a checkpoint of size %d", ErrBadProofRequest, s, cp.Size)
		}
		want[s] = true
	}
	err := ReadHeadLines(dir, func(line []byte) error {
		if want[uint64(t.Size()+1)] {
			lines[uint64(t.Size()+1)] = string(line)
		}
		t.Append(line)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: head log: %w", err)
	}
	if fs := CheckCheckpoint(dir, cp); len(fs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrBadCheckpoint, fs[0].Detail)
	}
	out := make([]InclusionProof, 0, len(headSeqs))
	for _, s := range headSeqs {
		p, err := t.InclusionProof(int64(s-1), cp.Size)
		if err != nil {
			return nil, err
		}
		out = append(out, InclusionProof{HeadSeq: s, Line: lines[s], Proof: p})
	}
	return out, nil
}

// VerifyInclusion checks proofs against cp (opened with OpenCheckpoint,
// so its signatures are already checked). When entries is not nil it
// maps head seq to the head log line an export holds, and every proof's
// line must be that line, and every entry must have a proof. It returns
// one bad-inclusion-proof finding per failure; none means every entry is
// in the witnessed log.
func VerifyInclusion(entries map[uint64][]byte, proofs []InclusionProof, cp *Checkpoint) []Finding {
	var out []Finding
	proved := map[uint64]bool{}
	for _, p := range proofs {
		bad := func(why string) {
			out = append(out, Finding{Kind: FindingBadInclusionProof, Seq: p.HeadSeq, File: headFile, Line: int(p.HeadSeq), Detail: why})
		}
		if p.HeadSeq == 0 || int64(p.HeadSeq) > cp.Size {
			bad(fmt.Sprintf("head entry %d is not in a checkpoint of size %d", p.HeadSeq, cp.Size))
			continue
		}
		if entries != nil && string(entries[p.HeadSeq]) != p.Line {
			bad(fmt.Sprintf("head entry %d differs from the line the proof proves", p.HeadSeq))
			continue
		}
		if err := tlog.CheckRecord(p.Proof, cp.Size, cp.Hash, int64(p.HeadSeq-1), tlog.RecordHash([]byte(p.Line))); err != nil {
			bad(fmt.Sprintf("head entry %d is not proved in checkpoint %s %d: %v", p.HeadSeq, cp.Origin, cp.Size, err))
			continue
		}
		proved[p.HeadSeq] = true
	}
	for s := range entries {
		if !proved[s] {
			out = append(out, Finding{Kind: FindingBadInclusionProof, Seq: s, File: headFile, Line: int(s),
				Detail: fmt.Sprintf("head entry %d has no valid inclusion proof", s)})
		}
	}
	return out
}

// ParseProofs reads a proofs.json. It is untrusted input: sizes are
// bounded by the caller's reader.
func ParseProofs(b []byte) (*Proofs, error) {
	var p Proofs
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%w: proofs: %v", ErrMalformed, err)
	}
	return &p, nil
}

// Export layout of the proofs (see FORMAT.md): DIR/proofs/checkpoint and
// DIR/proofs/proofs.json.
const (
	ProofsDir            = "proofs"
	ProofsFile           = "proofs.json"
	ProofsCheckpointFile = "checkpoint"
)

// MarshalProofs returns the proofs.json content for proofs against cp.
func MarshalProofs(cp *Checkpoint, proofs []InclusionProof) ([]byte, error) {
	b, err := json.MarshalIndent(Proofs{Checkpoint: string(cp.Note), Proofs: proofs}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// VerifyProofsDir checks an export's proofs (CheckExportProofs) and
// reports each head seq in required that is beyond the checkpoint's size
// as a bad-inclusion-proof too: every one of them must be proved. It
// returns an error only when the proofs cannot be read.
func VerifyProofsDir(dir string, keys CheckpointKeys, required []uint64) ([]Finding, error) {
	pc, err := CheckExportProofs(dir, keys, required)
	if err != nil {
		return nil, err
	}
	out := pc.Findings
	for _, s := range pc.Uncovered {
		out = append(out, Finding{Kind: FindingBadInclusionProof, Seq: s, File: headFile, Line: int(s),
			Detail: fmt.Sprintf("head entry %d is not in a checkpoint of size %d", s, pc.Checkpoint.Size)})
	}
	return out, nil
}
