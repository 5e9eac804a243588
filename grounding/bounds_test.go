package grounding

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

const boundsYAML = `grounding:
  - name: pay
    match: {provider: erp, method: POST, path: /payments}
    bind:
      - {name: invoice, read: {provider: erp, path: "/invoices/{id}"}, where: {id: request.json.invoice}}
      - {name: supplier, read: {provider: erp, path: "/suppliers/{id}"}, where: {id: invoice.supplier_id}}
    require:
      - {field: request.json.amount, at_most: invoice.amount_due, as: money}
      - {field: request.json.amount, at_least: 0.01, as: money}
      - {field: request.json.fee, at_most: 10, as: number, sign: any}
      - {field: request.json.count, at_least: invoice.min_count, as: number, sign: positive}
      - {field: request.json.remit_to, equals: supplier.email, as: email}
`

// TestBounds: at_least, literal bounds and the sign of amounts. A value
// bounded from above may not be negative, nor written with a minus sign
// ("-0"), unless the requirement says sign: any.
func TestBounds(t *testing.T) {
	rules, err := Parse("bounds.yaml", []byte(boundsYAML))
	if err != nil {
		t.Fatal(err)
	}
	store := newFake().read("wf-1",
		record("/invoices/INV-7", `{"id":"INV-7","supplier_id":42,"amount_due":"1250.00","min_count":1}`, now.Add(-30e9), "ev-invoice"),
		record("/suppliers/42", supplierBody, now.Add(-20e9), "ev-supplier"),
	)
	body := func(amount, fee, count, email string) []byte {
		return []byte(`{"invoice":"INV-7","amount":` + amount + `,"fee":` + fee + `,"count":` + count + `,"remit_to":"` + email + `"}`)
	}
	for _, tc := range []struct {
		name string
		body []byte
		want []string // a part of each failure, in order; nil: grounded
	}{
		{"honest", body(`"1250.00"`, `"2.50"`, `3`, `ap@acme.example`), nil},
		{"a fee may be negative (sign: any)", body(`"1"`, `-5`, `3`, `ap@acme.example`), nil},
		{"negative amount", body(`"-1"`, `0`, `3`, `ap@acme.example`), []string{"request.json.amount is negative or written with a minus sign", "request.json.amount is below the rule's bound"}},
		{"minus zero", body(`"-0"`, `0`, `3`, `ap@acme.example`), []string{"request.json.amount is negative or written with a minus sign", "below"}},
		{"minus zero as a number", body(`-0.00`, `0`, `3`, `ap@acme.example`), []string{"minus sign", "below"}},
		{"zero is below at_least 0.01", body(`"0"`, `0`, `3`, `ap@acme.example`), []string{"request.json.amount is below the rule's bound (money)"}},
		{"a tenth of a cent", body(`"0.001"`, `0`, `3`, `ap@acme.example`), []string{"below"}},
		{"above the amount due", body(`"1250.01"`, `0`, `3`, `ap@acme.example`), []string{"request.json.amount is above invoice.amount_due (money)"}},
		{"fee above the literal bound", body(`"1"`, `10.01`, `3`, `ap@acme.example`), []string{"request.json.fee is above the rule's bound (number)"}},
		{"count zero is not positive", body(`"1"`, `0`, `0`, `ap@acme.example`), []string{"request.json.count is not above zero", "request.json.count is below invoice.min_count"}},
		{"count below the record's minimum", body(`"1"`, `0`, `0.5`, `ap@acme.example`), []string{"request.json.count is below invoice.min_count (number)"}},
	} {
		res := rules.Check(context.Background(), Input{Workflow: "wf-1", Now: now, Records: store, Call: paymentCall(tc.body)})
		if !res.Applied {
			t.Fatalf("%s: no rule applied", tc.name)
		}
		if len(res.Failures) != len(tc.want) {
			t.Errorf("%s: failures %q, want %d like %q", tc.name, res.Failures, len(tc.want), tc.want)
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(res.Failures[i], w) {
				t.Errorf("%s: failure %d is %q, want %q", tc.name, i, res.Failures[i], w)
			}
		}
		for _, f := range res.Failures {
			if strings.Contains(f, "1250.01") || strings.Contains(f, "-0") {
				t.Errorf("%s: a failure shows a value: %q", tc.name, f)
			}
		}
	}
}

