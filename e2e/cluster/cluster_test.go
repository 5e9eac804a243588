package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/embedded"
)

// TestClusterSurvivesANode starts three nodes, makes an R3 stream, kills
// one node and checks publishes are still acknowledged and nothing acked
// before is lost.
func TestClusterSurvivesANode(t *testing.T) {
	c := StartNATS(t, 3)
	if l, err := c.MetaLeader(); err != nil || l == "" {
		t.Fatalf("meta leader %q: %v", l, err)
	}
	creds, err := nats.NkeyOptionFromSeed(c.Creds(embedded.RoleBroker))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.URL(), creds, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	publish := func(n int) int {
		ok := 0
		for i := 0; i < n; i++ {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			if _, err := js.Publish(pctx, "t.x", []byte("x")); err == nil {
				ok++
			}
			pcancel()
		}
		return ok
	}
	acked := publish(50)
	c.Nodes[0].Kill()
	for acked < 100 {
		acked += publish(1)
		if ctx.Err() != nil {
			t.Fatal("publishes stopped being acknowledged after one node of three died")
		}
	}
	s, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs < uint64(acked) {
		t.Fatalf("stream holds %d messages, %d were acknowledged", info.State.Msgs, acked)
	}
	if err := c.Nodes[0].Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(time.Minute); err != nil {
		t.Fatal(err)
	}
}
