// Package witness is Gatehouse's checkpoint witness: an independent
// process (gatehouse witness) that cosigns a log's signed checkpoints
// only when each is consistent with the last one it cosigned, so a log
// cannot show one history to one verifier and another to the next, nor
// rewrite or roll back what a witness saw.
//
// The protocol follows C2SP tlog-witness: POST /add-checkpoint with the
// size the client believes the witness holds, a consistency proof from
// it, and the signed checkpoint; the reply is the witness's cosignature
// lines in C2SP tlog-cosignature (cosignature/v1) form. See
// broker/journal/FORMAT.md.
//
// State: for each known log (origin and Ed25519 key) the latest
// checkpoint it cosigned, in DIR/logs/<id>.checkpoint, written atomically
// before the cosignature is returned; refused forks and rollbacks are
// appended to DIR/conflicts.jsonl as evidence. A Witness is safe for
// concurrent use: AddCheckpoint calls are serialised by one mutex.
package witness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// Errors of AddCheckpoint. The HTTP edge maps them to status codes.
var (
	// ErrMalformed: a request or checkpoint that cannot be parsed.
	ErrMalformed = errors.New("witness: malformed request")
	// ErrUnknownLog: the checkpoint's origin is not a log this witness knows.
	ErrUnknownLog = errors.New("witness: unknown log")
	// ErrBadLogSignature: the checkpoint is not signed by the log's key.
	ErrBadLogSignature = errors.New("witness: checkpoint not signed by the log's key")
	// ErrFork: a checkpoint of the size already cosigned with another
	// root. Recorded in conflicts.jsonl.
	ErrFork = errors.New("witness: fork: a different tree of a size already cosigned")
	// ErrRollback: a checkpoint smaller than the one already cosigned.
	// Recorded in conflicts.jsonl.
	ErrRollback = errors.New("witness: rollback: smaller than the checkpoint already cosigned")
	// ErrBadProof: the consistency proof does not prove the new
	// checkpoint extends the cosigned one (a fork, or a bad proof).
	// Recorded in conflicts.jsonl.
	ErrBadProof = errors.New("witness: consistency proof does not verify")
)

// ConflictError: the old size given is not the size this witness holds
// for the log; the client resubmits with a proof from Size.
type ConflictError = journal.SizeConflictError

// Config configures a Witness.
type Config struct {
	Name   string              // the witness's key name; required
	Key    *journal.SigningKey // required
	Logs   []string            // verifier keys of the logs it witnesses (origin+hash+base64)
	Dir    string              // state directory; required
	Now    func() time.Time    // cosignature timestamps; default time.Now
	Logger *slog.Logger
}

// Witness cosigns checkpoints.
type Witness struct {
	signer *journal.NoteSigner
	logs   map[string]note.Verifier // by origin
	dir    string
	log    *slog.Logger

	mu sync.Mutex
}

// New opens the witness state in cfg.Dir (creating it).
func New(cfg Config) (*Witness, error) {
	if cfg.Name == "" || cfg.Key == nil || cfg.Dir == "" {
		return nil, errors.New("witness: a name, a key and a state directory are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Witness{signer: journal.NewCosigner(cfg.Name, cfg.Key, cfg.Now), logs: map[string]note.Verifier{}, dir: cfg.Dir, log: cfg.Logger}
	if _, err := note.NewVerifier(journal.VerifierKey(cfg.Name, cfg.Key.Public(), false)); err != nil {
		return nil, fmt.Errorf("witness: name %q cannot name a note key", cfg.Name)
	}
	for _, k := range cfg.Logs {
		v, err := journal.NewNoteVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("witness: log key %q: %w", k, err)
		}
		w.logs[v.Name()] = v
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "logs"), 0o750); err != nil {
		return nil, fmt.Errorf("witness: state: %w", err)
	}
	return w, nil
}

// VerifierKey is the witness's cosignature/v1 verifier key.
func (w *Witness) VerifierKey() string { return w.signer.VerifierKey() }

// Name is the witness's key name.
func (w *Witness) Name() string { return w.signer.Name() }

func (w *Witness) statePath(origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return filepath.Join(w.dir, "logs", hex.EncodeToString(sum[:8])+".checkpoint")
}

// Latest returns the latest checkpoint cosigned for origin, with the
// log's signature and this witness's cosignature; nil if none.
func (w *Witness) Latest(origin string) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, _, err := w.latest(origin)
	return b, err
}

func (w *Witness) latest(origin string) ([]byte, *journal.Checkpoint, error) {
	v, ok := w.logs[origin]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownLog, origin)
	}
	b, err := os.ReadFile(w.statePath(origin))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("witness: state: %w", err)
	}
	cp, err := journal.OpenCheckpoint(b, journal.CheckpointKeys{Log: v})
	if err != nil {
		return nil, nil, fmt.Errorf("witness: state of %q: %w", origin, err)
	}
	return b, cp, nil
}

