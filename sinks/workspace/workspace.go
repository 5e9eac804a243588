// Package workspace is the workspace sink: files an agent writes on the
// host, and a step's changes exported as one batch for the next step or for
// review.
//
// # Where files go
//
// Each run has its own folder, <Root>/<tenant>/<run>/, the tenant and run
// taken from the run's record (never from the agent) and the tenant made a
// safe path segment (TenantDir). An agent reaches only its own run's folder:
// not another run's, another person's or another tenant's. Every access goes
// through an os.Root opened on the run folder, and symbolic links are never
// followed: a path any of whose parts is a symbolic link fails with
// "unsafe-path", and os.Root stays the backstop against a link planted
// between the check and the write. Folders are made 0750, files 0640.
//
// # Actions and params
//
//   - write {"path": P, "content": <base64>} writes one file, replacing it.
//     Target is P; the outcome records the path, size and digest.
//   - read {"path": P} returns a file (class read). A missing file fails with
//     "not-found".
//   - export {"files": {P: <base64> | null, ...}} applies a step's changes:
//     each P is written, or deleted when null. Target is the path of the
//     batch the policy treats most strictly (bound to the broker, Bind):
//     the first, in path order, that strict policy refuses as an export
//     of that path alone (class destructive for a deletion), else the
//     first it holds for a person, else "export"; so a rule naming a path
//     decides a batch that touches it, which cannot carry a file past it.
//     The class is write, or destructive when the batch deletes. The outcome records
//     the counts (files, added, changed, unchanged, deleted) and a digest
//     over the batch: SHA-256 of the lines "P\t<digest>\n", sorted by P,
//     where <digest> is "sha256:<hex>" of the content or "deleted". An
//     unchanged file is not rewritten; deleting a missing file counts as
//     unchanged.
//
// A path is 1 to 1024 bytes of "/"-separated segments of
// [A-Za-z0-9._+@,=-], none empty, "." or "..", and no leading "/". Params
// are decoded strictly, so an unknown field (a tenant, a person, a folder)
// is BAD_REQUEST. Content is never recorded, only sizes and digests; paths
// are, so they must not carry secrets.
//
// # Batches
//
// An export first checks every path and writes every new file under a
// temporary name beside it (synced); any failure there removes the
// temporaries and changes nothing. Only then are the files renamed into
// place and the deletions made, and the folders synced. A failure in that
// last phase (a disk error) can leave part of the batch applied; the outcome
// then fails with "partial".
//
// # Limits and concurrency
//
// Config bounds one file, a whole export and the files in it (BAD_REQUEST
// before anything is decided), and the file a read returns. Note that the
// broker bounds a whole request at broker.MaxRequestBytes. The Sink is safe
// for concurrent use; concurrent writes of one path leave one of them whole.
package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// Actions of the workspace sink.
const (
	ActionWrite  = "write"
	ActionRead   = "read"
	ActionExport = "export"
)

// TargetExport is the Target of every export.
const TargetExport = "export"

// Defaults for Config.
const (
	DefaultMaxFileBytes   = 16 << 20
	DefaultMaxExportBytes = 64 << 20
	DefaultMaxExportFiles = 1000
	DefaultMaxReadBytes   = 700 << 10 // base64 of it, with the reply around it, fits a 1 MiB NATS message
)

// Config configures the sink. Root is required; every other zero value is
// useful.
type Config struct {
	// Root is the host folder holding every run's folder; it is created
	// (0750) if missing.
	Root           string
	MaxFileBytes   int64 // one file written or exported; 0 is DefaultMaxFileBytes
	MaxExportBytes int64 // all content of one export; 0 is DefaultMaxExportBytes
	MaxExportFiles int   // paths in one export; 0 is DefaultMaxExportFiles
	MaxReadBytes   int64 // the file a read returns; 0 is DefaultMaxReadBytes
}

// WriteParams are the params of a write.
type WriteParams struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
}

