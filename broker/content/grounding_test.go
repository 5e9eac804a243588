package content_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/policy"
)

// TestKeepRecord: full capture keeps a record body under the digest of its
// bytes, indexed to its run, effect and person, so erasing the person
// removes it; digests mode keeps nothing.
func TestKeepRecord(t *testing.T) {
	ada := policy.Principal{Tenant: "acme", Person: "ada"}
	body := []byte(`{"iban":"NL91ABNA0417164300"}`)
	for _, mode := range []content.Mode{content.ModeFull, content.ModeDigests} {
		t.Run(string(mode), func(t *testing.T) {
			s, err := content.Open(t.TempDir(), content.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c, err := content.NewCapturer(s, mode)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.KeepRecord(context.Background(), "r_1", "e_1", ada, body); err != nil {
				t.Fatal(err)
			}
			_, err = s.Get(content.DigestOf(body))
			if mode == content.ModeDigests {
				if !errors.Is(err, content.ErrNotFound) {
					t.Fatalf("digests mode kept a record: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			es, err := s.ErasePerson(ada, "")
			if err != nil || len(es) != 1 || es[0].Kind != content.KindRecord || es[0].Run != "r_1" {
				t.Fatalf("erased %+v, %v", es, err)
			}
			if _, err := s.Get(content.DigestOf(body)); !errors.Is(err, content.ErrNotFound) {
				t.Fatalf("record survived its person's erasure: %v", err)
			}
		})
	}
}

func TestGroundingDigests(t *testing.T) {
	a, b := content.DigestOf([]byte("a")), content.DigestOf([]byte("b"))
	g := &content.Grounding{
		Lookups: []content.RecordsRead{{Records: []content.RecordMeta{{Digest: a}, {Digest: b}}}, {Records: []content.RecordMeta{{Digest: a}}}},
		Rereads: []content.RecordsRead{{Records: []content.RecordMeta{{Digest: b}, {Digest: "not-a-digest"}}}},
	}
	got := g.Digests()
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("Digests() = %v", got)
	}
	if (*content.Grounding)(nil).Digests() != nil {
		t.Fatal("nil grounding names digests")
	}
}
