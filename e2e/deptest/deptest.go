// Package deptest is the dependency test every layered package runs: it
// lists what a package imports, directly or not, with `go list -deps` and
// fails on each import the package must never have, giving the reason.
// (After Tailscale's tstest/deptest.)
package deptest

import (
	"os/exec"
	"strings"
	"testing"
)

// Check fails t for every dependency of the package in the current
// directory that starts with a prefix of forbidden (import path prefix to
// the reason it is forbidden). name names the package in failures.
func Check(t *testing.T, name string, forbidden map[string]string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to list %s's imports: %v", name, err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, dep := range deps {
		for prefix, why := range forbidden {
			if strings.HasPrefix(dep, prefix) {
				t.Errorf("%s imports %s: %s", name, dep, why)
			}
		}
	}
}
