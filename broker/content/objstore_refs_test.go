package content_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/broker/natstest"
	"github.com/gatehouse/gatehouse/policy"
)

// A record byte-identical for two people (the same provider response read
// in ada's run and in bob's) is one blob referenced twice. Erasing ada
// must not delete what bob's run still references, on the object store
// exactly as on the folder store; content only ada references goes.
func TestSharedBlobSurvivesOnePersonsErasure(t *testing.T) {
	js := natstest.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	obj, err := content.OpenObjectStore(ctx, js, content.ObjectStoreConfig{Bucket: "shared_refs", Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := content.Open(t.TempDir(), content.Options{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	ada := policy.Principal{Tenant: "acme", Person: "ada"}
	bob := policy.Principal{Tenant: "acme", Person: "bob"}
	for name, s := range map[string]*content.Store{"objectstore": obj, "dir": dir} {
		t.Run(name, func(t *testing.T) {
			shared := []byte(`{"order":"o-1","total":12}`)
			d1, err := s.Put(shared, content.Ref{Kind: content.KindRecord, Run: "r_ada", Effect: "e_1", For: ada})
			if err != nil {
				t.Fatal(err)
			}
			d2, err := s.Put(shared, content.Ref{Kind: content.KindRecord, Run: "r_bob", Effect: "e_7", For: bob})
			if err != nil || d2 != d1 {
				t.Fatalf("second put: %s %v (first %s)", d2, err, d1)
			}
			adaOnly, _ := s.Put([]byte(`{"effect":"ada only"}`), content.Ref{Kind: content.KindRequest, Run: "r_ada", Effect: "e_1", For: ada})

			refs, err := s.Refs()
			if err != nil {
				t.Fatal(err)
			}
			var forShared []policy.Principal
			for _, r := range refs {
				if r.Digest == d1 {
					forShared = append(forShared, r.For)
				}
			}
			if len(forShared) != 2 || forShared[0] == forShared[1] {
				t.Fatalf("references of the shared blob: %+v", forShared)
			}

			es, err := s.ErasePerson(ada, "")
			if err != nil || len(es) != 1 || es[0].Digest != adaOnly {
				t.Fatalf("erase ada: %+v %v", es, err)
			}
			if got, err := s.Get(d1); err != nil || string(got) != string(shared) {
				t.Fatalf("bob's run lost the shared record: %q %v", got, err)
			}
			if _, err := s.Get(adaOnly); !errors.Is(err, content.ErrNotFound) {
				t.Fatalf("ada's own request after erasure: %v", err)
			}
			// Nor does erasing bob take it: ada's run names it too.
			if es, err := s.ErasePerson(bob, ""); err != nil || len(es) != 0 {
				t.Fatalf("erase bob: %+v %v", es, err)
			}
			if _, err := s.Get(d1); err != nil {
				t.Fatalf("shared record after erasing bob: %v", err)
			}
			// Retention is unchanged: unused long enough, it goes.
			c.t = c.t.Add(40 * 24 * time.Hour)
			es, err = s.EraseUnused(30 * 24 * time.Hour)
			if err != nil || len(es) != 1 || es[0].Digest != d1 || es[0].For != ada {
				t.Fatalf("erase unused: %+v %v", es, err)
			}
			if _, err := s.Get(d1); !errors.Is(err, content.ErrNotFound) {
				t.Fatalf("shared record after retention: %v", err)
			}
		})
	}
}
