package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const (
	checkpointsDir = "checkpoints"
	latestFile     = "latest"
)

// Cosigner is a witness as the Checkpointer sees it (package witness has
// the HTTP client). AddCheckpoint submits a signed checkpoint with a
// consistency proof from oldSize (the size the witness last cosigned for
// this log, 0 for none) and returns the witness's signature lines ("— name
// base64\n"...). When the witness holds another size it returns a
// *SizeConflictError naming it.
type Cosigner interface {
	AddCheckpoint(ctx context.Context, oldSize int64, proof tlog.TreeProof, checkpoint []byte) ([]byte, error)
	String() string
}

// SizeConflictError: the witness's latest cosigned size is not the old
// size given; resubmit with a proof from Size.
type SizeConflictError struct{ Size int64 }

func (e *SizeConflictError) Error() string {
	return fmt.Sprintf("witness holds a checkpoint of size %d", e.Size)
}

// CheckpointConfig configures a Checkpointer.
type CheckpointConfig struct {
	Origin    string      // the log's name, the first line of every checkpoint; required
	Key       *SigningKey // the log's key; required
	Interval  time.Duration
	Witnesses []Cosigner
	// WitnessKeys, when set, check every cosignature a witness returns
	// before it is kept: a reply that does not verify under one of them
	// is dropped (and logged), so the stored checkpoint always opens.
	WitnessKeys []note.Verifier
	Logger      *slog.Logger
}

// Checkpointer signs checkpoints over a Writer's head log, on a schedule
// (Run) and on demand (Checkpoint), submits each to the witnesses and
// keeps the latest, with the cosignatures it got, in
// DIR/checkpoints/latest (written to a temporary file, fsynced, renamed).
//
// It builds the head log's Merkle tree in memory when created (reading the
// head log under the Writer's lock) and the Writer extends it on every
// commit. Checkpoint calls are serialised; all methods are safe for
// concurrent use; Latest does not wait for a checkpoint in progress (a
// slow witness). Lock order: Checkpointer.mu, then Writer.mu or
// Checkpointer.smu.
type Checkpointer struct {
	w      *Writer
	cfg    CheckpointConfig
	signer *NoteSigner
	log    *slog.Logger

	mu        sync.Mutex // serialises Checkpoint
	witnessed []int64    // per witness, the size it last cosigned (0: unknown); under mu

	smu    sync.Mutex
	latest []byte // the latest checkpoint note, cosignatures included
	signed int64  // its size
}