// TestEmailExactBytes: an address is grounded only when what is sent is
// what is compared: a domain IDNA mapping would change (a zero-width
// space, a soft hyphen, a fullwidth letter, an upper-case non-ASCII
// letter) or read two ways (ß) is not a valid email, never equal to the
// record.
func TestEmailExactBytes(t *testing.T) {
	for _, tc := range []struct {
		sent, recorded string
		equal          bool
		invalid        bool
	}{
		{"ap@acme.example", "ap@acme.example", true, false},
		{"ap@ACME.Example", "ap@acme.example", true, false},  // ASCII case in a domain is one name
		{"AP@acme.example", "ap@acme.example", false, false}, // the local part is compared byte for byte
		{"ap@b\u00fccher.example", "ap@xn--bcher-kva.example", true, false},
		{"ap@ac\u200bme.example", "ap@acme.example", false, true},
		{"ap@ac\u00adme.example", "ap@acme.example", false, true},
		{"ap@\uff41cme.example", "ap@acme.example", false, true},
		{"ap@B\u00dccher.example", "ap@b\u00fccher.example", false, true},
		{"ap@stra\u00dfe.example", "ap@strasse.example", false, true},
		{"ap@acme.example.", "ap@acme.example", false, true},
		{"ap\u200b@acme.example", "ap@acme.example", false, true},
		{"ap@xn--zz.example", "ap@xn--zz.example", false, true},
	} {
		eq, err := Compare(KindEmail, tc.sent, tc.recorded)
		if (err != nil) != tc.invalid || eq != tc.equal {
			t.Errorf("Compare(%q, %q) = %v, %v; want equal %v, invalid %v", tc.sent, tc.recorded, eq, err, tc.equal, tc.invalid)
		}
	}
}

// TestFieldsEqualUpToCase: a JSON key, form name or query name written in
// two ways equal after case folding and NFC is one field sent twice, so a
// provider that matches fields without regard to case cannot read the
// other copy.
func TestFieldsEqualUpToCase(t *testing.T) {
	rules, err := Parse("g.yaml", []byte(`grounding:
  - name: pay
    match: {provider: erp, method: POST, path: /payments}
    bind:
      - {name: supplier, read: {provider: erp, path: "/suppliers/{id}"}, where: {id: request.query.supplier}}
    require:
      - {field: request.json.iban, equals: supplier.iban, as: iban}
      - {field: request.form.iban, equals: supplier.iban, as: iban}
`))
	if err != nil {
		t.Fatal(err)
	}
	store := newFake().read("wf-1", record("/suppliers/42", supplierBody, now.Add(-20e9), "ev-supplier"))
	good := "DE89370400440532013000"
	check := func(ct, body string, q url.Values) []string {
		return rules.Check(context.Background(), Input{Workflow: "wf-1", Now: now, Records: store,
			Call: Call{Provider: "erp", Method: "POST", Path: "/payments", Query: q, Body: []byte(body), ContentType: ct}}).Failures
	}
	q := url.Values{"supplier": {"42"}}
	for _, body := range []string{
		`{"iban":"` + good + `","IBAN":"` + plantedIBAN + `"}`,
		`{"iban":"` + good + `","\u0130BAN":"` + plantedIBAN + `"}`, // dotted capital I: Java's equalsIgnoreCase takes it for i
		`{"iban":"` + good + `","\u0131ban":"` + plantedIBAN + `"}`, // dotless i, likewise
		`{"meta":{"Iban":"x"},"iban":"` + good + `","Iban":"` + plantedIBAN + `"}`,
	} {
		f := check("application/json", body, q)
		twice := strings.Contains(strings.Join(f, "; "), "request.json.iban equals supplier.iban (iban) cannot be checked: request.json.iban is sent twice")
		if !twice {
			t.Errorf("%s: failures %q", body, f)
		}
	}
	f := check("application/x-www-form-urlencoded", "iban="+good+"&IBAN="+plantedIBAN, q)
	if !strings.Contains(strings.Join(f, "; "), "request.form.iban is sent twice") {
		t.Errorf("form: %q", f)
	}
	// other_fields: allow, and the attacker's IBAN in the query, which a
	// server merging parameters may read instead of the body's.
	f = check("application/json", `{"iban":"`+good+`"}`, url.Values{"supplier": {"42"}, "IBAN": {plantedIBAN}})
	if !strings.Contains(strings.Join(f, "; "), "request.json.iban equals supplier.iban (iban) cannot be checked: request.json.iban is sent twice") {
		t.Errorf("query merged into the body: %q", f)
	}
	f = check("application/x-www-form-urlencoded", "iban="+good, url.Values{"supplier": {"42"}, "Supplier": {"666"}})
	if !strings.Contains(strings.Join(f, "; "), "request.query.supplier is sent twice") || !strings.Contains(strings.Join(f, "; "), "binding supplier cannot select its record") {
		t.Errorf("query: %q", f)
	}
}

