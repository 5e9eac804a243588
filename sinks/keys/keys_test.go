package keys

import (
	"errors"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
)

func TestCheck(t *testing.T) {
	for _, ok := range []string{"a", "reports/q1.csv", "A-b_c.d/e", strings.Repeat("x", 16)} {
		if err := Check(ok, 16); err != nil {
			t.Errorf("Check(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/abs", "a/../b", "..", "a/./b", ".", "a//b", "a/", "sp ace", "tab\t", "ü", "a\\b", strings.Repeat("x", 17)} {
		if err := Check(bad, 16); !errors.Is(err, broker.ErrBadRequest) {
			t.Errorf("Check(%q) = %v, want a bad request", bad, err)
		}
	}
}

func TestClip(t *testing.T) {
	if got := Clip(strings.Repeat("a", 100)); len(got) != 67 {
		t.Errorf("Clip kept %d bytes", len(got))
	}
	if got := Clip("a\xffb"); got != "a?b" {
		t.Errorf("Clip(invalid) = %q", got)
	}
}
