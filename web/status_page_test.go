package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/dashboard"
)

// The status page names the NATS URL, the credentials, journal and policy
// paths and the policy's read error only to operators and admins bound to
// no tenant, as /api/status does; every other signed-in user gets the
// reduced page, and /api/status refuses them.
func TestStatusDetailsOnlyForDeploymentOperators(t *testing.T) {
	ev := newEnv(t, true)
	details := []string{"nats://10.0.0.7:4222", "/srv/gatehouse/nats/creds", "/srv/gatehouse/journal", "/etc/gatehouse/", `unknown key`, `binds twice`}
	ev.srv = httptest.NewServer(New(Config{Users: ev.users, SetupToken: ev.setupTok, Approvals: ev.svc, JournalDir: ev.journal,
		Status: func() dashboard.Status {
			return dashboard.Status{Mode: "report", PolicyName: "/etc/gatehouse/rules.yaml", PolicyDigest: "sha256:0f",
				PolicyError:    `/etc/gatehouse/rules.yaml: rule 2 "x": unknown key "colour"`,
				GroundingError: `grounding rules: /etc/gatehouse/grounding.yaml: rule "pay" binds twice`,
				NATSURL:        "nats://10.0.0.7:4222", Embedded: true, CredsDir: "/srv/gatehouse/nats/creds", JournalDir: "/srv/gatehouse/journal"}
		}}))
	t.Cleanup(ev.srv.Close)

	for _, n := range []string{"olga", "ada"} {
		c := ev.client(t)
		c.login(n)
		resp, page := c.get("/status")
		if resp.StatusCode != http.StatusOK || strings.Contains(page, "status-reduced") {
			t.Errorf("%s /status: %d, reduced page", n, resp.StatusCode)
		}
		for _, d := range details {
			if !strings.Contains(page, d) {
				t.Errorf("%s /status does not show %q", n, d)
			}
		}
		if resp, body := c.get("/api/status"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "nats://10.0.0.7:4222") {
			t.Errorf("%s /api/status: %d %s", n, resp.StatusCode, body)
		}
	}
	for _, n := range []string{"rita", "aud-acme", "rev-globex", "op-globex"} {
		c := ev.client(t)
		c.login(n)
		resp, page := c.get("/status")
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, "status-reduced") || !strings.Contains(page, "sha256:0f") ||
			!strings.Contains(page, "rules.yaml") || !strings.Contains(page, "Policy could not be read") ||
			!strings.Contains(page, "Grounding rules could not be read") {
			t.Errorf("%s /status: %d, not the reduced page: %s", n, resp.StatusCode, page)
		}
		for _, d := range details {
			if strings.Contains(page, d) {
				t.Errorf("%s /status shows %q", n, d)
			}
		}
		if resp, body := c.get("/api/status"); resp.StatusCode != http.StatusForbidden || strings.Contains(body, "nats://") {
			t.Errorf("%s /api/status: %d %s", n, resp.StatusCode, body)
		}
	}
}
