package e2e

import (
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
)

// TestGroundingAcrossBrokerProcesses reads the records through one broker
// process, stops it, and pays through another: the records are in the
// shared store, so the second process grounds the payment on reads the
// first one made, and still refuses the planted IBAN.
func TestGroundingAcrossBrokerProcesses(t *testing.T) {
	ns := existingNATS(t)
	url := ns.ClientURL()
	e := &erp{}
	srv := httptest.NewServer(e)
	defer srv.Close()
	dir := t.TempDir()
	files := erpFiles(t, dir, srv.URL, "tok-ada")
	jdir := filepath.Join(dir, "journal")
	writer := exec.Command(bin, "writer", "--nats-url", url, "--journal-dir", jdir)
	writer.Env = cleanEnv()
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = writer.Process.Kill(); _ = writer.Wait() }()
	startBroker := func(name string) *server {
		return serve(t, filepath.Join(dir, name), append([]string{"--mode", "strict", "--nats-url", url, "--no-writer"}, files...)...)
	}
	call := func(run, params string) (broker.EffectReply, int) {
		return callProvider(t, run, params, "--nats-url", url)
	}

	a := startBroker("a")
	run := strings.TrimSpace(gh(t, "work", "open", "--nats-url", url, "--tenant", "acme", "--person", "ada", "--agent", erpRunner).stdout)
	for _, path := range []string{"/invoices/INV-7", "/suppliers/S-1"} {
		if r, code := call(run, `{"provider":"erp","method":"GET","path":"`+path+`","atom":"erp.read"}`); code != 0 {
			t.Fatalf("GET %s through broker a: %d %+v", path, code, r.Decision)
		}
	}
	a.stop(t)

	b := startBroker("b")
	pay := payment
	if r, code := call(run, pay("DE89370400440532013000")); code != 1 || r.Decision.Refusal != "ungrounded" {
		t.Fatalf("planted IBAN through broker b: %d %+v", code, r.Decision)
	}
	if r, code := call(run, pay("GB82WEST12345698765432")); code != 0 || r.Decision.Outcome != "allowed" {
		t.Fatalf("honest payment through broker b: %d %+v", code, r.Decision)
	}
	if got := e.paid(); len(got) != 1 {
		t.Fatalf("payments: %q", got)
	}
	b.stop(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		v := gh(t, "verify", "--json", jdir)
		var rep struct {
			OK     bool
			Events int
		}
		_ = json.Unmarshal([]byte(v.stdout), &rep)
		// open, 2 reads x3, ungrounded decision, payment x3
		if rep.OK && rep.Events == 11 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journal: %s", v.stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
