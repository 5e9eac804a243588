package evidence

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// ExportSummary is what Export wrote.
type ExportSummary struct {
	Dir      string   `json:"dir,omitempty"`
	Manifest Manifest `json:"manifest"`
}

// bundle is an export in memory: the files and the manifest.
type bundle struct {
	head     []byte
	runs     [][]byte // in manifest order
	cpNote   []byte   // proofs/checkpoint; nil without proofs
	proofs   []byte   // proofs/proofs.json
	manifest Manifest
}

// NoCheckpoint is the manifest's NoProofs when the journal had no
// checkpoint to prove the export against.
const NoCheckpoint = "the journal had no signed checkpoint when the export was made"

// exportOptions tune an export (tests set the clock).
type exportOptions struct {
	now func() time.Time
}

// collect selects and reads everything an export of sel holds.
func collect(journalDir string, sel Selector, opts exportOptions) (*bundle, error) {
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	// The checkpoint before the head log, the head log before the runs:
	// each only grows and is written after what it covers, so the head
	// log copy holds every entry the checkpoint covers, and every run
	// read after it holds at least what it registers.
	cpNote, cp, err := latestCheckpoint(journalDir)
	if err != nil {
		return nil, err
	}
	head, err := journal.ReadRegular(filepath.Join(journalDir, "head.jsonl"), maxRunBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoJournal, journalDir, err)
	}
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
		head = head[:i+1]
	} else {
		head = nil
	}
	ids, err := listRuns(journalDir)
	if err != nil {
		return nil, err
	}
	registered := registeredHeads(head)
	b := &bundle{head: head}
	b.manifest = Manifest{Format: ManifestFormat, Version: ManifestVersion, Tenant: sel.Tenant, Person: sel.Person,
		Created: opts.now().UTC(), Head: fileOf("head.jsonl", head), Runs: []RunFile{}}
	jr := &journalRuns{dir: journalDir, cache: map[string]*runData{}}
	for _, id := range ids {
		rd := jr.get(id)
		if rd.open == nil || !sel.matches(rd.open.ActingFor) {
			continue // another tenant's or person's, or unreadable: never named
		}
		if why := jr.leftOut(rd); why != "" {
			b.manifest.LeftOut = append(b.manifest.LeftOut, LeftOut{Run: id, Reason: why})
			continue
		}
		raw, events, ok := uptoHead(rd.raw, registered[id])
		if !ok {
			b.manifest.LeftOut = append(b.manifest.LeftOut, LeftOut{Run: id, Reason: NotRegistered})
			continue
		}
		b.runs = append(b.runs, raw)
		b.manifest.Runs = append(b.manifest.Runs, RunFile{Run: id, Person: rd.open.ActingFor.Person, Events: events,
			File: fileOf("runs/"+id+".jsonl", raw)})
	}
	if err := b.prove(cpNote, cp); err != nil {
		return nil, err
	}
	return b, nil
}

// NotRegistered is the left-out reason of a run the copied head log does
// not register yet (it was being opened as the export was made); the
// next export holds it.
const NotRegistered = "the head log did not register it yet when the export was made: a later export holds it"

// registeredHeads is each run's latest registered event in the head log
// bytes head (its highest run_seq).
func registeredHeads(head []byte) map[string]uint64 {
	out := map[string]uint64{}
	for line := range bytes.Lines(head) {
		var h struct {
			Run    string `json:"run"`
			RunSeq uint64 `json:"run_seq"`
		}
		if json.Unmarshal(line, &h) == nil && h.RunSeq > out[h.Run] {
			out[h.Run] = h.RunSeq
		}
	}
	return out
}

// uptoHead cuts a run file's complete lines raw after its event seq reg,
// the one the head log copy registers last: events written after the head
// log was copied are left to a later export, so every event an export
// holds is registered, and verify takes any other as appended to it. It
// returns the bytes kept and how many events they hold; ok is false when
// reg is 0 (not registered). A file without event reg (cut short in the
// journal) is kept whole, for verify to report.
func uptoHead(raw []byte, reg uint64) (kept []byte, events int, ok bool) {
	if reg == 0 {
		return nil, 0, false
	}
	off, n := 0, 0
	for line := range bytes.Lines(raw) {
		off += len(line)
		ev, err := journal.ParseLine(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			continue
		}
		n++
		if ev.Seq == reg {
			return raw[:off], n, true
		}
	}
	return raw, n, true
}

