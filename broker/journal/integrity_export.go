package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/sumdb/note"
)

// Inclusion proofs for evidence exports: the exporting side (PeekCheckpoint,
// LatestCheckpoint, ProveEntries) trusts the journal folder it reads; the
// checking side (CheckExportProofs) trusts nothing but the keys it is given.

// ErrCheckpointMismatch: the head log does not hash to the checkpoint it
// is to be proved against (rewritten, or shorter than the checkpoint).
var ErrCheckpointMismatch = errors.New("journal: the head log does not match the checkpoint")

// Finding and note kinds of an export's proofs.
const (
	// An export checked with the log's key carries no inclusion proofs
	// (no proofs/checkpoint): nothing in it is tied to a witnessed
	// checkpoint.
	FindingProofsMissing FindingKind = "proofs-missing"

	// The export's checkpoint opened with the keys, its head log matches
	// it, and every proof verified: a record of what was checked.
	NoteProofsChecked NoteKind = "proofs-checked"
	// The export carries inclusion proofs, but no log key was given to
	// check them with.
	NoteProofsUnchecked NoteKind = "proofs-unchecked"
	// The export carries no inclusion proofs (and none were asked for).
	NoteNoProofs NoteKind = "no-proofs"
	// Head entries of exported runs that come after the checkpoint's
	// size: the export was made before a checkpoint covered them, so they
	// are protected by the hash chain only.
	NoteNotWitnessed NoteKind = "not-yet-witnessed"
)

// LatestCheckpoint returns the signed checkpoint note the writer stored in
// the journal in dir (checkpoints/latest, see Checkpointer), with every
// cosignature it got. The error wraps os.ErrNotExist when none was stored.
// The note is as whoever holds the folder left it: open it with
// OpenCheckpoint to trust it, or PeekCheckpoint to read it.
func LatestCheckpoint(dir string) ([]byte, error) {
	b, err := ReadRegular(filepath.Join(dir, checkpointsDir, latestFile), maxCheckpointBytes)
	if errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadCheckpoint, maxCheckpointBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("journal: latest checkpoint: %w", err)
	}
	if len(b) > maxCheckpointBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadCheckpoint, maxCheckpointBytes)
	}
	return b, nil
}

// unknownKeys makes note.Open record every signature as unverified.
type unknownKeys struct{}

func (unknownKeys) Verifier(name string, hash uint32) (note.Verifier, error) {
	return nil, &note.UnknownVerifierError{Name: name, KeyHash: hash}
}

// PeekCheckpoint parses a signed checkpoint note WITHOUT checking any
// signature: for the journal's own exporter, which trusts its folder, to
// learn the size, root and who claims to have signed. Witnesses lists the
// names on signature lines other than the origin's (claims, not checked).
// Errors wrap ErrBadCheckpoint.
func PeekCheckpoint(text []byte) (*Checkpoint, error) {
	if len(text) > maxCheckpointBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadCheckpoint, maxCheckpointBytes)
	}
	_, err := note.Open(text, unknownKeys{})
	var un *note.UnverifiedNoteError
	if !errors.As(err, &un) {
		return nil, fmt.Errorf("%w: not a signed note: %v", ErrBadCheckpoint, err)
	}
	cp, err := ParseCheckpoint(un.Note.Text)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range un.Note.UnverifiedSigs {
		if s.Name != cp.Origin && !seen[s.Name] {
			seen[s.Name] = true
			cp.Witnesses = append(cp.Witnesses, s.Name)
		}
	}
	cp.Note = bytes.Clone(text)
	return &cp, nil
}

// ProveEntries returns the inclusion proofs of the head entries seqs
// (1-based) against cp, computed from head, a head log's complete lines
// (each ending in '\n'), such as the copy an export holds. The first
// cp.Size lines must hash to cp's root (else ErrCheckpointMismatch), and
// every seq must be within cp.Size (else ErrBadProofRequest). Each proof's
// Line is head's line, so the proofs prove exactly the bytes exported.
func ProveEntries(head []byte, seqs []uint64, cp *Checkpoint) ([]InclusionProof, error) {
	t := &Tree{}
	var lines [][]byte
	for rest := head; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break // a partial last line is not an entry
		}
		lines = append(lines, rest[:i])
		t.Append(rest[:i])
		rest = rest[i+1:]
	}
	if t.Size() < cp.Size {
		return nil, fmt.Errorf("%w: the head log has %d entries, the checkpoint %d", ErrCheckpointMismatch, t.Size(), cp.Size)
	}
	if root, _ := t.Root(cp.Size); root != cp.Hash {
		return nil, fmt.Errorf("%w: the first %d head log entries do not hash to the root of checkpoint %s %d",
			ErrCheckpointMismatch, cp.Size, cp.Origin, cp.Size)
	}
	out := make([]InclusionProof, 0, len(seqs))
	for _, s := range seqs {
		if s == 0 || int64(s) > cp.Size {
			return nil, fmt.Errorf("%w: head entry %d is not in a checkpoint of size %d", ErrBadProofRequest, s, cp.Size)
		}
		p, err := t.InclusionProof(int64(s-1), cp.Size)
		if err != nil {
			return nil, err
		}
		out = append(out, InclusionProof{HeadSeq: s, Line: string(lines[s-1]), Proof: p})
	}
	return out, nil
}

