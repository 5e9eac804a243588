package evidence

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// Finding kinds an export adds to verify's. Each is evidence the export is
// not as made.
const (
	// A file whose size or SHA-256 differs from what the manifest says.
	FindingManifestMismatch journal.FindingKind = "export-manifest-mismatch"
	// A run file the manifest does not list.
	FindingUnlistedRun journal.FindingKind = "export-unlisted-run"
	// A run that does not act for the manifest's tenant (and person).
	FindingForeignRun journal.FindingKind = "export-foreign-run"
	// Events of an exported run after its last head log entry, or a
	// partial last line: an export holds registered events only (the
	// exporter cuts each run at the head log it copies), so they were
	// added after it was made. In a journal the same is an interrupted
	// write (a note); in an export, unsigned events appended there would
	// otherwise verify.
	FindingAfterHead journal.FindingKind = "export-after-head"
)

// VerifyOptions are the public keys an export is checked with. The zero
// value checks without keys.
type VerifyOptions struct {
	// Checkpoint, when its Log is set, checks the export's inclusion
	// proofs and head log against the checkpoint it carries, opened with
	// these keys (the witnesses' cosignatures as Quorum asks). An export
	// without proofs is then a proofs-missing finding.
	Checkpoint journal.CheckpointKeys
	// Keys and RequireSignatures check event signatures as journal.Verify.
	Keys              *journal.TrustedKeys
	RequireSignatures bool
}

// ExportDir is the export folder dir names: dir itself when it holds
// export.json, or the one folder inside it that does (an archive
// unpacked with tar -C dir holds TENANT-evidence/). A symlink is never
// followed to find it. Anything else is ErrNotExport, saying what to do.
func ExportDir(dir string) (string, error) {
	if fi, err := os.Lstat(filepath.Join(dir, journal.ExportManifestFile)); err == nil && fi.Mode().IsRegular() {
		return dir, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrNotExport, dir, err)
	}
	var found []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(dir, e.Name(), journal.ExportManifestFile)); err == nil && fi.Mode().IsRegular() {
			found = append(found, filepath.Join(dir, e.Name()))
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("%w: %s has no %s, nor one folder holding it: unpack the download first (tar -xzf TENANT-evidence-*.tar.gz -C %s) and name that folder or the TENANT-evidence folder inside it",
			ErrNotExport, dir, journal.ExportManifestFile, dir)
	}
	return "", fmt.Errorf("%w: %s holds %d exports (%s, ...): name one of them", ErrNotExport, dir, len(found), filepath.Base(found[0]))
}

// VerifyExport checks the export in dir offline without keys:
// VerifyExportWith(dir, VerifyOptions{}).
func VerifyExport(dir string) (*journal.Report, error) {
	return VerifyExportWith(dir, VerifyOptions{})
}

// VerifyExportWith checks the export in dir offline, with nothing but
// the public keys in opts: the manifest, each file against it, each run
// against the head log (journal.Verify in export mode: runs the export
// does not hold are expected to be absent), and that every run acts for
// the manifest's tenant. With opts.Checkpoint.Log it also opens the
// export's checkpoint with the keys (bad-checkpoint), checks the export's
// head log against it (rolled-back, checkpoint-mismatch) and the inclusion
// proof of every head entry of an exported run it covers
// (bad-inclusion-proof); entries after it are a not-yet-witnessed note.
// Without it, a note says the proofs were not checked. It returns an
// error wrapping ErrNotExport when dir has no readable manifest, or
// journal.ErrNotJournal; everything else is in the report.
func VerifyExportWith(dir string, opts VerifyOptions) (*journal.Report, error) {
	dir, err := ExportDir(dir)
	if err != nil {
		return nil, err
	}
	raw, err := journal.ReadRegular(filepath.Join(dir, journal.ExportManifestFile), journal.MaxManifestBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNotExport, dir, err)
	}
	m, err := ParseManifest(raw)
	if err != nil {
		return nil, err
	}
	rep, err := journal.Verify(dir, journal.VerifyOptions{Export: &journal.ExportScope{Runs: m.RunIDs()},
		Keys: opts.Keys, RequireSignatures: opts.RequireSignatures})
	if err != nil {
		return nil, err
	}
	extra, notes := verifyProofs(dir, m, opts.Checkpoint)
	kept := rep.Notes[:0]
	for _, n := range rep.Notes {
		switch n.Kind {
		case journal.NoteAfterHead, journal.NotePartialLine:
			extra = append(extra, journal.Finding{Kind: FindingAfterHead, Run: n.Run, File: n.File,
				Detail: n.Detail + "; an export holds only events its head log registers: these were added after it was made"})
		default:
			kept = append(kept, n)
		}
	}
	rep.Notes = append(kept, notes...)
	check := func(f File, run string) {
		n, sum, err := hashFile(filepath.Join(dir, filepath.FromSlash(f.Path)), f.Size)
		if errors.Is(err, fs.ErrNotExist) {
			return // journal.Verify reports a missing run or head log
		}
		if err != nil {
			extra = append(extra, journal.Finding{Kind: FindingManifestMismatch, Run: run, File: f.Path, Detail: "cannot read: " + err.Error()})
			return
		}
		if n != f.Size || sum != f.SHA256 {
			extra = append(extra, journal.Finding{Kind: FindingManifestMismatch, Run: run, File: f.Path,
				Detail: fmt.Sprintf("%d bytes or more with another SHA-256 than the manifest's %d bytes: changed after the export was made", n, f.Size)})
		}
	}
	check(m.Head, "")
	listed := map[string]bool{}
	sel := m.Selector()
	for _, r := range m.Runs {
		listed[r.Run] = true
		check(r.File, r.Run)
		rd := readRun(dir, r.Run)
		switch {
		case rd.readErr != "":
		case rd.open == nil:
			extra = append(extra, journal.Finding{Kind: FindingForeignRun, Run: r.Run, File: r.Path, Detail: "no readable run.open"})
		case !sel.matches(rd.open.ActingFor):
			extra = append(extra, journal.Finding{Kind: FindingForeignRun, Run: r.Run, File: r.Path,
				Detail: fmt.Sprintf("acts for %s/%s, not %s", rd.open.ActingFor.Tenant, rd.open.ActingFor.Person, sel)})
		case rd.foreign != "":
			extra = append(extra, journal.Finding{Kind: FindingForeignRun, Run: r.Run, File: r.Path, Detail: rd.foreign})
		}
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "runs")); err == nil {
		for _, e := range entries {
			id, _ := strings.CutSuffix(e.Name(), ".jsonl")
			if !listed[id] {
				extra = append(extra, journal.Finding{Kind: FindingUnlistedRun, Run: id, File: "runs/" + e.Name(),
					Detail: "a run file the manifest does not list"})
			}
		}
	}
	if len(extra) > 0 {
		rep.Findings = append(rep.Findings, extra...)
		slices.SortStableFunc(rep.Findings, func(a, b journal.Finding) int {
			return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Kind, b.Kind))
		})
		rep.OK = false
	}
	return rep, nil
}

