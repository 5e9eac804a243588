package provider_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/provider"

	"github.com/nats-io/nats.go/jetstream"
)

const honest = `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":"1200.00","payee":"Acme Supplies","currency":"EUR"}`

func payment(iban, amount, payee string) string {
	return `{"invoice":"INV-7","iban":"` + iban + `","amount":"` + amount + `","payee":"` + payee + `","currency":"EUR"}`
}

// readBoth reads the invoice and its supplier through Gatehouse.
func (s *setup) readBoth(t testing.TB, run string) {
	t.Helper()
	mustAllow(t, s.call(t, run, policy.OriginShipped, get("/invoices/INV-7")))
	mustAllow(t, s.call(t, run, policy.OriginShipped, get("/suppliers/S-1")))
}

// TestGroundingAttacks: each attack the reference names is refused in
// strict mode and nothing reaches /payments; the honest payment goes
// through citing both records, and verify checks the citations.
func TestGroundingAttacks(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{grounding: groundingYAML})
	for _, tc := range []struct {
		name string
		prep func(t *testing.T, run string)
		body string
		want string // in a failure
	}{
		{"IBAN planted in the invoice notes", nil, payment(attackerIBAN, "1200.00", "Acme Supplies"), "iban"},
		{"changed-banks message in the task", nil, payment(messageIBAN, "1200.00", "Acme Supplies"), "iban"},
		{"amount above the amount due", nil, payment(supplierIBAN, "1200.01", "Acme Supplies"), "amount"},
		{"lookalike supplier name", nil, payment(supplierIBAN, "1200.00", "Аcme Supplies"), "payee"}, // Cyrillic А
		{"field sent twice up to case", nil, `{"invoice":"INV-7","iban":"` + supplierIBAN + `","IBAN":"` + attackerIBAN + `","amount":"1","payee":"Acme Supplies","currency":"EUR"}`, "twice"},
		{"negative amount", nil, payment(supplierIBAN, "-100.00", "Acme Supplies"), "minus"},
		{"minus zero", nil, payment(supplierIBAN, "-0", "Acme Supplies"), "minus"},
		{"extra field", nil, `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":"1","payee":"Acme Supplies","currency":"EUR","bcc_iban":"` + attackerIBAN + `"}`, "bcc_iban"},
		{"two records for one selector", func(t *testing.T, run string) {
			s.erp.setSupplier("S-1", "iban", attackerIBAN)
			mustAllow(t, s.call(t, run, policy.OriginShipped, get("/suppliers/S-1")))
			s.erp.setSupplier("S-1", "iban", supplierIBAN)
		}, honest, "supplier"},
		{"stale record", func(t *testing.T, run string) { s.clock.Advance(301 * time.Second) }, honest, "old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := s.open(t, "ada")
			if tc.prep != nil && strings.HasPrefix(tc.name, "two") {
				tc.prep(t, run)
			}
			s.readBoth(t, run)
			if tc.prep != nil && !strings.HasPrefix(tc.name, "two") {
				tc.prep(t, run)
				defer s.clock.Advance(-301 * time.Second)
			}
			before := s.erp.count("POST", "/payments")
			r := s.call(t, run, policy.OriginShipped, pay(tc.body))
			mustRefuse(t, r, policy.RefuseUngrounded)
			if s.erp.count("POST", "/payments") != before {
				t.Fatal("an ungrounded payment reached /payments")
			}
			d := s.decision(t, run, r.Effect)
			if d.Rule != "grounding:supplier-payment" || len(d.Reasons) == 0 || !strings.Contains(strings.ToLower(d.Reasons[0].Detail), tc.want) {
				t.Fatalf("recorded %+v", d)
			}
		})
	}

	t.Run("the honest payment", func(t *testing.T) {
		run := s.open(t, "ada")
		s.readBoth(t, run)
		before := s.erp.payCount()
		r := s.call(t, run, policy.OriginShipped, pay(honest))
		mustAllow(t, r)
		if s.erp.payCount() != before+1 {
			t.Fatal("the honest payment did not reach the ERP")
		}
		d := s.decision(t, run, r.Effect)
		if len(d.Citations) != 2 || !strings.HasPrefix(d.Citations[0].Path, "erp:/invoices/INV-7") || d.Citations[1].Path != "erp:/suppliers/S-1" || d.Citations[0].Run != run {
			t.Fatalf("citations %+v", d.Citations)
		}
		for _, c := range d.Citations {
			found := false
			for _, ev := range s.env.Events(t, run) {
				if ev.Type == journal.TypeOutcome && ev.Effect == c.Effect && strings.Contains(string(ev.Data), c.Digest) {
					found = true
				}
			}
			if !found {
				t.Fatalf("citation %+v names no recorded outcome", c)
			}
		}
	})
	// Last: the change marks the shared agent, whose later runs ground
	// nothing on erp (TestGroundingAfterAnUngroundedChange).
	t.Run("read after the workflow wrote to the record", func(t *testing.T) {
		run := s.open(t, "ada")
		r := s.call(t, run, policy.OriginShipped, map[string]any{"provider": "erp", "method": "PATCH", "path": "/suppliers/S-1",
			"atom": "erp.suppliers.update", "body": json.RawMessage(`{"iban":"` + attackerIBAN + `"}`)})
		mustAllow(t, r)
		defer s.erp.setSupplier("S-1", "iban", supplierIBAN)
		s.readBoth(t, run)
		before := s.erp.count("POST", "/payments")
		r = s.call(t, run, policy.OriginShipped, pay(payment(attackerIBAN, "1200.00", "Acme Supplies")))
		mustRefuse(t, r, policy.RefuseUngrounded)
		if s.erp.count("POST", "/payments") != before {
			t.Fatal("reached /payments")
		}
		if d := s.decision(t, run, r.Effect); !strings.Contains(d.Reasons[0].Detail, "a change no grounding rule checked") {
			t.Fatalf("refused for another reason: %s", d.Reasons[0].Detail)
		}
	})

	s.env.Verify(t) // checks every citation
	if journalHolds(t, s.env.JournalDir, supplierIBAN) || journalHolds(t, s.env.JournalDir, notesSecret) {
		t.Fatal("the journal holds a record's content")
	}
}

