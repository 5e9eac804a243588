package review_test

import (
	"testing"

	"github.com/gatehouse/gatehouse/e2e/deptest"
)

// TestDeps keeps policy review pure over the journal's files.
func TestDeps(t *testing.T) {
	deptest.Check(t, "broker/review", map[string]string{
		"github.com/redis/":     "review reads journal files offline",
		"github.com/labstack/":  "review has no HTTP surface; the dashboard's handlers call it",
		"github.com/a-h/templ":  "review returns values; rendering belongs to package dashboard",
		"github.com/mxschmitt/": "review reads recorded browser decisions; it drives no browser",
	})
}
