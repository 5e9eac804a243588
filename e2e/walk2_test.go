package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/approval"
)

// TestWalk2ApprovalLifeThroughServe walks the README's approvals backend
// flow (keygen, the payouts rule, serve --approval-key, shared
// credentials, strict mode) with --approval-life so short that every
// approval has expired when the agent proposes the action again: the
// action is held again (exit 3) under the same request, now reopened; the
// journal holds approval.reopened saying the approval expired, before the
// held decision; approve show prints the decision set aside; nothing
// was attempted, and verify passes. An approval life
// of 1ns makes expiry certain without waiting on a clock.
func TestWalk2ApprovalLifeThroughServe(t *testing.T) {
	data := t.TempDir()
	write := inDir(t, data)
	key := filepath.Join(data, "backend.key")
	if r := gh(t, "keygen", "--out", key); r.code != 0 || !strings.Contains(r.stdout, "gatehouse serve --approval-key") {
		t.Fatalf("keygen: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rules := write("rules.yaml", `approvals:
  - name: payouts
    match: {sink: output, target: "payout*"}
    roles: [finance]
    assurance: mfa
`)
	serve(t, data, "--mode", "strict", "--policy", rules, "--approval-key", strings.TrimSuffix(key, ".key")+".pub", "--approval-life", "1ns")
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
	payout := func() result {
		return gh(t, "effect", "output", "--data-dir", data, "--run", run, "--status", "payout",
			"--result", `{"to": "GB82WEST12345698765432", "amount": "120.00"}`)
	}
	if r := payout(); r.code != 3 || !strings.Contains(r.stdout, "held (strict mode): approval-missing, rule approval:payouts") {
		t.Fatalf("payout: exit %d, want 3 (held)\n%s%s", r.code, r.stdout, r.stderr)
	}
	q := approvalList(t, data, "--state", "pending")
	if len(q) != 1 {
		t.Fatalf("pending: %+v", q)
	}
	id := q[0].ID
	if r := gh(t, "approve", "approve", id, "--data-dir", data, "--key", key, "--approver", "rita", "--role", "finance",
		"--assurance", "mfa", "--reason", "invoice checked"); r.code != 0 {
		t.Fatalf("approve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := payout(); r.code != 3 || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "why: ") || !strings.Contains(r.stdout, "the approval expired: given ") {
		t.Fatalf("payout after its approval expired: exit %d, want 3, held under %s\n%s%s", r.code, id, r.stdout, r.stderr)
	}
	got := approvalShow(t, data, id)
	if got.State != approval.StateReopened || got.Decision != nil || len(got.Previous) != 1 || got.Previous[0].Approver != "rita" {
		t.Fatalf("after expiry: %+v", got)
	}
	show := gh(t, "approve", "show", id, "--data-dir", data)
	if show.code != 0 || !strings.Contains(show.stdout, "reopened") ||
		!strings.Contains(show.stdout, "  set aside: approved=true by rita (mfa, signed-assertion) invoice checked, at ") {
		t.Fatalf("approve show of the reopened request: exit %d\n%s%s", show.code, show.stdout, show.stderr)
	}

	// The journal: approval.reopened with why, before the held decision
	// that followed it.
	f, err := os.Open(filepath.Join(data, "journal", "runs", run+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var types []string
	reopenedAt := -1
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Approval string `json:"approval"`
				Why      string `json:"why"`
				Outcome  string `json:"outcome"`
			} `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type+":"+ev.Data.Outcome)
		if ev.Type == "approval.reopened" {
			if ev.Data.Approval != id || !strings.HasPrefix(ev.Data.Why, "the approval expired: given ") {
				t.Fatalf("approval.reopened: %s", sc.Text())
			}
			reopenedAt = len(types) - 1
		}
	}
	if reopenedAt < 0 || reopenedAt+1 >= len(types) || types[reopenedAt+1] != "policy.decision:held" {
		t.Fatalf("journal %v: want approval.reopened followed by the held policy.decision", types)
	}
	for _, ty := range types {
		if strings.HasPrefix(ty, "effect.attempt") {
			t.Fatalf("journal %v: an expired approval let the payout run", types)
		}
	}
	if r := gh(t, "verify", filepath.Join(data, "journal")); r.code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestWalk2MCPHTTPRefusesAnotherAgentsRun walks "Streamable HTTP": with
// bob's token, a session on bob's run opens; on a run opened for no agent
// it is refused 403 with the code the broker gives the same refusal,
// NOT_RUN_AGENT (it said FORBIDDEN_FIELD, a code about request fields), and
// without a token 401.
func TestWalk2MCPHTTPRefusesAnotherAgentsRun(t *testing.T) {
	data := t.TempDir()
	s := serve(t, data, "--mcp-http", "127.0.0.1:0", "--agents", "bob")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(args ...string) string {
		t.Helper()
		r := gh(t, append([]string{"work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada"}, args...)...)
		if r.code != 0 {
			t.Fatalf("work open: exit %d %s", r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	bobs, nobodys := open("--agent", "bob"), open()
	tok := agentToken(t, data, "bob")
	openMCP(ctx, t, s.ep.MCP, bobs, tok)
	code, _, body := mcpRaw(ctx, t, "POST", s.ep.MCP+"?run="+nobodys, tok, "", mcpInit)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); code != http.StatusForbidden || err != nil || e.Error.Code != "NOT_RUN_AGENT" ||
		!strings.Contains(e.Error.Message, "was not opened for agent bob") {
		t.Fatalf("bob's token on a run opened for no agent: %d %s", code, body)
	}
	if code, _, body := mcpRaw(ctx, t, "POST", s.ep.MCP+"?run="+bobs, "", "", mcpInit); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s", code, body)
	}
}
