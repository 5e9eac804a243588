package journal

import "testing"

// An effect attempted before its run was closed may finish after: the
// application closed the work while the effect ran (a host command, a
// provider call). Its outcome and approval settlement after run.close are
// the true record, not tampering. Anything else after run.close is: a new
// decision, an attempt, or an outcome of an effect never attempted before
// the close.
func TestVerifyOutcomeOfAnEffectInFlightAtClose(t *testing.T) {
	const run = "r_cccccccccccccccccccccccccc"
	base := func() []Event {
		return []Event{
			ev(t, run, "e1", TypeRunOpen, "", 1, RunOpen{Scopes: []string{}}),
			ev(t, run, "e2", TypeDecision, "x_1", 2, decision(OutcomeAllowed)),
			ev(t, run, "e3", TypeAttempt, "x_1", 3, Attempt{Sink: "process", Action: "exec"}),
			ev(t, run, "e4", TypeRunClose, "", 4, RunClose{Status: "done"}),
		}
	}
	dir := t.TempDir()
	writeJournal(t, dir, append(base(),
		ev(t, run, "e5", TypeOutcome, "x_1", 5, Result{Status: "ok"}),
		ev(t, run, "e6", TypeApprovalSettle, "x_1", 6, ApprovalSettle{Approval: "ap_x", Status: "ok"})), 2)
	if rep := verify(t, dir); !rep.OK {
		t.Fatalf("an in-flight effect's outcome after the close: %s", dump(rep))
	}
	for name, late := range map[string]Event{
		"a decision":                 ev(t, run, "e5", TypeDecision, "x_2", 5, decision(OutcomeRefused)),
		"an attempt":                 ev(t, run, "e5", TypeAttempt, "x_1", 5, Attempt{Sink: "process", Action: "exec"}),
		"an outcome never attempted": ev(t, run, "e5", TypeOutcome, "x_2", 5, Result{Status: "ok"}),
		"a second close":             ev(t, run, "e5", TypeRunClose, "", 5, RunClose{Status: "again"}),
	} {
		dir := t.TempDir()
		writeJournal(t, dir, append(base(), late), 2)
		if rep := verify(t, dir); !hasFinding(rep, FindingEventAfterClose, run, 5) {
			t.Errorf("%s after run.close: %s", name, dump(rep))
		}
	}
}
