package journal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/edwards25519"
)

// testSeed returns a fixed seed made from b.
func testSeed(b byte) []byte { return bytes.Repeat([]byte{b}, ed25519.SeedSize) }

func testKey(t tb, b byte) *SigningKey {
	k, err := NewSigningKey(testSeed(b))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSignVerifyRoundTrip(t *testing.T) {
	k := testKey(t, 1)
	keys, err := NewTrustedKeys(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("ab", 32)
	s := k.SignEvent(hash)
	if s.KeyID != k.KeyID() || len(s.KeyID) != 16 {
		t.Fatalf("key id %q", s.KeyID)
	}
	if err := keys.VerifyEvent(hash, s); err != nil {
		t.Fatal(err)
	}
	if err := keys.VerifyEvent(strings.Repeat("cd", 32), s); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("another hash: %v", err)
	}
	other := testKey(t, 2).SignEvent(hash)
	if err := keys.VerifyEvent(hash, other); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("untrusted key: %v", err)
	}
	// The statement is what the format page says, and parses back.
	st := Statement(hash, k.KeyID())
	if want := `{"hash":"` + hash + `","key_id":"` + k.KeyID() + `","spec":"gatehouse.journal.sig/v1"}`; string(st) != want {
		t.Fatalf("statement %s", st)
	}
	h, id, err := ParseStatement(st)
	if err != nil || h != hash || id != k.KeyID() {
		t.Fatalf("ParseStatement: %q %q %v", h, id, err)
	}
}

// smallOrderPoints are encodings of points of order 1, 2, 4 and 8; the
// test checks each really has small order.
var smallOrderPoints = []string{
	"0100000000000000000000000000000000000000000000000000000000000000", // identity
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2
	"0000000000000000000000000000000000000000000000000000000000000000", // order 4
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", // order 8
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
}

func TestSmallOrderPointsAreSmallOrder(t *testing.T) {
	all := slices.Clone(smallOrderPoints)
	seen := map[string]bool{}
	for _, p := range smallOrder { // the verifier's table: eight distinct canonical encodings
		all = append(all, hex.EncodeToString(p[:]))
		seen[hex.EncodeToString(p[:])] = true
		q, _ := new(edwards25519.Point).SetBytes(p[:])
		if q == nil || !bytes.Equal(q.Bytes(), p[:]) {
			t.Fatalf("%x is not a canonical point", p)
		}
	}
	if len(seen) != 8 {
		t.Fatalf("%d distinct small-order encodings", len(seen))
	}
	for _, s := range all {
		b, _ := hex.DecodeString(s)
		p, err := new(edwards25519.Point).SetBytes(b)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) != 1 {
			t.Fatalf("%s is not of small order", s)
		}
	}
}

// scalarOf returns the secret scalar a of an Ed25519 seed (A = aB).
func scalarOf(seed []byte) *edwards25519.Scalar {
	h := sha512.Sum512(seed)
	a, _ := new(edwards25519.Scalar).SetBytesWithClamping(h[:32])
	return a
}

// challenge returns k = SHA-512(R || A || M) mod L.
func challenge(R, A, msg []byte) *edwards25519.Scalar {
	h := sha512.New()
	h.Write(R)
	h.Write(A)
	h.Write(msg)
	k, _ := new(edwards25519.Scalar).SetUniformBytes(h.Sum(nil))
	return k
}

