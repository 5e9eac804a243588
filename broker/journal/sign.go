package journal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"filippo.io/edwards25519"
)

// SigSpec is the spec tag every event signature statement names.
const SigSpec = "gatehouse.journal.sig/v1"

// Signature errors. Verification never says more than which check failed.
var (
	// ErrBadKey: a signing or public key that cannot be used (unreadable,
	// wrong length, not canonical, of small order).
	ErrBadKey = errors.New("journal: bad key")
	// ErrBadSignature: a signature that does not verify strictly.
	ErrBadSignature = errors.New("journal: bad signature")
	// ErrUnknownKey: a signature by a key id that is not trusted.
	ErrUnknownKey = errors.New("journal: unknown key id")
)

// SigningKey is an Ed25519 private key. It never prints itself: String,
// Format (every verb, %v, %+v, %#v, %x, %s...), LogValue and MarshalText
// give only its key id, so it cannot reach a log line, an error or a
// reply. A SigningKey is immutable and safe for concurrent use.
type SigningKey struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	id   string
}

// NewSigningKey makes a key from a 32-byte Ed25519 seed. It refuses any
// other length (ErrBadKey) and never pads or truncates.
func NewSigningKey(seed []byte) (*SigningKey, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: a seed is %d bytes, not %d", ErrBadKey, ed25519.SeedSize, len(seed))
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	return &SigningKey{priv: priv, pub: pub, id: KeyID(pub)}, nil
}

// ParseSigningKey reads a key written as PKCS#8 PEM (what gatehouse keygen
// writes), or its seed as 64 hex digits or standard base64 (44
// characters), surrounding whitespace ignored.
func ParseSigningKey(text []byte) (*SigningKey, error) {
	if seed, ok, err := pkcs8Seed(text); ok { // keyformat.go
		if err != nil {
			return nil, err
		}
		return NewSigningKey(seed)
	}
	seed, err := decodeKey(text, ed25519.SeedSize)
	if err != nil {
		return nil, err
	}
	return NewSigningKey(seed)
}

// LoadSigningKey reads the seed from file, or, when file is "", from
// envValue. It returns (nil, nil) when both are empty. When the file is
// readable by its group or by others it logs a warning to log (the key
// is still used: refusing would leave events unsigned). Errors wrap
// ErrBadKey and never carry key material.
func LoadSigningKey(file, envValue string, log *slog.Logger) (*SigningKey, error) {
	if log == nil {
		log = slog.Default()
	}
	if file == "" {
		if envValue == "" {
			return nil, nil
		}
		return ParseSigningKey([]byte(envValue))
	}
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadKey, file, errors.Unwrap(err))
	}
	if fi.Mode().Perm()&0o077 != 0 {
		log.Warn("SIGNING KEY FILE IS READABLE BY OTHER USERS: anyone who can read it can forge journal signatures; chmod 600 it",
			"file", file, "mode", fi.Mode().Perm().String())
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadKey, file, errors.Unwrap(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadKey, file, err)
	}
	k, err := ParseSigningKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return k, nil
}

// WriteSigningKey writes a new random key to file (mode 0600, which must
// not exist yet) and returns it. The file holds the seed in hex.
func WriteSigningKey(file string, rand io.Reader) (*SigningKey, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(rand, seed); err != nil {
		return nil, err
	}
	k, _ := NewSigningKey(seed)
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(hex.EncodeToString(seed) + "\n")
	clear(seed)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return k, nil
}

func decodeKey(text []byte, size int) ([]byte, error) {
	s := strings.TrimSpace(string(text))
	var b []byte
	var err error
	switch len(s) {
	case 2 * size:
		b, err = hex.DecodeString(s)
	case base64.StdEncoding.EncodedLen(size):
		b, err = base64.StdEncoding.DecodeString(s)
	default:
		return nil, fmt.Errorf("%w: expected %d bytes as %d hex digits or %d base64 characters, got %d characters",
			ErrBadKey, size, 2*size, base64.StdEncoding.EncodedLen(size), len(s))
	}
	if err != nil || len(b) != size {
		return nil, fmt.Errorf("%w: not valid hex or base64", ErrBadKey)
	}
	return b, nil
}

// KeyID returns the key id of an Ed25519 public key: the first 16
// lowercase hex digits of SHA-256 over its 32 bytes.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// KeyID returns the key's id.
func (k *SigningKey) KeyID() string { return k.id }

// Public returns the public key.
func (k *SigningKey) Public() ed25519.PublicKey { return k.pub }

// String names the key by its id only.
func (k *SigningKey) String() string {
	if k == nil {
		return "journal.SigningKey(none)"
	}
	return "journal.SigningKey(" + k.id + ")"
}

// GoString is String, so %#v shows no key material.
func (k *SigningKey) GoString() string { return k.String() }

