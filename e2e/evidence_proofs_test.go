package e2e

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestWitnessedEvidenceExport: serve signs the journal and a witness (its
// own process) cosigns its checkpoints; effects for two tenants; then the
// operator exports one tenant's evidence with `gatehouse evidence acme/
// --export`, and its auditor checks it offline with only the log's and
// the witness's public keys. The other tenant's runs are absent, and a
// changed export or another witness's key fails.
func TestWitnessedEvidenceExport(t *testing.T) {
	tmp := t.TempDir()
	const origin = "e2e.example/evidence-log"
	logKey := gh(t, "keygen", "--out", filepath.Join(tmp, "log.key"), "--log-origin", origin)
	witKey := gh(t, "keygen", "--out", filepath.Join(tmp, "wit.key"), "--witness-name", "wit.e2e")
	otherWit := gh(t, "keygen", "--out", filepath.Join(tmp, "other.key"), "--witness-name", "wit.e2e")
	if logKey.code != 0 || witKey.code != 0 || otherWit.code != 0 {
		t.Fatalf("keygen: %v %v %v", logKey, witKey, otherWit)
	}
	logVKey, witVKey := keygenField(t, logKey.stdout, "log key"), keygenField(t, witKey.stdout, "witness key")
	witnessURL := startWitness(t, tmp, logVKey)

	data := t.TempDir()
	s := serve(t, data, "--signing-key-file", filepath.Join(tmp, "log.key"), "--log-origin", origin,
		"--witness", witnessURL, "--witness-key", witVKey, "--checkpoint-interval", "1h")
	runs := map[string]string{}
	for _, who := range []string{"acme/ada", "globex/bob", "acme/cy"} {
		tenant, person, _ := strings.Cut(who, "/")
		run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", tenant, "--person", person).stdout)
		if run == "" {
			t.Fatalf("work open %s", who)
		}
		runs[who] = run
		if r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--result", `{"rows":3}`); r.code != 0 {
			t.Fatalf("effect: %+v", r)
		}
		gh(t, "work", "close", "--data-dir", data, run)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, run := range runs {
		for !strings.Contains(readRun(t, data, run), `"run.close"`) {
			if time.Now().After(deadline) {
				t.Fatal("run.close never written")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for {
		resp, err := http.Get(s.ep.HTTP + "/checkpoint?fresh=1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(b), "— wit.e2e ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint: %d %s\n%s", resp.StatusCode, b, s.out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop(t)

	export := filepath.Join(t.TempDir(), "acme-evidence")
	ex := gh(t, "evidence", "--data-dir", data, "acme/", "--export", export)
	if ex.code != 0 || !strings.Contains(ex.stdout, "exported 2 run(s)") || !strings.Contains(ex.stdout, "cosigned by wit.e2e") ||
		strings.Contains(ex.stderr, "no signed checkpoint") {
		t.Fatalf("export: %d\n%s%s", ex.code, ex.stdout, ex.stderr)
	}
	// The other tenant's run is absent: no file, and not named in the
	// manifest or the proofs (the head log names it by id and hash only).
	if _, err := os.Stat(filepath.Join(export, "runs", runs["globex/bob"]+".jsonl")); err == nil {
		t.Fatal("acme's export holds globex's run")
	}
	for _, f := range []string{"export.json", "proofs/proofs.json"} {
		b, err := os.ReadFile(filepath.Join(export, f))
		if err != nil || bytes.Contains(b, []byte(runs["globex/bob"])) || bytes.Contains(b, []byte("globex")) {
			t.Fatalf("%s names globex's run (%v)", f, err)
		}
	}

	// The auditor: only public keys, offline.
	withKeys := func(dir, wkey string, args ...string) result {
		return gh(t, append([]string{"verify", "--export", dir, "--log-key", logVKey, "--witness-key", wkey}, args...)...)
	}
	if r := withKeys(export, witVKey); r.code != 0 || !strings.Contains(r.stdout, "intact") || !strings.Contains(r.stdout, "proofs-checked") ||
		!strings.Contains(r.stdout, "checked: the export's checkpoint (the log's signature, the cosignatures) and the inclusion proof of every head entry") {
		t.Fatalf("verify --export with keys: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := gh(t, "verify", "--export", export); r.code != 0 || !strings.Contains(r.stdout, "proofs-unchecked") {
		t.Fatalf("verify --export without keys: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := withKeys(export, keygenField(t, otherWit.stdout, "witness key")); r.code != 1 || !strings.Contains(r.stdout, "bad-checkpoint") {
		t.Fatalf("another witness's key: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := withKeys(export, witVKey, "--checkpoint", filepath.Join(export, "proofs", "checkpoint")); r.code != 2 {
		t.Fatalf("--checkpoint with --export: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A head entry of one of acme's runs changed in a copy of the export.
	edited := filepath.Join(t.TempDir(), "edited")
	copyDir(t, export, edited)
	hp := filepath.Join(edited, "head.jsonl")
	hb, _ := os.ReadFile(hp)
	var out []string
	done := false
	sc := bufio.NewScanner(bytes.NewReader(hb))
	for sc.Scan() {
		line := sc.Text()
		if !done && strings.Contains(line, runs["acme/ada"]) {
			line, done = strings.Replace(line, `"time":"20`, `"time":"19`, 1), true
		}
		out = append(out, line+"\n")
	}
	_ = os.WriteFile(hp, []byte(strings.Join(out, "")), 0o640)
	if r := withKeys(edited, witVKey, "--json"); r.code != 1 || !strings.Contains(r.stdout, `"bad-inclusion-proof"`) ||
		!strings.Contains(r.stdout, `"checkpoint-mismatch"`) {
		t.Fatalf("edited head entry: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// startWitness runs `gatehouse witness` for the log as its own process
// and returns its URL.
func startWitness(t *testing.T, tmp, logVKey string) string {
	t.Helper()
	wcmd := exec.Command(bin, "witness", "--state-dir", filepath.Join(tmp, "witness"), "--witness-key-file", filepath.Join(tmp, "wit.key"),
		"--name", "wit.e2e", "--log", logVKey, "--http", "127.0.0.1:0")
	wcmd.Env = cleanEnv()
	wout, err := wcmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var werr bytes.Buffer
	wcmd.Stderr = &werr
	if err := wcmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = wcmd.Process.Signal(os.Interrupt)
		_ = wcmd.Wait()
	})
	sc := bufio.NewScanner(wout)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "witness wit.e2e listening on "); ok {
			go io.Copy(io.Discard, wout)
			return u
		}
	}
	t.Fatalf("witness did not start: %s", werr.String())
	return ""
}

// keygenField is the value `gatehouse keygen` printed on its line name.
func keygenField(t *testing.T, out, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `\s+(\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s in %q", name, out)
	}
	return m[1]
}
