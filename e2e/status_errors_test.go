package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStatusCountsEffectErrors: `gatehouse status` counts a broker's
// effect replies that carried an error. NATS micro's own count stays at 0
// for answers given from their own goroutine, which is every answer.
func TestStatusCountsEffectErrors(t *testing.T) {
	data := t.TempDir()
	serve(t, data, "--mode", "strict", "--sandbox-tiers", "unconfined")
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
	if r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--result", "1"); r.code != 0 {
		t.Fatalf("output: exit %d %s", r.code, r.stderr)
	}
	for range 2 { // UNKNOWN_RUN
		if r := gh(t, "effect", "output", "--data-dir", data, "--run", "r_nosuchrun", "--result", "1"); r.code == 0 {
			t.Fatalf("an effect on an unknown run: exit 0")
		}
	}
	// A malformed request is an error reply (BAD_REQUEST); a policy
	// refusal is a decision, not an error.
	if r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--params", `{"nope":1}`); r.code != 2 || !strings.Contains(r.stderr, "BAD_REQUEST") {
		t.Fatalf("a malformed request: exit %d %s", r.code, r.stderr)
	}
	if r := gh(t, "effect", "process", "--data-dir", data, "--run", run, "--action", "exec", "--params", `{"argv":["/usr/bin/id"]}`); r.code != 1 || !strings.Contains(r.stdout, "refused") {
		t.Fatalf("a host command in strict mode: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	st := gh(t, "status", "--data-dir", data, "--json")
	var rep struct {
		Brokers []struct {
			Requests int `json:"requests"`
			Errors   int `json:"errors"`
		} `json:"brokers"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &rep); err != nil || len(rep.Brokers) != 1 {
		t.Fatalf("status --json: %v\n%s", err, st.stdout)
	}
	if b := rep.Brokers[0]; b.Errors != 3 {
		t.Fatalf("status counts %d errors of %d requests, want 3: the 2 effects on an unknown run and the malformed one, not the refusal", b.Errors, b.Requests)
	}
}
