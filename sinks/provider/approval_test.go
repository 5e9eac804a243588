package provider_test

import (
	"slices"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

// TestApprovedPaymentRetriesCarryTheApproval: a payment performed under an
// approval carries the approval's id as its idempotency key on every
// attempt (the ERP answers the first 503 after carrying it out), so the
// retry is deduplicated by the provider and the payment happens once.
// The key is the same whichever effect performs the approved action.
func TestApprovedPaymentRetriesCarryTheApproval(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{})
	runID := s.open(t, "ada")
	run := &broker.Run{ID: runID, For: policy.Principal{Tenant: "acme", Person: "ada"}, Scopes: []string{}}
	const approval = "ap_20260301T120000_0011223344556677"
	s.erp.mu.Lock()
	s.erp.fail503 = 1
	s.erp.mu.Unlock()

	ctx := broker.ContextWithApproval(ctxT(t), approval)
	req := request(runID, policy.OriginShipped, pay(`{"invoice":"INV-7","amount":"12.00"}`))
	prop, err := s.sink.Describe(ctx, run, &req)
	if err != nil {
		t.Fatal(err)
	}
	prop.ID = "e_first"
	done, err := s.sink.Perform(ctx, run, &req, prop)
	if err != nil {
		t.Fatal(err)
	}
	if done.Result.Detail["attempts"] != "2" || done.Result.Detail["status_code"] != "201" {
		t.Fatalf("outcome %+v", done.Result)
	}
	var keys []string
	for _, c := range s.erp.snapshot() {
		if c.Path == "/payments" {
			keys = append(keys, c.Key)
		}
	}
	if !slices.Equal(keys, []string{approval, approval}) {
		t.Fatalf("attempts carried keys %q, want the approval's id on each", keys)
	}
	if s.erp.payCount() != 1 {
		t.Fatalf("%d payments, want 1", s.erp.payCount())
	}

	// Another effect performing the same approved action (a broker that
	// retried after losing its connection) carries the same key, and the
	// provider pays once.
	prop.ID = "e_second"
	if _, err := s.sink.Perform(ctx, run, &req, prop); err != nil {
		t.Fatal(err)
	}
	if s.erp.payCount() != 1 {
		t.Fatalf("%d payments after a second attempt of the approved action, want 1", s.erp.payCount())
	}

	// An operation_id the agent chose (bound by the approval's digest, as
	// every param) wins over the approval's id.
	p := pay(`{"invoice":"INV-7","amount":"13.00"}`)
	p["operation_id"] = "pay-INV-7-2"
	req = request(runID, policy.OriginShipped, p)
	if prop, err = s.sink.Describe(ctx, run, &req); err != nil {
		t.Fatal(err)
	}
	prop.ID = "e_third"
	if _, err := s.sink.Perform(ctx, run, &req, prop); err != nil {
		t.Fatal(err)
	}
	calls := s.erp.snapshot()
	if last := calls[len(calls)-1]; last.Key != "pay-INV-7-2" {
		t.Fatalf("key %q, want the agent's operation_id", last.Key)
	}
}