// AddCheckpoint checks and cosigns checkpoint, the log's signed note,
// given the size the caller believes this witness holds for the log and a
// consistency proof from it. It returns the cosignature lines. The new
// checkpoint is stored before they are returned.
//
// Errors: ErrMalformed, ErrUnknownLog, ErrBadLogSignature, a
// *ConflictError when oldSize is not the size held, ErrRollback, ErrFork,
// ErrBadProof (the last three are recorded in conflicts.jsonl).
func (w *Witness) AddCheckpoint(oldSize int64, proof tlog.TreeProof, checkpoint []byte) ([]byte, error) {
	origin, _, ok := strings.Cut(string(checkpoint), "\n")
	if !ok {
		return nil, fmt.Errorf("%w: no origin line", ErrMalformed)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.logs[origin]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownLog, origin)
	}
	cp, err := journal.OpenCheckpoint(checkpoint, journal.CheckpointKeys{Log: v})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadLogSignature, err)
	}
	_, held, err := w.latest(origin)
	if err != nil {
		return nil, err
	}
	var heldSize int64
	var heldHash tlog.Hash
	if held != nil {
		heldSize, heldHash = held.Size, held.Hash
	}
	if oldSize != heldSize {
		return nil, &ConflictError{Size: heldSize}
	}
	switch {
	case cp.Size < oldSize:
		return nil, w.refuse(ErrRollback, cp, oldSize, fmt.Sprintf("size %d after size %d was cosigned", cp.Size, oldSize))
	case cp.Size == oldSize:
		if len(proof) != 0 {
			return nil, fmt.Errorf("%w: a proof between equal sizes", ErrMalformed)
		}
		if held != nil && cp.Hash != heldHash {
			return nil, w.refuse(ErrFork, cp, oldSize, fmt.Sprintf("size %d with root %s; cosigned root %s", cp.Size, cp.Hash, heldHash))
		}
	case oldSize == 0:
		if len(proof) != 0 {
			return nil, fmt.Errorf("%w: a proof from size 0", ErrMalformed)
		}
	default:
		if err := tlog.CheckTree(proof, cp.Size, cp.Hash, oldSize, heldHash); err != nil {
			return nil, w.refuse(ErrBadProof, cp, oldSize, fmt.Sprintf("size %d does not extend cosigned size %d: %v", cp.Size, oldSize, err))
		}
	}
	n, err := note.Open(checkpoint, note.VerifierList(v))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadLogSignature, err)
	}
	body := n.Text
	signed, err := note.Sign(&note.Note{Text: body}, w.signer)
	if err != nil {
		return nil, fmt.Errorf("witness: cosign: %w", err)
	}
	sigLines := signed[len(body)+1:]
	// Keep the log's signature and ours.
	var logSig []byte
	for _, s := range n.Sigs {
		logSig = fmt.Appendf(logSig, "— %s %s\n", s.Name, s.Base64)
	}
	stored := append(append(append([]byte(body), '\n'), logSig...), sigLines...)
	if err := writeAtomic(w.statePath(origin), stored); err != nil {
		return nil, fmt.Errorf("witness: state: %w", err)
	}
	w.log.Info("witness: cosigned", "origin", origin, "size", cp.Size, "old", oldSize)
	return bytes.Clone(sigLines), nil
}

// conflict is one line of conflicts.jsonl.
type conflict struct {
	Time       time.Time `json:"time"`
	Kind       string    `json:"kind"` // fork, rollback, inconsistent
	Origin     string    `json:"origin"`
	Size       int64     `json:"size"`
	Cosigned   int64     `json:"cosigned_size"`
	Detail     string    `json:"detail"`
	Checkpoint string    `json:"checkpoint"` // the refused note, as evidence
}

// refuse records a refused checkpoint and returns err with detail.
func (w *Witness) refuse(err error, cp *journal.Checkpoint, held int64, detail string) error {
	kind := map[error]string{ErrFork: "fork", ErrRollback: "rollback", ErrBadProof: "inconsistent"}[err]
	line, _ := json.Marshal(conflict{Time: time.Now().UTC(), Kind: kind, Origin: cp.Origin, Size: cp.Size, Cosigned: held, Detail: detail, Checkpoint: string(cp.Note)})
	if ferr := appendLine(filepath.Join(w.dir, "conflicts.jsonl"), line); ferr != nil {
		w.log.Error("witness: cannot record a conflict", "err", ferr)
	}
	w.log.Error("witness: REFUSED checkpoint", "kind", kind, "origin", cp.Origin, "size", cp.Size, "cosigned_size", held, "detail", detail)
	return fmt.Errorf("%w: %s", err, detail)
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(filepath.Dir(path)); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	return err
}

func appendLine(path string, line []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
