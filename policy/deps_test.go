package policy

import (
	"testing"

	"github.com/gatehouse/gatehouse/e2e/deptest"
)

// TestDeps keeps package policy pure: it must never import the components
// the rest of Gatehouse talks to.
func TestDeps(t *testing.T) {
	deptest.Check(t, "policy", map[string]string{
		"github.com/nats-io/":              "policy decides; it must not talk to NATS (the broker does)",
		"github.com/redis/":                "policy keeps no shared state; Redis belongs to the broker's stores",
		"github.com/labstack/":             "policy has no HTTP surface; echo belongs to package web",
		"github.com/playwright-community/": "policy decides browser effects from values; Playwright belongs to package browser",
		"github.com/mxschmitt/":            "policy decides browser effects from values; Playwright belongs to package browser",
		"github.com/a-h/templ":             "policy renders nothing; templ belongs to package dashboard",
		"github.com/open-policy-agent/":    "OPA is only a benchmark yardstick (policy/opabench); it must never reach the shipped binary",
		"net/http":                         "policy does no I/O; whatever sends requests lives at the edges",
	})
}
