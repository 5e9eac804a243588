package dashboard

import (
	"testing"

	"github.com/gatehouse/gatehouse/e2e/deptest"
)

// TestDeps keeps package dashboard a renderer of values: package web
// serves it. (It imports broker/approval and broker/review for their value
// types, which bring NATS in transitively, so NATS is not listed.)
func TestDeps(t *testing.T) {
	deptest.Check(t, "dashboard", map[string]string{
		"github.com/labstack/":  "dashboard renders; serving (echo) belongs to package web",
		"github.com/mxschmitt/": "dashboard renders; Playwright belongs to package browser (and the tests)",
	})
}
