package artifact

import (
	"strings"
	"testing"
)

// TestDirLockIsNoLedger: no tenant's lock file in a folder store's .quota
// is a ledger, its own or another tenant's, for tenants named alike.
func TestDirLockIsNoLedger(t *testing.T) {
	var tenants []string
	for _, n := range []string{"acme", "acme.lock", "acme~lock", "acme.lock.lock", "a", "a~", "~", "lock", ".lock", "x/y", strings.Repeat("t", 65)} {
		tenants = append(tenants, TenantDir(n))
	}
	ledgers := map[string]bool{}
	for _, tn := range tenants {
		ledgers[ledgerPath(tn)] = true
	}
	for _, tn := range tenants {
		if ledgers[lockPath(tn)] {
			t.Errorf("tenant dir %q: its lock %s is a ledger", tn, lockPath(tn))
		}
	}
}
