package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// One key format story for every key Gatehouse uses (journal signing, a
// witness, an approvals backend), as cosign has: `gatehouse keygen --out
// NAME.key` writes the private key NAME.key and the public NAME.pub, and
// every flag that takes a key takes those files.
//
//   - NAME.key is PKCS#8 PEM ("PRIVATE KEY"), mode 0600: what
//     `openssl genpkey -algorithm ed25519` writes and Go's
//     x509.ParsePKCS8PrivateKey reads. Flags taking a private key take a
//     file only (--signing-key-file, --witness-key-file, approve --key),
//     never the key on the command line; the older forms (a hex or base64
//     seed, PEM "ED25519 PRIVATE KEY") are read too.
//   - NAME.pub is PKIX PEM ("PUBLIC KEY", `openssl pkey -pubout`),
//     followed by the key's signed-note verifier keys (one a line) when
//     keygen was told the log's origin (--log-origin) or the witness's name
//     (--witness-name). Flags taking a public key take the file or the key
//     itself: --trusted-key, --previous-key and --approval-key read any of
//     the forms (PEM, 64 hex digits, base64, a verifier key); --log-key,
//     --witness-key and witness --log need a verifier key, which names the
//     log or witness, and take it from such a file.
//
// A private key given where a public one is wanted is refused by name, so
// it is never published by mistake.

// maxKeyFile bounds what is read of a key file.
const maxKeyFile = 64 << 10

var (
	errNotKey        = errors.New("not a key")
	errPrivateGiven  = errors.New("this is a private key; give its public key (the .pub file gatehouse keygen wrote beside it)")
	errNoVerifierKey = errors.New("holds no verifier key")
)

// parsePrivateKey reads an Ed25519 private key in any form described
// above. Errors never carry key material.
func parsePrivateKey(text []byte) (ed25519.PrivateKey, error) {
	if b, _ := pem.Decode(text); b != nil {
		switch b.Type {
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%w: PKCS#8: %v", errNotKey, err)
			}
			ek, ok := k.(ed25519.PrivateKey)
			if !ok {
				return nil, fmt.Errorf("%w: a %T, not an Ed25519 key", errNotKey, k)
			}
			return ek, nil
		case "ED25519 PRIVATE KEY":
			return privateFromRaw(b.Bytes)
		case "PUBLIC KEY", "ED25519 PUBLIC KEY":
			return nil, fmt.Errorf("%w: this is a public key; give the private key file (NAME.key)", errNotKey)
		}
		return nil, fmt.Errorf("%w: PEM block %q", errNotKey, b.Type)
	}
	s := strings.TrimSpace(string(text))
	if b, err := hex.DecodeString(s); err == nil && len(s) == 2*ed25519.SeedSize {
		return ed25519.NewKeyFromSeed(b), nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return privateFromRaw(b)
	}
	return nil, fmt.Errorf("%w: not PEM, hex or base64", errNotKey)
}

func privateFromRaw(b []byte) (ed25519.PrivateKey, error) {
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		k := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
		if !bytes.Equal(k[ed25519.SeedSize:], b[ed25519.SeedSize:]) {
			return nil, fmt.Errorf("%w: the 64-byte key's public half does not match its seed", errNotKey)
		}
		return k, nil
	}
	return nil, fmt.Errorf("%w: %d bytes, want a 32-byte seed or a 64-byte key", errNotKey, len(b))
}

// readKeyFile reads a key file: a regular file of at most maxKeyFile
// bytes, opened without blocking (readUserFile).
func readKeyFile(path string) ([]byte, os.FileInfo, error) {
	return readUserFileInfo(path, maxKeyFile)
}