// Format prints String for every verb.
func (k *SigningKey) Format(f fmt.State, _ rune) { io.WriteString(f, k.String()) }

// LogValue logs the key id only.
func (k *SigningKey) LogValue() slog.Value {
	if k == nil {
		return slog.StringValue("none")
	}
	return slog.GroupValue(slog.String("key_id", k.id))
}

// MarshalText gives the key id only, so encoding a struct holding a key
// does not leak it.
func (k *SigningKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// sign signs msg. Unexported: signing is done through SignEvent and the
// checkpoint signer, whose statements are typed.
func (k *SigningKey) sign(msg []byte) []byte { return ed25519.Sign(k.priv, msg) }

// Signature is the "sig" member of a signed event line: who signed (the
// key id) and the Ed25519 signature, standard base64, over the statement
// Statement(hash, key_id).
type Signature struct {
	KeyID string `json:"key_id"`
	Sig   string `json:"sig"`
}

// Statement returns the bytes an event signature covers: the RFC 8785
// canonical JSON {"hash":HASH,"key_id":KEYID,"spec":"gatehouse.journal.sig/v1"},
// where HASH is the event's hash (64 lowercase hex digits) and KEYID the
// signer's key id (16 lowercase hex digits). Both are plain ASCII, so the
// canonical form is exactly this concatenation.
func Statement(hash, keyID string) []byte {
	return []byte(`{"hash":"` + hash + `","key_id":"` + keyID + `","spec":"` + SigSpec + `"}`)
}

// ParseStatement parses a signature statement, strictly: exactly the
// canonical form Statement produces, hash 64 and key id 16 lowercase hex
// digits. Anything else wraps ErrMalformed.
func ParseStatement(b []byte) (hash, keyID string, err error) {
	const pre, mid, post = `{"hash":"`, `","key_id":"`, `","spec":"` + SigSpec + `"}`
	rest, ok := bytes.CutPrefix(b, []byte(pre))
	if !ok || len(rest) < 64+len(mid)+16+len(post) {
		return "", "", fmt.Errorf("%w: not a signature statement", ErrMalformed)
	}
	hash, rest = string(rest[:64]), rest[64:]
	if rest, ok = bytes.CutPrefix(rest, []byte(mid)); !ok || len(rest) != 16+len(post) {
		return "", "", fmt.Errorf("%w: not a signature statement", ErrMalformed)
	}
	keyID = string(rest[:16])
	if !bytes.Equal(rest[16:], []byte(post)) || !isLowerHex(hash) || !isLowerHex(keyID) {
		return "", "", fmt.Errorf("%w: not a signature statement", ErrMalformed)
	}
	return hash, keyID, nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// SignEvent signs an event hash (64 lowercase hex digits).
func (k *SigningKey) SignEvent(hash string) Signature {
	return Signature{KeyID: k.id, Sig: base64.StdEncoding.EncodeToString(k.sign(Statement(hash, k.id)))}
}

// CheckPublicKey refuses a public key a strict verifier must not trust:
// not 32 bytes, not a canonical point encoding, or of small order (under
// which any signature verifies). Errors wrap ErrBadKey.
func CheckPublicKey(pub []byte) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: public key of %d bytes", ErrBadKey, len(pub))
	}
	switch checkPoint(pub) {
	case errNotPoint:
		return fmt.Errorf("%w: public key is not a point", ErrBadKey)
	case errNonCanonical:
		return fmt.Errorf("%w: public key is not canonically encoded", ErrBadKey)
	case errSmallOrder:
		return fmt.Errorf("%w: public key of small order", ErrBadKey)
	}
	return nil
}

var (
	errNotPoint     = errors.New("not a point")
	errNonCanonical = errors.New("non-canonical encoding")
	errSmallOrder   = errors.New("small order")
)

func checkPoint(enc []byte) error {
	p, err := new(edwards25519.Point).SetBytes(enc)
	if err != nil {
		return errNotPoint
	}
	if !bytes.Equal(p.Bytes(), enc) {
		return errNonCanonical
	}
	if new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1 {
		return errSmallOrder
	}
	return nil
}

// VerifyStrict checks an Ed25519 signature the strict way: the public key
// must pass CheckPublicKey, R must be a canonical point not of small
// order, S must be canonical (S < L), and the signature must verify under
// crypto/ed25519. Errors wrap ErrBadKey or ErrBadSignature.
func VerifyStrict(pub ed25519.PublicKey, msg, sig []byte) error {
	if err := CheckPublicKey(pub); err != nil {
		return err
	}
	return verifyChecked(pub, msg, sig)
}

// smallOrder holds the canonical encodings of the eight points of small
// order (orders 1, 2, 4 and 8). A canonical R is of small order exactly
// when it is one of them.
var smallOrder = func() [8][32]byte {
	var out [8][32]byte
	for i, s := range []string{
		"0100000000000000000000000000000000000000000000000000000000000000",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0000000000000000000000000000000000000000000000000000000000000080",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
	} {
		hex.Decode(out[i][:], []byte(s))
	}
	return out
}()

