package provider_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker/natstest"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// SetGrounding swaps the rules in force; a sink built without grounding
// has no record store, so rules given later are refused and nothing
// changes, rather than checks running against no records.
func TestSetGrounding(t *testing.T) {
	cat, err := provider.ParseCatalogue("c.yaml", []byte(catalogue("http://127.0.0.1:1")))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := grounding.Parse("g.yaml", []byte(pinnedYAML))
	if err != nil {
		t.Fatal(err)
	}
	bare, err := provider.New(context.Background(), nil, provider.Config{Catalogue: cat})
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.SetGrounding(rules); !errors.Is(err, provider.ErrNoRecordStore) || bare.Grounding() != nil {
		t.Fatalf("rules on a sink without a record store: %v, in force %v", err, bare.Grounding())
	}

	s, err := provider.New(context.Background(), natstest.JetStream(t), provider.Config{Catalogue: cat, Grounding: rules})
	if err != nil {
		t.Fatal(err)
	}
	broken := grounding.Unreadable("g.yaml", errors.New("line 3: colour"))
	for _, r := range []*grounding.Rules{broken, rules, nil} {
		if err := s.SetGrounding(r); err != nil || s.Grounding().Name() != r.Name() || s.Grounding().Digest() != r.Digest() {
			t.Fatalf("SetGrounding(%v): %v, in force %v", r.Name(), err, s.Grounding())
		}
	}
	// Rules that do not fit the catalogue are refused and change nothing.
	if err := s.SetGrounding(rules); err != nil {
		t.Fatal(err)
	}
	misfit, err := grounding.Parse("misfit.yaml", []byte(strings.ReplaceAll(pinnedYAML, "/payments", "/api/payments")))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetGrounding(misfit); !errors.Is(err, grounding.ErrInvalidRules) || !strings.Contains(err.Error(), "/api/payments fits no operation") || s.Grounding().Name() != "g.yaml" {
		t.Fatalf("misfit rules: %v, in force %s", err, s.Grounding().Name())
	}
	if _, err := provider.New(context.Background(), natstest.JetStream(t), provider.Config{Catalogue: cat, Grounding: misfit}); !errors.Is(err, grounding.ErrInvalidRules) {
		t.Fatalf("New with misfit rules: %v", err)
	}
}