// verifyProofs checks the export's proofs with keys (see VerifyExportWith).
func verifyProofs(dir string, m *Manifest, keys journal.CheckpointKeys) ([]journal.Finding, []journal.Note) {
	pfile := journal.ProofsDir + "/" + journal.ProofsFile
	_, err := os.Stat(filepath.Join(dir, journal.ProofsDir, journal.ProofsFile))
	if errors.Is(err, fs.ErrNotExist) {
		why := m.NoProofs
		switch {
		case m.Proofs != "":
			why = "the manifest names " + m.Proofs + "/, which is missing"
		case why == "":
			why = "the manifest does not say why"
		}
		if keys.Log != nil {
			return []journal.Finding{{Kind: journal.FindingProofsMissing, File: pfile,
				Detail: "the export carries no inclusion proofs (" + why + "): nothing in it is tied to a witnessed checkpoint"}}, nil
		}
		return nil, []journal.Note{{Kind: journal.NoteNoProofs, File: pfile,
			Detail: "the export carries no inclusion proofs (" + why + "): checked against its own head log only"}}
	}
	if keys.Log == nil {
		what := "inclusion proofs"
		if b, err := journal.ReadRegular(filepath.Join(dir, journal.ProofsDir, journal.ProofsCheckpointFile), 64<<10); err == nil {
			if cp, err := journal.PeekCheckpoint(b); err == nil {
				what = fmt.Sprintf("inclusion proofs against checkpoint %s %d (cosigned, it says, by %v)", cp.Origin, cp.Size, cp.Witnesses)
			}
		}
		return nil, []journal.Note{{Kind: journal.NoteProofsUnchecked, File: pfile,
			Detail: "the export carries " + what + "; not checked: no log key given (--log-key, and --witness-key for each witness)"}}
	}
	pc, err := journal.CheckExportProofs(dir, keys, exportedEntries(dir, m))
	if err != nil {
		return []journal.Finding{{Kind: journal.FindingBadInclusionProof, File: pfile, Detail: "cannot read the proofs: " + err.Error()}}, nil
	}
	found := pc.Findings
	var notes []journal.Note
	if cp := pc.Checkpoint; cp != nil {
		found = append(found, journal.CheckCheckpoint(dir, cp)...)
		if len(found) == 0 {
			d := fmt.Sprintf("%d head entries of the exported runs proved in checkpoint %s %d, cosigned by %v; the head log matches it",
				len(pc.Proved), cp.Origin, cp.Size, cp.Witnesses)
			if len(keys.Witnesses) == 0 {
				d += "; no witness key was given, so whoever holds the log's key could have signed it over a rewritten journal"
			}
			notes = append(notes, journal.Note{Kind: journal.NoteProofsChecked, File: pfile, Detail: d})
		}
		if len(pc.Uncovered) > 0 {
			notes = append(notes, journal.Note{Kind: journal.NoteNotWitnessed, File: "head.jsonl",
				Detail: fmt.Sprintf("%d head entries of exported runs (seq %d to %d) come after checkpoint %s %d: protected by the hash chain only; a later export proves them",
					len(pc.Uncovered), pc.Uncovered[0], pc.Uncovered[len(pc.Uncovered)-1], cp.Origin, cp.Size)})
		}
	}
	return found, notes
}

// exportedEntries returns the seqs of the export's head log entries that
// register a run the manifest lists.
func exportedEntries(dir string, m *Manifest) []uint64 {
	listed := map[string]bool{}
	for _, r := range m.Runs {
		listed[r.Run] = true
	}
	var out []uint64
	seq := uint64(0)
	_ = journal.ReadHeadLines(dir, func(line []byte) error {
		seq++
		var h struct {
			Run string `json:"run"`
		}
		if json.Unmarshal(line, &h) == nil && listed[h.Run] {
			out = append(out, seq)
		}
		return nil
	})
	return out
}

// hashFile is the size and hex SHA-256 of the regular file at path
// (journal.OpenRegular), reading at most size+1 bytes: a file longer than
// the manifest says differs without being read to its end.
func hashFile(path string, size int64) (int64, string, error) {
	f, err := journal.OpenRegular(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, size+1))
	if err != nil {
		return n, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
