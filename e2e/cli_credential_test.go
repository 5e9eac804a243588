package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker/embedded"
)

// TestEffectWithAnotherIdentitysCredential: a named agent's credential
// given to `effect` without --agent speaks on the shared agent's subjects,
// which the server refuses that credential. The CLI says so at once, exit
// 2 with CREDENTIAL_REFUSED and what to do, instead of a TIMEOUT after
// ten seconds whose effect "may have been decided"; with --agent it works.
func TestEffectWithAnotherIdentitysCredential(t *testing.T) {
	data := t.TempDir()
	if r := gh(t, "agents", "add", "bob", "--data-dir", data); r.code != 0 {
		t.Fatalf("agents add: %d %s", r.code, r.stderr)
	}
	serve(t, data, "--sandbox-tiers", "unconfined")
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--agent", "bob").stdout)
	creds := embedded.AgentCredsPath(filepath.Join(data, "nats"), "bob")
	r := gh(t, "effect", "output", "--data-dir", data, "--creds", creds, "--run", run, "--result", "1", "--timeout", "1h")
	if r.code != 2 || !strings.Contains(r.stderr, "CREDENTIAL_REFUSED") || !strings.Contains(r.stderr, "--agent NAME") {
		t.Fatalf("bob's credential as the shared agent: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := gh(t, "effect", "output", "--data-dir", data, "--agent", "bob", "--run", run, "--result", "1"); r.code != 0 {
		t.Fatalf("with --agent bob: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
