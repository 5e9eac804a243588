package policy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps package policy pure: it must never import the components
// the rest of Gatehouse talks to.
func TestDeps(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to list policy's imports: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []struct{ prefix, why string }{
		{"github.com/nats-io/", "policy decides; it must not talk to NATS (the broker does)"},
		{"github.com/redis/", "policy keeps no shared state; Redis belongs to the broker's stores"},
		{"github.com/labstack/", "policy has no HTTP surface; echo belongs to package web"},
		{"github.com/playwright-community/", "policy decides browser effects from values; Playwright belongs to package browser"},
		{"github.com/mxschmitt/", "policy decides browser effects from values; Playwright belongs to package browser"},
		{"github.com/a-h/templ", "policy renders nothing; templ belongs to package dashboard"},
		{"github.com/open-policy-agent/", "OPA is only a benchmark yardstick (policy/opabench); it must never reach the shipped binary"},
		{"net/http", "policy does no I/O; whatever sends requests lives at the edges"},
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f.prefix) {
				t.Errorf("policy imports %s: %s", dep, f.why)
			}
		}
	}
}