// TestGroundingAcrossBrokers: the reads go through one broker, the payment
// is decided by another with its own NATS connection and sink; they share
// only NATS (journal, runs, the record bucket).
func TestGroundingAcrossBrokers(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{grounding: groundingYAML})
	nc, err := s.env.NS.Connect(embedded.RoleBroker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	other := &setup{erp: s.erp, env: s.env, clock: s.clock, logs: &syncBuffer{}}
	sinkB := newSinkOn(t, js, other, groundingYAML)
	runs, err := broker.OpenKVRuns(ctxT(t), js, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Config{Mode: policy.ModeStrict}, runs, broker.NewRecorder(js, 5*time.Second), s.env.Broker.Policy(), sinkB)
	if err != nil {
		t.Fatal(err)
	}
	propose := func(run string, p map[string]any) *broker.EffectReply {
		raw, _ := json.Marshal(request(run, policy.OriginShipped, p))
		return b.Propose(ctxT(t), broker.Internal(policy.OriginShipped), policy.SinkProvider, raw)
	}

	run := s.open(t, "ada")
	// Without the reads, broker B refuses.
	mustRefuse(t, propose(run, pay(honest)), policy.RefuseUngrounded)
	s.readBoth(t, run) // through broker A, over NATS
	r := propose(run, pay(honest))
	mustAllow(t, r)
	if d := s.decision(t, run, r.Effect); len(d.Citations) != 2 {
		t.Fatalf("citations %+v", d.Citations)
	}
	s.env.Verify(t)
}

func newSinkOn(t testing.TB, js jetstream.JetStream, s *setup, ground string) *provider.Sink {
	t.Helper()
	env := *s.env
	env.JS = js
	return newSink(t, &env, s, ground)
}

