package e2e

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCheckpointSigningNeedsOperatorOnServe: once serve has dashboard
// users, having the journal sign a checkpoint on demand (GET
// /checkpoint?fresh=1, POST /checkpoint) needs an operator's session,
// while what verifiers read (the latest checkpoint, its key) stays public.
func TestCheckpointSigningNeedsOperatorOnServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gatehouse serve")
	}
	data := t.TempDir()
	for _, u := range [][2]string{{"olga", "operator"}, {"rita", "reviewer"}} {
		if r := ghIn(t, dashPassword+"\n", "users", "add", u[0], "--role", u[1], "--data-dir", data, "--password-stdin"); r.code != 0 {
			t.Fatalf("users add %s: %+v", u[0], r)
		}
	}
	keyFile := filepath.Join(t.TempDir(), "log.key")
	must(t, os.WriteFile(keyFile, []byte(hex.EncodeToString(bytes.Repeat([]byte{0x3c}, 32))+"\n"), 0o600))
	s := serve(t, data, "--signing-key-file", keyFile, "--checkpoint-interval", "1h")
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
	gh(t, "work", "close", "--data-dir", data, run)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(readRun(t, data, run), `"run.close"`) {
		if time.Now().After(deadline) {
			t.Fatal("run.close never written")
		}
		time.Sleep(50 * time.Millisecond)
	}

	anon := func(method, path string) int {
		t.Helper()
		req, _ := http.NewRequest(method, s.ep.HTTP+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := anon(http.MethodGet, "/checkpoint?fresh=1"); code != http.StatusUnauthorized {
		t.Fatalf("anonymous GET /checkpoint?fresh=1: %d", code)
	}
	if code := anon(http.MethodPost, "/checkpoint"); code != http.StatusForbidden { // no CSRF token, no session
		t.Fatalf("anonymous POST /checkpoint: %d", code)
	}
	rita := signIn(t, s.ep.HTTP, "rita")
	tok := csrfField.FindStringSubmatch(rita.get(t, "/status"))
	if code, _ := rita.post(t, "/checkpoint", url.Values{"_csrf": {tok[1]}}); code != http.StatusForbidden {
		t.Fatalf("reviewer POST /checkpoint: %d", code)
	}
	if code := anon(http.MethodGet, "/checkpoint"); code != http.StatusNotFound {
		t.Fatalf("a refused request signed: GET /checkpoint %d", code)
	}

	olga := signIn(t, s.ep.HTTP, "olga")
	cp := olga.get(t, "/checkpoint?fresh=1")
	if lines := strings.Split(cp, "\n"); len(lines) < 3 || lines[1] == "0" {
		t.Fatalf("operator GET /checkpoint?fresh=1:\n%s", cp)
	}
	tok = csrfField.FindStringSubmatch(olga.get(t, "/status"))
	if code, body := olga.post(t, "/checkpoint", url.Values{"_csrf": {tok[1]}}); code != http.StatusOK || !strings.Contains(body, "\n— ") {
		t.Fatalf("operator POST /checkpoint: %d %s", code, body)
	}
	for _, p := range []string{"/checkpoint", "/checkpoint/key", "/.well-known/did.json"} {
		if code := anon(http.MethodGet, p); code != http.StatusOK {
			t.Errorf("anonymous GET %s: %d", p, code)
		}
	}
	s.stop(t)
}
