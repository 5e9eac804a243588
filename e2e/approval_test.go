package e2e

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
)

// bank is a payments provider that records each payment with the
// idempotency key it carried and deduplicates by it. With hang set, a
// payment is received (and announced on started) but never answered until
// the caller goes away.
type bank struct {
	mu       sync.Mutex
	keys     []string          // the Idempotency-Key of every request
	payments map[string]string // key -> amount, the payments carried out
	hang     bool
	started  chan string
}

func newBank() *bank { return &bank{payments: map[string]string{}, started: make(chan string, 8)} }

func (b *bank) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/payments" {
		http.NotFound(w, r)
		return
	}
	var p struct{ Amount string }
	_ = json.NewDecoder(r.Body).Decode(&p)
	key := r.Header.Get("Idempotency-Key")
	b.mu.Lock()
	b.keys = append(b.keys, key)
	if _, dup := b.payments[key]; !dup {
		b.payments[key] = p.Amount
	}
	hang := b.hang
	b.mu.Unlock()
	if hang {
		b.started <- key
		<-r.Context().Done() // until the broker is killed
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprint(w, `{"status":"paid"}`)
}

func (b *bank) paid() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{}
	for k, v := range b.payments {
		out[k] = v
	}
	return out
}

// approvalFiles writes the catalogue, Ada's credential, the rules file
// with an approvals rule, and the backend's key pair; it returns the serve
// flags and the private key file.
func approvalFiles(t *testing.T, dir, url string) (flags []string, privFile string) {
	t.Helper()
	write := inDir(t, dir)
	pubFile, privFile := backendKey(t, write)
	return []string{
		"--mode", "strict",
		"--agents", erpRunner + "=shipped",
		"--providers", write("providers.yaml", `
providers:
  - {name: bank, base_url: `+url+`, auth: {type: bearer}, idempotency_header: Idempotency-Key}
integrations:
  - {name: bank.pay, provider: bank, effect: write, origin: shipped, operations: [{method: POST, template: /payments}]}
`),
		"--credentials", write("credentials.yaml", "credentials:\n  - {tenant: acme, person: ada, provider: bank, token: tok-ada}\n"),
		"--policy", write("rules.yaml", runnerCard+`
approvals:
  - name: payments
    match: {provider: bank, method: POST, path: /payments}
    roles: [finance]
    assurance: mfa
`),
		"--approval-key", pubFile,
		"--approval-claim-timeout", "2s",
	}, privFile
}

