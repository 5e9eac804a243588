package grounding

import (
	"testing"

	"github.com/gatehouse/gatehouse/e2e/deptest"
)

// TestDeps keeps package grounding pure: records reach it through the
// Records interface, never through a client of its own.
func TestDeps(t *testing.T) {
	deptest.Check(t, "grounding", map[string]string{
		"github.com/nats-io/":                   "grounding checks values; the shared record store on JetStream belongs to the broker",
		"github.com/redis/":                     "the Redis record store belongs to the broker; grounding takes Records",
		"github.com/labstack/":                  "grounding has no HTTP surface; echo belongs to package web",
		"github.com/playwright-community/":      "grounding checks provider calls; Playwright belongs to package browser",
		"github.com/mxschmitt/":                 "grounding checks provider calls; Playwright belongs to package browser",
		"github.com/a-h/templ":                  "grounding renders nothing; templ belongs to package dashboard",
		"github.com/open-policy-agent/":         "OPA is only a benchmark yardstick; it must never reach grounding",
		"net/http":                              "grounding does no I/O: a reread goes through the broker (Input.Reread), never a client here",
		"github.com/gatehouse/gatehouse/broker": "the broker imports grounding, never the other way",
		"github.com/gatehouse/gatehouse/sinks":  "the provider sink calls grounding, never the other way",
	})
}