// ProofCheck is what CheckExportProofs found.
type ProofCheck struct {
	// Checkpoint is the export's checkpoint, opened with the keys; nil
	// when it did not open (a bad-checkpoint finding says why).
	Checkpoint *Checkpoint
	Findings   []Finding
	// Proved are the entries whose proofs verified; Uncovered those of
	// the entries asked about beyond the checkpoint's size, which no
	// proof can cover yet.
	Proved, Uncovered []uint64
}

// CheckExportProofs checks the inclusion proofs of the export in dir
// (FORMAT.md section 7) with nothing but keys:
//
//   - the checkpoint is DIR/proofs/checkpoint (DIR/proofs/proofs.json's
//     own when that file is absent); it must open with keys, else one
//     bad-checkpoint finding and nothing else is checked;
//   - proofs.json must be against that same checkpoint, else a
//     bad-inclusion-proof finding (its proofs are then checked against
//     the checkpoint file, and fail unless they happen to hold);
//   - each proof must prove its line in the checkpoint, and its line must
//     be the export's head log line at its seq (bad-inclusion-proof);
//   - each seq of entries within the checkpoint's size must have a valid
//     proof (bad-inclusion-proof); those beyond it are returned as
//     Uncovered, not findings.
//
// It does not compare the export's head log with the checkpoint's root:
// CheckCheckpoint does. The error wraps os.ErrNotExist when the export
// has no proofs.json, ErrMalformed when it cannot be parsed.
func CheckExportProofs(dir string, keys CheckpointKeys, entries []uint64) (*ProofCheck, error) {
	pfile := ProofsDir + "/" + ProofsFile
	b, err := ReadRegular(filepath.Join(dir, ProofsDir, ProofsFile), MaxProofsBytes)
	if err != nil {
		return nil, err
	}
	ps, err := ParseProofs(b)
	if err != nil {
		return nil, err
	}
	pc := &ProofCheck{}
	cpText, cpFile := []byte(ps.Checkpoint), pfile
	if f, err := ReadRegular(filepath.Join(dir, ProofsDir, ProofsCheckpointFile), maxCheckpointBytes); err == nil {
		cpText, cpFile = f, ProofsDir+"/"+ProofsCheckpointFile
		if !bytes.Equal(f, []byte(ps.Checkpoint)) {
			pc.Findings = append(pc.Findings, Finding{Kind: FindingBadInclusionProof, File: pfile,
				Detail: "the proofs are against another checkpoint than " + cpFile})
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	cp, err := OpenCheckpoint(cpText, keys)
	if err != nil {
		pc.Findings = append(pc.Findings, Finding{Kind: FindingBadCheckpoint, File: cpFile, Detail: err.Error()})
		return pc, nil
	}
	pc.Checkpoint = cp
	head := map[uint64][]byte{}
	var n uint64
	if err := ReadHeadLines(dir, func(line []byte) error {
		n++
		head[n] = bytes.Clone(line)
		return nil
	}); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	found := VerifyInclusion(nil, ps.Proofs, cp)
	failed := map[uint64]bool{}
	for _, f := range found {
		failed[f.Seq] = true
	}
	proved := map[uint64]bool{}
	for _, p := range ps.Proofs {
		switch {
		case failed[p.HeadSeq] || proved[p.HeadSeq]:
		case string(head[p.HeadSeq]) != p.Line:
			failed[p.HeadSeq] = true
			found = append(found, Finding{Kind: FindingBadInclusionProof, Seq: p.HeadSeq, File: headFile, Line: int(p.HeadSeq),
				Detail: fmt.Sprintf("head entry %d differs from the line its proof proves", p.HeadSeq)})
		default:
			proved[p.HeadSeq] = true
			pc.Proved = append(pc.Proved, p.HeadSeq)
		}
	}
	for _, s := range entries {
		switch {
		case int64(s) > cp.Size:
			pc.Uncovered = append(pc.Uncovered, s)
		case !proved[s] && !failed[s]:
			failed[s] = true
			found = append(found, Finding{Kind: FindingBadInclusionProof, Seq: s, File: headFile, Line: int(s),
				Detail: fmt.Sprintf("head entry %d has no valid inclusion proof", s)})
		}
	}
	pc.Findings = append(pc.Findings, found...)
	return pc, nil
}
