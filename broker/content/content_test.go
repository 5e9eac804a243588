package content_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/broker/content/contenttest"
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
	segs, _ := filepath.Glob(filepath.Join(s.Dir(), "segments", "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	if b, _ := os.ReadFile(segs[0]); !strings.Contains(string(b), `"op":"put","len":5,"digest":"`+d+`"`) || !strings.HasSuffix(string(b), "}\nhello\n") {
		t.Fatalf("segment holds %q", b)
	}
	if b, err := s.Get(d); err != nil || string(b) != "hello" {
		t.Fatalf("get = %q, %v", b, err)
	}
	restore := contenttest.EditBlob(t, s.Dir(), d, "hello", "hellO")
	if _, err := s.Get(d); !errors.Is(err, content.ErrChanged) {
		t.Fatalf("changed blob: %v, want ErrChanged", err)
	}
	restore()
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

// Erasure takes the bytes out of the segment file itself, and keeps the
// rest of the segment readable; the same bytes kept again afterwards are
// kept.
func TestEraseRemovesTheBytesFromTheSegment(t *testing.T) {
	s, err := content.Open(t.TempDir(), content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ada := policy.Principal{Tenant: "acme", Person: "ada"}
	secret := []byte(`{"card":"4111-1111-1111-1111"}`)
	d, _ := s.Put(secret, content.Ref{Kind: content.KindRequest, Run: "r_1", For: ada})
	other, _ := s.Put([]byte("bob's"), content.Ref{Kind: content.KindRequest, Run: "r_2", For: policy.Principal{Tenant: "acme", Person: "bob"}})
	es, err := s.ErasePerson(ada, "")
	if err != nil || len(es) != 1 || es[0].Digest != d {
		t.Fatalf("erased %+v, %v", es, err)
	}
	segs, _ := filepath.Glob(filepath.Join(s.Dir(), "segments", "*.seg"))
	for _, seg := range segs {
		if b, _ := os.ReadFile(seg); bytes.Contains(b, []byte("4111")) {
			t.Fatalf("%s still holds the erased bytes", seg)
		}
	}
	if _, err := s.Get(d); !errors.Is(err, content.ErrNotFound) {
		t.Fatalf("erased blob: %v", err)
	}
	if b, err := s.Get(other); err != nil || string(b) != "bob's" {
		t.Fatalf("the next blob after the erased one: %q %v", b, err)
	}
	if again, err := s.ErasePerson(ada, ""); err != nil || len(again) != 0 {
		t.Fatalf("second erasure: %+v %v", again, err)
	}
	if _, err := s.Put(secret, content.Ref{Kind: content.KindRequest, Run: "r_3", For: ada}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Get(d); err != nil || !bytes.Equal(b, secret) {
		t.Fatalf("kept again after the erasure: %q %v", b, err)
	}
}

// Two stores on one folder (two processes): each appends to a segment of
// its own, each reads the other's, and an erasure by one is seen by the
// other, which then keeps those bytes again when asked to.
func TestStoresShareAFolder(t *testing.T) {
	dir := t.TempDir()
	a, err := content.Open(dir, content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := content.Open(dir, content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rules := []byte("rules: []")
	d, _ := a.Put(rules, content.Ref{Kind: content.KindPolicy, Name: "rules.yaml"})
	if got, err := b.Get(d); err != nil || !bytes.Equal(got, rules) {
		t.Fatalf("b reads a's blob: %q %v", got, err)
	}
	if _, err := b.Erase([]content.Erasure{{Digest: d, Kind: content.KindPolicy, Reason: "test"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(d); !errors.Is(err, content.ErrNotFound) {
		t.Fatalf("a after b erased: %v", err)
	}
	// a wrote these bytes before: it must not take them as still kept.
	if _, err := a.Put(rules, content.Ref{Kind: content.KindPolicy, Name: "rules.yaml"}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(d); err != nil || !bytes.Equal(got, rules) {
		t.Fatalf("b after a kept them again: %q %v", got, err)
	}
	if _, err := b.Put([]byte("b's own"), content.Ref{Kind: content.KindRecord}); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segs) != 2 {
		t.Fatalf("segments %v, want one per store that wrote", segs)
	}
}

// A folder written before segments (a blob file per digest, index.jsonl)
// is read, listed and erased as before.
func TestFolderFromBeforeSegments(t *testing.T) {
	dir := t.TempDir()
	blob := []byte("old request")
	d := content.DigestOf(blob)
	h := strings.TrimPrefix(d, "sha256:")
	if err := os.MkdirAll(filepath.Join(dir, "sha256", h[:2]), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sha256", h[:2], h[2:]), blob, 0o600); err != nil {
		t.Fatal(err)
	}
	ada := policy.Principal{Tenant: "acme", Person: "ada"}
	line, _ := json.Marshal(content.Ref{Digest: d, Kind: content.KindRequest, Run: "r_old", For: ada, Time: time.Unix(1, 0).UTC()})
	if err := os.WriteFile(filepath.Join(dir, "index.jsonl"), append(line, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := content.Open(dir, content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Get(d); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("old blob: %q %v", got, err)
	}
	if refs, err := s.Refs(); err != nil || len(refs) != 1 || refs[0].Run != "r_old" {
		t.Fatalf("old index: %+v %v", refs, err)
	}
	es, err := s.ErasePerson(ada, "")
	if err != nil || len(es) != 1 {
		t.Fatalf("erase: %+v %v", es, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sha256", h[:2], h[2:])); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old blob file after erasure: %v", err)
	}
	if _, err := s.Get(d); !errors.Is(err, content.ErrNotFound) {
		t.Fatalf("old blob after erasure: %v", err)
	}
}

// An erasure cut short after punching the bytes and before logging
// itself leaves zeros: not kept, never "changed".
func TestZerosAreNotKept(t *testing.T) {
	s, err := content.Open(t.TempDir(), content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, _ := s.Put([]byte("abc"), content.Ref{Kind: content.KindRecord})
	contenttest.EditBlob(t, s.Dir(), d, "abc", "\x00\x00\x00")
	if _, err := s.Get(d); !errors.Is(err, content.ErrNotFound) {
		t.Fatalf("zeroed blob: %v", err)
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

// FuzzSegment: whatever a segment file holds (torn, tampered with, not a
// segment at all), a store reading it never panics, and every blob it
// returns hashes to its digest.
func FuzzSegment(f *testing.F) {
	good := []byte(`{"op":"put","len":5,"digest":"` + content.DigestOf([]byte("hello")) + `","kind":"request","run":"r_1","time":"2026-01-01T00:00:00Z"}` + "\nhello\n")
	f.Add(good)
	f.Add(append(good, []byte(`{"op":"touch","digest":"`+content.DigestOf([]byte("hello"))+`","time":"2026-01-02T00:00:00Z"}`+"\n")...))
	f.Add(good[:len(good)-4])
	f.Add([]byte(`{"op":"put","len":-1,"digest":"sha256:00"}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "segments"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "segments", "0000000000000001-abcdefgh.seg"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := content.Open(dir, content.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		refs, err := s.Refs()
		if err != nil {
			return
		}
		for _, r := range refs {
			if blob, err := s.Get(r.Digest); err == nil && content.DigestOf(blob) != r.Digest {
				t.Fatalf("Get(%s) returned bytes of another digest", r.Digest)
			}
			_, _ = s.LastUsed(r.Digest)
		}
	})
}
