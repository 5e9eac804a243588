package broker

import (
	"errors"
	"strings"
	"testing"
)

// TestOpenWorkDuplicateKeys: a work.open whose input (or any other part)
// has a key twice, or twice up to case, is refused before a run exists,
// naming the key's path and never its values.
func TestOpenWorkDuplicateKeys(t *testing.T) {
	for _, tc := range []struct{ req, want string }{
		{`{"tenant":"acme","person":"ada","input":{"invoice":"INV-7","invoice":"INV-9"}}`, "work.open.input.invoice is written twice"},
		{`{"tenant":"acme","person":"ada","input":{"invoice":"INV-7","Invoice":"INV-9"}}`, "work.open.input.Invoice is written twice, as keys that differ only in case"},
		{`{"tenant":"acme","person":"ada","input":{"lines":[{"iban":"A","iban":"B"}]}}`, "work.open.input.lines[0].iban"},
		{`{"tenant":"acme","Tenant":"evil","person":"ada"}`, "work.open.Tenant"},
		{`{"tenant":"acme","person":"ada","input":{"memo":"\ud800"}}`, "unpaired"},
	} {
		_, err := DecodeOpenWork([]byte(tc.req))
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.req, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "INV-9") || strings.Contains(err.Error(), "evil")) {
			t.Errorf("the error carries a value: %v", err)
		}
	}
	if w, err := DecodeOpenWork([]byte(`{"tenant":"acme","person":"ada","input":{"invoice":"INV-7","lines":[{"iban":"A"},{"iban":"B"}]}}`)); err != nil || w.Tenant != "acme" {
		t.Fatalf("a clean request was refused: %v", err)
	}
}
