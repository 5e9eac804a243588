package evidence_test

import (
	"errors"
	"testing"

	"github.com/gatehouse/gatehouse/broker/evidence"
)

// FuzzParseManifest: the manifest comes from whoever handed the export
// over. ParseManifest never panics, and what it accepts is valid and
// every error says it is not an export.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"format":"gatehouse-evidence-export","version":1,"tenant":"acme","created":"2026-01-01T00:00:00Z","head":{"path":"head.jsonl","size":0,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},"runs":[]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := evidence.ParseManifest(b)
		if err != nil {
			if !errors.Is(err, evidence.ErrNotExport) {
				t.Fatalf("error %v does not wrap ErrNotExport", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted an invalid manifest: %v", err)
		}
	})
}
