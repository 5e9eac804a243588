package paramnames

import (
	"slices"
	"testing"
)

func q(k string) Name { return Name{Key: k} }
func j(k string) Name { return Name{Key: k, Literal: true} }

// TestClashes: names common servers read as one field (or one inside the
// other) clash; names they read as different fields do not.
func TestClashes(t *testing.T) {
	for _, tc := range []struct {
		a, b  Name
		clash bool
		who   string // the server that reads them as one
	}{
		{q("iban"), q("IBAN"), true, "ASP.NET model binding ignores case"},
		{q("iban"), q("ıban"), true, ".NET and Java fold the dotless i"},
		{j("iban"), q("iban"), true, "Rails and Laravel merge query and body"},
		{j("iban"), q("Iban"), true, "ASP.NET"},
		{q("iban"), q("iban[]"), true, "qs makes one list of both"},
		{j("iban"), q("iban[]"), true, "Rails: the query's list replaces the body's value"},
		{j("payment"), q("payment[iban]"), true, "Rails: a shallow merge, the query's hash wins"},
		{j("payment"), q("payment.iban"), true, "Spring, ASP.NET dotted binding"},
		{q("payment[iban]"), q("payment.iban"), true, "Spring reads both as payment.iban"},
		{q("payment[iban]"), q("payment%5Biban%5D"), false, "decoded before it gets here: two distinct keys"},
		{q("iban"), q(" iban"), true, "PHP drops leading spaces"},
		{q("remittance_email"), q("remittance.email"), true, "PHP turns . into _"},
		{q("remittance_email"), q("remittance email"), true, "PHP turns a space into _"},
		{q("iban_"), q("iban["), true, "PHP: a [ never closed is _"},
		{q("iban"), q("iban\x00x"), true, "C servers stop at NUL"},
		{q("filter[a]"), q("filter[b]"), false, "two fields of filter"},
		{q("a[b][c]"), q("a[b]"), true, "one inside the other"},
		{q("iban"), q("ibanx"), false, ""},
		{q("iban"), q("iban "), false, "a trailing space is kept (PHP makes it iban_)"},
		{j("iban"), j("IBAN"), false, "two JSON keys are strictjson's concern"},
		{j("a.b"), j("a"), false, "JSON keys are literal"},
		{j("a.b"), q("a"), false, "a JSON key with a dot is not a path"},
		{q("amount"), q("amount"), true, "the same name from two sources (query and form)"},
	} {
		got := Clashes([]Name{tc.a, tc.b})
		if (len(got) == 1) != tc.clash || len(got) > 1 {
			t.Errorf("%q (%v) and %q (%v): %v, want clash %v (%s)", tc.a.Key, tc.a.Literal, tc.b.Key, tc.b.Literal, got, tc.clash, tc.who)
		}
		if rev := Clashes([]Name{tc.b, tc.a}); len(rev) != len(got) {
			t.Errorf("%q and %q: order changes the answer", tc.a.Key, tc.b.Key)
		}
	}
}

func TestClashesMany(t *testing.T) {
	names := []Name{j("invoice"), j("iban"), j("amount"), q("iban[]"), q("expand"), q("AMOUNT"), q("x")}
	got := Clashes(names)
	want := []Clash{{1, 3}, {2, 5}}
	if !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	if Clashes(nil) != nil || Clashes(names[:1]) != nil {
		t.Fatal("fewer than two names clash")
	}
}

// FuzzClashes: any names, in any order, give the same pairs, never a
// name with itself, and a name always clashes with a copy of itself sent
// from elsewhere.
func FuzzClashes(f *testing.F) {
	f.Add("iban", "iban[]", "payment.iban", false)
	f.Add(" a.b[c", "a_b", "\x00", true)
	f.Fuzz(func(t *testing.T, a, b, c string, lit bool) {
		names := []Name{{Key: a, Literal: lit}, q(b), q(c)}
		got := Clashes(names)
		pairs := map[[2]string]bool{}
		for _, cl := range got {
			if cl.A >= cl.B {
				t.Fatalf("pair %v", cl)
			}
			pairs[[2]string{names[cl.A].Key, names[cl.B].Key}] = true
		}
		rev := []Name{names[2], names[1], names[0]}
		for _, cl := range Clashes(rev) {
			x, y := rev[cl.A].Key, rev[cl.B].Key
			if !pairs[[2]string{x, y}] && !pairs[[2]string{y, x}] {
				t.Fatalf("%q and %q clash in one order only", x, y)
			}
		}
		if len(Readings(q(b))) > 0 && len(Clashes([]Name{q(b), q(b)})) != 1 {
			t.Fatalf("%q does not clash with itself sent twice", b)
		}
	})
}
