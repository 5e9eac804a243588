package e2e

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// TestStatusApprovalsOnRedis: with serve --redis-url the approvals live in
// Redis, and `gatehouse status --redis-url` counts the pending ones there
// (count and the oldest's time); deciding one takes it out. A --redis-url
// that is not a URL is a usage error that does not echo it; Redis that
// cannot be reached is a finding.
func TestStatusApprovalsOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gatehouse serve and redis-server")
	}
	redisURL, _, _ := sinktest.StartRedis(t)
	b := newBank()
	srv := httptest.NewServer(b)
	defer srv.Close()
	data := t.TempDir()
	flags, key := approvalFiles(t, data, srv.URL)
	s := serve(t, data, append(flags, "--redis-url", redisURL)...)
	status := func(args ...string) (result, *statusApprovalsJSON) {
		t.Helper()
		r := gh(t, append([]string{"status", "--data-dir", data, "--json"}, args...)...)
		var st struct{ Approvals *statusApprovalsJSON }
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("status --json %v: exit %d %v\n%s%s", args, r.code, err, r.stdout, r.stderr)
		}
		return r, st.Approvals
	}
	if r, a := status("--redis-url", redisURL); r.code != 0 || a == nil || a.Pending != 0 || a.Oldest != nil {
		t.Fatalf("status --redis-url before any approval: exit %d %+v\n%s", r.code, a, r.stdout)
	}

	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--agent", erpRunner).stdout)
	held, code := callProvider(t, run, bankPayment("100.00"), "--data-dir", data)
	if code != 3 || held.Error == nil || held.Error.Code != broker.CodeApprovalRequired {
		t.Fatalf("gated payment: exit %d %+v", code, held.Error)
	}
	r, a := status("--redis-url", redisURL)
	if a == nil || a.Pending != 1 || a.Oldest == nil || time.Since(*a.Oldest) > time.Minute || time.Since(*a.Oldest) < 0 {
		t.Fatalf("status --redis-url with one held payment: exit %d %+v\n%s", r.code, a, r.stdout)
	}
	if text := gh(t, "status", "--data-dir", data, "--redis-url", redisURL); !strings.Contains(text.stdout, "Approvals pending: 1, oldest waiting") {
		t.Fatalf("status text:\n%s%s", text.stdout, text.stderr)
	}
	// Without --redis-url status looks in JetStream KV, where this
	// deployment keeps none.
	if _, a := status(); a != nil && a.Pending != 0 {
		t.Fatalf("status without --redis-url counted %+v", a)
	}

	if r := gh(t, "approve", "refuse", held.Decision.Approval, "--data-dir", data, "--key", key, "--approver", "rita",
		"--role", "finance", "--assurance", "mfa", "--reason", "not ours"); r.code != 0 {
		t.Fatalf("refuse: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if _, a := status("--redis-url", redisURL); a == nil || a.Pending != 0 {
		t.Fatalf("status --redis-url after the refusal: %+v", a)
	}

	bad := gh(t, "status", "--data-dir", data, "--redis-url", "redis://op:s3cret@%zz")
	if bad.code != 2 || strings.Contains(bad.stdout+bad.stderr, "s3cret") {
		t.Fatalf("a bad --redis-url: exit %d\n%s%s", bad.code, bad.stdout, bad.stderr)
	}
	if r, a := status("--redis-url", "redis://127.0.0.1:1/0"); r.code != 1 || a != nil || !strings.Contains(r.stdout, "approvals in Redis") {
		t.Fatalf("status with Redis unreachable: exit %d %+v\n%s", r.code, a, r.stdout)
	}
	s.stop(t)
}