// TestFieldsServersReadAsOne: under other_fields: allow, a form or query
// name that Rails, PHP, qs, Spring or ASP.NET read as a grounded field (or
// as the object holding it) makes that field sent twice, so the copy the
// provider reads is never one grounding did not check.
func TestFieldsServersReadAsOne(t *testing.T) {
	rules, err := Parse("g.yaml", []byte(`grounding:
  - name: pay-path
    match: {provider: erp, method: POST, path: "/suppliers/{id}/pay"}
    bind:
      - {name: supplier, read: {provider: erp, path: "/suppliers/{id}"}, where: {id: request.path.id}}
    require:
      - {field: request.json.payment.iban, equals: supplier.iban, as: iban}
      - {field: request.form.iban, equals: supplier.iban, as: iban}
`))
	if err != nil {
		t.Fatal(err)
	}
	store := newFake().read("wf-1", record("/suppliers/42", supplierBody, now.Add(-20e9), "ev-supplier"))
	good := "DE89370400440532013000"
	check := func(ct, body string, q url.Values) string {
		return strings.Join(rules.Check(context.Background(), Input{Workflow: "wf-1", Now: now, Records: store,
			Call: Call{Provider: "erp", Method: "POST", Path: "/suppliers/42/pay", Query: q, Body: []byte(body), ContentType: ct}}).Failures, "; ")
	}
	const jsonTwice = "request.json.payment.iban equals supplier.iban (iban) cannot be checked: request.json.payment.iban is sent twice"
	const formTwice = "request.form.iban equals supplier.iban (iban) cannot be checked: request.form.iban is sent twice"
	jsonBody := `{"payment":{"iban":"` + good + `"}}`
	if f := check("application/json", jsonBody, nil); strings.Contains(f, "twice") {
		t.Fatalf("the honest JSON call: %s", f)
	}
	if f := check("application/x-www-form-urlencoded", "iban="+good, nil); strings.Contains(f, "twice") {
		t.Fatalf("the honest form call: %s", f)
	}
	for _, q := range []string{"payment[iban]", "payment.iban", "Payment[IBAN]", "payment[]", "payment"} {
		if f := check("application/json", jsonBody, url.Values{q: {plantedIBAN}}); !strings.Contains(f, jsonTwice) || !strings.Contains(f, "in the body and in the query") {
			t.Errorf("query %s: %s", q, f)
		}
	}
	for _, form := range []string{"iban[]=" + plantedIBAN, "%20iban=" + plantedIBAN, "iban%00x=" + plantedIBAN, "IBAN=" + plantedIBAN} {
		if f := check("application/x-www-form-urlencoded", "iban="+good+"&"+form, nil); !strings.Contains(f, formTwice) {
			t.Errorf("form with %s: %s", form, f)
		}
	}
	for _, q := range []string{"iban[]", " iban", "IBAN"} {
		if f := check("application/x-www-form-urlencoded", "iban="+good, url.Values{q: {plantedIBAN}}); !strings.Contains(f, formTwice) {
			t.Errorf("form and query %q: %s", q, f)
		}
	}
	// Names servers read apart stay apart.
	if f := check("application/json", jsonBody, url.Values{"filter[a]": {"1"}, "filter[b]": {"2"}, "paymentx": {"3"}}); strings.Contains(f, "twice") {
		t.Errorf("distinct names: %s", f)
	}
}

