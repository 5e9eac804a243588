package canon_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/gatehouse/gatehouse/broker/journal/canon"
)

// twoStep is the contract: encoding/json, then the RFC 8785 canonicaliser.
func twoStep(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(b)
}

// TestRFC8785Vectors: each input of RFC 8785's test data (testdata/rfc8785,
// from the RFC's reference implementation), read as Go values, encodes to
// exactly the expected output.
func TestRFC8785Vectors(t *testing.T) {
	ins, err := filepath.Glob(filepath.Join("testdata", "rfc8785", "*.in.json"))
	if err != nil || len(ins) < 10 {
		t.Fatalf("vectors: %v %v", ins, err)
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.json")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(in, ".in.json") + ".out.json")
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(src, &v); err != nil {
				t.Fatal(err)
			}
			got, err := canon.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
			// The text itself, as a RawMessage, canonicalises the same.
			got, err = canon.Marshal(json.RawMessage(src))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("raw: got %s (%v)\nwant %s", got, err, want)
			}
		})
	}
}

// TestES6Numbers: RFC 8785 appendix B's number serialisations.
func TestES6Numbers(t *testing.T) {
	for _, c := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	} {
		got, err := canon.Marshal(math.Float64frombits(c.bits))
		if err != nil || string(got) != c.want {
			t.Errorf("%016x: %s %v, want %s", c.bits, got, err, c.want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := canon.Marshal(f); err == nil {
			t.Errorf("%v encoded", f)
		}
	}
}

type inner struct {
	B string `json:"b"`
	A int    `json:"a,omitempty"`
}

type textKey int

func (k textKey) MarshalText() ([]byte, error) { return []byte("k" + string(rune('0'+k))), nil }

type valueMarshaler struct{ n int }

func (v valueMarshaler) MarshalJSON() ([]byte, error) {
	return []byte(`{"z": 1, "a": [1.0, "\u0041"]}`), nil
}

type ptrMarshaler struct{ n int }

func (v *ptrMarshaler) MarshalJSON() ([]byte, error) { return []byte(`"ptr"`), nil }

type embedded struct {
	inner
	C bool `json:"c"`
}

type quoted struct {
	N int `json:"n,string"`
}

type zeroer struct{ x int }

func (z zeroer) IsZero() bool { return z.x == 7 }

type kitchen struct {
	Z        string `json:"z"`
	Esc      string `json:"esc"`
	Skip     string `json:"-"`
	Dash     string `json:"-,"`
	Untagged int
	Omit     string            `json:"omit,omitempty"`
	OmitZero time.Time         `json:"omit_zero,omitzero"`
	Zeroer   zeroer            `json:"zeroer,omitzero"`
	Time     time.Time         `json:"time"`
	TimePtr  *time.Time        `json:"time_ptr"`
	Raw      json.RawMessage   `json:"raw"`
	RawNil   json.RawMessage   `json:"raw_nil"`
	Num      json.Number       `json:"num"`
	Bytes    []byte            `json:"bytes"`
	Array    [3]byte           `json:"array"`
	NilSlice []string          `json:"nil_slice"`
	Empty    []string          `json:"empty"`
	Map      map[string]any    `json:"map"`
	IntMap   map[int]string    `json:"int_map"`
	TextMap  map[textKey]int   `json:"text_map"`
	Ptr      *inner            `json:"ptr"`
	NilPtr   *inner            `json:"nil_ptr"`
	Any      any               `json:"any"`
	Val      valueMarshaler    `json:"val"`
	PtrM     ptrMarshaler      `json:"ptr_m"`
	PtrMP    *ptrMarshaler     `json:"ptr_mp"`
	Emb      embedded          `json:"emb"`
	Quoted   quoted            `json:"quoted"`
	F32      float32           `json:"f32"`
	F64      float64           `json:"f64"`
	Big      int64             `json:"big"`
	UBig     uint64            `json:"ubig"`
	Detail   map[string]string `json:"detail,omitempty"`
}

// TestMatchesTwoStep holds Marshal to the contract on values that touch
// every rule it implements itself, and those it hands to encoding/json.
func TestMatchesTwoStep(t *testing.T) {
	tm := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	k := kitchen{
		Z: "zed", Esc: "<a href=\"x\">&\u2028\u2029\x01\x1f\t\n\r\b\f\\/\xff\xed\xa0\x80é😂",
		Skip: "no", Dash: "dash", Untagged: 3, Zeroer: zeroer{7},
		Time: tm, TimePtr: &tm, Raw: json.RawMessage(`{"b": 2.50, "a": "\u00e9"}`), Num: "1.50",
		Bytes: []byte{0, 1, 2, 255}, Array: [3]byte{1, 2, 3}, Empty: []string{},
		Map:     map[string]any{"é": 1, "e": 2.5, "\u20ac": []any{nil, true}, "😂": "x", "ﬃ": map[string]any{}},
		IntMap:  map[int]string{10: "ten", 9: "nine", -1: "neg"},
		TextMap: map[textKey]int{1: 1, 2: 2},
		Ptr:     &inner{B: "b"}, Any: &inner{B: "in any", A: 2},
		PtrMP: &ptrMarshaler{}, Emb: embedded{inner: inner{B: "e"}, C: true}, Quoted: quoted{N: 5},
		F32: 3.14159, F64: 1e21, Big: 1<<53 + 1, UBig: 1<<63 + 1, Detail: map[string]string{"b": "1", "a": "2"},
	}
	for name, v := range map[string]any{
		"kitchen": k, "pointer": &k, "nil": nil, "nil map": map[string]int(nil), "string": "s\u0000",
		"slice of any": []any{1, "a", nil, 2.5, []int{1}}, "addressable marshaler": &struct{ P ptrMarshaler }{},
	} {
		want, werr := twoStep(v)
		got, gerr := canon.Marshal(v)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Errorf("%s:\n got  %s (%v)\n want %s (%v)", name, got, gerr, want, werr)
		}
	}
}

