package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/natstest"
	"github.com/gatehouse/gatehouse/policy"
)

// A run closed through one broker's store is seen closed by another's,
// which had it cached: the bucket's watch updated the cache (its entries
// otherwise live ten minutes, far beyond this test).
func TestRunCloseReachesOtherBrokersCaches(t *testing.T) {
	js := natstest.JetStream(t)
	ctx := context.Background()
	a, err := broker.OpenKVRuns(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	b, err := broker.OpenKVRuns(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	r := &broker.Run{ID: broker.NewRunID(time.Now()), For: policy.Principal{Tenant: "acme", Person: "ada"}, Scopes: []string{}}
	if err := a.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, r.ID); err != nil || got.Closed {
		t.Fatalf("b before the close: %+v %v", got, err)
	}
	if _, err := a.Close(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := b.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the close never reached the other store's cache")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Close(ctx, r.ID); !errors.Is(err, broker.ErrRunClosed) {
		t.Fatalf("closing twice: %v", err)
	}
}
