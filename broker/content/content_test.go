package content_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/policy"
)

// clock is a settable clock for the store.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestPutGetAndChangedContent(t *testing.T) {
	s, err := content.Open(t.TempDir(), content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := s.Put([]byte("hello"), content.Ref{Kind: content.KindRequest, Run: "r_1"})
	if err != nil {
		t.Fatal(err)
	}
	if d != content.DigestOf([]byte("hello")) {
		t.Fatalf("digest %s", d)
	}
	h := strings.TrimPrefix(d, "sha256:")
	if _, err := os.Stat(filepath.Join(s.Dir(), "sha256", h[:2], h[2:])); err != nil {
		t.Fatalf("blob not at the documented path: %v", err)
	}
	if b, err := s.Get(d); err != nil || string(b) != "hello" {
		t.Fatalf("get = %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), "sha256", h[:2], h[2:]), []byte("hellO"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(d); !errors.Is(err, content.ErrChanged) {
		t.Fatalf("changed blob: %v, want ErrChanged", err)
	}
	if _, err := s.Get(content.DigestOf([]byte("nope"))); !errors.Is(err, content.ErrNotFound) {
		t.Fatalf("missing blob: %v", err)
	}
	if _, err := s.Get("sha256:../../etc/passwd"); !errors.Is(err, content.ErrBadDigest) {
		t.Fatalf("bad digest: %v", err)
	}
	refs, err := s.Refs()
	if err != nil || len(refs) != 1 || refs[0].Digest != d || refs[0].Run != "r_1" {
		t.Fatalf("index = %+v, %v", refs, err)
	}
}

func TestEraseUnusedByTheInjectedClock(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, err := content.Open(t.TempDir(), content.Options{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old, _ := s.Put([]byte("old"), content.Ref{Kind: content.KindRequest, Run: "r_old", For: policy.Principal{Tenant: "acme", Person: "ada"}})
	reused, _ := s.Put([]byte("reused"), content.Ref{Kind: content.KindPolicy, Name: "rules.yaml"})
	c.t = c.t.Add(20 * 24 * time.Hour)
	if _, err := s.Put([]byte("reused"), content.Ref{Kind: content.KindPolicy}); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(11 * 24 * time.Hour) // old: 31 days unused; reused: 11

	if es, err := s.EraseUnused(0); err != nil || len(es) != 0 {
		t.Fatalf("0 days keeps everything: %v %v", es, err)
	}
	es, err := s.EraseUnused(30 * 24 * time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Digest != old || es[0].Run != "r_old" || es[0].Reason != "unused for 30 days" {
		t.Fatalf("erased %+v, want only %s", es, old)
	}
	if _, err := s.Get(old); !errors.Is(err, content.ErrNotFound) {
		t.Fatalf("old content still there: %v", err)
	}
	if _, err := s.Get(reused); err != nil {
		t.Fatalf("reused content erased: %v", err)
	}
	log, err := s.Erasures()
	if err != nil || log[old].Reason != "unused for 30 days" || log[old].For.Person != "ada" {
		t.Fatalf("erasure log = %+v, %v", log, err)
	}
}

func TestEraserLoopStopsOnClose(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, err := content.Open(t.TempDir(), content.Options{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, _ := s.Put([]byte("x"), content.Ref{Kind: content.KindRequest})
	c.t = c.t.Add(48 * time.Hour)
	e := content.StartEraser(s, content.EraserConfig{MaxAge: 24 * time.Hour, Every: time.Millisecond})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := s.Get(d); errors.Is(err, content.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the eraser did not erase unused content")
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.Close()
	e.Close() // twice is fine
}

func TestPersonContentLeavesOthersAndPolicies(t *testing.T) {
	s, err := content.Open(t.TempDir(), content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ada := policy.Principal{Tenant: "acme", Person: "ada"}
	bob := policy.Principal{Tenant: "acme", Person: "bob"}
	a, _ := s.Put([]byte("ada's"), content.Ref{Kind: content.KindRequest, Run: "r_a", For: ada})
	b, _ := s.Put([]byte("bob's"), content.Ref{Kind: content.KindRequest, Run: "r_b", For: bob})
	p, _ := s.Put([]byte("rules: []"), content.Ref{Kind: content.KindPolicy})
	es, err := s.ErasePerson(ada, "")
	if err != nil || len(es) != 1 || es[0].Digest != a || es[0].Reason != "person acme/ada" {
		t.Fatalf("erased %+v, %v", es, err)
	}
	for _, d := range []string{b, p} {
		if _, err := s.Get(d); err != nil {
			t.Fatalf("%s erased with ada's content: %v", d, err)
		}
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]content.Mode{"": content.ModeFull, "FULL": content.ModeFull, " digests": content.ModeDigests, "off": content.ModeOff} {
		if got, err := content.ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := content.ParseMode("some"); !errors.Is(err, content.ErrUnknownMode) {
		t.Errorf("ParseMode(some): %v", err)
	}
}

// TestEffectRecordCoversEveryField fills every field of policy.Effect and
// checks the record round-trips it, so a field added to policy.Effect is
// not silently dropped from what replay decides on.
func TestEffectRecordCoversEveryField(t *testing.T) {
	var e policy.Effect
	v := reflect.ValueOf(&e).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x" + v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]string{"amount": "12.50"}))
		case reflect.Pointer:
			switch f.Interface().(type) {
			case *policy.Contract:
				f.Set(reflect.ValueOf(&policy.Contract{Operations: []policy.Operation{{Method: "GET", Template: "/a/{id}"}}}))
			case *policy.Grounding:
				f.Set(reflect.ValueOf(&policy.Grounding{Rule: "g", Failures: []string{"iban"}}))
			default:
				t.Fatalf("policy.Effect.%s: a pointer type the record does not know", v.Type().Field(i).Name)
			}
		default:
			t.Fatalf("policy.Effect.%s: a kind (%s) the record does not know", v.Type().Field(i).Name, f.Kind())
		}
	}
	r := &content.Request{Run: "r_1", Effect: "e_1", Described: content.FromEffect(e), DecidedAt: time.Unix(1, 0)}
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := content.DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Described.Effect(); !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip lost fields:\n got %+v\nwant %+v", got, e)
	}
	b2, _ := back.Encode()
	if string(b) != string(b2) {
		t.Fatal("encoding is not deterministic")
	}
}
