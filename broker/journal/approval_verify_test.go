package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const (
	apRun    = "r_apapapapapapapapapapapapap"
	apID     = "ap_20260301T120000_0011223344556677"
	apAction = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	apOther  = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// approvedRun is a run whose one effect runs under an approval, as the
// broker records it.
func approvedRun(t *testing.T) []Event {
	dec := decision(OutcomeAllowed)
	dec.Approval, dec.ActionDigest = apID, apAction
	return []Event{
		ev(t, apRun, "e1", TypeRunOpen, "", 1, RunOpen{Scopes: []string{}}),
		ev(t, apRun, "e2", TypeDecision, "x_held", 2, decision(OutcomeHeld)),
		ev(t, apRun, "e3", TypeApprovalRequest, "x_held", 3, ApprovalRequest{Approval: apID, ActionDigest: apAction, Sink: "provider", Action: "call", Arguments: []string{"amount"}, Rule: "approval:payments", Roles: []string{"finance"}}),
		ev(t, apRun, "e4", TypeApprovalDecision, "x_held", 4, ApprovalDecision{Approval: apID, ActionDigest: apAction, Approved: true, Approver: "rita", Roles: []string{"finance"}, Assurance: "mfa", Authenticated: "signed-assertion", Verified: true}),
		ev(t, apRun, "e5", TypeDecision, "x_run", 5, dec),
		ev(t, apRun, "e6", TypeApprovalClaim, "x_run", 6, ApprovalClaim{Approval: apID, ActionDigest: apAction}),
		ev(t, apRun, "e7", TypeAttempt, "x_run", 7, Attempt{Sink: "provider", Action: "call"}),
		ev(t, apRun, "e8", TypeOutcome, "x_run", 8, Result{Status: "ok"}),
		ev(t, apRun, "e9", TypeApprovalSettle, "x_run", 9, ApprovalSettle{Approval: apID, Status: "ok"}),
	}
}

// rewrite tampers consistently: it reads every event back from dir's run
// file, lets f change them, and writes the result as a whole new journal
// through the real writer in place of the old one. Every hash, link and
// head-log entry is recomputed, so only a check of what the events say can
// catch the change.
func rewrite(t *testing.T, dir string, f func([]Event) []Event) {
	t.Helper()
	b, err := os.ReadFile(runPath(dir, apRun))
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		e, err := ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	writeJournal(t, dir, f(evs), 3)
}

func TestVerifyChecksEveryApprovedEffect(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func([]Event) []Event
		want   FindingKind
	}{
		{"untampered", nil, ""},
		{"approval-for-another-action", func(evs []Event) []Event {
			evs[3].Data = mustJSON(t, ApprovalDecision{Approval: apID, ActionDigest: apOther, Approved: true, Approver: "rita", Roles: []string{"finance"}, Authenticated: "signed-assertion"})
			return evs
		}, FindingApprovalMismatch},
		{"effect-names-another-action", func(evs []Event) []Event {
			dec := decision(OutcomeAllowed)
			dec.Approval, dec.ActionDigest = apID, apOther
			evs[4].Data = mustJSON(t, dec)
			return evs
		}, FindingApprovalMismatch},
		{"decision-removed", func(evs []Event) []Event {
			return append(evs[:3:3], evs[4:]...)
		}, FindingApprovalMissing},
		{"refused-not-approved", func(evs []Event) []Event {
			evs[3].Type = TypeApprovalRefused
			evs[3].Data = mustJSON(t, ApprovalDecision{Approval: apID, ActionDigest: apAction, Approver: "rita", Roles: []string{"finance"}, Authenticated: "dashboard-session"})
			return evs
		}, FindingApprovalMissing},
		{"decision-after-the-effect", func(evs []Event) []Event {
			evs[3], evs[4] = evs[4], evs[3]
			return evs
		}, FindingApprovalMissing},
		{"reopened-before-the-effect", func(evs []Event) []Event {
			return slices.Insert(evs, 4, reopened(t))
		}, FindingApprovalMissing},
		{"another-approval-id", func(evs []Event) []Event {
			dec := decision(OutcomeAllowed)
			dec.Approval, dec.ActionDigest = "ap_20260301T120000_ffffffffffffffff", apAction
			evs[4].Data = mustJSON(t, dec)
			return evs
		}, FindingApprovalMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "journal")
			writeJournal(t, dir, approvedRun(t), 2)
			if rep := verify(t, dir); !rep.OK {
				t.Fatalf("the journal as written has findings: %s", dump(rep))
			}
			if tc.tamper == nil {
				return
			}
			rewrite(t, dir, tc.tamper)
			rep := verify(t, dir)
			if rep.OK || !hasFinding(rep, tc.want, apRun, 0) {
				t.Fatalf("want %s: %s", tc.want, dump(rep))
			}
			for _, f := range rep.Findings {
				if f.Kind != FindingApprovalMissing && f.Kind != FindingApprovalMismatch {
					t.Fatalf("the rewrite was not consistent, %s also found it: %s", f.Kind, dump(rep))
				}
			}
		})
	}
}

