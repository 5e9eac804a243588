package dashboard

import (
	"strings"
	"testing"
	"time"
)

// The reduced status page (anyone but an operator or admin without a
// tenant) says how the broker is doing and nothing of where things are.
func TestStatusReducedGolden(t *testing.T) {
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	secret := []string{"nats://10.0.0.7:4222", "/data/nats/creds", "/data/journal", "/etc/gatehouse/", `unknown key "colour"`, `unknown key "bnd"`, "reload-policy"}
	for name, st := range map[string]Status{
		"status-reduced.html": {
			Version: "0.1.0", Mode: "strict", PolicyName: "/etc/gatehouse/rules.yaml", PolicyDigest: "sha256:ab12",
			NATSURL: "nats://10.0.0.7:4222", Embedded: true, CredsDir: "/data/nats/creds", JournalDir: "/data/journal",
			Sinks: []string{"output", "peer"}, Started: start, Now: start.Add(90 * time.Second),
			WriterRunning: true, EventsWritten: 12, Pending: 1, SandboxTier: "bubblewrap", SandboxConfined: true,
		},
		"status-reduced-policy-error.html": {
			Version: "0.1.0", Mode: "report", PolicyName: "/etc/gatehouse/bad.yaml",
			PolicyError: `/etc/gatehouse/bad.yaml: rule 2 "x": unknown key "colour"`,
			NATSURL:     "nats://10.0.0.7:4222", JournalDir: "/data/journal", Started: start, Now: start, SandboxTier: "unconfined",
		},
		"status-reduced-grounding-error.html": {
			Version: "0.1.0", Mode: "strict", PolicyName: "/etc/gatehouse/rules.yaml", PolicyDigest: "sha256:ab12",
			GroundingError: `grounding rules: /etc/gatehouse/grounding.yaml: line 3: rule "refund": unknown key "bnd"`,
			NATSURL:        "nats://10.0.0.7:4222", JournalDir: "/data/journal", Sinks: []string{"provider"}, Started: start, Now: start, SandboxTier: "unconfined",
		},
	} {
		// Reload is set to show the reduced page never offers it.
		got := render(t, StatusReducedShell(Nav{User: "aud", Tenant: "acme", CSRF: "x", Evidence: true, Active: "status", Reload: true}, st))
		for _, s := range secret {
			if strings.Contains(string(got), s) {
				t.Errorf("%s shows %q", name, s)
			}
		}
		golden(t, name, got)
	}
}
