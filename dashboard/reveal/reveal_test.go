package reveal

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"pay\u202Eexe.txt", "pay⟨U+202E⟩exe.txt"},
		{"a\u200Bb\u200Dc\uFEFF", "a⟨U+200B⟩b⟨U+200D⟩c⟨U+FEFF⟩"},
		{"\x1b[31mred", "⟨U+001B⟩[31mred"},
		{"two\nlines\ttab", "two⟨U+000A⟩lines⟨U+0009⟩tab"},
		{"bad\xffbyte", "bad⟨0xFF⟩byte"},
		{"\u2066iso\u2069", "⟨U+2066⟩iso⟨U+2069⟩"},
		{"nb\u00a0sp", "nb⟨U+00A0⟩sp"},
		{"tag\U000E0041", "tag⟨U+E0041⟩"},
		{"Zürich €", "Zürich €"},
	} {
		if got := Line(c.in); got != c.want {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Block("a\nb\u202Ec"); got != "a\nb⟨U+202E⟩c" {
		t.Errorf("Block kept %q", got)
	}
}

func TestNotes(t *testing.T) {
	if n := Notes("pay\u202Eexe.txt"); len(n) != 1 || !strings.Contains(n[0], "bidirectional") {
		t.Errorf("notes %v", n)
	}
	if n := Notes("p\u0430ypal"); len(n) != 1 || !strings.Contains(n[0], "Cyrillic") { // Cyrillic а
		t.Errorf("mixed scripts: %v", n)
	}
	if n := Notes("Москва and Paris"); n != nil {
		t.Errorf("two scripts in two words flagged: %v", n)
	}
	if Clean("p\u0430ypal") || !Clean("paypal") {
		t.Error("Clean")
	}
}

func TestJSON(t *testing.T) {
	got, dup, ok := JSON([]byte(`{"z":1,"a":{"y":[1,2.50,"\u202Egnp.exe"],"b":null},"m":1e400}`))
	want := `{
  "a": {
    "b": null,
    "y": [
      1,
      2.50,
      "⟨U+202E⟩gnp.exe"
    ]
  },
  "m": 1e400,
  "z": 1
}`
	if !ok || dup != "" || got != want {
		t.Errorf("JSON:\n%s\nwant\n%s", got, want)
	}
	if _, dup, _ := JSON([]byte(`{"amount":"1","amount":"1000"}`)); dup != "amount" {
		t.Errorf("duplicate key not reported: %q", dup)
	}
	if _, _, ok := JSON([]byte(`"str"`)); ok {
		t.Error("a string is not pretty-printed")
	}
	if s, kind, _ := Value(`"pay\u202eexe.txt"`); kind != "string" || s != "pay⟨U+202E⟩exe.txt" {
		t.Errorf("Value of a string: %q %s", s, kind)
	}
}

func TestFold(t *testing.T) {
	long := strings.Repeat("x", 20000)
	head, rest := Fold(long, 12, 600)
	if utf8.RuneCountInString(head) != 600 || head+rest != long {
		t.Errorf("fold %d + %d", len(head), len(rest))
	}
	many := strings.Repeat("line\n", 40)
	head, rest = Fold(many, 12, 10000)
	if strings.Count(head, "\n") != 11 || head+rest != many {
		t.Errorf("fold lines: %q", head)
	}
	if h, r := Fold("short", 12, 600); h != "short" || r != "" {
		t.Error("short value folded")
	}
	if s := Short("abcdef", 4); s != "abc…" {
		t.Errorf("Short %q", s)
	}
}

// FuzzLine: what Line shows never holds a character it must reveal, is
// valid UTF-8, and says as much as the input (never shorter in runes).
func FuzzLine(f *testing.F) {
	for _, s := range []string{"pay\u202Eexe.txt", "\x1b]0;title\x07", "a\u200Bb", "\xff\xfe", "{\"a\":1}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l := Line(s)
		if !utf8.ValidString(l) {
			t.Fatalf("Line(%q) is not UTF-8", s)
		}
		for _, r := range l {
			if hidden(r, false) {
				t.Fatalf("Line(%q) = %q keeps U+%04X", s, l, r)
			}
		}
		if utf8.RuneCountInString(l) < utf8.RuneCountInString(s) {
			t.Fatalf("Line(%q) shorter than the input", s)
		}
		if p, _, ok := JSON([]byte(s)); ok {
			for _, r := range p {
				if hidden(r, true) {
					t.Fatalf("JSON(%q) keeps U+%04X", s, r)
				}
			}
		}
	})
}

func BenchmarkLine(b *testing.B) {
	plain := strings.Repeat("DE89370400440532013000 ", 8)
	mixed := strings.Repeat("refund \u202Eorder 8812 ", 8)
	b.Run("ascii", func(b *testing.B) {
		for b.Loop() {
			_ = Line(plain)
		}
	})
	b.Run("bidi", func(b *testing.B) {
		for b.Loop() {
			_ = Line(mixed)
		}
	})
	b.Run("json", func(b *testing.B) {
		raw := []byte(`{"amount":"120.00","iban":"DE89370400440532013000","memo":"refund order 8812","lines":[{"sku":"A1","n":2},{"sku":"B7","n":1}]}`)
		for b.Loop() {
			_, _, _ = JSON(raw)
		}
	})
}
