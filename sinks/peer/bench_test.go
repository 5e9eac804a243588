package peer_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// BenchmarkRoundTrip measures a peer effect from the agent's request to its
// reply over loopback TCP, in strict mode with the journal writer
// consuming: decoded, decided, decision and attempt acknowledged by
// JetStream, the message stored in the peer stream, the outcome recorded,
// answered. send is one message; delegate also records the sub-run's
// run.open and creates its run record. It reports p50 and p99 of
// individually timed round trips.
func BenchmarkRoundTrip(b *testing.B) {
	env := start(b, policy.ModeStrict, "")
	run := env.Open(b, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(b)
	body := map[string]any{"step": "totals", "value": 42}

	b.Run("send", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			r, err := env.Agent.Send(ctx, run, "bob", body)
			lat = append(lat, time.Since(t0))
			if err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
				b.Fatalf("%v %+v", err, r)
			}
		}
		report(b, lat)
	})
	// next: the agent's read of a message waiting for it, through a
	// broker: the request, the broker's fetch from the agent's consumer,
	// its acknowledgement confirmed by JetStream, the reply.
	b.Run("next", func(b *testing.B) {
		bob := env.NamedAgent(b, "bob", "")
		in, err := bob.Peer("bob")
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			if r, err := env.Agent.Send(ctx, run, "bob", body); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
				b.Fatalf("%v %+v", err, r)
			}
		}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			m, err := in.Next(ctx)
			lat = append(lat, time.Since(t0))
			if err != nil || m == nil {
				b.Fatalf("%v %+v", err, m)
			}
		}
		report(b, lat)
	})
	b.Run("delegate", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			child, r, err := env.Agent.Delegate(ctx, run, "worker", body)
			lat = append(lat, time.Since(t0))
			if err != nil || child == "" {
				b.Fatalf("%v %+v", err, r)
			}
		}
		report(b, lat)
	})
}

func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
}
