package broker

import (
	"errors"
	"testing"

	"github.com/gatehouse/gatehouse/broker/approval"
)

// FuzzDecodeApprovalQuery: no body from NATS crashes the decoder, and
// whatever it accepts is a query the store can be asked safely.
func FuzzDecodeApprovalQuery(f *testing.F) {
	f.Add([]byte(`{"states":["pending"],"tenant":"acme","limit":10}`), false)
	f.Add([]byte(`{"id":"ap_20260301T120000_0011223344556677"}`), true)
	f.Add([]byte(``), false)
	f.Fuzz(func(t *testing.T, data []byte, get bool) {
		q, err := DecodeApprovalQuery(data, get)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		if get && !approval.ValidID(q.ID) || q.ID != "" && !approval.ValidID(q.ID) {
			t.Fatalf("accepted id %q", q.ID)
		}
		if q.Limit < 0 || q.Limit > maxApprovalLimit {
			t.Fatalf("accepted limit %d", q.Limit)
		}
		for _, s := range q.States {
			if !s.Known() {
				t.Fatalf("accepted state %q", s)
			}
		}
	})
}

// FuzzDecodeSignedAssertion: no body crashes the decoder or the signature
// check, and nothing but a signature by the configured key verifies.
func FuzzDecodeSignedAssertion(f *testing.F) {
	f.Add([]byte(`{"assertion":{"kind":"decision","id":"ap_20260301T120000_0011223344556677","action_digest":"sha256:11","approved":true,"happened":false,"approver":"rita","roles":["finance"],"assurance":"mfa","reason":"","time":"2026-03-01T12:00:00Z"},"signature":"AAAA"}`))
	f.Add([]byte(`{"assertion":{"id":"../../etc"},"signature":""}`))
	f.Add([]byte(`{"assertion":{},"signature":"AAAA","extra":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sa, err := DecodeSignedAssertion(data)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		if !approval.ValidID(sa.Assertion.ID) || sa.Signature == "" {
			t.Fatalf("accepted %+v", sa)
		}
		if err := sa.Verify(fuzzKey); err == nil {
			t.Fatalf("an assertion nobody signed verified: %s", data)
		}
	})
}

// fuzzKey is a public key whose private half no input knows.
var fuzzKey = func() []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = byte(i*7 + 1)
	}
	return k
}()
