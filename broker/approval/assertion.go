package approval

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gowebpki/jcs"
)

// Assertion is a decision signed by the deployment's own backend, bound
// to the exact action: the request id and its action digest. The signature
// is Ed25519 over the RFC 8785 canonical JSON of the assertion without the
// signature. Kind "decision" approves or refuses; kind "reconcile" reports
// whether an action of unknown outcome took effect.
type Assertion struct {
	Kind         string    `json:"kind"` // decision, reconcile
	ID           string    `json:"id"`
	ActionDigest string    `json:"action_digest"`
	Approved     bool      `json:"approved"`
	Happened     bool      `json:"happened"`
	Approver     string    `json:"approver"`
	Roles        []string  `json:"roles"`
	Assurance    string    `json:"assurance"`
	Reason       string    `json:"reason"`
	Time         time.Time `json:"time"`
}

// SignedAssertion is what the backend sends on subject.ApprovalDecide.
type SignedAssertion struct {
	Assertion Assertion `json:"assertion"`
	Signature string    `json:"signature"` // base64 (std) Ed25519 signature
}

func (a Assertion) canonical() ([]byte, error) {
	if a.Roles == nil {
		a.Roles = []string{}
	}
	a.Time = a.Time.UTC()
	raw, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// Sign signs a with key.
func (a Assertion) Sign(key ed25519.PrivateKey) (SignedAssertion, error) {
	c, err := a.canonical()
	if err != nil {
		return SignedAssertion{}, err
	}
	return SignedAssertion{Assertion: a, Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, c))}, nil
}

// Verify checks the signature against pub (ErrBadAssertion).
func (sa SignedAssertion) Verify(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: no approval key is configured (--approval-key)", ErrBadAssertion)
	}
	sig, err := base64.StdEncoding.DecodeString(sa.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: signature is not a base64 Ed25519 signature", ErrBadAssertion)
	}
	c, err := sa.Assertion.canonical()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadAssertion, err)
	}
	if !ed25519.Verify(pub, c, sig) {
		return fmt.Errorf("%w: signature does not match the configured key", ErrBadAssertion)
	}
	return nil
}

// DecideSigned verifies a signed assertion and applies it: a decision
// (recorded as authenticated by signed-assertion, verified) or a
// reconciliation. The assertion must name the request's exact action
// digest; any other action is ErrBadAssertion.
func (s *Service) DecideSigned(ctx context.Context, sa SignedAssertion) (*Request, error) {
	if err := sa.Verify(s.key); err != nil {
		return nil, err
	}
	a := sa.Assertion
	r, err := s.Get(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	if a.ActionDigest != r.ActionDigest {
		return nil, fmt.Errorf("%w: the assertion names action %s, the request is for %s", ErrBadAssertion, a.ActionDigest, r.ActionDigest)
	}
	switch a.Kind {
	case "decision":
		if r.State == StateReopened && !a.Time.After(r.Updated) {
			// An assertion signed before the reopen approved the action
			// under the policy of that time; it cannot answer the new ask.
			return nil, fmt.Errorf("%w: the assertion was signed at %s, before the request was reopened at %s; sign a new one",
				ErrBadAssertion, a.Time.Format(time.RFC3339), r.Updated.Format(time.RFC3339))
		}
		return s.Decide(ctx, a.ID, Decision{Approved: a.Approved, Approver: a.Approver, Roles: a.Roles, Assurance: a.Assurance,
			Authenticated: "signed-assertion", Reason: a.Reason, Time: a.Time})
	case "reconcile":
		return s.Reconcile(ctx, a.ID, Reconciliation{Happened: a.Happened, By: a.Approver, Roles: a.Roles,
			Assurance: a.Assurance, Reason: a.Reason, Time: a.Time})
	}
	return nil, fmt.Errorf("%w: kind %q is not decision or reconcile", ErrBadAssertion, clip(a.Kind))
}

// ParsePublicKey reads an Ed25519 public key: a PEM "PUBLIC KEY" (PKIX) is
// not accepted to keep the parser small; the forms are base64 of the 32
// raw bytes, or a PEM block "ED25519 PUBLIC KEY" holding them.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	raw, err := keyBytes(data, "ED25519 PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	if len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: public key is %d bytes, want %d", errBadKey, len(raw), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), nil
}

// ParsePrivateKey reads an Ed25519 private key: base64 of the 32-byte seed
// or the 64-byte key, or a PEM block "ED25519 PRIVATE KEY" holding them.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	raw, err := keyBytes(data, "ED25519 PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	switch len(raw) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(raw), nil
	case ed25519.PrivateKeySize:
		return ed25519.PrivateKey(raw), nil
	}
	return nil, fmt.Errorf("%w: private key is %d bytes", errBadKey, len(raw))
}

var errBadKey = errors.New("approval: bad key")

func keyBytes(data []byte, pemType string) ([]byte, error) {
	if b, _ := pem.Decode(data); b != nil {
		if b.Type != pemType {
			return nil, fmt.Errorf("%w: PEM block %q, want %q", errBadKey, b.Type, pemType)
		}
		return b.Bytes, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("%w: not base64 or PEM", errBadKey)
	}
	return raw, nil
}

// LoadPublicKey reads a public key file.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("approval key: %w", err)
	}
	return ParsePublicKey(data)
}
