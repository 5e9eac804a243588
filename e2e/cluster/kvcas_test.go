package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/kvcas"
)

// TestKVConflictOnAReplicatedBucket: on an R3 bucket every lost compare-
// and-swap (a stale update, a create of a live key, creates racing for a
// deleted key) is a kvcas.Conflict, and a store failure is not: the
// stores of request ids, approvals, sessions, grounding records and
// quotas tell a lost race from an unavailable store by it.
func TestKVConflictOnAReplicatedBucket(t *testing.T) {
	c := StartNATS(t, 3)
	creds, err := nats.NkeyOptionFromSeed(c.Creds(embedded.RoleBroker))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.URL(), creds)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "cas_r3", Replicas: 3, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Create(ctx, "k", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctx, "k", []byte("2"), rev); err != nil {
		t.Fatal(err)
	}
	// A stale revision.
	_, err = kv.Update(ctx, "k", []byte("3"), rev)
	if !kvcas.Conflict(err) {
		t.Fatalf("stale update: %v, not a conflict", err)
	}
	t.Logf("stale update on R3: %v (matches ErrKeyExists: %v)", err, errors.Is(err, jetstream.ErrKeyExists))
	// A live key.
	if _, err = kv.Create(ctx, "k", []byte("4")); !kvcas.Conflict(err) {
		t.Fatalf("create of a live key: %v, not a conflict", err)
	}
	// Creates racing for a deleted key: one wins, every other loses as a
	// conflict, whichever path of Create it took.
	for round := range 5 {
		if err := kv.Delete(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { _, errs[i] = kv.Create(ctx, "k", []byte("racer")) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !kvcas.Conflict(err):
				t.Fatalf("round %d: a create that lost the race failed otherwise: %v", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d creates won", round, won)
		}
	}
	// And a store failure is not a conflict.
	if _, err := kv.Update(ctx, "bad key!", []byte("x"), 1); err == nil || kvcas.Conflict(err) {
		t.Fatalf("invalid key: %v", err)
	}
}
