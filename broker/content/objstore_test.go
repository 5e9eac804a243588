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

// Two stores on one Object Store bucket stand for two broker hosts: what
// one keeps, the other reads, and an erasure made from either deletes the
// object for both and is in both erasure logs.
func TestObjectStoreSharedAcrossHosts(t *testing.T) {
	js := natstest.JetStream(t)
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := content.OpenObjectStore(ctx, js, content.ObjectStoreConfig{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	b, err := content.OpenObjectStore(ctx, js, content.ObjectStoreConfig{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	ada := policy.Principal{Tenant: "acme", Person: "ada"}
	bob := policy.Principal{Tenant: "acme", Person: "bob"}
	adas, err := a.Put([]byte(`{"effect":"ada's"}`), content.Ref{Kind: content.KindRequest, Run: "r_ada", Effect: "e_1", For: ada})
	if err != nil {
		t.Fatal(err)
	}
	bobs, _ := b.Put([]byte(`{"effect":"bob's"}`), content.Ref{Kind: content.KindRequest, Run: "r_bob", For: bob})
	pol, _ := a.Put([]byte("rules: []"), content.Ref{Kind: content.KindPolicy, Name: "rules.yaml"})

	if got, err := b.Get(adas); err != nil || string(got) != `{"effect":"ada's"}` {
		t.Fatalf("host b reads host a's blob: %q %v", got, err)
	}
	if _, err := b.Get(content.DigestOf([]byte("never kept"))); !errors.Is(err, content.ErrNotFound) {
		t.Fatalf("a blob never kept: %v", err)
	}
	if _, err := b.Get("sha256:../../etc/passwd"); !errors.Is(err, content.ErrBadDigest) {
		t.Fatalf("bad digest: %v", err)
	}
	refs, err := b.Refs()
	if err != nil || len(refs) != 3 {
		t.Fatalf("refs = %+v, %v", refs, err)
	}

	// Last use: written on day 0; the policy used again on day 20 by b.
	if err := b.Touch(adas); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(20 * 24 * time.Hour)
	if _, err := b.Put([]byte("rules: []"), content.Ref{Kind: content.KindPolicy}); err != nil {
		t.Fatal(err)
	}
	if used, err := a.LastUsed(pol); err != nil || !used.Equal(c.t) {
		t.Fatalf("policy last used %v (%v), want %v", used, err, c.t)
	}
	c.t = c.t.Add(11 * 24 * time.Hour)

	// Person erasure from host b takes only ada's request.
	es, err := b.ErasePerson(ada, "")
	if err != nil || len(es) != 1 || es[0].Digest != adas || es[0].Reason != "person acme/ada" {
		t.Fatalf("erase ada: %+v %v", es, err)
	}
	if _, err := a.Get(adas); !errors.Is(err, content.ErrNotFound) {
		t.Fatalf("ada's blob after erasure, from host a: %v", err)
	}
	if again, err := a.ErasePerson(ada, ""); err != nil || len(again) != 0 {
		t.Fatalf("erasing ada again: %+v %v", again, err)
	}
	// Retention from host a: bob's request is 31 days unused, the policy 11.
	es, err = a.EraseUnused(30 * 24 * time.Hour)
	if err != nil || len(es) != 1 || es[0].Digest != bobs || es[0].For != bob {
		t.Fatalf("erase unused: %+v %v", es, err)
	}
	if _, err := b.Get(pol); err != nil {
		t.Fatalf("policy erased: %v", err)
	}
	log, err := b.Erasures()
	if err != nil || log[adas].Reason != "person acme/ada" || log[bobs].Reason != "unused for 30 days" || len(log) != 2 {
		t.Fatalf("erasure log = %+v, %v", log, err)
	}
	if a.Dir() != "" || a.Close() != nil {
		t.Fatal("an object store has no folder, and Close does nothing")
	}
}
