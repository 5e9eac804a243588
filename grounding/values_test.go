package grounding

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

const (
	ibanDE = "DE89370400440532013000"
	ibanGB = "GB82WEST12345698765432"
	ibanFR = "FR1420041010050500013M02606"
)

// makeIBAN returns the IBAN for a country and BBAN with correct check
// digits (ISO 7064 MOD 97-10).
func makeIBAN(country, bban string) string {
	b := []byte(strings.ToUpper(bban + country + "00"))
	r := 0
	for _, c := range b {
		if isDigit(c) {
			r = (r*10 + int(c-'0')) % 97
		} else {
			r = (r*100 + int(c-'A') + 10) % 97
		}
	}
	return fmt.Sprintf("%s%02d%s", country, 98-r, strings.ToUpper(bban))
}

func TestMakeIBANAgreesWithKnownIBANs(t *testing.T) {
	for _, want := range []string{ibanDE, ibanGB, ibanFR, "NL91ABNA0417164300", "BE68539007547034"} {
		if got := makeIBAN(want[:2], want[4:]); got != want {
			t.Errorf("makeIBAN(%s) = %s", want, got)
		}
	}
}

func TestCompare(t *testing.T) {
	type tc struct {
		name           string
		kind           string
		sent, recorded any
		equal          bool
		err            error
	}
	num := func(s string) json.Number { return json.Number(s) }
	tests := []tc{
		// iban
		{"iban same", KindIBAN, ibanDE, ibanDE, true, nil},
		{"iban paper form and lower case", KindIBAN, "de89 3704 0044 0532 0130 00", ibanDE, true, nil},
		{"iban letters in BBAN lower case", KindIBAN, "gb82 west 1234 5698 7654 32", ibanGB, true, nil},
		{"iban different account", KindIBAN, makeIBAN("DE", "370400440532013001"), ibanDE, false, nil},
		{"iban one digit changed sent", KindIBAN, "DE89370400440532013001", ibanDE, false, ErrInvalidValue},
		{"iban one digit changed recorded", KindIBAN, ibanDE, "DE89370400440532013001", false, ErrInvalidValue},
		{"iban swapped digits", KindIBAN, "DE89370400440532010300", ibanDE, false, ErrInvalidValue},
		{"iban check digits 01 never issued", KindIBAN, "DE01370400440532013000", ibanDE, false, ErrInvalidValue},
		{"iban too short", KindIBAN, "DE8937040044", ibanDE, false, ErrInvalidValue},
		{"iban tab not stripped", KindIBAN, "DE89\t370400440532013000", ibanDE, false, ErrInvalidValue},
		{"iban dash not stripped", KindIBAN, "DE89-3704-0044-0532-0130-00", ibanDE, false, ErrInvalidValue},
		{"iban fullwidth digits", KindIBAN, "DE８９370400440532013000", ibanDE, false, ErrInvalidValue},
		{"iban number", KindIBAN, num("89370400440532013000"), ibanDE, false, ErrInvalidValue},
		{"iban empty", KindIBAN, "", ibanDE, false, ErrInvalidValue},
		// money
		{"money trailing zeros", KindMoney, "100.0", "100.00", true, nil},
		{"money number and string", KindMoney, num("100"), "100.00", true, nil},
		{"money integer", KindMoney, 100, num("100.000"), true, nil},
		{"money different", KindMoney, "100.01", "100.00", false, nil},
		{"money negative zero", KindMoney, "-0.00", "0", true, nil},
		{"money beyond float precision", KindMoney, "9007199254740993.01", "9007199254740993.02", false, nil},
		{"money tiny difference", KindMoney, "0.1000000000000000000000001", "0.1", false, nil},
		{"money float refused", KindMoney, 100.0, "100", false, ErrInvalidValue},
		{"money exponent refused", KindMoney, num("1e2"), "100", false, ErrInvalidValue},
		{"money plus sign refused", KindMoney, "+100", "100", false, ErrInvalidValue},
		{"money bare fraction refused", KindMoney, ".5", "0.5", false, ErrInvalidValue},
		{"money trailing dot refused", KindMoney, "5.", "5", false, ErrInvalidValue},
		{"money NaN refused", KindMoney, "NaN", "NaN", false, ErrInvalidValue},
		{"money Infinity refused", KindMoney, "Infinity", "Infinity", false, ErrInvalidValue},
		{"money thousands separator refused", KindMoney, "1,000.00", "1000", false, ErrInvalidValue},
		{"money currency sign refused", KindMoney, "€100", "100", false, ErrInvalidValue},
		{"money bool refused", KindMoney, true, "1", false, ErrInvalidValue},
		// number
		{"number exponent", KindNumber, num("1.5e3"), "1500", true, nil},
		{"number negative exponent", KindNumber, num("15E-1"), "1.50", true, nil},
		{"number different", KindNumber, num("3"), num("4"), false, nil},
		{"number huge exponent refused", KindNumber, num("1e99999"), "1", false, ErrInvalidValue},
		// email
		{"email same", KindEmail, "ap@acme.example", "ap@acme.example", true, nil},
		{"email domain case", KindEmail, "ap@ACME.Example", "ap@acme.example", true, nil},
		{"email local part case matters", KindEmail, "AP@acme.example", "ap@acme.example", false, nil},
		{"email IDN domain and punycode", KindEmail, "ap@bücher.example", "ap@xn--bcher-kva.example", true, nil},
		{"email Cyrillic lookalike domain", KindEmail, "ap@асме.example", "ap@acme.example", false, nil},
		{"email two @", KindEmail, "a@b@acme.example", "ap@acme.example", false, ErrInvalidValue},
		{"email no domain", KindEmail, "ap@", "ap@acme.example", false, ErrInvalidValue},
		{"email display name", KindEmail, "AP <ap@acme.example>", "ap@acme.example", false, ErrInvalidValue},
		{"email bad domain", KindEmail, "ap@acme..example", "ap@acme.example", false, ErrInvalidValue},
		{"email underscore domain", KindEmail, "ap@ac_me.example", "ap@acme.example", false, ErrInvalidValue},
		// text
		{"text same", KindText, "Acme GmbH", "Acme GmbH", true, nil},
		{"text case not folded", KindText, "acme GmbH", "Acme GmbH", false, nil},
		{"text Cyrillic lookalike", KindText, "Асме GmbH", "Acme GmbH", false, nil},
		{"text NFC composed vs decomposed", KindText, "Mu\u0308ller", "M\u00fcller", true, nil},
		{"text fullwidth not folded", KindText, "Ａcme", "Acme", false, nil},
		{"text trailing space matters", KindText, "Acme ", "Acme", false, nil},
		{"text zero-width space matters", KindText, "Ac\u200bme", "Acme", false, nil},
		{"text invalid UTF-8", KindText, "Acme\xff", "Acme\xff", false, ErrInvalidValue},
		{"text number refused", KindText, num("7"), "7", false, ErrInvalidValue},
		// id
		{"id string", KindID, "INV-7", "INV-7", true, nil},
		{"id number and string", KindID, num("7"), "7", true, nil},
		{"id 7.0 is not 7", KindID, num("7.0"), num("7"), false, nil},
		{"id leading zero", KindID, "007", num("7"), false, nil},
		{"id case", KindID, "inv-7", "INV-7", false, nil},
		{"id Go int", KindID, 7, "7", true, nil},
		{"id empty", KindID, "", "", false, ErrInvalidValue},
		{"id bool", KindID, true, "true", false, ErrInvalidValue},
		{"id float", KindID, 7.0, "7", false, ErrInvalidValue},
		// exact
		{"exact string", KindExact, "EUR", "EUR", true, nil},
		{"exact number text", KindExact, num("1.0"), num("1"), false, nil},
		{"exact number vs string", KindExact, num("1"), "1", false, nil},
		{"exact null", KindExact, nil, nil, true, nil},
		{"exact object", KindExact, map[string]any{"a": []any{num("1"), "x"}}, map[string]any{"a": []any{num("1"), "x"}}, true, nil},
		{"exact object extra key", KindExact, map[string]any{"a": "x", "b": nil}, map[string]any{"a": "x"}, false, nil},
		{"exact list order", KindExact, []any{"a", "b"}, []any{"b", "a"}, false, nil},
		{"exact bool", KindExact, true, true, true, nil},
		{"exact float refused", KindExact, 1.5, 1.5, false, ErrInvalidValue},
		// unknown
		{"unknown kind", "iban ", ibanDE, ibanDE, false, ErrUnknownKind},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Compare(tt.kind, tt.sent, tt.recorded)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("Compare err = %v, want %v", err, tt.err)
			}
			if got != tt.equal {
				t.Fatalf("Compare = %v, want %v", got, tt.equal)
			}
			if err != nil {
				for _, v := range []any{tt.sent, tt.recorded} {
					if s, ok := v.(string); ok && len(s) > 3 && strings.Contains(err.Error(), s) {
						t.Fatalf("error %q holds the value %q", err, s)
					}
				}
			}
		})
	}
}