// reopened is the approval.reopened the approval service records when the
// broker finds the policy no longer accepts apID's approval.
func reopened(t *testing.T) Event {
	return ev(t, apRun, "e_reopen", TypeApprovalReopened, "x_held", 4, ApprovalReopened{Approval: apID, ActionDigest: apAction,
		Rule: "approval:payments", Roles: []string{"finance"}, Assurance: "mfa", Why: "the approval rule changed and the approval no longer suffices"})
}

// An approval.reopened sets aside the approval's earlier decisions: an
// effect allowed under it after the reopen needs a decision after the
// reopen. Each journal is written whole through the real writer.
func TestVerifyApprovalReopened(t *testing.T) {
	approvedAgain := ev(t, apRun, "e_again", TypeApprovalDecision, "x_held", 4, ApprovalDecision{Approval: apID, ActionDigest: apAction,
		Approved: true, Approver: "fred", Roles: []string{"finance"}, Assurance: "mfa", Authenticated: "signed-assertion", Verified: true})
	refusedAfter := ev(t, apRun, "e_refused", TypeApprovalRefused, "x_held", 4, ApprovalDecision{Approval: apID, ActionDigest: apAction,
		Approver: "fred", Roles: []string{"finance"}, Authenticated: "dashboard-session", Reason: "not this month"})
	for _, tc := range []struct {
		name string
		evs  func([]Event) []Event
		want FindingKind // "" for none
	}{
		// approval.decision, approval.reopened, allowed effect.
		{"reopened, not decided again", func(evs []Event) []Event { return slices.Insert(evs, 4, reopened(t)) }, FindingApprovalMissing},
		// ... approval.reopened, approval.decision (approved), allowed effect.
		{"reopened, approved again", func(evs []Event) []Event { return slices.Insert(evs, 4, reopened(t), approvedAgain) }, ""},
		// ... approval.reopened, approval.refused, allowed effect.
		{"reopened, then refused", func(evs []Event) []Event { return slices.Insert(evs, 4, reopened(t), refusedAfter) }, FindingApprovalMissing},
		// The effect ran before the reopen: its approval stood then.
		{"reopened after the effect", func(evs []Event) []Event { return append(evs, reopened(t)) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "journal")
			writeJournal(t, dir, tc.evs(approvedRun(t)), 2)
			rep := verify(t, dir)
			if tc.want == "" {
				if !rep.OK {
					t.Fatalf("want no findings: %s", dump(rep))
				}
				return
			}
			if rep.OK || !hasFinding(rep, tc.want, apRun, 0) {
				t.Fatalf("want %s: %s", tc.want, dump(rep))
			}
			for _, f := range rep.Findings {
				if f.Kind != tc.want {
					t.Fatalf("only %s expected: %s", tc.want, dump(rep))
				}
			}
		})
	}
}
