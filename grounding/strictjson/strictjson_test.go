package strictjson_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want error
	}{
		{`{"a":1,"b":[1,2,{"c":"d"}]}`, nil},
		{` {"a":"\u00e9\ud83d\ude00"} `, nil},
		{`{"iban":"A","IBAN":"B"}`, nil}, // only Scan with Fold reports these
		{`{"a":1,"a":2}`, strictjson.ErrDuplicateKey},
		{`{"a":{"x":1,"x":1}}`, strictjson.ErrDuplicateKey},
		{`{"a":1,"\u0061":2}`, strictjson.ErrDuplicateKey}, // equal once unescaped
		{`[{"k":1},{"k":1}]`, nil},                         // different objects
		{"{\"a\":\"\xff\"}", strictjson.ErrInvalidUTF8},
		{`{"a":"\ud800"}`, strictjson.ErrSurrogate},
		{`{"a":"\udc00\ud800"}`, strictjson.ErrSurrogate},
		{`{"a":"\ud800x"}`, strictjson.ErrSurrogate},
		{`{"a":1}{"b":2}`, strictjson.ErrSyntax},
		{`{"a":1,}`, strictjson.ErrSyntax},
		{"\xef\xbb\xbf{}", strictjson.ErrSyntax},
		{``, strictjson.ErrSyntax},
		{strings.Repeat("[", strictjson.MaxDepth+2) + strings.Repeat("]", strictjson.MaxDepth+2), strictjson.ErrTooDeep},
	} {
		err := strictjson.Check([]byte(tc.doc))
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("Check(%q) = %v, want %v", tc.doc, err, tc.want)
		}
	}
}

func TestScanFold(t *testing.T) {
	dups, err := strictjson.Scan([]byte(`{"iban":"A","lines":[{"Amount":1,"amount":2}],"IBAN":"B","\u212Aey":1,"key":2,"iban":"C"}`), strictjson.Options{Fold: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range dups {
		s := strictjson.PathText(d.Path, "$")
		if d.Folded {
			s += " folded"
		}
		got = append(got, s)
	}
	want := []string{"$.lines[0].amount folded", "$.IBAN folded", "$.key folded", "$.iban"}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Fatalf("got %q, want %q", got, want)
	}
	var de *strictjson.DuplicateError
	if err := strictjson.Check([]byte(`{"x":{"y":1,"y":2}}`)); !errors.As(err, &de) || strictjson.PathText(de.Path, "body") != "body.x.y" {
		t.Fatalf("error %v", err)
	}
}

func TestFoldKey(t *testing.T) {
	for a, b := range map[string]string{
		"IBAN":            "iban",
		"\u212Aelvin":     "kelvin", // Kelvin sign
		"Stra\u00dfe":     "strasse",
		"caf\u0065\u0301": "caf\u00e9", // NFD and NFC
		"\u0131ban":       "IBAN",      // dotless i: Java's equalsIgnoreCase takes it for i
		"\u0130ban":       "iban",      // dotted capital I
		"amount\u017f":    "AMOUNTS",   // long s
	} {
		if strictjson.FoldKey(a) != strictjson.FoldKey(b) {
			t.Errorf("FoldKey(%q) = %q, FoldKey(%q) = %q", a, strictjson.FoldKey(a), b, strictjson.FoldKey(b))
		}
	}
	if strictjson.FoldKey("iban") == strictjson.FoldKey("ibαn") {
		t.Fatal("a lookalike letter folded together")
	}
}

// FuzzScan: Scan never panics; what it accepts, encoding/json reads too,
// and a document Check accepts has no key twice when encoding/json reads
// it back and writes it again.
func FuzzScan(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"a":2}`, `{"a":"\ud800"}`, `[1,{"b":{"C":1,"c":2}}]`, `"x"`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dups, err := strictjson.Scan(data, strictjson.Options{Fold: true})
		if err != nil {
			return
		}
		var v any
		if json.Unmarshal(data, &v) != nil {
			t.Fatalf("Scan accepted %q, encoding/json did not", data)
		}
		exact := 0
		for _, d := range dups {
			if len(d.Path) == 0 || d.Path[len(d.Path)-1].Index != -1 {
				t.Fatalf("duplicate %+v does not end at a key", d)
			}
			if !d.Folded {
				exact++
			}
		}
		if cerr := strictjson.Check(data); (cerr == nil) != (exact == 0) {
			t.Fatalf("Check %v with %d exact duplicates", cerr, exact)
		}
	})
}

// TestLargeObjects: duplicates are found past the first keys too, and a
// large object is read in linear time (sets, not pairwise comparison).
func TestLargeObjects(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 50000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `_` + strconv.Itoa(i) + `":1`)
	}
	doc := b.String()
	if dups, err := strictjson.Scan([]byte(doc+"}"), strictjson.Options{Fold: true}); err != nil || len(dups) != 0 {
		t.Fatalf("%d duplicates, %v", len(dups), err)
	}
	dups, err := strictjson.Scan([]byte(doc+`,"Ka_0":2,"ka_0":3}`), strictjson.Options{Fold: true})
	if err != nil || len(dups) != 2 || !dups[0].Folded || dups[1].Folded {
		t.Fatalf("%+v %v", dups, err)
	}
}
