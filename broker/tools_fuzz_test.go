package broker

import (
	"errors"
	"testing"
)

// FuzzToolsRequests: the bodies of gatehouse.v1.agent.<id>.tools.list and .tools.wait
// come from agents; decoding never panics and accepts only a run id (and
// an approval id, a non-negative timeout).
func FuzzToolsRequests(f *testing.F) {
	for _, s := range []string{`{"run":"r_01m8n75ye327hsa7apgb8fqfxn"}`, `{"run":"r_01m8n75ye327hsa7apgb8fqfxn","approval":"ap_20261201T114211_36c04b0db791a6c8","timeout_ms":5}`,
		`{"run":"x"}`, `{"run":"r_01m8n75ye327hsa7apgb8fqfxn","tenant":"acme"}`, `{"run":"r_01m8n75ye327hsa7apgb8fqfxn","approval":"../x"}`, `{"run":"r_01m8n75ye327hsa7apgb8fqfxn","approval":"ap_1","timeout_ms":-1}`, `[]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if r, err := DecodeToolsRequest(data); err == nil {
			if !ValidRunID(r.Run) {
				t.Fatalf("accepted run %q", r.Run)
			}
		} else if !errors.Is(err, ErrBadRequest) {
			t.Fatalf("tools list: %v", err)
		}
		if w, err := DecodeWaitRequest(data); err == nil {
			if !ValidRunID(w.Run) || w.TimeoutMS < 0 || w.Approval == "" {
				t.Fatalf("accepted wait %+v", w)
			}
		} else if !errors.Is(err, ErrBadRequest) {
			t.Fatalf("tools wait: %v", err)
		}
	})
}