// TestGroundingReread: fresh: reread reads the records again through the
// broker, so the payment cites the rereads, which are journaled.
func TestGroundingReread(t *testing.T) {
	rules := strings.Replace(groundingYAML, "    max_age_seconds: 300\n", "    fresh: reread\n", 1)
	s := start(t, policy.ModeStrict, opts{grounding: rules})
	run := s.open(t, "ada")
	before := s.erp.count("GET", "")
	r := s.call(t, run, policy.OriginShipped, pay(honest))
	mustAllow(t, r)
	if got := s.erp.count("GET", "") - before; got != 2 {
		t.Fatalf("%d rereads reached the ERP, want 2", got)
	}
	d := s.decision(t, run, r.Effect)
	if len(d.Citations) != 2 {
		t.Fatalf("citations %+v", d.Citations)
	}
	s.env.Verify(t)

	// A supplier changed at the ERP since: the reread sees the change.
	s.erp.setSupplier("S-1", "iban", attackerIBAN)
	defer s.erp.setSupplier("S-1", "iban", supplierIBAN)
	mustRefuse(t, s.call(t, run, policy.OriginShipped, pay(honest)), policy.RefuseUngrounded)
}

// TestGroundingOnlyPlainReads: a read with a query, a body or a header of
// the agent's is answered but never kept, since each can change what the
// path answers (a filtered view, an old version, a pending change); only
// the plain GET of the path grounds.
func TestGroundingOnlyPlainReads(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{grounding: groundingYAML})
	for name, read := range map[string]map[string]any{
		"a header": {"provider": "erp", "method": "GET", "path": "/suppliers/S-1", "atom": "erp.read", "headers": map[string]string{"Accept": "application/vnd.erp.pending+json"}},
		"a query":  {"provider": "erp", "method": "GET", "path": "/suppliers/S-1", "atom": "erp.read", "query": map[string][]string{"view": {"pending"}}},
		"a body":   {"provider": "erp", "method": "GET", "path": "/suppliers/S-1", "atom": "erp.read", "body": map[string]any{"view": "pending"}},
	} {
		t.Run(name, func(t *testing.T) {
			run := s.open(t, "ada")
			mustAllow(t, s.call(t, run, policy.OriginShipped, get("/invoices/INV-7")))
			mustAllow(t, s.call(t, run, policy.OriginShipped, read))
			r := s.call(t, run, policy.OriginShipped, pay(honest))
			mustRefuse(t, r, policy.RefuseUngrounded)
			if d := s.decision(t, run, r.Effect); !strings.Contains(d.Reasons[0].Detail, "no record of erp:/suppliers/{id} was read") {
				t.Fatalf("refused for another reason: %s", d.Reasons[0].Detail)
			}
			s.readBoth(t, run) // the plain reads ground it
			mustAllow(t, s.call(t, run, policy.OriginShipped, pay(honest)))
		})
	}
}

