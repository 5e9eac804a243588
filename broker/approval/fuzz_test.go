package approval_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// FuzzActionDigest: params come from the agent. No input crashes the
// binding; a bound action's digest does not depend on spelling (the
// canonical re-encoding of its params binds to the same digest), and its
// arguments are exactly the params' top-level names.
func FuzzActionDigest(f *testing.F) {
	f.Add(`{"amount":"10.00","iban":"DE89"}`)
	f.Add(`{"n":1e3,"nested":{"b":[1,2],"a":null}}`)
	f.Add(`[1]`)
	f.Add(``)
	f.Add(`{"body":{"a":1},"BODY":{"a":2}}`)
	f.Add(`{"x":[{"\u212aey":1,"key":2}]}`)
	f.Add(`{"ref":12345678901234567890,"amount":10.50}`)
	f.Fuzz(func(t *testing.T, params string) {
		a := Action{Sink: "provider", Action: "call", Run: "r1", Params: json.RawMessage(params)}
		d, args, err := a.Digest()
		if err != nil {
			if !errors.Is(err, ErrBadAction) {
				t.Fatalf("error %v does not wrap ErrBadAction", err)
			}
			return
		}
		// Bound params have no two keys encoding/json reads as one.
		dups, _ := strictjson.Scan([]byte(params), strictjson.Options{Fold: true})
		for _, dup := range dups {
			if dup.Folded {
				t.Fatalf("bound params with keys equal after folding at %v", dup.Path)
			}
		}
		// Bound params hold only numbers a double keeps exactly.
		dec := json.NewDecoder(strings.NewReader(params))
		dec.UseNumber()
		var all any
		if dec.Decode(&all) == nil && !ExactNumbers(all) {
			t.Fatalf("bound params with a number RFC 8785 would round: %s", params)
		}
		var obj map[string]json.RawMessage
		if params != "" && params != "null" {
			if err := json.Unmarshal([]byte(params), &obj); err != nil {
				return // "null" with spaces and the like
			}
		}
		if len(args) != len(obj) {
			t.Fatalf("%d arguments for %d params", len(args), len(obj))
		}
		re, err := json.Marshal(obj)
		if err != nil {
			return
		}
		if len(obj) == 0 {
			re = []byte(`{}`)
		}
		d2, _, err := Action{Sink: "provider", Action: "call", Run: "r1", Params: re}.Digest()
		if err != nil || d2 != d {
			t.Fatalf("re-encoded params bind to %s (%v), want %s", d2, err, d)
		}
	})
}

// FuzzVerifyAssertion: whatever a caller changes in a signed assertion,
// it no longer verifies, and nothing panics.
func FuzzVerifyAssertion(f *testing.F) {
	f.Add("decision", "ap_1", "sha256:11", true, "rita", "finance", "mfa", "ok", int64(0), "")
	f.Add("reconcile", "ap_2", "", false, "", "", "", "", int64(-1), "AAAA")
	seed := make([]byte, ed25519.SeedSize)
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	base := Assertion{Kind: "decision", ID: "ap_1", ActionDigest: "sha256:11", Approved: true, Approver: "rita", Roles: []string{"finance"}, Assurance: "mfa", Time: time.Unix(0, 0)}
	good, err := base.Sign(priv)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, kind, id, digest string, approved bool, approver, role, assurance, reason string, sec int64, sig string) {
		a := Assertion{Kind: kind, ID: id, ActionDigest: digest, Approved: approved, Approver: approver, Roles: []string{role},
			Assurance: assurance, Reason: reason, Time: time.Unix(sec, 0)}
		sa := SignedAssertion{Assertion: a, Signature: good.Signature}
		if sig != "" {
			sa.Signature = sig
		}
		err := sa.Verify(pub)
		same := sa.Signature == good.Signature && kind == base.Kind && id == base.ID && digest == base.ActionDigest && approved == base.Approved &&
			approver == base.Approver && role == "finance" && assurance == base.Assurance && reason == "" && sec == 0
		if err == nil && !same {
			t.Fatalf("a changed assertion verified: %+v", sa)
		}
		if err != nil && !errors.Is(err, ErrBadAssertion) {
			t.Fatalf("error %v does not wrap ErrBadAssertion", err)
		}
	})
}

// FuzzParsePublicKey: the --approval-key file; nothing crashes the parser
// and what it accepts is a 32-byte key.
func FuzzParsePublicKey(f *testing.F) {
	f.Add([]byte("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"))
	f.Add([]byte("-----BEGIN ED25519 PUBLIC KEY-----\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n-----END ED25519 PUBLIC KEY-----\n"))
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParsePublicKey(data)
		if err == nil && len(k) != ed25519.PublicKeySize {
			t.Fatalf("accepted a %d-byte key", len(k))
		}
	})
}
