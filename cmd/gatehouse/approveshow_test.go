package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/approval"
)

// A reopened request (an expired approval, a changed policy) shows the
// decisions set aside, so the person asked again sees who approved it
// before and when.
func TestApproveShowPrintsSetAsideDecisions(t *testing.T) {
	var out bytes.Buffer
	env := &cliEnv{stdout: &out}
	given := time.Date(2026, 12, 1, 23, 50, 34, 0, time.UTC)
	r := &approval.Request{
		ID: "ap_1", State: approval.StateReopened, Sink: "output", Action: "deliver",
		Run: "r_1", Tenant: "acme", Person: "ada", Rule: "approval:payouts",
		Previous: []approval.Decision{{Approved: true, Approver: "rita", Assurance: "mfa",
			Authenticated: "signed-assertion", Reason: "ok", Time: given}},
	}
	printRequest(env, r, true)
	want := "  set aside: approved=true by rita (mfa, signed-assertion) ok, at 2026-12-01T23:50:34Z\n"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("show printed\n%s\nwant a line %q", out.String(), want)
	}
	if strings.Contains(out.String(), "decided:") {
		t.Fatalf("a reopened request has no current decision, got\n%s", out.String())
	}
}
