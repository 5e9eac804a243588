package review

import (
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/policy"
)

// A host command never runs in a sandbox tier, so its fix cannot be to
// install one; sandboxed code's can.
func TestUnconfinedFixFitsTheSink(t *testing.T) {
	if fix := unconfinedFix(policy.SinkProcess); strings.Contains(fix, "bubblewrap") || !strings.Contains(fix, "--origin shipped") {
		t.Errorf("process exec: %s", fix)
	}
	if fix := unconfinedFix(policy.SinkCode); !strings.Contains(fix, "bubblewrap") {
		t.Errorf("code run: %s", fix)
	}
}