// ReadParams are the params of a read.
type ReadParams struct {
	Path string `json:"path"`
}

// ExportParams are the params of an export: path to base64 content, or
// null to delete.
type ExportParams struct {
	Files map[string]json.RawMessage `json:"files"`
}

// FileReply answers a write (without Content) or a read.
type FileReply struct {
	Path    string `json:"path"`
	Content []byte `json:"content,omitempty"`
	Size    int64  `json:"size"`
	Digest  string `json:"digest"`
}

// ExportReply answers an export.
type ExportReply struct {
	Files     int    `json:"files"`
	Added     int    `json:"added"`
	Changed   int    `json:"changed"`
	Unchanged int    `json:"unchanged"`
	Deleted   int    `json:"deleted"`
	Digest    string `json:"digest"`
}

// Sink writes and reads run folders. Safe for concurrent use; Close
// releases the root folder.
type Sink struct {
	root *os.Root
	cfg  Config
	pol  atomic.Pointer[policyBox] // the broker's policy, once bound
}

// Policy is what the sink needs of the broker to describe an export: the
// policy it decides under. *broker.Broker is one.
type Policy interface{ Policy() *policy.Policy }

type policyBox struct{ p Policy }

// Bind gives the sink the broker whose policy decides its effects, so an
// export is described by its most restricted path (see the package
// documentation). Until it is bound an export is described as "export".
func (s *Sink) Bind(p Policy) { s.pol.Store(&policyBox{p}) }

var _ broker.Sink = (*Sink)(nil)