// loadPrivateKeyFile reads a private key file, warning on log when other
// users may read it.
func loadPrivateKeyFile(path string, log *slog.Logger) (ed25519.PrivateKey, error) {
	b, fi, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 && log != nil {
		log.Warn("PRIVATE KEY FILE IS READABLE BY OTHER USERS: anyone who can read it can sign as this key; chmod 600 it",
			"file", path, "mode", fi.Mode().Perm().String())
	}
	k, err := parsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// loadSigningKey is the journal (or witness) signing key from file, or,
// when file is "", from envValue (the key itself, in any private form).
// Both empty is (nil, nil). Errors wrap journal.ErrBadKey.
func loadSigningKey(file, envValue string, log *slog.Logger) (*journal.SigningKey, error) {
	var priv ed25519.PrivateKey
	var err error
	switch {
	case file != "":
		priv, err = loadPrivateKeyFile(file, log)
	case envValue != "":
		priv, err = parsePrivateKey([]byte(envValue))
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", journal.ErrBadKey, err)
	}
	return journal.NewSigningKey(priv.Seed())
}

// vkey is a parsed signed-note verifier key.
type vkey struct {
	text    string
	witness bool // cosignature/v1 (a witness's), not Ed25519 (a log's)
	pub     ed25519.PublicKey
}

func parseVKey(s string) (vkey, bool) {
	s = strings.TrimSpace(s)
	if _, err := journal.NewNoteVerifier(s); err != nil { // name+hash+base64 (whose base64 may hold '+')
		return vkey{}, false
	}
	_, rest, _ := strings.Cut(s, "+")
	_, key, _ := strings.Cut(rest, "+")
	raw, _ := base64.StdEncoding.DecodeString(key)
	return vkey{text: s, witness: raw[0] != 1, pub: ed25519.PublicKey(raw[1:])}, true
}

// parsePublicKeys reads every public key in text: PEM blocks ("PUBLIC
// KEY", "ED25519 PUBLIC KEY") and, outside them, one key a line as 64 hex
// digits, base64 or a verifier key; blank lines and '#' comments are
// skipped. A private key anywhere is errPrivateGiven.
func parsePublicKeys(text []byte) ([]ed25519.PublicKey, []vkey, error) {
	var pubs []ed25519.PublicKey
	var vkeys []vkey
	rest := text
	var outside bytes.Buffer
	for {
		i := bytes.Index(rest, []byte("-----BEGIN "))
		if i < 0 {
			outside.Write(rest)
			break
		}
		outside.Write(rest[:i])
		b, after := pem.Decode(rest[i:])
		if b == nil {
			return nil, nil, fmt.Errorf("%w: a PEM block that does not parse", errNotKey)
		}
		rest = after
		switch b.Type {
		case "PUBLIC KEY":
			k, err := x509.ParsePKIXPublicKey(b.Bytes)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: PKIX: %v", errNotKey, err)
			}
			ek, ok := k.(ed25519.PublicKey)
			if !ok {
				return nil, nil, fmt.Errorf("%w: a %T, not an Ed25519 key", errNotKey, k)
			}
			pubs = append(pubs, ek)
		case "ED25519 PUBLIC KEY":
			if len(b.Bytes) != ed25519.PublicKeySize {
				return nil, nil, fmt.Errorf("%w: %d bytes, want %d", errNotKey, len(b.Bytes), ed25519.PublicKeySize)
			}
			pubs = append(pubs, ed25519.PublicKey(b.Bytes))
		case "PRIVATE KEY", "ED25519 PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY":
			return nil, nil, errPrivateGiven
		default:
			return nil, nil, fmt.Errorf("%w: PEM block %q", errNotKey, b.Type)
		}
	}
	for n, line := range strings.Split(outside.String(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if v, ok := parseVKey(line); ok {
			vkeys = append(vkeys, v)
			pubs = append(pubs, v.pub)
			continue
		}
		var raw []byte
		var err error
		switch len(line) {
		case 2 * ed25519.PublicKeySize:
			raw, err = hex.DecodeString(line)
		case base64.StdEncoding.EncodedLen(ed25519.PublicKeySize):
			raw, err = base64.StdEncoding.DecodeString(line)
		case base64.StdEncoding.EncodedLen(ed25519.PrivateKeySize), 4 * ed25519.SeedSize:
			return nil, nil, errPrivateGiven
		default:
			err = errNotKey
		}
		if err != nil || len(raw) != ed25519.PublicKeySize {
			return nil, nil, fmt.Errorf("line %d: %w: want a public key as 64 hex digits, base64, PEM or a verifier key (name+hash+base64)", n+1, errNotKey)
		}
		pubs = append(pubs, ed25519.PublicKey(raw))
	}
	return pubs, vkeys, nil
}

// publicKeysArg reads the public keys a flag names: a file holding them,
// or the key itself.
func publicKeysArg(arg string) ([]ed25519.PublicKey, []vkey, error) {
	if b, _, err := readKeyFile(arg); err == nil {
		pubs, vk, err := parsePublicKeys(b)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", arg, err)
		}
		if len(pubs) == 0 {
			return nil, nil, fmt.Errorf("%s: holds no public key", arg)
		}
		return pubs, vk, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	pubs, vk, err := parsePublicKeys([]byte(arg))
	if err != nil || len(pubs) == 0 {
		if errors.Is(err, errPrivateGiven) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%q is neither a file nor a public key", clipArg(arg))
	}
	return pubs, vk, nil
}

// loadTrustedKeys is every key the files (or keys) name, for verify
// --trusted-key and serve --previous-key.
func loadTrustedKeys(args ...string) (*journal.TrustedKeys, error) {
	var all []ed25519.PublicKey
	for _, a := range args {
		pubs, _, err := publicKeysArg(a)
		if err != nil {
			return nil, err
		}
		all = append(all, pubs...)
	}
	return journal.NewTrustedKeys(all...)
}

// loadOnePublicKey is the one public key arg names (serve --approval-key).
func loadOnePublicKey(arg string) (ed25519.PublicKey, error) {
	pubs, _, err := publicKeysArg(arg)
	if err != nil {
		return nil, err
	}
	first := pubs[0]
	for _, p := range pubs[1:] {
		if !p.Equal(first) {
			return nil, fmt.Errorf("%s holds %d different keys, want one", clipArg(arg), len(pubs))
		}
	}
	if err := journal.CheckPublicKey(first); err != nil {
		return nil, err
	}
	return first, nil
}

// verifierKeyArg is the signed-note verifier key arg names: the key
// itself, or the first one of the right kind (a witness's when witness)
// in the file arg names.
func verifierKeyArg(arg string, witness bool) (string, error) {
	if v, ok := parseVKey(arg); ok {
		return v.text, nil
	}
	kind, made := "log", "gatehouse keygen --out log.key --log-origin NAME"
	if witness {
		kind, made = "witness", "gatehouse keygen --out wit.key --witness-name NAME"
	}
	b, _, err := readKeyFile(arg)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%q is neither a verifier key (name+hash+base64) nor a file holding one", clipArg(arg))
		}
		return "", err
	}
	_, vkeys, err := parsePublicKeys(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", arg, err)
	}
	for _, v := range vkeys {
		if v.witness == witness {
			return v.text, nil
		}
	}
	return "", fmt.Errorf("%s %w of a %s: a verifier key names its %s; make the key with %s, or pass the key printed as 'NAME+HASH+KEY'",
		arg, errNoVerifierKey, kind, kind, made)
}

// clipArg is an argument short enough to quote in an error.
func clipArg(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// writeKeyPair writes a new key's private file (PKCS#8 PEM, mode 0600)
// and public file (PKIX PEM, then the verifier keys, one a line). Neither
// may exist; on failure nothing is left behind.
func writeKeyPair(privPath, pubPath string, priv ed25519.PrivateKey, vkeys []string) error {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return err
	}
	for _, p := range []string{privPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s exists: keygen never overwrites a key", p)
		}
	}
	if err := writeNew(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	for _, v := range vkeys {
		pub = append(pub, v+"\n"...)
	}
	if err := writeNew(pubPath, pub, 0o644); err != nil {
		_ = os.Remove(privPath)
		return err
	}
	return nil
}

// writeNew creates path (which must not exist) with b, synced.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// pubPathFor is the public file beside a private key file: NAME.key gives
// NAME.pub, anything else gets .pub appended.
func pubPathFor(privPath string) string {
	if base, ok := strings.CutSuffix(privPath, ".key"); ok && base != "" {
		return base + ".pub"
	}
	return privPath + ".pub"
}
