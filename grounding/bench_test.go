package grounding

import (
	"testing"
)

// BenchmarkCheck is the cost of grounding one payment through the
// two-record bind chain (invoice, then its supplier) with four
// requirements and other_fields: deny, against an in-memory store.
func BenchmarkCheck(b *testing.B) {
	rules := mustLoad(b, "testdata/payment.yaml")
	in := Input{Workflow: "wf-1", Call: paymentCall(payment(nil)), Now: now, Records: honestStore()}
	if res := rules.Check(b.Context(), in); len(res.Failures) != 0 {
		b.Fatal(res.Failures)
	}
	b.ReportAllocs()
	for b.Loop() {
		rules.Check(b.Context(), in)
	}
}

// BenchmarkCheckNoRule is the cost for a call no rule matches.
func BenchmarkCheckNoRule(b *testing.B) {
	rules := mustLoad(b, "testdata/payment.yaml")
	in := Input{Workflow: "wf-1", Call: Call{Provider: "erp", Method: "GET", Path: "/invoices/INV-7"}, Now: now, Records: honestStore()}
	b.ReportAllocs()
	for b.Loop() {
		rules.Check(b.Context(), in)
	}
}

func BenchmarkKeeps(b *testing.B) {
	rules := mustLoad(b, "testdata/payment.yaml")
	b.ReportAllocs()
	for b.Loop() {
		rules.Keeps("erp", "/suppliers/42")
	}
}
