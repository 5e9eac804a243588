package content_test

import (
	"testing"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/policy"
)

// A blob the index names as a policy or grounding rules file belongs to
// nobody: a person's record that happens to hold the same bytes (a
// provider that answered with the rules file) does not take it with the
// person's erasure, or every run decided under those rules loses them.
func TestPersonErasureKeepsABlobThatIsAlsoRules(t *testing.T) {
	s, err := content.Open(t.TempDir(), content.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ada := policy.Principal{Tenant: "acme", Person: "ada"}
	for _, kind := range []content.Kind{content.KindPolicy, content.KindGrounding} {
		rules := []byte("rules of kind " + string(kind))
		d, err := s.Put(rules, content.Ref{Kind: kind, Name: "rules.yaml"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(rules, content.Ref{Kind: content.KindRecord, Run: "r_ada", Effect: "e_1", For: ada}); err != nil {
			t.Fatal(err)
		}
		es, err := s.ErasePerson(ada, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 0 {
			t.Errorf("%s: erased %+v", kind, es)
		}
		if _, err := s.Get(d); err != nil {
			t.Errorf("%s blob erased with ada's content: %v", kind, err)
		}
	}
}
