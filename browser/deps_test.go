package browser

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps package browser to its place: the browser and the broker's
// interfaces, nothing of the web edge or of other sinks.
func TestDeps(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to list browser's imports: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []struct{ prefix, why string }{
		{"github.com/playwright-community/", "the archived path downloads its driver from a retired CDN; use github.com/mxschmitt/playwright-go"},
		{"github.com/labstack/", "the browser has no HTTP surface of its own; echo belongs to package web"},
		{"github.com/a-h/templ", "the browser renders nothing; templ belongs to package dashboard"},
		{"github.com/redis/", "a run's browser state lives in its BrowserContext, not in a shared store"},
		{"github.com/gatehouse/gatehouse/sinks/", "sinks do not import each other; share through broker"},
		{"github.com/gatehouse/gatehouse/dashboard", "arrows point one way: dashboard reads, browser acts"},
		{"github.com/gatehouse/gatehouse/web", "arrows point one way: web serves, browser acts"},
		{"github.com/gatehouse/gatehouse/cmd/", "cmd wires packages; packages never import it"},
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f.prefix) {
				t.Errorf("browser imports %s: %s", dep, f.why)
			}
		}
	}
}