// inDir returns a function that writes a file of dir (mode 0600) and
// returns its path.
func inDir(t *testing.T, dir string) func(name, text string) string {
	return func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// backendKey writes a backend's Ed25519 key pair: the public key for
// serve's --approval-key, the private one for 'gatehouse approve --key'.
func backendKey(t *testing.T, write func(name, text string) string) (pubFile, privFile string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return write("backend.pub", base64.StdEncoding.EncodeToString(pub)+"\n"), write("backend.key", base64.StdEncoding.EncodeToString(priv.Seed())+"\n")
}

func bankPayment(amount string) string {
	return `{"provider":"bank","method":"POST","path":"/payments","atom":"bank.pay","body":{"to":"GB82WEST12345698765432","amount":"` + amount + `"}}`
}

// approvalList runs `gatehouse approve list --json`.
func approvalList(t *testing.T, data string, args ...string) []approval.Request {
	t.Helper()
	r := gh(t, append([]string{"approve", "list", "--data-dir", data, "--json"}, args...)...)
	var rep broker.ApprovalReply
	if err := cliJSON(r.stdout, &rep); err != nil || r.code != 0 {
		t.Fatalf("approve list: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	return rep.Requests
}

func approvalShow(t *testing.T, data, id string) approval.Request {
	t.Helper()
	r := gh(t, "approve", "show", id, "--data-dir", data, "--json")
	var rep broker.ApprovalReply
	if err := cliJSON(r.stdout, &rep); err != nil || rep.Request == nil {
		t.Fatalf("approve show: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	return *rep.Request
}

// TestApprovalsThroughServe: a payment an approvals rule gates is held,
// shows in the queue, is approved by the backend's signed assertion from
// the CLI, and runs once with the approval's id as its idempotency key; two
// approvals racing leave one decision and one payment; a broker killed
// between claim and settle leaves OUTCOME_UNKNOWN, which a person
// reconciles; verify passes.
func TestApprovalsThroughServe(t *testing.T) {
	b := newBank()
	srv := httptest.NewServer(b)
	defer srv.Close()
	data := t.TempDir()
	flags, key := approvalFiles(t, data, srv.URL)
	s := serve(t, data, flags...)
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--agent", erpRunner).stdout)
	call := func(amount string) (broker.EffectReply, int) {
		return callProvider(t, run, bankPayment(amount), "--data-dir", data)
	}
	approve := func(id, who string) result {
		return gh(t, "approve", "approve", id, "--data-dir", data, "--key", key, "--approver", who, "--role", "finance", "--assurance", "mfa", "--reason", "invoice checked")
	}

	// Held, in the queue, approved, runs once.
	held, code := call("100.00")
	if code != 3 || held.Error == nil || held.Error.Code != broker.CodeApprovalRequired || held.Decision.Approval == "" {
		t.Fatalf("gated payment: exit %d %+v %+v", code, held.Decision, held.Error)
	}
	id := held.Decision.Approval
	if q := approvalList(t, data, "--state", "pending"); len(q) != 1 || q[0].ID != id || q[0].Tenant != "acme" || q[0].Rule != "approval:payments" {
		t.Fatalf("queue: %+v", q)
	}
	if r := approve(id, "ada"); r.code != 1 {
		t.Fatalf("the person the work is for approved her own payment: exit %d %s", r.code, r.stdout)
	}
	if r := approve(id, "rita"); r.code != 0 {
		t.Fatalf("approve: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if got := approvalShow(t, data, id); got.State != approval.StateApproved || got.Decision.Authenticated != "signed-assertion" {
		t.Fatalf("after approve: %+v", got)
	}
	if len(b.paid()) != 0 {
		t.Fatal("paid before the approved action was proposed again")
	}
	ran, code := call("100.00")
	if code != 0 || ran.Outcome == nil || ran.Outcome.Status != "ok" || ran.Decision.Approval != id {
		t.Fatalf("approved payment: exit %d %+v %+v %+v", code, ran.Decision, ran.Outcome, ran.Error)
	}
	if again, code := call("100.00"); code != 3 || again.Error.Code != broker.CodeApprovalRequired || again.Decision.Approval == id {
		t.Fatalf("ran twice under one approval: exit %d %+v", code, again.Decision)
	}
	if p := b.paid(); len(p) != 1 || p[id] != "100.00" {
		t.Fatalf("payments %v, want one keyed by the approval %s", p, id)
	}

	// Two approvals at once: exactly one decision stands; two proposals
	// at once: exactly one payment.
	held2, _ := call("200.00")
	id2 := held2.Decision.Approval
	codes := make(chan int, 2)
	for _, who := range []string{"rita", "ruth"} {
		go func() {
			cmd := exec.Command(bin, "approve", "approve", id2, "--data-dir", data, "--key", key, "--approver", who, "--role", "finance")
			cmd.Env = cleanEnv()
			err := cmd.Run()
			c := 0
			if ee, ok := err.(*exec.ExitError); ok {
				c = ee.ExitCode()
			} else if err != nil {
				c = -1
			}
			codes <- c
		}()
	}
	if a, c := <-codes, <-codes; a+c != 1 {
		t.Fatalf("racing approvals exited %d and %d, want one 0 and one 1", a, c)
	}
	outs := make(chan []byte, 2)
	for range 2 {
		go func() {
			cmd := exec.Command(bin, "effect", "provider", "--data-dir", data, "--run", run, "--action", "call", "--agent", erpRunner, "--params", bankPayment("200.00"), "--json")
			cmd.Env = cleanEnv()
			out, _ := cmd.Output()
			outs <- out
		}()
	}
	ranN := 0
	for range 2 {
		var r broker.EffectReply
		if err := json.Unmarshal(<-outs, &r); err != nil {
			t.Fatal(err)
		}
		if r.Outcome != nil {
			ranN++
		}
	}
	if p := b.paid(); ranN != 1 || len(p) != 2 || p[id2] != "200.00" {
		t.Fatalf("racing proposals ran %d times; payments %v", ranN, p)
	}

	// Killed between claim and settle.
	held3, _ := call("300.00")
	id3 := held3.Decision.Approval
	if r := approve(id3, "rita"); r.code != 0 {
		t.Fatalf("approve: %s %s", r.stdout, r.stderr)
	}
	b.mu.Lock()
	b.hang = true
	b.mu.Unlock()
	agent := exec.Command(bin, "effect", "provider", "--data-dir", data, "--run", run, "--action", "call", "--agent", erpRunner, "--params", bankPayment("300.00"), "--json")
	agent.Env = cleanEnv()
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = agent.Process.Kill(); _ = agent.Wait() }()
	select {
	case k := <-b.started:
		if k != id3 {
			t.Fatalf("the approved payment carried key %q, want %s", k, id3)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the approved payment never reached the bank:\n%s", s.out)
	}
	if got := approvalShow(t, data, id3); got.State != approval.StateClaimed {
		t.Fatalf("while the payment is in flight: %s", got.State)
	}
	if err := s.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	b.mu.Lock()
	b.hang = false
	b.mu.Unlock()
	if err := os.Remove(filepath.Join(data, "endpoints.json")); err != nil {
		t.Fatal(err)
	}
	s = serve(t, data, flags...)
	deadline := time.Now().Add(30 * time.Second)
	for approvalShow(t, data, id3).State != approval.StateOutcomeUnknown {
		if time.Now().After(deadline) {
			t.Fatalf("the interrupted payment never became outcome_unknown:\n%s", s.out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r, code := call("300.00"); code != 1 || r.Outcome != nil || r.Error == nil || r.Error.Code != broker.CodeApprovalUsed {
		t.Fatalf("an outcome_unknown action ran again: exit %d %+v %+v", code, r.Decision, r.Error)
	}
	// Reconciling needs the rule's role and assurance, as approving does.
	if rc := gh(t, "approve", "reconcile", id3, "--data-dir", data, "--key", key, "--approver", "olga", "--happened=false", "--reason", "no role"); rc.code != 1 {
		t.Fatalf("reconcile without the rule's role: exit %d %s %s", rc.code, rc.stdout, rc.stderr)
	}
	rc := gh(t, "approve", "reconcile", id3, "--data-dir", data, "--key", key, "--approver", "olga", "--role", "finance", "--assurance", "mfa", "--happened=true", "--reason", "the bank shows the payment")
	if rc.code != 0 {
		t.Fatalf("reconcile: exit %d %s %s", rc.code, rc.stdout, rc.stderr)
	}
	if got := approvalShow(t, data, id3); got.State != approval.StateReconciled || got.Reconciled == nil || !got.Reconciled.Happened {
		t.Fatalf("after reconcile: %+v", got)
	}
	s.stop(t)

	v := gh(t, "verify", "--json", filepath.Join(data, "journal"))
	if v.code != 0 {
		t.Fatalf("verify: exit %d %s %s", v.code, v.stdout, v.stderr)
	}
	j := readRun(t, data, run)
	for _, typ := range []string{"approval.request", "approval.decision", "approval.claim", "approval.settle", "approval.reconciled"} {
		if !strings.Contains(j, `"type":"`+typ+`"`) {
			t.Errorf("no %s in the run's chain", typ)
		}
	}
	if n := strings.Count(j, `"type":"approval.decision"`); n != 3 {
		t.Errorf("%d approval.decision events, want 3 (one per approved request)", n)
	}
	if bytes.Contains([]byte(j), []byte("tok-ada")) || strings.Contains(j, "GB82WEST") {
		t.Error("a credential or an argument reached the journal")
	}
}
