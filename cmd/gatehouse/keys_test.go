package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// Every key flag takes what keygen wrote: the private file where a
// private key is wanted, the public file (or the key itself, in any of its
// forms) where a public one is; never one for the other.
func TestKeyFilesKeygenWrites(t *testing.T) {
	dir := t.TempDir()
	for range 20 { // base64 of some keys holds '+', which verifier keys also use as a separator
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		privPath := filepath.Join(dir, "k"+hex.EncodeToString(pub[:4])+".key")
		logKey, witKey := journal.VerifierKey("log.example", pub, false), journal.VerifierKey("wit.example", pub, true)
		if err := writeKeyPair(privPath, pubPathFor(privPath), priv, []string{logKey, witKey}); err != nil {
			t.Fatal(err)
		}
		got, err := loadPrivateKeyFile(privPath, nil)
		if err != nil || !got.Equal(priv) {
			t.Fatalf("private file: %v", err)
		}
		pubFile := pubPathFor(privPath)
		for _, arg := range []string{pubFile, hex.EncodeToString(pub), base64.StdEncoding.EncodeToString(pub), logKey} {
			k, err := loadOnePublicKey(arg)
			if err != nil || !k.Equal(pub) {
				t.Fatalf("public key from %q: %v", arg, err)
			}
		}
		if v, err := verifierKeyArg(pubFile, false); err != nil || v != logKey {
			t.Fatalf("log key from the .pub: %q %v", v, err)
		}
		if v, err := verifierKeyArg(pubFile, true); err != nil || v != witKey {
			t.Fatalf("witness key from the .pub: %q %v", v, err)
		}
		if _, err := loadOnePublicKey(privPath); !errors.Is(err, errPrivateGiven) {
			t.Fatalf("a private key taken as public: %v", err)
		}
		if _, err := loadPrivateKeyFile(pubFile, nil); err == nil {
			t.Fatal("a public key taken as private")
		}
	}
	// The older forms of a private key still read: a hex or base64 seed.
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	for _, text := range []string{hex.EncodeToString(priv.Seed()), base64.StdEncoding.EncodeToString(priv.Seed()), base64.StdEncoding.EncodeToString(priv)} {
		p := filepath.Join(dir, "old")
		os.Remove(p)
		if err := os.WriteFile(p, []byte(text+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if k, err := loadPrivateKeyFile(p, nil); err != nil || !k.Equal(priv) {
			t.Fatalf("old form %s...: %v", text[:8], err)
		}
	}
	if err := writeKeyPair(filepath.Join(dir, "x.key"), filepath.Join(dir, "x.pub"), priv, nil); err != nil {
		t.Fatal(err)
	}
	if err := writeKeyPair(filepath.Join(dir, "x.key"), filepath.Join(dir, "x.pub"), priv, nil); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("keygen over a key: %v", err)
	}
}

// FuzzKeyText: the key parsers never panic, and what parses as a public
// key is a 32-byte key.
func FuzzKeyText(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	dir := f.TempDir()
	p := filepath.Join(dir, "k.key")
	_ = writeKeyPair(p, pubPathFor(p), priv, []string{journal.VerifierKey("o", pub, false)})
	for _, file := range []string{p, pubPathFor(p)} {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	f.Add([]byte(hex.EncodeToString(pub)))
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parsePrivateKey(b)
		pubs, vkeys, err := parsePublicKeys(b)
		if err != nil {
			return
		}
		for _, k := range pubs {
			if len(k) != ed25519.PublicKeySize {
				t.Fatalf("a %d-byte public key", len(k))
			}
		}
		for _, v := range vkeys {
			if _, ok := parseVKey(v.text); !ok {
				t.Fatalf("verifier key %q does not parse again", v.text)
			}
		}
	})
}