func TestCompareSymmetric(t *testing.T) {
	pairs := [][2]any{
		{"de89 3704 0044 0532 0130 00", ibanDE}, {"100.0", "100.00"}, {"Асме", "Acme"},
	}
	for _, p := range pairs {
		for _, kind := range []string{KindIBAN, KindMoney, KindText, KindExact} {
			a, errA := Compare(kind, p[0], p[1])
			b, errB := Compare(kind, p[1], p[0])
			if a != b || (errA == nil) != (errB == nil) {
				t.Errorf("Compare(%s) not symmetric for %v", kind, p)
			}
		}
	}
}

func TestAtMost(t *testing.T) {
	num := func(s string) json.Number { return json.Number(s) }
	tests := []struct {
		name        string
		kind        string
		sent, limit any
		ok          bool
		err         error
	}{
		{"equal", KindMoney, "1250.00", num("1250"), true, nil},
		{"below", KindMoney, "1249.99", "1250", true, nil},
		{"one cent above", KindMoney, "1250.01", "1250.00", false, nil},
		{"far beyond float precision", KindMoney, "12345678901234567890.01", "12345678901234567890.00", false, nil},
		{"negative below", KindMoney, "-5", "0", true, nil},
		{"number exponent", KindNumber, num("2e3"), "1999", false, nil},
		{"float limit refused", KindMoney, "1", 2.0, false, ErrInvalidValue},
		{"missing limit refused", KindMoney, "1", nil, false, ErrInvalidValue},
		{"iban not ordered", KindIBAN, ibanDE, ibanDE, false, ErrUnknownKind},
		{"text not ordered", KindText, "a", "b", false, ErrUnknownKind},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AtMost(tt.kind, tt.sent, tt.limit)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("AtMost err = %v, want %v", err, tt.err)
			}
			if got != tt.ok {
				t.Fatalf("AtMost = %v, want %v", got, tt.ok)
			}
		})
	}
}