// TestGroundingSpendsTheBound: the invoice record that bounds a payment's
// amount grounds one payment. A second payment of the same invoice, in
// turn or at the same time, is refused (ungrounded, or record-spent when
// both were decided before either was sent) and never reaches the ERP,
// until the invoice is read again.
func TestGroundingSpendsTheBound(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{grounding: groundingYAML})
	run := s.open(t, "ada")
	s.readBoth(t, run)
	before := s.erp.payCount()
	mustAllow(t, s.call(t, run, policy.OriginShipped, pay(honest)))
	r := s.call(t, run, policy.OriginShipped, pay(payment(supplierIBAN, "0.01", "Acme Supplies")))
	mustRefuse(t, r, policy.RefuseUngrounded)
	if d := s.decision(t, run, r.Effect); !strings.Contains(d.Reasons[0].Detail, "binding invoice: the record of erp:/invoices/{id} already bounded an amount this workflow sent") {
		t.Fatalf("refused for another reason: %s", d.Reasons[0].Detail)
	}
	if got := s.erp.payCount() - before; got != 1 {
		t.Fatalf("%d payments reached the ERP, want 1", got)
	}
	// Read again (the ERP here does not lower the amount due), the invoice
	// grounds one more payment; the supplier's record was not spent.
	mustAllow(t, s.call(t, run, policy.OriginShipped, get("/invoices/INV-7")))
	mustAllow(t, s.call(t, run, policy.OriginShipped, pay(honest)))

	// Four payments at once on one read: one is paid.
	run = s.open(t, "ada")
	s.readBoth(t, run)
	before = s.erp.payCount()
	var wg sync.WaitGroup
	replies := make([]*broker.EffectReply, 4)
	for i := range replies {
		wg.Add(1)
		go func() { defer wg.Done(); replies[i] = s.call(t, run, policy.OriginShipped, pay(honest)) }()
	}
	wg.Wait()
	if got := s.erp.payCount() - before; got != 1 {
		t.Fatalf("%d of 4 concurrent payments reached the ERP, want 1", got)
	}
	paid := 0
	for _, r := range replies {
		switch {
		case r.Decision != nil && r.Decision.Outcome == journal.OutcomeAllowed && r.Outcome != nil && r.Outcome.Status == "ok":
			paid++
		case r.Decision != nil && r.Decision.Outcome == journal.OutcomeAllowed && (r.Outcome == nil || r.Outcome.Error != "record-spent"):
			t.Fatalf("an allowed payment that was not sent failed with %+v", r.Outcome)
		}
	}
	if paid != 1 {
		t.Fatalf("%d payments answered as paid", paid)
	}
	s.env.Verify(t)
}

// TestGroundingAfterAnUngroundedChange: a change no rule grounded, sent to
// the provider at any path (here the supplier at another spelling of its
// id, which the ERP may read as the same supplier) or through another
// provider of its server, makes every record of the provider read after
// it ungrounding, in the workflow and in the agent's later runs; another
// agent's runs are not affected.
func TestGroundingAfterAnUngroundedChange(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{grounding: groundingYAML, rules: "agents:\n  - name: payer\n  - name: editor\n"})
	run := s.open(t, "ada")
	mustAllow(t, s.call(t, run, policy.OriginShipped, get("/invoices/INV-7")))
	r := s.call(t, run, policy.OriginShipped, map[string]any{"provider": "erp", "method": "PATCH", "path": "/suppliers/s-1",
		"atom": "erp.suppliers.update", "body": json.RawMessage(`{"iban":"` + attackerIBAN + `"}`)})
	if r.Decision == nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("the change: %+v", r.Decision)
	}
	mustAllow(t, s.call(t, run, policy.OriginShipped, get("/suppliers/S-1")))
	r = s.call(t, run, policy.OriginShipped, pay(honest))
	mustRefuse(t, r, policy.RefuseUngrounded)
	d := s.decision(t, run, r.Effect)
	if !strings.Contains(d.Reasons[0].Detail, "binding supplier: the record of erp:/suppliers/{id} was read after this workflow or its agent sent erp a change no grounding rule checked") ||
		strings.Contains(d.Reasons[0].Detail, "binding invoice:") {
		t.Fatalf("refused for another reason: %s", d.Reasons[0].Detail)
	}
	// The same agent's next run: its change may show there too.
	other := s.open(t, "ada")
	s.readBoth(t, other)
	r = s.call(t, other, policy.OriginShipped, pay(honest))
	mustRefuse(t, r, policy.RefuseUngrounded)
	if d := s.decision(t, other, r.Effect); !strings.Contains(d.Reasons[0].Detail, "binding invoice: the record of erp:/invoices/{id} was read after this workflow or its agent sent erp a change") {
		t.Fatalf("refused for another reason: %s", d.Reasons[0].Detail)
	}
	// Another agent, whose runs the change was not made in, pays.
	as := func(agent string) func(run string, p map[string]any) *broker.EffectReply {
		c := s.env.NamedAgent(t, agent, "")
		return func(run string, p map[string]any) *broker.EffectReply {
			r, err := c.Effect(ctxT(t), policy.SinkProvider, request(run, "", p))
			if r == nil {
				t.Fatal(err)
			}
			return r
		}
	}
	byPayer := as("payer")
	prun := s.env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada", Agent: "payer"})
	mustAllow(t, byPayer(prun, get("/invoices/INV-7")))
	mustAllow(t, byPayer(prun, get("/suppliers/S-1")))
	mustAllow(t, byPayer(prun, pay(honest)))

	// A change through another provider of the same server (erp-plain has
	// erp's base URL) counts for erp's records too.
	byEditor := as("editor")
	run = s.env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada", Agent: "editor"})
	mustAllow(t, byEditor(run, get("/invoices/INV-7")))
	if r := byEditor(run, map[string]any{"provider": "erp-plain", "method": "POST", "path": "/notes", "atom": "erp-plain.notes", "body": json.RawMessage(`{"text":"x"}`)}); r.Decision == nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("the change: %+v", r.Decision)
	}
	mustAllow(t, byEditor(run, get("/suppliers/S-1")))
	r = byEditor(run, pay(honest))
	mustRefuse(t, r, policy.RefuseUngrounded)
	if d := s.decision(t, run, r.Effect); !strings.Contains(d.Reasons[0].Detail, "binding supplier: the record of erp:/suppliers/{id} was read after this workflow or its agent sent erp a change") {
		t.Fatalf("refused for another reason: %s", d.Reasons[0].Detail)
	}
}

