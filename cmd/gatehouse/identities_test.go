package main

import (
	"slices"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/identity"
)

// While serve reloads a register in which bob was removed and added
// again, the register in force in between knows no bob: neither the
// removed bob (still connected until the NATS server's users change) nor
// the new one acts, and work opened for bob meanwhile is stamped for the
// registration that follows the removal, the new bob's. alice, unchanged,
// goes on.
func TestReloadPassesThroughNoRegistration(t *testing.T) {
	cur := &identity.Registry{}
	for _, n := range []string{"alice", "bob"} {
		if err := cur.AddAgent(identity.Agent{Name: n, Added: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	next := &identity.Registry{Agents: slices.Clone(cur.Agents)}
	if err := next.RemoveAgent("bob"); err != nil {
		t.Fatal(err)
	}
	if err := next.AddAgent(identity.Agent{Name: "bob", Added: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	old, neu := cur.AgentRegistration("bob"), next.AgentRegistration("bob")
	mid := withoutReplaced(cur, next)
	between := mid.AgentRegistration("bob")
	if between.State != identity.Removed || between.Owns(old.Stamp) || between.Owns(neu.Stamp) {
		t.Fatalf("bob in between: %+v", between)
	}
	if !neu.Owns(between.Stamp) || old.Owns(between.Stamp) {
		t.Fatalf("work opened in between is not the new bob's: %+v stamped %q", neu, between.Stamp)
	}
	if a := mid.AgentRegistration("alice"); a != cur.AgentRegistration("alice") {
		t.Fatalf("alice in between: %+v", a)
	}
	if len(cur.Agents) != 2 || len(cur.Removed) != 0 {
		t.Fatalf("the register in force was changed: %+v", cur)
	}
}
