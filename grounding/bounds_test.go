package grounding

import (
	"context"
	"net/url"
	"strings"
	"testing"
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
		`{field: request.json.amount, at_most: 1, at_least: 0, as: money}`:      "both given",
		`{field: request.json.amount, at_least: "invoice.x[*]", as: money}`:     "[*] is only for one_of",
	} {
		if _, err := Parse("g.yaml", []byte(strings.Replace(base, "REQ", req, 1))); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", req, err, want)
		}
	}
}