// latestCheckpoint reads the journal's latest stored checkpoint: nil when
// there is none; ErrCheckpoint when it cannot be read.
func latestCheckpoint(journalDir string) ([]byte, *journal.Checkpoint, error) {
	note, err := journal.LatestCheckpoint(journalDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	// The exporter trusts its own folder; the auditor opens the note
	// with the keys.
	cp, err := journal.PeekCheckpoint(note)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	return note, cp, nil
}

// prove adds the inclusion proofs of the exported runs' head entries
// against cp (nil: the manifest says there are none). Entries after
// cp.Size are listed in the manifest as not covered.
func (b *bundle) prove(cpNote []byte, cp *journal.Checkpoint) error {
	if cp == nil {
		b.manifest.NoProofs = NoCheckpoint
		return nil
	}
	exported := map[string]bool{}
	for _, r := range b.manifest.Runs {
		exported[r.Run] = true
	}
	var covered, later []uint64
	seq := uint64(0)
	for rest := b.head; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		line := rest[:i]
		rest = rest[i+1:]
		seq++
		var h struct {
			Run string `json:"run"`
		}
		if json.Unmarshal(line, &h) != nil || !exported[h.Run] {
			continue
		}
		if int64(seq) <= cp.Size {
			covered = append(covered, seq)
		} else {
			later = append(later, seq)
		}
	}
	proofs, err := journal.ProveEntries(b.head, covered, cp)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if b.proofs, err = journal.MarshalProofs(cp, proofs); err != nil {
		return fmt.Errorf("evidence: proofs: %w", err)
	}
	b.cpNote = cpNote
	b.manifest.Proofs = journal.ProofsDir
	b.manifest.Checkpoint = &CheckpointRef{Origin: cp.Origin, Size: cp.Size, Witnesses: cp.Witnesses, Proved: len(proofs), NotCovered: later}
	if b.manifest.Checkpoint.Witnesses == nil {
		b.manifest.Checkpoint.Witnesses = []string{}
	}
	return nil
}

// proofFiles are the export's proof files, relative paths to content,
// in the order they are written; none without proofs.
func (b *bundle) proofFiles() [][2]string {
	if b.cpNote == nil {
		return nil
	}
	return [][2]string{
		{journal.ProofsDir + "/" + journal.ProofsCheckpointFile, string(b.cpNote)},
		{journal.ProofsDir + "/" + journal.ProofsFile, string(b.proofs)},
	}
}

func fileOf(path string, b []byte) File {
	sum := sha256.Sum256(b)
	return File{Path: path, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
}

// Export writes the evidence export of sel from the journal in journalDir
// into the folder dst (created; it must not exist or be empty). See the
// package doc for the layout. The manifest is written last, so a folder
// without one is an export that did not finish.
func Export(dst, journalDir string, sel Selector) (*ExportSummary, error) {
	return exportAt(dst, journalDir, sel, exportOptions{})
}

func exportAt(dst, journalDir string, sel Selector, opts exportOptions) (*ExportSummary, error) {
	b, err := collect(journalDir, sel, opts)
	if err != nil {
		return nil, err
	}
	if entries, err := os.ReadDir(dst); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrExists, dst)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dst, "runs"), 0o700); err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	write := func(rel string, data []byte) error {
		if err := os.WriteFile(filepath.Join(dst, filepath.FromSlash(rel)), data, 0o600); err != nil {
			return fmt.Errorf("evidence: %w", err)
		}
		return nil
	}
	if err := write("head.jsonl", b.head); err != nil {
		return nil, err
	}
	for i, r := range b.manifest.Runs {
		if err := write(r.Path, b.runs[i]); err != nil {
			return nil, err
		}
	}
	if pf := b.proofFiles(); pf != nil {
		if err := os.MkdirAll(filepath.Join(dst, journal.ProofsDir), 0o700); err != nil {
			return nil, fmt.Errorf("evidence: %w", err)
		}
		for _, f := range pf {
			if err := write(f[0], []byte(f[1])); err != nil {
				return nil, err
			}
		}
	}
	m, _ := json.MarshalIndent(b.manifest, "", "  ")
	if err := write(journal.ExportManifestFile, append(m, '\n')); err != nil {
		return nil, err
	}
	return &ExportSummary{Dir: dst, Manifest: b.manifest}, nil
}

// WriteArchive writes the same export as Export, as a tar.gz stream whose
// entries sit under one folder named after the tenant
// ("<tenant>-evidence/"); unpacked, the folder verifies with
// `gatehouse verify --export`.
func WriteArchive(w io.Writer, journalDir string, sel Selector) error {
	b, err := collect(journalDir, sel, exportOptions{})
	if err != nil {
		return err
	}
	root := safeName(sel.Tenant) + "-evidence/"
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	mod := b.manifest.Created
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: root + name, Mode: 0o600, Size: int64(len(data)), ModTime: mod, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: root + "runs/", Mode: 0o700, ModTime: mod, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("evidence: archive: %w", err)
	}
	if err := add("head.jsonl", b.head); err != nil {
		return fmt.Errorf("evidence: archive: %w", err)
	}
	for i, r := range b.manifest.Runs {
		if err := add(r.Path, b.runs[i]); err != nil {
			return fmt.Errorf("evidence: archive: %w", err)
		}
	}
	if pf := b.proofFiles(); pf != nil {
		if err := tw.WriteHeader(&tar.Header{Name: root + journal.ProofsDir + "/", Mode: 0o700, ModTime: mod, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
			return fmt.Errorf("evidence: archive: %w", err)
		}
		for _, f := range pf {
			if err := add(f[0], []byte(f[1])); err != nil {
				return fmt.Errorf("evidence: archive: %w", err)
			}
		}
	}
	m, _ := json.MarshalIndent(b.manifest, "", "  ")
	if err := add(journal.ExportManifestFile, append(m, '\n')); err != nil {
		return fmt.Errorf("evidence: archive: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("evidence: archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("evidence: archive: %w", err)
	}
	return nil
}

// safeName keeps letters, digits, '-', '_' and '.' of a tenant name for a
// folder name.
func safeName(s string) string {
	out := []byte{}
	for i := 0; i < len(s) && len(out) < 64; i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && len(out) > 0 {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return "tenant"
	}
	return string(out)
}
