package broker_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

func (w *world) run(t *testing.T, id string) *broker.Run {
	t.Helper()
	kv, err := w.js.KeyValue(ctxT(t), subject.RunsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	var r broker.Run
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// A sub-run, and a sub-run of it, are for exactly the root's person,
// mandate and scopes; only the agent is theirs. Each run.open names its
// parent.
func TestOpenChildInheritsFromTheRoot(t *testing.T) {
	w := start(t, policy.ModeReport, "")
	ctx := ctxT(t)
	m := &policy.Mandate{Systems: []string{"peer", "output"}, Effects: []policy.EffectClass{policy.EffectNotify},
		ExpiresAt: time.Now().Add(time.Hour).UTC().Truncate(time.Second)}
	rootID, err := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada", Mandate: m, Scopes: []string{"invoices.read"}, Agent: "planner"})
	if err != nil {
		t.Fatal(err)
	}
	root := w.run(t, rootID)
	child, err := w.b.OpenChild(ctx, rootID, "worker")
	if err != nil {
		t.Fatal(err)
	}
	grand, err := w.b.OpenChild(ctx, child.ID, "helper")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		r             *broker.Run
		agent, parent string
		depth         int
	}{{w.run(t, child.ID), "worker", rootID, 1}, {w.run(t, grand.ID), "helper", child.ID, 2}} {
		r := tc.r
		if r.For != root.For || r.MandateDigest != root.MandateDigest || r.MandateDigest == "" ||
			!reflect.DeepEqual(r.Mandate, root.Mandate) || !reflect.DeepEqual(r.Scopes, root.Scopes) {
			t.Fatalf("sub-run %+v does not carry the root's authority %+v", r, root)
		}
		if r.Agent != tc.agent || r.Parent != tc.parent || r.Root != rootID || r.Depth != tc.depth {
			t.Fatalf("sub-run %+v: want agent %s parent %s root %s depth %d", r, tc.agent, tc.parent, rootID, tc.depth)
		}
		evs := w.journalEvents(t, r.ID)
		if len(evs) != 1 || evs[0].Type != journal.TypeRunOpen {
			t.Fatalf("journal of %s = %v", r.ID, types(evs))
		}
		var open journal.RunOpen
		if err := json.Unmarshal(evs[0].Data, &open); err != nil {
			t.Fatal(err)
		}
		if open.Parent != tc.parent || open.ActingFor != root.For || open.MandateDigest != root.MandateDigest ||
			!reflect.DeepEqual(open.Scopes, root.Scopes) || open.Agent != tc.agent {
			t.Fatalf("run.open of %s = %+v", r.ID, open)
		}
	}
}

func TestOpenChildRefuses(t *testing.T) {
	w := start(t, policy.ModeReport, "")
	ctx := ctxT(t)
	rootID, _ := w.app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	code := func(err error) broker.Code { c, _ := broker.CodeOf(err); return c }

	for _, bad := range []string{"", "a.b", "*", ">", "a b", "ünïcode", string(make([]byte, 65))} {
		if _, err := w.b.OpenChild(ctx, rootID, bad); code(err) != broker.CodeBadRequest {
			t.Errorf("agent %q: err = %v, want BAD_REQUEST", bad, err)
		}
	}
	if _, err := w.b.OpenChild(ctx, broker.NewRunID(time.Now()), "worker"); !errors.Is(err, broker.ErrUnknownRun) {
		t.Errorf("unknown parent: err = %v", err)
	}

	// Delegation nests at most MaxDelegationDepth deep.
	id := rootID
	for i := 0; i < broker.MaxDelegationDepth; i++ {
		c, err := w.b.OpenChild(ctx, id, "worker")
		if err != nil {
			t.Fatalf("depth %d: %v", i+1, err)
		}
		id = c.ID
	}
	if _, err := w.b.OpenChild(ctx, id, "worker"); code(err) != broker.CodeBadRequest {
		t.Errorf("past the depth limit: err = %v, want BAD_REQUEST", err)
	}

	// Closing the work closes its sub-runs: no new sub-run, no effect.
	child, err := w.b.OpenChild(ctx, rootID, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.app.CloseWork(ctx, rootID, "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.b.OpenChild(ctx, child.ID, "helper"); !errors.Is(err, broker.ErrRunClosed) {
		t.Errorf("sub-run of closed work: err = %v, want ErrRunClosed", err)
	}
	// Only the delegate acts in the sub-run, and not once the work is closed.
	worker := w.NamedAgent(t, "worker", "")
	_, err = worker.Output(ctx, child.ID, "ok", 1)
	var eb *broker.ErrorBody
	if !errors.As(err, &eb) || eb.Code != broker.CodeRunClosed {
		t.Fatalf("effect in a sub-run of closed work: err = %v, want RUN_CLOSED", err)
	}
}