// TestStrictVerificationRefuses makes each class of bad key and bad
// signature with a real key, checks that plain crypto/ed25519 accepts the
// ones that only strict verification catches, and that VerifyStrict
// refuses every one.
func TestStrictVerificationRefuses(t *testing.T) {
	seed := testSeed(7)
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	msg := Statement(strings.Repeat("0f", 32), KeyID(pub))
	good := ed25519.Sign(priv, msg)
	if err := VerifyStrict(pub, msg, good); err != nil {
		t.Fatalf("good signature refused: %v", err)
	}

	// Small-order R: R = identity, S = k*a, so [S]B - [k]A = identity = R
	// and the cofactorless check of crypto/ed25519 accepts it.
	identity := edwards25519.NewIdentityPoint().Bytes()
	k := challenge(identity, pub, msg)
	S := new(edwards25519.Scalar).Multiply(k, scalarOf(seed))
	smallR := append(bytes.Clone(identity), S.Bytes()...)

	// Non-canonical S: S + L encodes the same scalar mod L.
	nonCanon := bytes.Clone(good)
	addL(nonCanon[32:])

	// R replaced by an order-8 point: refused as small order before
	// anything else.
	order8, _ := hex.DecodeString(smallOrderPoints[3])
	r8 := append(bytes.Clone(order8), good[32:]...)

	// Non-canonical R encoding: y >= p (the identity's y = 1 written as
	// 1 + p).
	nonCanonR := bytes.Clone(good)
	copy(nonCanonR[:32], nonCanonicalOne())

	// A small-order public key (the identity): every signature with
	// R = [r]B and S = r verifies for any message.
	r, _ := new(edwards25519.Scalar).SetUniformBytes(bytes.Repeat([]byte{9}, 64))
	anyMsg := append(new(edwards25519.Point).ScalarBaseMult(r).Bytes(), r.Bytes()...)
	weakPub := ed25519.PublicKey(identity)

	cases := []struct {
		name       string
		pub        ed25519.PublicKey
		sig        []byte
		plainOK    bool // crypto/ed25519 alone accepts it
		wantBadKey bool
		want       string
	}{
		{"small-order R", pub, smallR, true, false, "R of small order"},
		{"order-8 R", pub, r8, false, false, "R of small order"},
		{"non-canonical S", pub, nonCanon, false, false, "S is not canonical"},
		{"non-canonical R", pub, nonCanonR, false, false, "R is not canonically encoded"},
		{"small-order public key", weakPub, anyMsg, true, true, "small order"},
		{"short signature", pub, good[:63], false, false, "63 bytes"},
		{"flipped bit", pub, flip(good, 40), false, false, "does not verify"},
		{"short public key", pub[:31], good, false, true, "31 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.pub) == 32 && len(c.sig) == 64 {
				if got := ed25519.Verify(c.pub, msg, c.sig); got != c.plainOK {
					t.Fatalf("crypto/ed25519 accepts: %v, expected %v", got, c.plainOK)
				}
			}
			err := VerifyStrict(c.pub, msg, c.sig)
			want := ErrBadSignature
			if c.wantBadKey {
				want = ErrBadKey
			}
			if !errors.Is(err, want) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("VerifyStrict: %v, want %v (%s)", err, want, c.want)
			}
		})
	}
	for _, s := range smallOrderPoints {
		b, _ := hex.DecodeString(s)
		if _, err := NewTrustedKeys(b); !errors.Is(err, ErrBadKey) {
			t.Errorf("small-order key %s trusted: %v", s, err)
		}
		if _, err := NewNoteVerifier(VerifierKey("log.example", b, false)); !errors.Is(err, ErrBadKey) {
			t.Errorf("small-order note key %s accepted: %v", s, err)
		}
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 1
	return c
}

// addL adds the group order L to the little-endian scalar s in place.
func addL(s []byte) {
	L := []byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}
	carry := 0
	for i := range s {
		v := int(s[i]) + int(L[i]) + carry
		s[i], carry = byte(v), v>>8
	}
}

// nonCanonicalOne is y = 1 + p (p = 2^255 - 19) with the sign bit clear:
// a non-canonical encoding of the identity that lenient decoders accept.
func nonCanonicalOne() []byte {
	b := make([]byte, 32)
	b[0] = 0xee // 0xed + 1
	for i := 1; i < 31; i++ {
		b[i] = 0xff
	}
	b[31] = 0x7f
	return b
}

func TestParseSigningKey(t *testing.T) {
	seed := testSeed(3)
	for _, text := range []string{hex.EncodeToString(seed), base64.StdEncoding.EncodeToString(seed) + "\n", "  " + hex.EncodeToString(seed) + "\n"} {
		k, err := ParseSigningKey([]byte(text))
		if err != nil || !bytes.Equal(k.Public(), ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)) {
			t.Fatalf("%q: %v", text, err)
		}
	}
	for _, bad := range []string{"", "abcd", hex.EncodeToString(seed[:31]), hex.EncodeToString(append(seed, 1)), strings.Repeat("zz", 32)} {
		if _, err := ParseSigningKey([]byte(bad)); !errors.Is(err, ErrBadKey) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}

// TestKeyNeverPrinted captures every log line and error the key can be
// part of, and checks that the seed and private key appear in none, in
// hex or base64.
func TestKeyNeverPrinted(t *testing.T) {
	seed := testSeed(0x5a)
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	textLog := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dir := t.TempDir()

	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte(hex.EncodeToString(seed)), 0o644); err != nil {
		t.Fatal(err)
	}
	var outputs []string
	k, err := LoadSigningKey(file, "", log) // group/other readable: warns
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "READABLE BY OTHER USERS") {
		t.Fatalf("no warning for a world-readable key file: %s", logs.String())
	}
	log.Info("loaded", "key", k)
	textLog.Info("loaded", "key", k)
	log.Info("struct", "cfg", struct{ Key *SigningKey }{k})
	outputs = append(outputs,
		fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s %x %X %q", k, k, k, k, k, k, k),
		fmt.Sprintf("%v %+v %#v", *k, struct{ K *SigningKey }{k}, []*SigningKey{k}))
	// Errors from bad keys in a file and in the environment.
	bad := append(bytes.Clone(seed), seed[:5]...)
	for _, text := range []string{hex.EncodeToString(bad), base64.StdEncoding.EncodeToString(bad), hex.EncodeToString(seed)[:63] + "g"} {
		_ = os.WriteFile(file, []byte(text), 0o600)
		if _, err := LoadSigningKey(file, "", log); err == nil {
			t.Fatalf("%q accepted", text)
		} else {
			outputs = append(outputs, err.Error())
		}
		if _, err := LoadSigningKey("", text, log); err == nil {
			t.Fatalf("env %q accepted", text)
		} else {
			outputs = append(outputs, err.Error())
		}
	}
	// A journal signed with it, its verification and its report.
	w, err := Open(filepath.Join(dir, "j"), WriterOptions{Now: clock(), Signer: k, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(fixedEvents(t)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rep, err := Verify(filepath.Join(dir, "j"), VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, fmt.Sprintf("%+v", rep), logs.String())
	run, _ := os.ReadFile(runPath(filepath.Join(dir, "j"), "r_aaaaaaaaaaaaaaaaaaaaaaaaaa"))
	outputs = append(outputs, string(run))

	priv := ed25519.NewKeyFromSeed(seed)
	secrets := []string{}
	for _, b := range [][]byte{seed, priv, seed[:16], seed[16:]} {
		secrets = append(secrets, hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b)),
			base64.StdEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b), string(b))
	}
	all := strings.Join(outputs, "\n")
	for _, s := range secrets {
		if strings.Contains(all, s) {
			t.Fatalf("key material %q appears in output", s)
		}
	}
	if !strings.Contains(all, k.KeyID()) {
		t.Fatal("the key id should be visible")
	}
}