// genIBAN draws a valid IBAN: a country code, a BBAN of 11 to 30 letters
// and digits, and the check digits that make it valid.
func genIBAN(t *rapid.T) string {
	country := rapid.StringMatching(`[A-Z]{2}`).Draw(t, "country")
	bban := rapid.StringMatching(`[A-Z0-9]{11,30}`).Draw(t, "bban")
	iban := makeIBAN(country, bban)
	if cd := iban[2:4]; cd == "01" {
		t.Skip("check digits 01 are never issued") // "98" is the same IBAN class
	}
	return iban
}

// spaced writes an IBAN in paper form, lower case where asked.
func spaced(iban string, lower bool) string {
	var b strings.Builder
	for i := 0; i < len(iban); i++ {
		if i > 0 && i%4 == 0 {
			b.WriteByte(' ')
		}
		b.WriteByte(iban[i])
	}
	if lower {
		return strings.ToLower(b.String())
	}
	return b.String()
}

func TestIBANProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		iban := genIBAN(t)
		if eq, err := Compare(KindIBAN, iban, iban); err != nil || !eq {
			t.Fatalf("valid IBAN %s not equal to itself: %v", iban, err)
		}
		other := spaced(iban, rapid.Bool().Draw(t, "lower"))
		if eq, err := Compare(KindIBAN, other, iban); err != nil || !eq {
			t.Fatalf("%q not equal to %s: %v", other, iban, err)
		}
		// Any change of a single character is refused: MOD 97-10 catches
		// every single substitution.
		pos := rapid.IntRange(0, len(iban)-1).Draw(t, "pos")
		alphabet := "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		c := alphabet[rapid.IntRange(0, len(alphabet)-1).Draw(t, "char")]
		if c == iban[pos] {
			return
		}
		changed := iban[:pos] + string(c) + iban[pos+1:]
		eq, err := Compare(KindIBAN, changed, iban)
		if eq {
			t.Fatalf("%s changed at %d to %q still equals it", iban, pos, c)
		}
		// MOD 97-10 catches every substitution of a digit for a digit or a
		// letter for a letter, so such a change is not even a valid IBAN.
		if isDigit(c) == isDigit(iban[pos]) && err == nil {
			t.Fatalf("%s changed at %d to %q passes the check digits", iban, pos, c)
		}
	})
}

func TestMoneyProperties(t *testing.T) {
	dec := func(t *rapid.T, label string) string {
		s := rapid.StringMatching(`-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,12})?`).Draw(t, label)
		return s
	}
	rapid.Check(t, func(t *rapid.T) {
		a := dec(t, "a")
		zeros := strings.Repeat("0", rapid.IntRange(1, 6).Draw(t, "zeros"))
		padded := a + zeros
		if !strings.Contains(a, ".") {
			padded = a + "." + zeros
		}
		if eq, err := Compare(KindMoney, a, padded); err != nil || !eq {
			t.Fatalf("%s != %s: %v", a, padded, err)
		}
		if eq, err := Compare(KindMoney, json.Number(padded), a); err != nil || !eq {
			t.Fatalf("number %s != %s: %v", padded, a, err)
		}
		b := dec(t, "b")
		ra, _ := new(big.Rat).SetString(a)
		rb, _ := new(big.Rat).SetString(b)
		ok, err := AtMost(KindMoney, a, b)
		if err != nil || ok != (ra.Cmp(rb) <= 0) {
			t.Fatalf("AtMost(%s, %s) = %v, %v; big.Rat says %v", a, b, ok, err, ra.Cmp(rb) <= 0)
		}
		eq, err := Compare(KindMoney, a, b)
		if err != nil || eq != (ra.Cmp(rb) == 0) {
			t.Fatalf("Compare(%s, %s) = %v, %v; big.Rat says %v", a, b, eq, err, ra.Cmp(rb) == 0)
		}
	})
}
