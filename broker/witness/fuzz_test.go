package witness

import (
	"bytes"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// FuzzParseAddCheckpoint: the request parser never panics, and what it
// accepts formats back to the same body.
func FuzzParseAddCheckpoint(f *testing.F) {
	var h tlog.Hash
	h[3] = 9
	f.Add(FormatAddCheckpoint(0, nil, []byte("log\n1\nAA==\n\n— log AAAA\n")))
	f.Add(FormatAddCheckpoint(5, tlog.TreeProof{h, h}, []byte("log\n8\nAA==\n\n— log AAAA\n")))
	f.Add([]byte("old 01\n\nx"))
	f.Fuzz(func(t *testing.T, b []byte) {
		old, proof, cp, err := ParseAddCheckpoint(b)
		if err != nil {
			return
		}
		if !bytes.Equal(FormatAddCheckpoint(old, proof, cp), b) {
			t.Fatalf("%q does not round-trip", b)
		}
	})
}