// NewCheckpointer attaches a Checkpointer to w. It reads the head log
// into the tree and the latest stored checkpoint, if any.
func NewCheckpointer(w *Writer, cfg CheckpointConfig) (*Checkpointer, error) {
	if cfg.Origin == "" || cfg.Key == nil {
		return nil, fmt.Errorf("journal: checkpointer needs an origin and a key")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Checkpointer{w: w, cfg: cfg, signer: NewLogSigner(cfg.Origin, cfg.Key), log: cfg.Logger,
		witnessed: make([]int64, len(cfg.Witnesses))}
	if _, err := note.NewVerifier(c.signer.VerifierKey()); err != nil {
		return nil, fmt.Errorf("journal: origin %q cannot name a note key: %w", cfg.Origin, err)
	}
	if err := os.MkdirAll(filepath.Join(w.dir, checkpointsDir), dirMode); err != nil {
		return nil, fmt.Errorf("journal: checkpoints: %w", err)
	}
	var latest *Checkpoint
	if b, err := os.ReadFile(filepath.Join(w.dir, checkpointsDir, latestFile)); err == nil {
		if n, err := note.Open(b, note.VerifierList(c.verifier())); err == nil {
			if cp, err := ParseCheckpoint(n.Text); err == nil {
				c.latest, c.signed, latest = b, cp.Size, &cp
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tree == nil {
		t, err := openTreeFor(w, latest, c.log)
		if err != nil {
			return nil, err
		}
		w.tree = t
	}
	return c, nil
}

// openTreeFor opens w's tile tree (under w.mu) and checks it: as many
// leaves as the head log has entries, and the root the latest checkpoint
// signed (when there is one within it). A tree that fails either is
// rebuilt from the head log.
func openTreeFor(w *Writer, latest *Checkpoint, log *slog.Logger) (*TileTree, error) {
	t, err := OpenTileTree(w.dir, log)
	if err != nil {
		return nil, fmt.Errorf("journal: tiles: %w", err)
	}
	why := ""
	if t.Size() != int64(w.headSeq) {
		why = fmt.Sprintf("tiles hold %d entries, the head log %d", t.Size(), w.headSeq)
	} else if latest != nil && latest.Size <= t.Size() {
		if root, err := t.Root(latest.Size); err != nil || root != latest.Hash {
			why = fmt.Sprintf("tiles do not give the root of the latest checkpoint (size %d)", latest.Size)
		}
	}
	if why == "" {
		return t, nil
	}
	log.Warn("journal: rebuilding the tiles from the head log", "why", why)
	if t, err = t.rebuild(w.dir); err != nil {
		return nil, fmt.Errorf("journal: tiles: %w", err)
	}
	return t, nil
}

func (c *Checkpointer) verifier() note.Verifier {
	v, _ := NewNoteVerifier(c.signer.VerifierKey())
	return v
}

// VerifierKey is the log's signed-note verifier key, for witnesses and
// verifiers: origin+hash+base64.
func (c *Checkpointer) VerifierKey() string { return c.signer.VerifierKey() }

// Origin is the log's name.
func (c *Checkpointer) Origin() string { return c.cfg.Origin }

// PublicKey is the log's public key.
func (c *Checkpointer) PublicKey() []byte { return c.cfg.Key.Public() }

// Run signs a checkpoint every Interval when the head log grew, until ctx
// ends. Failures are logged and retried at the next tick.
func (c *Checkpointer) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if c.Size() <= c.signedSize() {
			continue
		}
		if _, err := c.Checkpoint(ctx); err != nil && !errors.Is(err, ErrEmptyLog) {
			c.log.Error("journal: checkpoint failed", "err", err)
		}
	}
}

func (c *Checkpointer) signedSize() int64 {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.signed
}

// Size is the head log's current number of entries.
func (c *Checkpointer) Size() int64 {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.w.tree.Size()
}

// Latest returns the latest checkpoint note, nil before the first.
func (c *Checkpointer) Latest() []byte {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.latest
}

// ConsistencyProof proves the tree of size old a prefix of the tree of
// size n. Errors wrap ErrBadProofRequest.
func (c *Checkpointer) ConsistencyProof(old, n int64) (tlog.TreeProof, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.w.tree.ConsistencyProof(old, n)
}

// Refresh signs a checkpoint when the head log grew since the latest one
// (or none was signed yet) and returns the latest.
func (c *Checkpointer) Refresh(ctx context.Context) ([]byte, error) {
	if c.Size() > c.signedSize() {
		if _, err := c.Checkpoint(ctx); err != nil {
			return nil, err
		}
	}
	return c.Latest(), nil
}

// Checkpoint signs a checkpoint of the head log as it is now, submits it
// to every witness, stores it with the cosignatures obtained, and returns
// it. A witness that fails is logged and left out; the checkpoint is
// stored anyway. ErrEmptyLog when the head log has no entry.
func (c *Checkpointer) Checkpoint(ctx context.Context) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.w.mu.Lock()
	n := c.w.tree.Size()
	root, err := c.w.tree.Root(n)
	if err == nil {
		if perr := c.w.tree.WritePartials(); perr != nil {
			c.log.Warn("journal: partial tiles of the checkpoint not written", "err", perr)
		}
	}
	c.w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, ErrEmptyLog
	}
	signed, err := note.Sign(&note.Note{Text: FormatCheckpoint(c.cfg.Origin, n, root)}, c.signer)
	if err != nil {
		return nil, fmt.Errorf("journal: sign checkpoint: %w", err)
	}
	out := bytes.Clone(signed)
	for i, wit := range c.cfg.Witnesses {
		sigs, err := c.submit(ctx, i, wit, n, signed)
		if err != nil {
			c.log.Warn("journal: witness did not cosign", "witness", wit.String(), "size", n, "err", err)
			continue
		}
		out = append(out, sigs...)
	}
	if err := c.store(out); err != nil {
		return nil, err
	}
	c.smu.Lock()
	c.latest, c.signed = out, n
	c.smu.Unlock()
	return out, nil
}

// submit sends a checkpoint of size n to witness i, resubmitting once
// from the size the witness names on a conflict.
func (c *Checkpointer) submit(ctx context.Context, i int, wit Cosigner, n int64, signed []byte) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		old := c.witnessed[i]
		var proof tlog.TreeProof
		if old > 0 && old < n {
			var err error
			if proof, err = c.ConsistencyProof(old, n); err != nil {
				return nil, err
			}
		}
		sigs, err := wit.AddCheckpoint(ctx, old, proof, signed)
		var conflict *SizeConflictError
		if errors.As(err, &conflict) && attempt == 0 && conflict.Size != old && conflict.Size <= n {
			c.witnessed[i] = conflict.Size
			continue
		}
		if err != nil {
			return nil, err
		}
		if !validSigLines(sigs) {
			return nil, fmt.Errorf("witness %s replied with no signature lines", wit)
		}
		if len(c.cfg.WitnessKeys) > 0 {
			vs := append([]note.Verifier{c.verifier()}, c.cfg.WitnessKeys...)
			n, err := note.Open(append(bytes.Clone(signed), sigs...), note.VerifierList(vs...))
			if err != nil || len(n.Sigs) < 2 {
				return nil, fmt.Errorf("witness %s: cosignature does not verify under the witness keys given", wit)
			}
		}
		c.witnessed[i] = n
		return sigs, nil
	}
}

// validSigLines reports whether b is one or more note signature lines.
func validSigLines(b []byte) bool {
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return false
	}
	for _, l := range bytes.Split(b[:len(b)-1], []byte("\n")) {
		if !bytes.HasPrefix(l, []byte("— ")) || bytes.Count(l, []byte(" ")) != 2 {
			return false
		}
	}
	return true
}

func (c *Checkpointer) store(b []byte) error {
	dir := filepath.Join(c.w.dir, checkpointsDir)
	tmp := filepath.Join(dir, latestFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fileMode)
	if err != nil {
		return fmt.Errorf("journal: store checkpoint: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, latestFile))
	}
	if err == nil {
		err = syncDir(OSFS{}, dir)
	}
	if err != nil {
		return fmt.Errorf("journal: store checkpoint: %w", err)
	}
	return nil
}
