package journal

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"
)

// The key file gatehouse keygen writes (PKCS#8 PEM) is a signing key.
func TestParseSigningKeyReadsPKCS8(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	k, err := ParseSigningKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil || !k.Public().Equal(pub) {
		t.Fatalf("PKCS#8: %v", err)
	}
	if _, err := ParseSigningKey([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")); !errors.Is(err, ErrBadKey) {
		t.Fatalf("bad PKCS#8: %v", err)
	}
}