// TestSignedJournal writes a signed journal, verifies it with the right
// keys, with a rotated set, without keys, and after each kind of damage.
func TestSignedJournal(t *testing.T) {
	old, cur := testKey(t, 1), testKey(t, 2)
	dir := t.TempDir()
	w, err := Open(dir, WriterOptions{Now: clock(), Signer: old})
	if err != nil {
		t.Fatal(err)
	}
	evs := fixedEvents(t)
	if _, err := w.Append(evs[:4]); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// Rotation: the rest is signed with the new key.
	w, err = Open(dir, WriterOptions{Now: clock(), Signer: cur})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(evs[4:]); err != nil {
		t.Fatal(err)
	}
	w.Close()

	both, _ := NewTrustedKeys(old.Public(), cur.Public())
	rep := mustVerify(t, dir, VerifyOptions{Keys: both, RequireSignatures: true})
	if !rep.OK || rep.Signed != len(evs) {
		t.Fatalf("signed journal: %+v", rep)
	}
	// The hashes are those of the unsigned journal: signing changes no chain.
	plain := t.TempDir()
	writeJournal(t, plain, evs, 4)
	for _, run := range []string{"r_aaaaaaaaaaaaaaaaaaaaaaaaaa", "r_bbbbbbbbbbbbbbbbbbbbbbbbbb"} {
		a, b := readLines(t, runPath(dir, run)), readLines(t, runPath(plain, run))
		for i := range a {
			ea, _ := ParseLine(a[i])
			eb, _ := ParseLine(b[i])
			if ea.Hash != eb.Hash {
				t.Fatalf("%s line %d: signed hash %s, unsigned %s", run, i+1, ea.Hash, eb.Hash)
			}
		}
	}
	// Unsigned journals still verify; requiring signatures flags them.
	if rep := mustVerify(t, plain, VerifyOptions{Keys: both}); !rep.OK {
		t.Fatalf("unsigned journal: %+v", rep.Findings)
	}
	rep = mustVerify(t, plain, VerifyOptions{Keys: both, RequireSignatures: true})
	if rep.OK || rep.Findings[0].Kind != FindingUnsignedEvent {
		t.Fatalf("unsigned journal, signatures required: %+v", rep.Findings)
	}
	// Only the new key after a rotation: the old events are unknown-key.
	onlyCur, _ := NewTrustedKeys(cur.Public())
	rep = mustVerify(t, dir, VerifyOptions{Keys: onlyCur})
	if kinds(rep)[FindingUnknownKey] == 0 {
		t.Fatalf("old key dropped: %+v", rep.Findings)
	}
	// No keys: a note, no findings.
	rep = mustVerify(t, dir, VerifyOptions{})
	if !rep.OK || len(rep.Notes) == 0 {
		t.Fatalf("no keys: %+v", rep)
	}

	// A signature moved to another event: bad-signature.
	path := runPath(dir, "r_aaaaaaaaaaaaaaaaaaaaaaaaaa")
	lines := readLines(t, path)
	s1, _, _ := LineSignature(lines[0])
	s2, _, _ := LineSignature(lines[1])
	lines[1] = bytes.Replace(lines[1], []byte(s2.Sig), []byte(s1.Sig), 1)
	writeLines(t, path, lines)
	rep = mustVerify(t, dir, VerifyOptions{Keys: both})
	if kinds(rep)[FindingBadSignature] != 1 || len(rep.Findings) != 1 {
		t.Fatalf("moved signature: %+v", rep.Findings)
	}
}

func mustVerify(t *testing.T, dir string, opts VerifyOptions) *Report {
	t.Helper()
	rep, err := Verify(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func kinds(r *Report) map[FindingKind]int {
	m := map[FindingKind]int{}
	for _, f := range r.Findings {
		m[f.Kind]++
	}
	return m
}
