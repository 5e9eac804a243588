package grounding

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the rules loader, as YAML and as
// JSON. It must never panic; a file it refuses is named in the error and
// gives no rules; a file it accepts must check calls without panicking.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	more, _ := filepath.Glob("testdata/*.json")
	for _, name := range append(files, more...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, strings.HasSuffix(name, ".json"))
	}
	f.Add([]byte(base), false)
	calls := []Call{
		paymentCall(payment(nil)),
		{Provider: "erp", Method: "PUT", Path: "/invoices/INV-7/pay", Body: []byte("iban=x&amount=1"), ContentType: "application/x-www-form-urlencoded"},
		{Provider: "erp", Method: "GET", Path: "/invoices/INV-7"},
		{Provider: "erp", Method: "POST", Path: "/"},
	}
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		name := "fuzz.yaml"
		if asJSON {
			name = "fuzz.json"
		}
		r, err := Parse(name, data)
		if err != nil {
			if r != nil {
				t.Fatal("Parse returned rules and an error")
			}
			if !strings.Contains(err.Error(), name) || !errors.Is(err, ErrInvalidRules) {
				t.Fatalf("error does not name the file or wrap ErrInvalidRules: %v", err)
			}
			return
		}
		for _, call := range calls {
			in := Input{Workflow: "wf-1", Call: call, Now: now, Records: honestStore(), Caller: map[string]any{"invoice": "INV-7"},
				Reread: func(_ context.Context, provider, path string) (Record, error) {
					return record(path, supplierBody, now, "ev"), nil
				}}
			res := r.Check(t.Context(), in)
			if !res.Applied && (len(res.Failures) != 0 || res.Rule != "") {
				t.Fatalf("not applied but %+v", res)
			}
			r.Keeps(call.Provider, call.Path)
		}
	})
}

// FuzzRequest feeds arbitrary bodies and content types through Check: it
// must never panic, and a body that cannot be read must fail.
func FuzzRequest(f *testing.F) {
	f.Add(payment(nil), "application/json")
	f.Add([]byte(`{"iban": "x", "iban": "y"}`), "application/json")
	f.Add([]byte(`[1, {"a": [2, {"a": 3}]}]`), "application/json; charset=UTF-8")
	f.Add([]byte("iban=DE89370400440532013000&amount=1&amount=2"), "application/x-www-form-urlencoded")
	f.Add([]byte("%zz"), "application/x-www-form-urlencoded")
	f.Add([]byte("\xff"), "text/plain")
	rules, err := Load("testdata/payment.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		call := Call{Provider: "erp", Method: "POST", Path: "/payments", Body: body, ContentType: contentType}
		res := rules.Check(t.Context(), Input{Workflow: "wf-1", Call: call, Now: now, Records: honestStore()})
		if !res.Applied {
			t.Fatal("rule not applied")
		}
		if len(res.Failures) == 0 && !json.Valid(body) {
			t.Fatalf("grounded a body that is not JSON: %q", body)
		}
	})
}

// FuzzIBAN: the IBAN parser never panics, an IBAN it accepts equals its
// paper form, and nothing it accepts fails its own check digits.
func FuzzIBAN(f *testing.F) {
	for _, s := range []string{ibanDE, ibanGB, ibanFR, "de89 3704 0044 0532 0130 00", "DE00", "", " ", "DE8937040044053201300\u00a00", "ÄÖ89370400440532013000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := normalIBAN(s)
		eq, cerr := Compare(KindIBAN, s, ibanDE)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("normalIBAN and Compare disagree on %q: %v, %v", s, err, cerr)
		}
		if err != nil {
			if eq {
				t.Fatal("an invalid IBAN compared equal")
			}
			return
		}
		if ibanMod97([]byte(n)) != 1 || len(n) < 15 || len(n) > 34 {
			t.Fatalf("accepted %q as %q", s, n)
		}
		if eq2, err := Compare(KindIBAN, spaced(n, true), n); err != nil || !eq2 {
			t.Fatalf("%q not equal to its paper form: %v", n, err)
		}
	})
}

// FuzzMoney: the decimal parser never panics, and when both sides are
// read, Compare and AtMost agree with exact rational arithmetic.
func FuzzMoney(f *testing.F) {
	for _, p := range [][2]string{{"100.0", "100.00"}, {"-0", "0"}, {"1e3", "1000"}, {"NaN", "NaN"}, {"1.", ".1"}, {"99999999999999999999.99", "1"}, {"", "-"}} {
		f.Add(p[0], p[1], false)
		f.Add(p[0], p[1], true)
	}
	f.Fuzz(func(t *testing.T, a, b string, asNumber bool) {
		kind := KindMoney
		if asNumber {
			kind = KindNumber
		}
		eq, err := Compare(kind, a, b)
		le, err2 := AtMost(kind, json.Number(a), json.Number(b))
		ge, err3 := AtLeast(kind, a, json.Number(b))
		if (err == nil) != (err2 == nil) || (err == nil) != (err3 == nil) {
			t.Fatalf("Compare, AtMost and AtLeast disagree on whether %q, %q can be read", a, b)
		}
		if err != nil {
			return
		}
		ra, ok1 := new(big.Rat).SetString(a)
		rb, ok2 := new(big.Rat).SetString(b)
		if !ok1 || !ok2 {
			t.Fatalf("accepted %q, %q that big.Rat cannot read", a, b)
		}
		if eq != (ra.Cmp(rb) == 0) || le != (ra.Cmp(rb) <= 0) || ge != (ra.Cmp(rb) >= 0) {
			t.Fatalf("%q vs %q: equal %v, at most %v; big.Rat says %d", a, b, eq, le, ra.Cmp(rb))
		}
	})
}

// FuzzEmail: the address parser never panics, comparison is symmetric,
// and an address it accepts equals itself.
func FuzzEmail(f *testing.F) {
	for _, p := range [][2]string{
		{"ap@acme.example", "ap@ACME.example"}, {"ap@bücher.example", "ap@xn--bcher-kva.example"},
		{"a@b@c", "a@b"}, {"@", ""}, {"ap@асме.example", "ap@acme.example"}, {"\"a b\"@x.example", "x@x"},
		{"ap@ac\u200bme.example", "ap@acme.example"}, {"ap@stra\u00dfe.example", "ap@strasse.example"}, {"ap@\uff41cme.example", "ap@acme.example"},
	} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ab, errA := Compare(KindEmail, a, b)
		ba, errB := Compare(KindEmail, b, a)
		if ab != ba || (errA == nil) != (errB == nil) {
			t.Fatalf("not symmetric: %q, %q", a, b)
		}
		if n, err := normalEmail(a); err == nil {
			if eq, err := Compare(KindEmail, a, a); err != nil || !eq {
				t.Fatalf("%q not equal to itself: %v", a, err)
			}
			// What it is compared as is an address it accepts, unchanged:
			// nothing the mapping drops or changes was accepted.
			if again, err := normalEmail(n); err != nil || again != n {
				t.Fatalf("%q compares as %q, which reads as %q (%v)", a, n, again, err)
			}
			if _, domain, _ := strings.Cut(a, "@"); strings.ContainsAny(domain, "\u200b\u00ad\u200c\u200d\u00df") {
				t.Fatalf("%q accepted with a character IDNA mapping drops or reads two ways", a)
			}
		}
	})
}
