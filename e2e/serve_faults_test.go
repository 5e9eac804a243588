package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
)

// TestServeFullDisk: serve's embedded journal writer on a disk that fills
// behaves as `gatehouse writer` does. Serve stays up; the writer says it
// cannot write in the writer health bucket, so strict mode refuses
// effects with JOURNAL_UNAVAILABLE and `gatehouse status` reports it;
// when space returns the writer reopens (repairing any partial line),
// catches up, effects are allowed again, and verify passes. The journal
// folder is a symlink into a 4 MB tmpfs (NATS's own store stays on the
// real disk). Needs mount (root), as TestFaultFullDisk does.
func TestServeFullDisk(t *testing.T) {
	mnt := smallTmpfs(t, "4m")
	data := t.TempDir()
	if err := os.Mkdir(filepath.Join(mnt, "journal"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(mnt, "journal"), filepath.Join(data, "journal")); err != nil {
		t.Fatal(err)
	}
	s := serve(t, data, "--mode", "strict", "--sandbox-tiers", "unconfined")
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
	output := func(i int) (broker.EffectReply, int) {
		r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--result", strconv.Itoa(i), "--json")
		var rep broker.EffectReply
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("effect reply: %v\n%s\n%s", err, r.stdout, r.stderr)
		}
		return rep, r.code
	}
	if rep, code := output(0); code != 0 {
		t.Fatalf("output before the disk filled: exit %d %+v", code, rep.Error)
	}

	fillers := []string{fillDisk(t, mnt)}

	// Effects go on until the writer fails on their records; from then on
	// strict mode refuses. The disk is kept full: a writer that fails
	// drops its spare log segments, and their room would let effects go
	// on for as long as it lasts.
	deadline := time.Now().Add(60 * time.Second)
	for i := 1; ; i++ {
		if i > 1 {
			fillers = append(fillers, fillDiskAs(t, mnt, fmt.Sprintf("filler-%d", i)))
		}
		rep, code := output(i)
		if rep.Error != nil && rep.Error.Code == broker.CodeJournal {
			// The writer may fail between the decision and the attempt:
			// then the decision is recorded as allowed and the effect is
			// not performed. Either way nothing happened.
			refused := rep.Decision != nil && rep.Decision.Outcome == "refused"
			notPerformed := rep.Decision != nil && rep.Decision.Outcome == "allowed" && rep.Outcome == nil
			if code != 1 || !(refused || notPerformed) {
				t.Fatalf("refusal with the disk full: exit %d %+v outcome %+v", code, rep.Decision, rep.Outcome)
			}
			t.Logf("after %d effects, strict mode refuses: %s", i, rep.Error.Message)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("strict mode never refused with the journal's disk full: exit %d %+v\n%s", code, rep.Error, s.out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitHTTP(t, s.ep.HTTP+"/healthz", http.StatusOK) // serve is still up
	st := gh(t, "status", "--data-dir", data)
	if st.code != 1 || !strings.Contains(st.stdout, "FINDING: the journal writer cannot write") {
		t.Fatalf("status with the disk full: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}

	for _, f := range fillers {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(60 * time.Second)
	for i := 1000; ; i++ {
		rep, code := output(i)
		if code == 0 {
			break
		}
		if rep.Error == nil || rep.Error.Code != broker.CodeJournal {
			t.Fatalf("after space returned: exit %d %+v", code, rep.Error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("effects still refused after space returned: %+v\n%s", rep.Error, s.out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := gh(t, "status", "--data-dir", data); strings.Contains(st.stdout, "cannot write") {
		t.Fatalf("status after space returned: exit %d\n%s", st.code, st.stdout)
	}
	s.stop(t)
	if v := gh(t, "verify", filepath.Join(data, "journal")); v.code != 0 {
		t.Fatalf("verify after the full disk: exit %d\n%s\n%s", v.code, tail(v.stdout, 4000), v.stderr)
	}
}

// TestApprovalsPendingShown: a held payment counts in every broker's
// gatehouse_approvals_pending and in `gatehouse status` (count and the
// oldest's age); deciding it takes it out of both.
func TestApprovalsPendingShown(t *testing.T) {
	b := newBank()
	srv := httptest.NewServer(b)
	defer srv.Close()
	data := t.TempDir()
	flags, key := approvalFiles(t, data, srv.URL)
	s := serve(t, data, flags...)
	metric := regexp.MustCompile(`(?m)^gatehouse_approvals_pending (\S+)$`)
	waitPending := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			m := metric.FindStringSubmatch(waitHTTP(t, s.ep.HTTP+"/metrics", http.StatusOK))
			if m != nil && m[1] == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("gatehouse_approvals_pending: %v, want %s", m, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	status := func() statusApprovalsJSON {
		t.Helper()
		r := gh(t, "status", "--data-dir", data, "--json")
		var st struct{ Approvals *statusApprovalsJSON }
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Approvals == nil {
			t.Fatalf("status --json: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		return *st.Approvals
	}
	waitPending("0")
	if a := status(); a.Pending != 0 || a.Oldest != nil {
		t.Fatalf("status before any approval: %+v", a)
	}

	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--agent", erpRunner).stdout)
	held, code := callProvider(t, run, bankPayment("100.00"), "--data-dir", data)
	if code != 3 || held.Error == nil || held.Error.Code != broker.CodeApprovalRequired {
		t.Fatalf("gated payment: exit %d %+v", code, held.Error)
	}
	waitPending("1")
	a := status()
	if a.Pending != 1 || a.Oldest == nil || time.Since(*a.Oldest) > time.Minute || time.Since(*a.Oldest) < 0 {
		t.Fatalf("status with one held payment: %+v", a)
	}
	text := gh(t, "status", "--data-dir", data)
	if !strings.Contains(text.stdout, "Approvals pending: 1, oldest waiting") {
		t.Fatalf("status text:\n%s", text.stdout)
	}

	if r := gh(t, "approve", "refuse", held.Decision.Approval, "--data-dir", data, "--key", key, "--approver", "rita",
		"--role", "finance", "--assurance", "mfa", "--reason", "not ours"); r.code != 0 {
		t.Fatalf("refuse: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	waitPending("0")
	if a := status(); a.Pending != 0 {
		t.Fatalf("status after the refusal: %+v", a)
	}
	s.stop(t)
}

type statusApprovalsJSON struct {
	Pending int        `json:"pending"`
	Oldest  *time.Time `json:"oldest"`
}
