package evidence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// ManifestFormat and ManifestVersion mark export.json.
const (
	ManifestFormat  = "gatehouse-evidence-export"
	ManifestVersion = 1
	// maxManifest bounds what ParseManifest reads: an export of a million
	// runs stays well under it.
	maxManifest = 256 << 20
)

// Manifest is export.json. It is what the export claims to hold; verify
// checks the files against it and each run against the head log.
type Manifest struct {
	Format  string    `json:"format"`  // ManifestFormat
	Version int       `json:"version"` // ManifestVersion
	Tenant  string    `json:"tenant"`
	Person  string    `json:"person,omitempty"` // "" for the whole tenant
	Created time.Time `json:"created"`
	Head    File      `json:"head"`
	Runs    []RunFile `json:"runs"`
	// LeftOut names the tenant's runs the export does not hold, and why.
	LeftOut []LeftOut `json:"left_out,omitempty"`
	// Proofs names the folder of inclusion proofs ("proofs") when the
	// export carries them; "" when not, and NoProofs says why.
	Proofs string `json:"proofs,omitempty"`
	// Checkpoint describes the checkpoint the proofs are against, as the
	// exporter read it from its own journal: claims, which verify checks
	// against the checkpoint itself with the keys it is given.
	Checkpoint *CheckpointRef `json:"checkpoint,omitempty"`
	// NoProofs says why the export carries no inclusion proofs.
	NoProofs string `json:"no_proofs,omitempty"`
}

// CheckpointRef is what the manifest says about the export's checkpoint.
type CheckpointRef struct {
	Origin string `json:"origin"`
	Size   int64  `json:"size"` // head log entries it covers
	// Witnesses are the names on its cosignature lines (not checked here).
	Witnesses []string `json:"witnesses"`
	// Proved is the number of head entries of exported runs proved.
	Proved int `json:"proved"`
	// NotCovered are the head seqs of exported runs after Size: written
	// after the checkpoint, so protected by the hash chain only until a
	// later export proves them.
	NotCovered []uint64 `json:"not_covered,omitempty"`
}

// File is one file of the export.
type File struct {
	Path   string `json:"path"` // relative, '/'-separated
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // lowercase hex
}

// RunFile is one exported run.
type RunFile struct {
	Run    string `json:"run"`
	Person string `json:"person"`
	Events int    `json:"events"`
	File
}

// LeftOut is a run of the tenant not exported.
type LeftOut struct {
	Run    string `json:"run"`
	Reason string `json:"reason"`
}

// Selector returns whose export this is.
func (m *Manifest) Selector() Selector { return Selector{Tenant: m.Tenant, Person: m.Person} }

// RunIDs lists the exported runs.
func (m *Manifest) RunIDs() []string {
	out := make([]string, len(m.Runs))
	for i, r := range m.Runs {
		out[i] = r.Run
	}
	return out
}

// ParseManifest reads export.json, which comes from whoever handed over
// the export: strictly (unknown members and trailing data refused) and
// validated. Every error wraps ErrNotExport. It never panics.
func ParseManifest(b []byte) (*Manifest, error) {
	if len(b) > maxManifest {
		return nil, fmt.Errorf("%w: manifest larger than %d bytes", ErrNotExport, maxManifest)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %w", ErrNotExport, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: manifest: data after the object", ErrNotExport)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks what ParseManifest checks after decoding.
func (m *Manifest) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: manifest: %s", ErrNotExport, fmt.Sprintf(format, a...))
	}
	switch {
	case m.Format != ManifestFormat:
		return bad("format %q, want %q", clip(m.Format), ManifestFormat)
	case m.Version != ManifestVersion:
		return bad("version %d, want %d", m.Version, ManifestVersion)
	}
	if err := m.Selector().Validate(); err != nil {
		return bad("%v", err)
	}
	if m.Head.Path != "head.jsonl" {
		return bad("head path %q, want head.jsonl", clip(m.Head.Path))
	}
	if err := checkFile(m.Head); err != nil {
		return bad("head: %v", err)
	}
	seen := map[string]bool{}
	for i, r := range m.Runs {
		if !journal.ValidRunID(r.Run) {
			return bad("runs[%d]: %q is not a run id", i, clip(r.Run))
		}
		if seen[r.Run] {
			return bad("runs[%d]: run %s listed twice", i, r.Run)
		}
		seen[r.Run] = true
		if r.Path != "runs/"+r.Run+".jsonl" {
			return bad("runs[%d]: path %q, want runs/%s.jsonl", i, clip(r.Path), r.Run)
		}
		if err := checkFile(r.File); err != nil {
			return bad("runs[%d]: %v", i, err)
		}
		if r.Events < 0 {
			return bad("runs[%d]: negative event count", i)
		}
	}
	for i, l := range m.LeftOut {
		if !journal.ValidRunID(l.Run) || seen[l.Run] {
			return bad("left_out[%d]: %q is not a run id left out", i, clip(l.Run))
		}
	}
	if m.Proofs != "" && m.Proofs != journal.ProofsDir {
		return bad("proofs folder %q, want proofs", clip(m.Proofs))
	}
	if (m.Proofs == "") != (m.Checkpoint == nil) {
		return bad("proofs and checkpoint go together")
	}
	if m.Checkpoint != nil && (m.Checkpoint.Size < 1 || m.Checkpoint.Proved < 0) {
		return bad("checkpoint size %d, proved %d", m.Checkpoint.Size, m.Checkpoint.Proved)
	}
	return nil
}

func checkFile(f File) error {
	if f.Size < 0 {
		return fmt.Errorf("negative size")
	}
	if len(f.SHA256) != 64 {
		return fmt.Errorf("sha256 is not 64 hex digits")
	}
	for _, c := range f.SHA256 {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("sha256 is not lowercase hex")
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
