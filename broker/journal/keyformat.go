package journal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
)

// pkcs8Seed reads an Ed25519 private key in PKCS#8 PEM ("PRIVATE KEY"),
// the form `gatehouse keygen` writes (and `openssl genpkey -algorithm
// ed25519`), and returns its seed. ok is false when text holds no such
// block (it may be a hex or base64 seed). Errors wrap ErrBadKey and carry
// no key material.
func pkcs8Seed(text []byte) (seed []byte, ok bool, err error) {
	i := bytes.Index(text, []byte("-----BEGIN PRIVATE KEY-----"))
	if i < 0 {
		return nil, false, nil
	}
	b, _ := pem.Decode(text[i:])
	if b == nil {
		return nil, true, fmt.Errorf("%w: a PEM block that does not parse", ErrBadKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, true, fmt.Errorf("%w: PKCS#8: not a private key", ErrBadKey)
	}
	ek, isEd := k.(ed25519.PrivateKey)
	if !isEd {
		return nil, true, fmt.Errorf("%w: a %T, not an Ed25519 key", ErrBadKey, k)
	}
	return ek.Seed(), true, nil
}
