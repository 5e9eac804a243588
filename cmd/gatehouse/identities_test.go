package main

import (
	"errors"
	"log/slog"
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

// TestReloadRefusesTheNameUntilTheUsersChange drives serve's reload
// itself: bob removed and added again in the file. While the NATS server
// is given the new users, the register the broker decides by knows no
// bob (neither registration owns work then); after it, the new bob. If
// the server refuses the users, bob stays refused and alice goes on.
func TestReloadRefusesTheNameUntilTheUsersChange(t *testing.T) {
	dir := t.TempDir()
	cur := &identity.Registry{}
	for _, n := range []string{"alice", "bob"} {
		if err := cur.AddAgent(identity.Agent{Name: n, Added: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cur.Save(identity.Path(dir)); err != nil {
		t.Fatal(err)
	}
	old, alice := cur.AgentRegistration("bob"), cur.AgentRegistration("alice")
	next := &identity.Registry{Agents: slices.Clone(cur.Agents)}
	if err := next.RemoveAgent("bob"); err != nil {
		t.Fatal(err)
	}
	if err := next.AddAgent(identity.Agent{Name: "bob", Added: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := next.Save(identity.Path(dir)); err != nil {
		t.Fatal(err)
	}
	neu := next.AgentRegistration("bob")

	for _, refused := range []bool{false, true} {
		x := &identities{dataDir: dir, holder: identity.NewHolder(cur), log: slog.New(slog.DiscardHandler)}
		var during identity.Registration
		x.users = func(*identity.Registry) error {
			during = x.holder.Load().AgentRegistration("bob")
			if refused {
				return errors.New("the server refused the users")
			}
			return nil
		}
		err := x.reload()
		if refused != (err != nil) {
			t.Fatalf("refused %v: reload: %v", refused, err)
		}
		if during.State != identity.Removed || during.Owns(old.Stamp) || during.Owns(neu.Stamp) {
			t.Fatalf("bob while the users change: %+v", during)
		}
		after := x.holder.Load()
		switch bob := after.AgentRegistration("bob"); {
		case refused && (bob.State != identity.Removed || bob.Owns(old.Stamp)):
			t.Fatalf("bob after the server refused the users: %+v", bob)
		case !refused && bob != neu:
			t.Fatalf("bob after the reload: %+v, want %+v", bob, neu)
		}
		if a := after.AgentRegistration("alice"); a != alice {
			t.Fatalf("alice after the reload (refused %v): %+v", refused, a)
		}
	}
}
