package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvidenceAndReplayFromTheCLI runs serve with full capture, makes a few
// effects for two tenants, stops, then uses the binary as an operator and
// an auditor would: evidence for a person, a tenant's export, verify
// --export (and a plain verify refusing it), replay, a what-if policy, and
// erasing a person's content.
func TestEvidenceAndReplayFromTheCLI(t *testing.T) {
	data := t.TempDir()
	policyFile := filepath.Join(data, "rules.yaml")
	if err := os.WriteFile(policyFile, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	s := serve(t, data, "--mode", "report", "--policy", policyFile, "--journal-capture", "full")
	runs := map[string]string{}
	for _, who := range []string{"acme/ada", "globex/bob"} {
		tenant, person, _ := strings.Cut(who, "/")
		open := gh(t, "work", "open", "--data-dir", data, "--tenant", tenant, "--person", person)
		run := strings.TrimSpace(open.stdout)
		if open.code != 0 || run == "" {
			t.Fatalf("work open: %d %s %s", open.code, open.stdout, open.stderr)
		}
		runs[who] = run
		if r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--result", `{"rows":3}`); r.code != 0 {
			t.Fatalf("effect: %d %s %s", r.code, r.stdout, r.stderr)
		}
		gh(t, "effect", "output", "--data-dir", data, "--run", run, "--status", "leak-all", "--result", `"x"`)
	}
	s.stop(t)

	ev := gh(t, "evidence", "--data-dir", data, "acme/ada")
	if ev.code != 0 || !strings.Contains(ev.stdout, runs["acme/ada"]) || !strings.Contains(ev.stdout, "no-leaks") ||
		!strings.Contains(ev.stdout, "journal intact") || strings.Contains(ev.stdout, runs["globex/bob"]) {
		t.Fatalf("evidence acme/ada: %d\n%s%s", ev.code, ev.stdout, ev.stderr)
	}
	var tl struct {
		Runs []struct{ Run string }
	}
	if r := gh(t, "evidence", "--data-dir", data, "--json", "acme/ada"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &tl) != nil || len(tl.Runs) != 1 {
		t.Fatalf("evidence --json: %d %s", r.code, r.stdout)
	}

	export := filepath.Join(t.TempDir(), "acme-evidence")
	// No signing key, so no checkpoint: the export says so, and warns.
	if r := gh(t, "evidence", "--data-dir", data, "acme/", "--export", export); r.code != 0 || !strings.Contains(r.stdout, "exported 1 run(s)") ||
		!strings.Contains(r.stderr, "carries no inclusion proofs") {
		t.Fatalf("export: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(export, "runs", runs["globex/bob"]+".jsonl")); err == nil {
		t.Fatal("acme's export holds globex's run")
	}
	if r := gh(t, "verify", "--export", export); r.code != 0 || !strings.Contains(r.stdout, "intact") || !strings.Contains(r.stdout, "no-proofs") {
		t.Fatalf("verify --export: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := gh(t, "verify", export); r.code != 2 || !strings.Contains(r.stderr, "--export") {
		t.Fatalf("plain verify of an export: %d %s %s", r.code, r.stdout, r.stderr)
	}

	rp := gh(t, "replay", "--data-dir", data)
	if rp.code != 0 || strings.Count(rp.stdout, "reproduced (2 decision(s) identical)") != 2 {
		t.Fatalf("replay: %d\n%s%s", rp.code, rp.stdout, rp.stderr)
	}
	cand := filepath.Join(data, "candidate.yaml")
	os.WriteFile(cand, []byte(rules+`
  - name: no-rows
    decision: deny
    match: {sink: output, target: "ok"}
`), 0o600)
	wi := gh(t, "replay", "--data-dir", data, "--policy", cand)
	if wi.code != 1 || !strings.Contains(wi.stdout, "rule no-rows") || !strings.Contains(wi.stdout, "2 decision(s) in 2 run(s)") {
		t.Fatalf("what-if: %d\n%s%s", wi.code, wi.stdout, wi.stderr)
	}

	// Erasing a person's content: refused without --yes, then done; the
	// journal still verifies and replay says what can no longer be replayed.
	if r := gh(t, "evidence", "--data-dir", data, "acme/ada", "--erase"); r.code != 2 || !strings.Contains(r.stdout, "would erase 2 blob(s)") {
		t.Fatalf("erase without --yes: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := gh(t, "evidence", "--data-dir", data, "acme/ada", "--erase", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "erased 2 blob(s)") {
		t.Fatalf("erase: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := gh(t, "verify", filepath.Join(data, "journal")); r.code != 0 {
		t.Fatalf("verify after erasure: %d %s", r.code, r.stdout)
	}
	rp = gh(t, "replay", "--data-dir", data)
	if rp.code != 1 || !strings.Contains(rp.stdout, runs["acme/ada"]+": not replayable: request erased (person acme/ada") ||
		!strings.Contains(rp.stdout, runs["globex/bob"]+": reproduced") {
		t.Fatalf("replay after erasure: %d\n%s%s", rp.code, rp.stdout, rp.stderr)
	}
	if r := gh(t, "replay", "--data-dir", data, filepath.Join(data, "journal"), runs["globex/bob"]); r.code != 0 {
		t.Fatalf("replay one run: %d %s %s", r.code, r.stdout, r.stderr)
	}
}
