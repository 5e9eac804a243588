package e2e

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
)

// Attacks of round 12c on the trust boundary (issue 12): places where an
// agent's own spelling of a request, not a fact Gatehouse established,
// decided what an approval covered. The built binary in strict mode, a
// named agent's credential only; each case checks what the provider
// received and what the approval store holds.

// TestAttackApprovalKeyOrderSwap: an approval is bound to the action's
// params as JSON values (RFC 8785, so key order does not matter), but a
// sink decodes params with encoding/json, which matches "BODY" to the
// body field as well and keeps whichever comes last. So the same params
// with two keys that differ only in case decode to different calls
// depending on their order, under one digest: the agent had a payment of
// 1.00 approved and then, with the keys swapped, ran a payment of 9999.00
// under that approval. Params a sink could read either way are never put
// to a person: the request is refused, nothing is held, nothing is paid.
func TestAttackApprovalKeyOrderSwap(t *testing.T) {
	b := newBank()
	srv := httptest.NewServer(b)
	defer srv.Close()
	data := t.TempDir()
	flags, key := approvalFiles(t, data, srv.URL)
	serve(t, data, flags...)
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--agent", erpRunner).stdout)

	const to = `"to":"GB82WEST12345698765432"`
	small, big := `{`+to+`,"amount":"1.00"}`, `{`+to+`,"amount":"9999.00"}`
	head := `"provider":"bank","method":"POST","path":"/payments","atom":"bank.pay"`
	// encoding/json keeps the last: body 1.00 here, 9999.00 below.
	shown := `{"BODY":` + big + `,` + head + `,"body":` + small + `}`
	swapped := `{"body":` + small + `,` + head + `,"BODY":` + big + `}`

	held, code := callProvider(t, run, shown, "--data-dir", data)
	if held.Error == nil || held.Error.Code != broker.CodeBadRequest {
		// Before the fix: held for a person, who approves the 1.00.
		if held.Decision != nil && held.Decision.Approval != "" {
			id := held.Decision.Approval
			if r := gh(t, "approve", "approve", id, "--data-dir", data, "--key", key, "--approver", "rita", "--role", "finance", "--assurance", "mfa", "--reason", "1.00 checked"); r.code != 0 {
				t.Fatalf("approve: exit %d %s %s", r.code, r.stdout, r.stderr)
			}
			ran, rc := callProvider(t, run, swapped, "--data-dir", data)
			t.Errorf("swapped keys under approval %s: exit %d %+v %+v", id, rc, ran.Decision, ran.Outcome)
		}
		t.Errorf("params with body and BODY were not refused: exit %d %+v %+v", code, held.Decision, held.Error)
	}
	for k, amount := range b.paid() {
		t.Errorf("paid %s under key %s: an approval covered params the bank read otherwise", amount, k)
	}
	if q := approvalList(t, data); len(q) != 0 {
		t.Errorf("an ambiguous action was put to a person: %+v", q)
	}

	// The same payment written once is held as before, and its approval
	// covers only itself.
	honest := `{` + head + `,"body":` + small + `}`
	h, code := callProvider(t, run, honest, "--data-dir", data)
	if code != 3 || h.Error == nil || h.Error.Code != broker.CodeApprovalRequired {
		t.Fatalf("honest payment: exit %d %+v %+v", code, h.Decision, h.Error)
	}
	if got := approvalShow(t, data, h.Decision.Approval); got.State != approval.StatePending {
		t.Fatalf("honest payment's approval: %+v", got)
	}
}
