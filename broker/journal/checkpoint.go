package journal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Checkpoint errors.
var (
	// ErrBadCheckpoint: a checkpoint that is malformed, not signed by the
	// log's key, or lacking the witness cosignatures asked for.
	ErrBadCheckpoint = errors.New("journal: bad checkpoint")
	// ErrEmptyLog: there is nothing to checkpoint yet.
	ErrEmptyLog = errors.New("journal: the head log is empty")
)

// Checkpoint is the body of a C2SP tlog-checkpoint: the log's origin, the
// number of head log entries, and the RFC 6962 root hash over them (see
// Tree). Note holds the whole signed note it was read from, if any.
type Checkpoint struct {
	Origin string
	Size   int64
	Hash   tlog.Hash
	Note   []byte // the signed note, with every signature line
	// Witnesses names the witnesses whose cosignatures verified.
	Witnesses []string
}

// maxCheckpointBytes bounds a signed checkpoint note.
const maxCheckpointBytes = 16 << 10

// FormatCheckpoint returns the checkpoint body: origin, size and base64
// root hash, each on its own line.
func FormatCheckpoint(origin string, size int64, h tlog.Hash) string {
	return origin + "\n" + strconv.FormatInt(size, 10) + "\n" + base64.StdEncoding.EncodeToString(h[:]) + "\n"
}

// ParseCheckpoint parses a checkpoint body strictly: a non-empty origin
// without control characters, a decimal size without leading zeros, a
// standard base64 32-byte hash, then optional non-empty extension lines
// (kept in the body, ignored here), every line ending in '\n'.
func ParseCheckpoint(body string) (Checkpoint, error) {
	var cp Checkpoint
	if len(body) > maxCheckpointBytes || !strings.HasSuffix(body, "\n") || !utf8.ValidString(body) {
		return cp, fmt.Errorf("%w: not a checkpoint body", ErrBadCheckpoint)
	}
	lines := strings.Split(body[:len(body)-1], "\n")
	if len(lines) < 3 {
		return cp, fmt.Errorf("%w: a checkpoint has origin, size and hash lines", ErrBadCheckpoint)
	}
	for _, l := range lines {
		if l == "" || strings.IndexFunc(l, unicode.IsControl) >= 0 {
			return cp, fmt.Errorf("%w: empty line or control character", ErrBadCheckpoint)
		}
	}
	cp.Origin = lines[0]
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != lines[1] {
		return cp, fmt.Errorf("%w: bad size %q", ErrBadCheckpoint, lines[1])
	}
	cp.Size = n
	h, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(h) != tlog.HashSize {
		return cp, fmt.Errorf("%w: bad root hash", ErrBadCheckpoint)
	}
	copy(cp.Hash[:], h)
	return cp, nil
}

// CheckpointKeys are what a checkpoint is checked with: the log's key and
// the witnesses' keys, with how many witness cosignatures must verify.
type CheckpointKeys struct {
	Log       note.Verifier
	Witnesses []note.Verifier
	// Quorum is the number of witnesses that must have cosigned; 0 means
	// every witness in Witnesses.
	Quorum int
}

// OpenCheckpoint checks a signed checkpoint note: well formed, signed by
// keys.Log under its origin, and cosigned by a quorum of keys.Witnesses.
// Signatures by other keys are ignored. Errors wrap ErrBadCheckpoint.
func OpenCheckpoint(text []byte, keys CheckpointKeys) (*Checkpoint, error) {
	if keys.Log == nil {
		return nil, fmt.Errorf("%w: no log key to check it with", ErrBadCheckpoint)
	}
	if len(text) > maxCheckpointBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadCheckpoint, maxCheckpointBytes)
	}
	vs := append([]note.Verifier{keys.Log}, keys.Witnesses...)
	n, err := note.Open(text, note.VerifierList(vs...))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCheckpoint, err)
	}
	cp, err := ParseCheckpoint(n.Text)
	if err != nil {
		return nil, err
	}
	if cp.Origin != keys.Log.Name() {
		return nil, fmt.Errorf("%w: origin %q is not the log key's name %q", ErrBadCheckpoint, cp.Origin, keys.Log.Name())
	}
	logSigned := false
	seen := map[string]bool{}
	for _, s := range n.Sigs {
		switch {
		case s.Name == keys.Log.Name() && s.Hash == keys.Log.KeyHash():
			logSigned = true
		case !seen[s.Name]:
			seen[s.Name] = true
			cp.Witnesses = append(cp.Witnesses, s.Name)
		}
	}
	if !logSigned {
		return nil, fmt.Errorf("%w: not signed by the log key %s", ErrBadCheckpoint, keys.Log.Name())
	}
	q := keys.Quorum
	if q <= 0 {
		q = len(keys.Witnesses)
	}
	if len(cp.Witnesses) < q {
		return nil, fmt.Errorf("%w: cosigned by %d of the %d witnesses required", ErrBadCheckpoint, len(cp.Witnesses), q)
	}
	cp.Note = bytes.Clone(text)
	return &cp, nil
}