// New opens (creating if needed) cfg.Root and returns the sink.
func New(cfg Config) (*Sink, error) {
	if cfg.Root == "" {
		return nil, errors.New("workspace: Config.Root is required")
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	if cfg.MaxExportBytes <= 0 {
		cfg.MaxExportBytes = DefaultMaxExportBytes
	}
	if cfg.MaxExportFiles <= 0 {
		cfg.MaxExportFiles = DefaultMaxExportFiles
	}
	if cfg.MaxReadBytes <= 0 {
		cfg.MaxReadBytes = DefaultMaxReadBytes
	}
	if err := os.MkdirAll(cfg.Root, 0o750); err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	root, err := os.OpenRoot(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	return &Sink{root: root, cfg: cfg}, nil
}

// Close releases the root folder.
func (s *Sink) Close() error { return s.root.Close() }

// RunDir returns the folder of run under Root, relative to Root:
// "<TenantDir(tenant)>/<run id>".
func RunDir(run *broker.Run) string { return TenantDir(run.For.Tenant) + "/" + run.ID }

// change is one file of a write or an export; content nil deletes.
type change struct {
	path    string
	content []byte
	digest  string // "sha256:<hex>", or "deleted"
}

// state is the decoded request handed from Describe to Perform.
type state struct {
	action  string
	path    string   // write, read
	changes []change // write (one), export (sorted by path)
}

// Name implements broker.Sink.
func (s *Sink) Name() policy.Sink { return policy.SinkWorkspace }

// Describe implements broker.Sink.
func (s *Sink) Describe(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	if !broker.ValidRunID(run.ID) {
		return nil, fmt.Errorf("%w: run %q is not a run id", broker.ErrBadRequest, clip(run.ID))
	}
	e := policy.Effect{Sink: policy.SinkWorkspace, Action: req.Action, Origin: req.Origin, Tool: req.Tool}
	st := &state{action: req.Action}
	p := &broker.Proposal{State: st}
	switch req.Action {
	case ActionWrite:
		var wp WriteParams
		if err := broker.DecodeParams(req.Params, &wp); err != nil {
			return nil, err
		}
		if err := CheckPath(wp.Path); err != nil {
			return nil, err
		}
		if int64(len(wp.Content)) > s.cfg.MaxFileBytes {
			return nil, fmt.Errorf("%w: content is %d bytes, the limit is %d", broker.ErrBadRequest, len(wp.Content), s.cfg.MaxFileBytes)
		}
		if wp.Content == nil {
			wp.Content = []byte{}
		}
		st.path = wp.Path
		st.changes = []change{{path: wp.Path, content: wp.Content, digest: digest(wp.Content)}}
		e.Target = wp.Path
		p.Size, p.Digest = int64(len(wp.Content)), st.changes[0].digest
	case ActionRead:
		var rp ReadParams
		if err := broker.DecodeParams(req.Params, &rp); err != nil {
			return nil, err
		}
		if err := CheckPath(rp.Path); err != nil {
			return nil, err
		}
		st.path = rp.Path
		e.Target, e.Class = rp.Path, policy.EffectRead
	case ActionExport:
		var ep ExportParams
		if err := broker.DecodeParams(req.Params, &ep); err != nil {
			return nil, err
		}
		changes, size, err := s.exportChanges(ep.Files)
		if err != nil {
			return nil, err
		}
		st.changes = changes
		e.Target = TargetExport
		for _, c := range changes {
			if c.content == nil {
				e.Class = policy.EffectDestructive
			}
		}
		if t := s.restricted(run, e, changes); t != "" {
			e.Target = t
		}
		p.Size, p.Digest = size, batchDigest(changes)
	default:
		return nil, fmt.Errorf("%w: the workspace sink's actions are %q, %q and %q", broker.ErrBadRequest, ActionWrite, ActionRead, ActionExport)
	}
	p.Effect = e
	return p, nil
}

// restricted returns the path of changes the policy treats most strictly
// as the target of an export (e with that path, and the class of its own
// change): the first one strict policy refuses, else the first one it
// holds for a person, else "" (every path is allowed on its own, and the
// export is decided as TargetExport). So a rule naming a path decides an
// export that touches it as it decides a write of it: a batch cannot carry
// past a rule a path on its own would meet.
func (s *Sink) restricted(run *broker.Run, e policy.Effect, changes []change) string {
	box := s.pol.Load()
	if box == nil {
		return ""
	}
	pol := box.p.Policy()
	if pol == nil {
		return ""
	}
	in := policy.Input{Mode: policy.ModeStrict, Authority: run.Authority(), Now: time.Now()}
	held := ""
	for _, c := range changes {
		in.Effect = e
		in.Effect.Target, in.Effect.Class = c.path, ""
		if c.content == nil {
			in.Effect.Class = policy.EffectDestructive
		}
		switch pol.Decide(in).Verdict {
		case policy.VerdictAllow:
		case policy.VerdictHold:
			if held == "" {
				held = c.path
			}
		default:
			return c.path
		}
	}
	return held
}

func (s *Sink) exportChanges(files map[string]json.RawMessage) ([]change, int64, error) {
	if len(files) > s.cfg.MaxExportFiles {
		return nil, 0, fmt.Errorf("%w: export has %d files, the limit is %d", broker.ErrBadRequest, len(files), s.cfg.MaxExportFiles)
	}
	changes := make([]change, 0, len(files))
	var total int64
	for p, raw := range files {
		if err := CheckPath(p); err != nil {
			return nil, 0, err
		}
		c := change{path: p, digest: "deleted"}
		if string(raw) != "null" {
			if err := json.Unmarshal(raw, &c.content); err != nil {
				return nil, 0, fmt.Errorf("%w: files[%q] is neither base64 content nor null: %v", broker.ErrBadRequest, clip(p), err)
			}
			if c.content == nil {
				c.content = []byte{}
			}
			if int64(len(c.content)) > s.cfg.MaxFileBytes {
				return nil, 0, fmt.Errorf("%w: files[%q] is %d bytes, the limit is %d", broker.ErrBadRequest, clip(p), len(c.content), s.cfg.MaxFileBytes)
			}
			total += int64(len(c.content))
			c.digest = digest(c.content)
		}
		changes = append(changes, c)
	}
	if total > s.cfg.MaxExportBytes {
		return nil, 0, fmt.Errorf("%w: export is %d bytes, the limit is %d", broker.ErrBadRequest, total, s.cfg.MaxExportBytes)
	}
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.path, b.path) })
	// Sorted, a folder's files follow it directly or after siblings that sort
	// between ("a", "a-b", "a/c"): compare each path with every later one
	// sharing its prefix.
	for i := range changes {
		for j := i + 1; j < len(changes) && strings.HasPrefix(changes[j].path, changes[i].path); j++ {
			if changes[j].path[len(changes[i].path)] == '/' {
				return nil, 0, fmt.Errorf("%w: export has both %q and %q, a file and a folder of one name", broker.ErrBadRequest, clip(changes[i].path), clip(changes[j].path))
			}
		}
	}
	return changes, total, nil
}

