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
		UID:    firstUID,
		UIDs:   uidCount,
		Helper: []string{os.Args[0], sandbox.HelperArg},
		Logger: slog.New(slog.DiscardHandler),
	}
}

// detection is the self-tests of every confining tier under one config, run once per test binary.
type detection struct {
	once      sync.Once
	sb        map[sandbox.Tier]*sandbox.Sandbox
	reports   map[sandbox.Tier]*sandbox.Report
	uid, uids int
}

var (
	leased = &detection{uid: firstUID, uids: uidCount} // a uid of its own per run
	shared = &detection{uid: sharedUID, uids: 1}       // one uid shared by every run
)

var confinedTiers = []sandbox.Tier{sandbox.TierBwrap, sandbox.TierNamespaces, sandbox.TierLandlock}

// eachTier runs f once per confining tier, each in its own subtest, with a uid of its own per run. A tier is
// skipped only when its self-test says it cannot start on this machine; a tier that starts but is not
// confined fails the test.
func eachTier(t *testing.T, f func(t *testing.T, sb *sandbox.Sandbox)) {
	t.Helper()
	leased.each(t, f)
}

// eachSharedTier is eachTier with sandboxes whose every run is sharedUID.
func eachSharedTier(t *testing.T, f func(t *testing.T, sb *sandbox.Sandbox)) {
	t.Helper()
	shared.each(t, f)
}

func (d *detection) each(t *testing.T, f func(t *testing.T, sb *sandbox.Sandbox)) {
	t.Helper()
	d.once.Do(func() {
		d.sb, d.reports = map[sandbox.Tier]*sandbox.Sandbox{}, map[sandbox.Tier]*sandbox.Report{}
		for _, tier := range confinedTiers {
			cfg := testConfig(tier)
			cfg.UID, cfg.UIDs = d.uid, d.uids
			d.sb[tier], d.reports[tier] = sandbox.Detect(context.Background(), cfg)
		}
	})
	for _, tier := range confinedTiers {
		t.Run(string(tier), func(t *testing.T) {
			tr := d.reports[tier].Tier(tier)
			switch {
			case tr == nil:
				t.Fatalf("tier %s was not self-tested", tier)
			case tr.Err != "":
				t.Skipf("tier %s cannot start on this machine: %s", tier, tr.Err)
			case !tr.Confined:
				t.Fatalf("tier %s started but is not confined: %+v", tier, tr.Probes)
			}
			sb := d.sb[tier]
			if sb.Tier() != tier || !sb.Confined() {
				t.Fatalf("Detect chose %s (confined %v), want %s", sb.Tier(), sb.Confined(), tier)
			}
			f(t, sb)
		})
	}
}