// Note key algorithms (C2SP signed-note): 0x01 Ed25519 signatures, 0x04
// cosignature/v1 (tlog-cosignature) timestamped witness cosignatures.
const (
	algEd25519     = 0x01
	algCosignature = 0x04
)

func noteKeyHash(name string, alg byte, pub []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{alg})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// VerifierKey returns the signed-note verifier key (name+hash+base64) of
// pub for name: alg Ed25519 for a log, cosignature/v1 for a witness.
func VerifierKey(name string, pub ed25519.PublicKey, cosigner bool) string {
	alg := byte(algEd25519)
	if cosigner {
		alg = algCosignature
	}
	return fmt.Sprintf("%s+%08x+%s", name, noteKeyHash(name, alg, pub), base64.StdEncoding.EncodeToString(append([]byte{alg}, pub...)))
}

// NewNoteVerifier parses a verifier key of algorithm Ed25519 (a log's)
// or cosignature/v1 (a witness's). Verification is strict (VerifyStrict);
// a small-order key is refused here. Errors wrap ErrBadKey.
func NewNoteVerifier(vkey string) (note.Verifier, error) {
	vkey = strings.TrimSpace(vkey)
	name, rest, _ := strings.Cut(vkey, "+")
	hash16, key64, _ := strings.Cut(rest, "+")
	hash, err1 := strconv.ParseUint(hash16, 16, 32)
	key, err2 := base64.StdEncoding.Strict().DecodeString(key64)
	if len(hash16) != 8 || err1 != nil || err2 != nil || name == "" || strings.ContainsFunc(name, unicode.IsSpace) || len(key) != 33 {
		return nil, fmt.Errorf("%w: not a verifier key (name+hash+base64)", ErrBadKey)
	}
	if uint32(hash) != noteKeyHash(name, key[0], key[1:]) {
		return nil, fmt.Errorf("%w: verifier key hash does not match", ErrBadKey)
	}
	pub := ed25519.PublicKey(key[1:])
	if err := CheckPublicKey(pub); err != nil {
		return nil, err
	}
	switch key[0] {
	case algEd25519:
		return &noteVerifier{name: name, hash: uint32(hash), pub: pub}, nil
	case algCosignature:
		return &noteVerifier{name: name, hash: uint32(hash), pub: pub, cosig: true}, nil
	}
	return nil, fmt.Errorf("%w: unknown verifier key algorithm %d", ErrBadKey, key[0])
}

// noteVerifier verifies Ed25519 and cosignature/v1 note signatures strictly.
type noteVerifier struct {
	name  string
	hash  uint32
	pub   ed25519.PublicKey
	cosig bool
}

func (v *noteVerifier) Name() string    { return v.name }
func (v *noteVerifier) KeyHash() uint32 { return v.hash }
func (v *noteVerifier) Verify(msg, sig []byte) bool {
	if !v.cosig {
		return VerifyStrict(v.pub, msg, sig) == nil
	}
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	ts := binary.BigEndian.Uint64(sig[:8])
	return VerifyStrict(v.pub, cosignedMessage(ts, msg), sig[8:]) == nil
}

// cosignedMessage is what a cosignature/v1 signature covers.
func cosignedMessage(ts uint64, body []byte) []byte {
	return append([]byte("cosignature/v1\ntime "+strconv.FormatUint(ts, 10)+"\n"), body...)
}

// NoteSigner signs notes with a SigningKey: as a log (Ed25519, name = the
// log's origin) or as a witness (cosignature/v1, timestamped with Now).
type NoteSigner struct {
	key   *SigningKey
	name  string
	cosig bool
	now   func() time.Time
}

// NewLogSigner signs checkpoints of the log named origin.
func NewLogSigner(origin string, k *SigningKey) *NoteSigner {
	return &NoteSigner{key: k, name: origin}
}

// NewCosigner signs cosignature/v1 cosignatures as the witness named name.
// now defaults to time.Now.
func NewCosigner(name string, k *SigningKey, now func() time.Time) *NoteSigner {
	if now == nil {
		now = time.Now
	}
	return &NoteSigner{key: k, name: name, cosig: true, now: now}
}

func (s *NoteSigner) Name() string { return s.name }
func (s *NoteSigner) KeyHash() uint32 {
	alg := byte(algEd25519)
	if s.cosig {
		alg = algCosignature
	}
	return noteKeyHash(s.name, alg, s.key.pub)
}
func (s *NoteSigner) Sign(msg []byte) ([]byte, error) {
	if !s.cosig {
		return s.key.sign(msg), nil
	}
	ts := uint64(s.now().Unix())
	out := binary.BigEndian.AppendUint64(nil, ts)
	return append(out, s.key.sign(cosignedMessage(ts, msg))...), nil
}

// VerifierKey is the signer's verifier key.
func (s *NoteSigner) VerifierKey() string { return VerifierKey(s.name, s.key.pub, s.cosig) }

var _ note.Signer = (*NoteSigner)(nil)
