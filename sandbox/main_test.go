package sandbox_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/gatehouse/gatehouse/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.MaybeHelper()
	os.Exit(m.Run())
}

// testConfig re-executes the test binary as the helper.
func testConfig(tiers ...sandbox.Tier) sandbox.Config {
	return sandbox.Config{
		Tiers:  tiers,
		UID:    sandboxUID,
		GID:    sandboxUID,
		Helper: []string{os.Args[0], sandbox.HelperArg},
		Logger: slog.New(slog.DiscardHandler),
	}
}

var (
	detectOnce sync.Once
	detected   = map[sandbox.Tier]*sandbox.Sandbox{}
	reports    = map[sandbox.Tier]*sandbox.Report{}
)

var confinedTiers = []sandbox.Tier{sandbox.TierBwrap, sandbox.TierNamespaces, sandbox.TierLandlock}

// eachTier runs f once per confining tier, each in its own subtest. A tier is skipped only when its self-test
// says it cannot start on this machine; a tier that starts but is not confined fails the test.
func eachTier(t *testing.T, f func(t *testing.T, sb *sandbox.Sandbox)) {
	t.Helper()
	detectOnce.Do(func() {
		for _, tier := range confinedTiers {
			detected[tier], reports[tier] = sandbox.Detect(context.Background(), testConfig(tier))
		}
	})
	for _, tier := range confinedTiers {
		t.Run(string(tier), func(t *testing.T) {
			tr := reports[tier].Tier(tier)
			switch {
			case tr == nil:
				t.Fatalf("tier %s was not self-tested", tier)
			case tr.Err != "":
				t.Skipf("tier %s cannot start on this machine: %s", tier, tr.Err)
			case !tr.Confined:
				t.Fatalf("tier %s started but is not confined: %+v", tier, tr.Probes)
			}
			sb := detected[tier]
			if sb.Tier() != tier || !sb.Confined() {
				t.Fatalf("Detect chose %s (confined %v), want %s", sb.Tier(), sb.Confined(), tier)
			}
			f(t, sb)
		})
	}
}