// Perform implements broker.Sink.
func (s *Sink) Perform(ctx context.Context, run *broker.Run, req *broker.EffectRequest, prop *broker.Proposal) (*broker.Performed, error) {
	st := prop.State.(*state)
	if st.action == ActionRead {
		return s.read(run, st)
	}
	rr, err := s.runRoot(run, true)
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	counts, err := apply(ctx, rr, st.changes)
	if err != nil {
		return nil, err
	}
	if st.action == ActionWrite {
		reply, _ := json.Marshal(FileReply{Path: st.path, Size: prop.Size, Digest: prop.Digest})
		return &broker.Performed{
			Result: journal.Result{Status: "ok", Size: prop.Size, Digest: prop.Digest,
				Detail: map[string]string{"path": st.path, "created": strconv.FormatBool(counts.Added == 1)}},
			Reply: reply,
		}, nil
	}
	counts.Files, counts.Digest = len(st.changes), prop.Digest
	reply, _ := json.Marshal(counts)
	return &broker.Performed{
		Result: journal.Result{Status: "ok", Size: prop.Size, Digest: prop.Digest, Detail: map[string]string{
			"files": strconv.Itoa(counts.Files), "added": strconv.Itoa(counts.Added), "changed": strconv.Itoa(counts.Changed),
			"unchanged": strconv.Itoa(counts.Unchanged), "deleted": strconv.Itoa(counts.Deleted),
		}},
		Reply: reply,
	}, nil
}

func (s *Sink) read(run *broker.Run, st *state) (*broker.Performed, error) {
	rr, err := s.runRoot(run, false)
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	data, err := readFile(rr, st.path, s.cfg.MaxReadBytes)
	if err != nil {
		return nil, err
	}
	d := digest(data)
	reply, err := json.Marshal(FileReply{Path: st.path, Content: data, Size: int64(len(data)), Digest: d})
	if err != nil {
		return nil, err
	}
	return &broker.Performed{
		Result: journal.Result{Status: "ok", Size: int64(len(data)), Digest: d, Detail: map[string]string{"path": st.path}},
		Reply:  reply,
	}, nil
}

// runRoot opens the run's folder as its own os.Root, creating it when
// create is set.
func (s *Sink) runRoot(run *broker.Run, create bool) (*os.Root, error) {
	dir := RunDir(run)
	if err := checkNoSymlink(s.root, dir); err != nil {
		return nil, err
	}
	if create {
		if err := s.root.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("%w: run folder: %v", ErrStore, err)
		}
	}
	rr, err := s.root.OpenRoot(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: this run has written nothing yet", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: run folder: %v", ErrStore, err)
	}
	return rr, nil
}

// digest returns "sha256:<hex>" of b.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// batchDigest is the digest of an export: SHA-256 over "path\tdigest\n"
// lines of changes, which are sorted by path.
func batchDigest(changes []change) string {
	h := sha256.New()
	for _, c := range changes {
		h.Write([]byte(c.path + "\t" + c.digest + "\n"))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