// TestGroundingThroughAnotherProviderOfTheServer: a payment sent through
// another catalogue entry of the ERP's server (erp-plain, erp's base URL,
// its own integration declaring POST /payments) is grounded by the rule
// written for erp: the attacker's IBAN is refused and never sent, the
// honest payment is grounded with its citations.
func TestGroundingThroughAnotherProviderOfTheServer(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{grounding: groundingYAML})
	run := s.open(t, "ada")
	plain := func(body string) map[string]any {
		return map[string]any{"provider": "erp-plain", "method": "POST", "path": "/payments", "atom": "erp-plain.pay", "body": json.RawMessage(body)}
	}
	r := s.call(t, run, policy.OriginShipped, plain(payment(attackerIBAN, "1200.00", "Acme Supplies")))
	mustRefuse(t, r, policy.RefuseUngrounded)
	s.readBoth(t, run)
	r = s.call(t, run, policy.OriginShipped, plain(payment(attackerIBAN, "1200.00", "Acme Supplies")))
	mustRefuse(t, r, policy.RefuseUngrounded)
	if d := s.decision(t, run, r.Effect); d.Rule != "grounding:supplier-payment" || !strings.Contains(d.Reasons[0].Detail, "request.json.iban") {
		t.Fatalf("refused for another reason: %+v", d)
	}
	if s.erp.count("POST", "/payments") != 0 {
		t.Fatal("reached /payments")
	}
	// erp-cs reads paths case-sensitively and declares /Payments, which
	// erp (ignoring case) reads as its /payments.
	r = s.call(t, run, policy.OriginShipped, map[string]any{"provider": "erp-cs", "method": "POST", "path": "/Payments", "atom": "erp-cs.pay",
		"body": json.RawMessage(payment(attackerIBAN, "1200.00", "Acme Supplies"))})
	mustRefuse(t, r, policy.RefuseUngrounded)
	if s.erp.count("POST", "/payments")+s.erp.count("POST", "/Payments") != 0 {
		t.Fatal("reached /payments")
	}
	r = s.call(t, run, policy.OriginShipped, plain(honest))
	mustAllow(t, r)
	if d := s.decision(t, run, r.Effect); len(d.Citations) != 2 {
		t.Fatalf("the honest payment: %+v", d)
	}
	if s.erp.count("POST", "/payments") != 1 {
		t.Fatal("the honest payment was not sent")
	}
	s.env.Verify(t)
}