// canonicalY reports whether the encoding's y (sign bit masked) is below
// p = 2^255 - 19.
func canonicalY(enc []byte) bool {
	if enc[31]&0x7f != 0x7f {
		return true
	}
	for i := 30; i >= 1; i-- {
		if enc[i] != 0xff {
			return true
		}
	}
	return enc[0] < 0xed
}

// verifyChecked is VerifyStrict for a public key already checked (a
// TrustedKeys member): the cheap checks of R and S, then crypto/ed25519,
// which refuses an R that is not on the curve.
func verifyChecked(pub ed25519.PublicKey, msg, sig []byte) error {
	if err := checkSigEncoding(sig); err != nil {
		return err
	}
	if _, err := new(edwards25519.Scalar).SetCanonicalBytes(sig[32:]); err != nil {
		return fmt.Errorf("%w: S is not canonical (S >= L)", ErrBadSignature)
	}
	if !ed25519.Verify(pub, msg, sig) {
		return fmt.Errorf("%w: does not verify", ErrBadSignature)
	}
	return nil
}

// checkSigEncoding is the strict checks of a signature's encoding that
// need no curve arithmetic: 64 bytes, R canonical and not of small order.
func checkSigEncoding(sig []byte) error {
	if len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: %d bytes", ErrBadSignature, len(sig))
	}
	if !canonicalY(sig[:32]) {
		return fmt.Errorf("%w: R is not canonically encoded", ErrBadSignature)
	}
	for i := range smallOrder {
		if bytes.Equal(sig[:32], smallOrder[i][:]) {
			return fmt.Errorf("%w: R of small order", ErrBadSignature)
		}
	}
	return nil
}

// TrustedKeys is a set of public keys by key id: the current key and the
// ones it replaced, so journals signed before a rotation still verify.
// It is immutable once built and safe for concurrent use.
type TrustedKeys struct {
	keys map[string]ed25519.PublicKey
	fast map[string]*verifyKey // the same keys, ready to verify with
}

// NewTrustedKeys builds a set, refusing (ErrBadKey) any key that fails
// CheckPublicKey.
func NewTrustedKeys(pubs ...ed25519.PublicKey) (*TrustedKeys, error) {
	t := &TrustedKeys{keys: make(map[string]ed25519.PublicKey, len(pubs)), fast: make(map[string]*verifyKey, len(pubs))}
	for _, p := range pubs {
		k, err := newVerifyKey(p)
		if err != nil {
			return nil, err
		}
		t.keys[KeyID(p)] = k.pub
		t.fast[KeyID(p)] = k
	}
	return t, nil
}

// ParsePublicKeys reads public keys, one per line, as 64 hex digits or
// standard base64; blank lines and lines starting with '#' are skipped.
func ParsePublicKeys(text []byte) ([]ed25519.PublicKey, error) {
	var out []ed25519.PublicKey
	for i, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		b, err := decodeKey([]byte(line), ed25519.PublicKeySize)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// LoadTrustedKeys reads every file with ParsePublicKeys into one set.
func LoadTrustedKeys(files ...string) (*TrustedKeys, error) {
	var all []ed25519.PublicKey
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
		}
		keys, err := ParsePublicKeys(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		all = append(all, keys...)
	}
	return NewTrustedKeys(all...)
}

// IDs returns the key ids, sorted.
func (t *TrustedKeys) IDs() []string {
	ids := make([]string, 0, len(t.keys))
	for id := range t.keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Len is the number of keys.
func (t *TrustedKeys) Len() int { return len(t.keys) }

// Key returns the key of id.
func (t *TrustedKeys) Key(id string) (ed25519.PublicKey, bool) {
	k, ok := t.keys[id]
	return k, ok
}

// VerifyEvent checks s as the signature of the event whose hash is hash.
// Errors wrap ErrUnknownKey, ErrBadKey or ErrBadSignature.
func (t *TrustedKeys) VerifyEvent(hash string, s Signature) error {
	k, msg, sig, err := t.prepare(hash, s)
	if err != nil {
		return err
	}
	return k.verify(msg, sig)
}

// prepare is VerifyEvent up to the curve arithmetic: the key, the signed
// statement and the decoded signature.
func (t *TrustedKeys) prepare(hash string, s Signature) (*verifyKey, []byte, []byte, error) {
	k, ok := t.fast[s.KeyID]
	if !ok {
		return nil, nil, nil, fmt.Errorf("%w: %q", ErrUnknownKey, s.KeyID)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(s.Sig)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: not base64", ErrBadSignature)
	}
	return k, Statement(hash, s.KeyID), sig, nil
}
