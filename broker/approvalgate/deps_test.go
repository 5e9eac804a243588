package approvalgate_test

import (
	"testing"

	"github.com/gatehouse/gatehouse/e2e/deptest"
)

// TestDeps keeps the gate's rule pure, so replay can apply it offline.
func TestDeps(t *testing.T) {
	deptest.Check(t, "broker/approvalgate", map[string]string{
		"github.com/nats-io/":                           "the gate's rule asks no store (broker/approval pulls it in); the broker asks the approval store",
		"github.com/redis/":                             "the gate's rule asks no store",
		"github.com/gatehouse/gatehouse/broker/journal": "replay turns recorded events into an Approval",
		"net/http": "the gate's rule is pure",
	})
}
