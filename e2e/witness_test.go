package e2e

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// TestWitnessedJournal runs the integrity story with the built binary:
// keys from keygen, a witness as its own process over HTTP, serve signing
// every event and checkpoints cosigned by the witness, did.json, verify
// with keys and the witness's address; then a rewrite of the whole
// journal with the real signing key, and a rollback, both caught.
func TestWitnessedJournal(t *testing.T) {
	tmp := t.TempDir()
	const origin = "e2e.example/log"
	logKey := gh(t, "keygen", "--out", filepath.Join(tmp, "log.key"), "--log-origin", origin)
	witKey := gh(t, "keygen", "--out", filepath.Join(tmp, "wit.key"), "--witness-name", "wit.e2e")
	if logKey.code != 0 || witKey.code != 0 {
		t.Fatalf("keygen: %v %v", logKey, witKey)
	}
	logVKey, witVKey := keygenField(t, logKey.stdout, "log key"), keygenField(t, witKey.stdout, "witness key")
	pubFile := filepath.Join(tmp, "trusted.keys")
	if err := os.WriteFile(pubFile, []byte(keygenField(t, logKey.stdout, "public key")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The witness, its own process.
	witnessURL := startWitness(t, tmp, logVKey)

	data := t.TempDir()
	s := serve(t, data, "--signing-key-file", filepath.Join(tmp, "log.key"), "--log-origin", origin,
		"--witness", witnessURL, "--witness-key", witVKey, "--checkpoint-interval", "1h")
	open := gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--scope", "reports")
	run := strings.TrimSpace(open.stdout)
	for range 3 {
		if r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--result", `{"rows":3}`); r.code != 0 {
			t.Fatalf("effect: %+v", r)
		}
	}
	gh(t, "work", "close", "--data-dir", data, run)

	// did.json names the audit key.
	resp, err := http.Get(s.ep.HTTP + "/.well-known/did.json")
	if err != nil {
		t.Fatal(err)
	}
	var did struct {
		VerificationMethod []struct {
			ID           string
			PublicKeyJwk map[string]string
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&did)
	resp.Body.Close()
	if len(did.VerificationMethod) == 0 || !strings.HasSuffix(did.VerificationMethod[0].ID, "#audit-key") ||
		did.VerificationMethod[0].PublicKeyJwk["kid"] != keygenField(t, logKey.stdout, "key id") {
		t.Fatalf("did.json: %+v", did)
	}

	// Wait until the writer registered the close, then checkpoint on demand.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(readRun(t, data, run), `"run.close"`) {
		if time.Now().After(deadline) {
			t.Fatal("run.close never written")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var cpText string
	for {
		resp, err := http.Get(s.ep.HTTP + "/checkpoint?fresh=1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cpText = string(b)
		if resp.StatusCode == http.StatusOK && strings.Contains(cpText, "— wit.e2e ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint: %d %s\n%s", resp.StatusCode, b, s.out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop(t)

	jdir := filepath.Join(data, "journal")
	verify := func(args ...string) result {
		return gh(t, append([]string{"verify", jdir, "--trusted-key", pubFile, "--log-key", logVKey, "--witness-key", witVKey, "--witness", witnessURL}, args...)...)
	}
	if r := verify("--require-signatures"); r.code != 0 || !strings.Contains(r.stdout, "checked: signatures:") ||
		!strings.Contains(r.stdout, "entries against checkpoint") || !strings.Contains(r.stdout, "from "+witnessURL) || strings.Contains(r.stdout, "not checked") {
		t.Fatalf("intact journal: exit %d (it must say it checked the signatures and the witness's checkpoint)\n%s%s", r.code, r.stdout, r.stderr)
	}
	cpFile := filepath.Join(tmp, "checkpoint")
	_ = os.WriteFile(cpFile, []byte(cpText), 0o600)
	if r := gh(t, "verify", jdir, "--log-key", logVKey, "--witness-key", witVKey, "--checkpoint", cpFile, "--json"); r.code != 0 {
		t.Fatalf("against the checkpoint file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Keep a copy, then rewrite the whole journal with the real key: the
	// same runs, other content, every hash and the head log recomputed.
	orig := filepath.Join(tmp, "orig")
	copyDir(t, jdir, orig)
	key, err := journal.LoadSigningKey(filepath.Join(tmp, "log.key"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var evs []journal.Event
	for _, line := range strings.Split(strings.TrimSpace(readRun(t, data, run)), "\n") {
		e, err := journal.ParseLine([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		e.Data = bytes.ReplaceAll(e.Data, []byte(`"ada"`), []byte(`"eve"`))
		evs = append(evs, e)
	}
	forged := filepath.Join(tmp, "forged")
	w, err := journal.Open(forged, journal.WriterOptions{Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	// Batches that end where the original head log registered the run,
	// so the forged head log has as many entries as the true one.
	hb, _ := os.ReadFile(filepath.Join(jdir, "head.jsonl"))
	from := 0
	for _, line := range strings.Split(strings.TrimSpace(string(hb)), "\n") {
		var h journal.HeadEntry
		if err := json.Unmarshal([]byte(line), &h); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(evs[from:h.RunSeq]); err != nil {
			t.Fatal(err)
		}
		from = int(h.RunSeq)
	}
	w.Close()
	os.RemoveAll(jdir)
	copyDir(t, forged, jdir)
	if r := gh(t, "verify", jdir, "--trusted-key", pubFile, "--require-signatures"); r.code != 0 {
		t.Fatalf("the forgery should pass without a checkpoint: exit %d\n%s", r.code, r.stdout)
	}
	if r := verify(); r.code != 1 || !strings.Contains(r.stdout, "checkpoint-mismatch") {
		t.Fatalf("rewrite not caught: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Rolled back: the original journal with its last head entries gone.
	os.RemoveAll(jdir)
	copyDir(t, orig, jdir)
	head := filepath.Join(jdir, "head.jsonl")
	b, _ := os.ReadFile(head)
	lines := strings.SplitAfter(strings.TrimSpace(string(b)), "\n")
	_ = os.WriteFile(head, []byte(strings.Join(lines[:len(lines)-1], "")), 0o640)
	if r := verify(); r.code != 1 || !strings.Contains(r.stdout, "rolled-back") {
		t.Fatalf("rollback not caught: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, 0o750)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o640)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSigningKeyHandling: a key file others can read is used with a loud
// warning and never printed; a bad key leaves events unsigned with a loud
// error, and verify requiring signatures says so.
func TestSigningKeyHandling(t *testing.T) {
	tmp := t.TempDir()
	seed := bytes.Repeat([]byte{0x6b}, 32)
	keyFile := filepath.Join(tmp, "log.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(seed)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key, _ := journal.NewSigningKey(seed)
	trusted := filepath.Join(tmp, "trusted")
	_ = os.WriteFile(trusted, []byte(hex.EncodeToString(key.Public())+"\n"), 0o600)

	use := func(keyFile string) (string, string) {
		data := t.TempDir()
		s := serve(t, data, "--signing-key-file", keyFile, "--checkpoint-interval", "100ms")
		run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
		if r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--result", "1"); r.code != 0 {
			t.Fatalf("effect: %+v", r)
		}
		gh(t, "work", "close", "--data-dir", data, run)
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(readRun(t, data, run), `"run.close"`) {
			if time.Now().After(deadline) {
				t.Fatal("run.close never written")
			}
			time.Sleep(50 * time.Millisecond)
		}
		s.stop(t)
		return data, s.out.String()
	}

	data, out := use(keyFile)
	if !strings.Contains(out, "READABLE BY OTHER USERS") {
		t.Fatalf("no warning for a world-readable key:\n%s", out)
	}
	all := out
	_ = filepath.Walk(data, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && fi.Size() < 1<<20 {
			b, _ := os.ReadFile(p)
			all += string(b)
		}
		return nil
	})
	for _, secret := range []string{hex.EncodeToString(seed), base64.StdEncoding.EncodeToString(seed), hex.EncodeToString(ed25519.NewKeyFromSeed(seed))} {
		if strings.Contains(all, secret) {
			t.Fatalf("the signing key appears in serve's output or data")
		}
	}
	jdir := filepath.Join(data, "journal")
	if r := gh(t, "verify", jdir, "--trusted-key", trusted, "--require-signatures"); r.code != 0 {
		t.Fatalf("signed journal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(jdir, "checkpoints", "latest")); err != nil {
		t.Fatalf("no checkpoint stored on schedule: %v", err)
	}

	bad := filepath.Join(tmp, "bad.key")
	_ = os.WriteFile(bad, []byte(hex.EncodeToString(seed[:31])), 0o600)
	data, out = use(bad)
	if !strings.Contains(out, "SIGNING KEY UNUSABLE") {
		t.Fatalf("no error for a bad key:\n%s", out)
	}
	if r := gh(t, "verify", filepath.Join(data, "journal"), "--trusted-key", trusted, "--require-signatures"); r.code != 1 || !strings.Contains(r.stdout, "unsigned-event") {
		t.Fatalf("bad key: exit %d\n%s", r.code, r.stdout)
	}
}
