package journal

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// fuzzNote is a valid checkpoint signed by testKey(1) as "log.example".
func fuzzNote(t tb) ([]byte, note.Verifier) {
	k := testKey(t, 1)
	s := NewLogSigner("log.example", k)
	var h tlog.Hash
	h[0] = 1
	b, err := note.Sign(&note.Note{Text: FormatCheckpoint("log.example", 7, h)}, s)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewNoteVerifier(s.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	return b, v
}

// FuzzCheckpoint fuzzes the checkpoint body parser and the signed-note
// opener: neither may panic, and what opens must re-format to its body.
func FuzzCheckpoint(f *testing.F) {
	signed, v := fuzzNote(f)
	f.Add(signed)
	f.Add([]byte("log.example\n7\nAQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"))
	f.Add([]byte("log.example\n07\nAQ==\n\n— log.example AAAA\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if cp, err := ParseCheckpoint(string(b)); err == nil {
			if !strings.HasPrefix(string(b), FormatCheckpoint(cp.Origin, cp.Size, cp.Hash)) {
				t.Fatalf("parsed %q as %+v", b, cp)
			}
		}
		if cp, err := OpenCheckpoint(b, CheckpointKeys{Log: v}); err == nil {
			if cp.Origin != "log.example" || !bytes.HasPrefix(b, []byte(FormatCheckpoint(cp.Origin, cp.Size, cp.Hash))) {
				t.Fatalf("opened %q as %+v", b, cp)
			}
		}
		_, _ = NewNoteVerifier(string(b))
		// What the exporter and a keyless verify read: unchecked, but
		// the same body, and never more than OpenCheckpoint accepts.
		if cp, err := PeekCheckpoint(b); err == nil {
			if !bytes.HasPrefix(b, []byte(FormatCheckpoint(cp.Origin, cp.Size, cp.Hash))) || slices.Contains(cp.Witnesses, cp.Origin) {
				t.Fatalf("peeked %q as %+v", b, cp)
			}
		} else if _, err := OpenCheckpoint(b, CheckpointKeys{Log: v}); err == nil {
			t.Fatalf("%q opens but cannot be peeked", b)
		}
	})
}

// FuzzStatement fuzzes the signature statement and sig member parsers.
func FuzzStatement(f *testing.F) {
	k := testKey(f, 1)
	h := strings.Repeat("ab", 32)
	f.Add(Statement(h, k.KeyID()))
	sig, _ := json.Marshal(k.SignEvent(h))
	f.Add(sig)
	f.Add([]byte(`{"hash":"","key_id":"","spec":"gatehouse.journal.sig/v1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if hash, id, err := ParseStatement(b); err == nil {
			if !bytes.Equal(Statement(hash, id), b) {
				t.Fatalf("statement %q does not round-trip", b)
			}
		}
		if s, err := parseSig(b); err == nil {
			keys, _ := NewTrustedKeys(k.Public())
			_ = keys.VerifyEvent(h, s)
		}
	})
}

// FuzzProofs fuzzes proofs.json reading and checking.
func FuzzProofs(f *testing.F) {
	var h tlog.Hash
	p, _ := json.Marshal(Proofs{Checkpoint: "log.example\n1\n", Proofs: []InclusionProof{{HeadSeq: 1, Line: "{}", Proof: []tlog.Hash{h}}}})
	f.Add(p)
	f.Add([]byte(`{"proofs":[{"head_seq":0,"line":"","proof":["AA=="]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := ParseProofs(b)
		if err != nil {
			return
		}
		cp := &Checkpoint{Origin: "log.example", Size: 3}
		_ = VerifyInclusion(nil, ps.Proofs, cp)
	})
}
