package browser

import (
	"testing"

	"github.com/gatehouse/gatehouse/e2e/deptest"
)

// TestDeps keeps package browser to its place: the browser and the broker's
// interfaces, nothing of the web edge or of other sinks.
func TestDeps(t *testing.T) {
	deptest.Check(t, "browser", map[string]string{
		"github.com/playwright-community/":         "the archived path downloads its driver from a retired CDN; use github.com/mxschmitt/playwright-go",
		"github.com/labstack/":                     "the browser has no HTTP surface of its own; echo belongs to package web",
		"github.com/a-h/templ":                     "the browser renders nothing; templ belongs to package dashboard",
		"github.com/redis/":                        "a run's browser state lives in its BrowserContext, not in a shared store",
		"github.com/gatehouse/gatehouse/sinks/":    "sinks do not import each other; share through broker",
		"github.com/gatehouse/gatehouse/dashboard": "arrows point one way: dashboard reads, browser acts",
		"github.com/gatehouse/gatehouse/web":       "arrows point one way: web serves, browser acts",
		"github.com/gatehouse/gatehouse/cmd/":      "cmd wires packages; packages never import it",
	})
}