// TestListElementsAllNamed: a rule that checks payments[0] of a batch, and
// leaves other fields alone, refuses a batch with a second payment rather
// than let it through unchecked.
func TestListElementsAllNamed(t *testing.T) {
	rules, err := Parse("g.yaml", []byte(`grounding:
  - name: batch
    match: {provider: erp, method: POST, path: /payments/batch}
    bind:
      - {name: supplier, read: {provider: erp, path: "/suppliers/{id}"}, where: {id: "request.json.payments[0].supplier"}}
    require:
      - {field: "request.json.payments[0].iban", equals: supplier.iban, as: iban}
      - {field: "request.json.meta.tags[1]", equals: supplier.iban, as: exact}
`))
	if err != nil {
		t.Fatal(err)
	}
	store := newFake().read("wf-1", record("/suppliers/42", supplierBody, now.Add(-20e9), "ev-supplier"))
	good := `{"supplier":"42","iban":"DE89370400440532013000"}`
	check := func(body string) string {
		return strings.Join(rules.Check(context.Background(), Input{Workflow: "wf-1", Now: now, Records: store,
			Call: Call{Provider: "erp", Method: "POST", Path: "/payments/batch", Body: []byte(body), ContentType: "application/json"}}).Failures, "; ")
	}
	if f := check(`{"payments":[` + good + `]}`); strings.Contains(f, "elements") {
		t.Fatalf("one payment: %s", f)
	}
	if f := check(`{"payments":[` + good + `,{"supplier":"42","iban":"` + plantedIBAN + `"}]}`); !strings.Contains(f, "request.json.payments holds 2 elements and the rule names only some of them") {
		t.Fatalf("two payments: %s", f)
	}
	if f := check(`{"payments":[` + good + `],"meta":{"tags":["a","b","c"]}}`); !strings.Contains(f, "request.json.meta.tags holds 3 elements") {
		t.Fatalf("three tags: %s", f)
	}
}

func TestBoundsParseErrors(t *testing.T) {
	base := `grounding:
  - name: pay
    match: {provider: erp, path: /payments}
    bind:
      - {name: invoice, read: {provider: erp, path: "/invoices/{id}"}, where: {id: request.json.invoice}}
    require:
      - REQ
`
	for req, want := range map[string]string{
		`{field: request.json.amount, at_least: invoice.x, as: text}`:           "at_least compares money or number",
		`{field: request.json.amount, at_most: invoice.x, as: money, sign: up}`: "sign takes positive, non-negative or any",
		`{field: request.json.payee, equals: invoice.x, as: text, sign: any}`:   "sign is for money and number",
		`{field: request.json.amount, at_most: 1e5, as: money}`:                 "not a plain decimal number",
		`{field: request.json.amount, at_least: "0,01", as: money}`:             "\"0,01\" is not a plain decimal number (write e.g. 0.01",
		`{field: request.json.amount, at_least: "+1", as: money}`:               "not a plain decimal number",
		`{field: request.json.amount, at_most: 1, at_least: 0, as: money}`:      "both given",
		`{field: request.json.amount, at_least: "invoice.x[*]", as: money}`:     "[*] is only for one_of",
	} {
		if _, err := Parse("g.yaml", []byte(strings.Replace(base, "REQ", req, 1))); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", req, err, want)
		}
	}
}

// TestSpentRecords: the record an amount is bounded by grounds one
// carried-out call. Once the broker marks it spent, a second payment on the
// same invoice record is refused until the invoice is read again; the
// supplier's record, which bounds no amount, is not spent.
func TestSpentRecords(t *testing.T) {
	rules := mustLoad(t, "testdata/payment.yaml")
	check := func(store *fakeRecords) Result {
		return rules.Check(context.Background(), Input{Workflow: "wf-1", Now: now, Records: store, Call: paymentCall(payment(nil))})
	}
	store := honestStore()
	res := check(store)
	if len(res.Failures) != 0 {
		t.Fatalf("the first payment: %q", res.Failures)
	}
	if len(res.Spends) != 1 || res.Spends[0] != (Spend{Provider: "erp", Path: "/invoices/INV-7", ReadAt: now.Add(-time.Minute)}) {
		t.Fatalf("spends %+v, want the invoice's record", res.Spends)
	}
	store.spend("wf-1", "erp", "/invoices/INV-7", res.Spends[0].ReadAt)
	res = check(store)
	if f := strings.Join(res.Failures, "; "); !strings.Contains(f, "binding invoice: the record of erp:/invoices/{id} already bounded an amount this workflow sent") || len(res.Spends) != 0 {
		t.Fatalf("the second payment: %q, spends %+v", res.Failures, res.Spends)
	}
	if other := check(honestStore().spend("wf-2", "erp", "/invoices/INV-7", now)); len(other.Failures) != 0 {
		t.Fatalf("another workflow's spend: %q", other.Failures)
	}
	// Read again (the same body, so one record), it grounds one more.
	store.read("wf-1", record("/invoices/INV-7", invoiceBody, now.Add(-time.Second), "ev-invoice-2"))
	if res = check(store); len(res.Failures) != 0 || res.Spends[0].ReadAt != now.Add(-time.Second) {
		t.Fatalf("after a reread: %q %+v", res.Failures, res.Spends)
	}
	store.err = errors.New("store down")
	if f := strings.Join(check(store).Failures, "; "); !strings.Contains(f, "store down") {
		t.Fatalf("a store error: %q", f)
	}
}

