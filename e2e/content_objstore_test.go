package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayAndErasureOnTheObjectStore runs serve with --content-store
// objectstore on a NATS it did not start, so the content outlives serve in
// the bucket gatehouse_content; then, as an operator would: replay from
// the object store reproduces every run (the folder store has nothing),
// a person's content is erased through the CLI, verify still passes, and
// replay says that person's run was erased while the other reproduces.
func TestReplayAndErasureOnTheObjectStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gatehouse serve")
	}
	ns := existingNATS(t)
	url := ns.ClientURL()
	data := t.TempDir()
	policyFile := filepath.Join(data, "rules.yaml")
	must(t, os.WriteFile(policyFile, []byte(rules), 0o600))
	s := serve(t, data, "--nats-url", url, "--mode", "report", "--policy", policyFile,
		"--journal-capture", "full", "--content-store", "objectstore")
	runs := map[string]string{}
	for _, who := range []string{"acme/ada", "globex/bob"} {
		tenant, person, _ := strings.Cut(who, "/")
		open := gh(t, "work", "open", "--nats-url", url, "--tenant", tenant, "--person", person)
		run := strings.TrimSpace(open.stdout)
		if open.code != 0 || run == "" {
			t.Fatalf("work open: %d %s %s", open.code, open.stdout, open.stderr)
		}
		runs[who] = run
		if r := gh(t, "effect", "output", "--nats-url", url, "--run", run, "--result", `{"rows":3}`); r.code != 0 {
			t.Fatalf("effect: %d %s %s", r.code, r.stdout, r.stderr)
		}
		gh(t, "effect", "output", "--nats-url", url, "--run", run, "--status", "leak-all", "--result", `"x"`)
	}
	// While serve runs, the CLI finds the object store through the
	// endpoints file in --data-dir, without NATS flags.
	if r := gh(t, "evidence", "--data-dir", data, "acme/ada", "--erase", "--content-store", "objectstore"); r.code != 2 || !strings.Contains(r.stdout, "would erase 2 blob(s)") {
		t.Fatalf("dry-run erase through the endpoints file: %d %s %s", r.code, r.stdout, r.stderr)
	}
	s.stop(t)
	if _, err := os.Stat(filepath.Join(data, "content", "sha256")); err == nil {
		t.Fatal("content was kept in the folder too")
	}

	// The folder store has nothing to replay; the object store has it all.
	if rp := gh(t, "replay", "--data-dir", data); rp.code != 1 || !strings.Contains(rp.stdout, "not replayable") {
		t.Fatalf("replay from the empty folder store: %d\n%s%s", rp.code, rp.stdout, rp.stderr)
	}
	obj := []string{"--content-store", "objectstore", "--nats-url", url}
	rp := gh(t, append([]string{"replay", "--data-dir", data}, obj...)...)
	if rp.code != 0 || strings.Count(rp.stdout, "reproduced (2 decision(s) identical)") != 2 {
		t.Fatalf("replay from the object store: %d\n%s%s", rp.code, rp.stdout, rp.stderr)
	}

	r := gh(t, append([]string{"evidence", "--data-dir", data, "acme/ada", "--erase", "--yes"}, obj...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "erased 2 blob(s)") || !strings.Contains(r.stdout, "gatehouse_content") {
		t.Fatalf("erase from the object store: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if v := gh(t, "verify", filepath.Join(data, "journal")); v.code != 0 {
		t.Fatalf("verify after erasure: %d %s", v.code, v.stdout)
	}
	rp = gh(t, append([]string{"replay", "--data-dir", data}, obj...)...)
	if rp.code != 1 || !strings.Contains(rp.stdout, runs["acme/ada"]+": not replayable: request erased (person acme/ada") ||
		!strings.Contains(rp.stdout, runs["globex/bob"]+": reproduced") {
		t.Fatalf("replay after erasure: %d\n%s%s", rp.code, rp.stdout, rp.stderr)
	}

	// A store that is not there is a usage error, not an empty replay.
	if r := gh(t, "replay", "--data-dir", t.TempDir(), "--content-store", "objectstore"); r.code != 2 || !strings.Contains(r.stderr, "no running gatehouse") {
		t.Fatalf("replay without a reachable object store: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := gh(t, "replay", "--data-dir", data, "--content-store", "s3"); r.code != 2 {
		t.Fatalf("--content-store s3: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestObjectStoreThroughTheEmbeddedServer: with the embedded NATS (which
// needs credentials), the CLI reaches the object store of the serve
// running in --data-dir with nothing but --content-store objectstore.
func TestObjectStoreThroughTheEmbeddedServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gatehouse serve")
	}
	data := t.TempDir()
	s := serve(t, data, "--mode", "report", "--journal-capture", "full", "--content-store", "objectstore")
	defer s.stop(t)
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
	if r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--result", `{"rows":3}`); r.code != 0 {
		t.Fatalf("effect: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r := gh(t, "evidence", "--data-dir", data, "acme/ada", "--erase", "--yes", "--content-store", "objectstore", "--json")
	var out struct{ Erased []struct{ Kind, Run string } }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || len(out.Erased) != 1 || out.Erased[0].Run != run || out.Erased[0].Kind != "request" {
		t.Fatalf("erase through the embedded server: %d %s %s", r.code, r.stdout, r.stderr)
	}
}