// A time outside what encoding/json writes is an error, as there.
func TestTimeOutOfRange(t *testing.T) {
	if _, err := canon.Marshal(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Fatal("year 10000 encoded")
	}
}

func TestAppendString(t *testing.T) {
	for in, want := range map[string]string{
		"":             `""`,
		"abc":          `"abc"`,
		"\"\\":         `"\"\\"`,
		"\x00\x1f\x7f": `"\u0000\u001f` + "\x7f" + `"`,
		"<>&":          `"<>&"`,
		"\xff":         "\"\ufffd\"",
	} {
		if got := string(canon.AppendString(nil, in)); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzMarshal: any JSON text, read as Go values, encodes as the two-step
// way does.
func FuzzMarshal(f *testing.F) {
	ins, _ := filepath.Glob(filepath.Join("testdata", "rfc8785", "*.in.json"))
	for _, in := range ins {
		b, _ := os.ReadFile(in)
		f.Add(b)
	}
	for _, s := range []string{`{"a":-0}`, `[1e3,1E-7,123456789012345678901]`, `"\ud83d\ude02\u2028"`, `{"\u00e9":1,"e":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		want, werr := twoStep(v)
		got, gerr := canon.Marshal(v)
		if (werr == nil) != (gerr == nil) || werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("%q:\n got  %s (%v)\n want %s (%v)", b, got, gerr, want, werr)
		}
	})
}

func BenchmarkMarshal(b *testing.B) {
	v := kitchen{Z: "zed", Time: time.Now(), Map: map[string]any{"a": 1, "b": "two"}, Detail: map[string]string{"status": "200"}}
	b.Run("canon", func(b *testing.B) {
		for b.Loop() {
			if _, err := canon.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json+jcs", func(b *testing.B) {
		for b.Loop() {
			if _, err := twoStep(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