// TestWrittenAnywhere: a mutating call no rule grounded (marked on
// AnyPath) may have changed any record of the provider, at any path, so a
// record read after it grounds nothing; one read before still does.
func TestWrittenAnywhere(t *testing.T) {
	rules := mustLoad(t, "testdata/payment.yaml")
	check := func(store *fakeRecords) string {
		return strings.Join(rules.Check(context.Background(), Input{Workflow: "wf-1", Now: now, Records: store, Call: paymentCall(payment(nil))}).Failures, "; ")
	}
	if f := check(honestStore().wrote("wf-1", "erp", AnyPath, now.Add(-30*time.Second))); f != "" {
		t.Fatalf("a change after the reads: %s", f)
	}
	if f := check(honestStore().wrote("wf-1", "erp", AnyPath, now.Add(-2*time.Minute))); !strings.Contains(f, "binding invoice: the record of erp:/invoices/{id} was read after this workflow or its agent sent erp a change") {
		t.Fatalf("a change before the reads: %s", f)
	}
	f := check(honestStore().wrote("wf-1", "erp", AnyPath, now.Add(-55*time.Second)))
	if !strings.Contains(f, "binding supplier: the record of erp:/suppliers/{id} was read after this workflow or its agent sent erp a change no grounding rule checked") || strings.Contains(f, "binding invoice:") {
		t.Fatalf("a change between the reads: %s", f)
	}
	if f := check(honestStore().wrote("wf-1", "crm", AnyPath, now.Add(-2*time.Hour)).wrote("wf-2", "erp", AnyPath, now.Add(-2*time.Hour))); f != "" {
		t.Fatalf("another provider's or workflow's change: %s", f)
	}
	// The agent's own change in another workflow counts; another agent's
	// does not.
	byAgent := func(agent string) string {
		store := honestStore().wrote(AgentScope("bot"), "erp", AnyPath, now.Add(-2*time.Hour))
		return strings.Join(rules.Check(context.Background(), Input{Workflow: "wf-1", Agent: agent, Now: now, Records: store, Call: paymentCall(payment(nil))}).Failures, "; ")
	}
	if f := byAgent("bot"); !strings.Contains(f, "binding invoice: the record of erp:/invoices/{id} was read after this workflow or its agent sent erp a change") {
		t.Fatalf("the agent's change in another workflow: %s", f)
	}
	if f := byAgent("clerk"); f != "" {
		t.Fatalf("another agent's change: %s", f)
	}
	if AgentScope("") != "agent:_shared" {
		t.Fatal(AgentScope(""))
	}
}

// TestQuotedLiteralBound: a bound written as a quoted number is the
// number, not a path to a binding named "0".
func TestQuotedLiteralBound(t *testing.T) {
	rules, err := Parse("g.yaml", []byte(`grounding:
  - name: pay
    match: {provider: erp, path: /payments}
    require:
      - {field: request.json.amount, at_least: "0.01", as: money}
`))
	if err != nil {
		t.Fatal(err)
	}
	for amount, ok := range map[string]bool{"0.01": true, "0.001": false} {
		res := rules.Check(context.Background(), Input{Workflow: "wf-1", Now: now, Records: newFake(),
			Call: Call{Provider: "erp", Method: "POST", Path: "/payments", Body: []byte(`{"amount":"` + amount + `"}`), ContentType: "application/json"}})
		if (len(res.Failures) == 0) != ok {
			t.Errorf("amount %s: %q", amount, res.Failures)
		}
	}
}
