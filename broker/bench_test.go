package broker_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// benchWorld is a world in strict mode with one open run; its journal
// writer consumes as in production, so every decision is durably recorded.
func benchWorld(b *testing.B) (*world, string) {
	w := start(b, policy.ModeStrict, "")
	run, err := w.app.OpenWork(context.Background(), broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		b.Fatal(err)
	}
	return w, run
}

// BenchmarkEffectRoundTrip measures an agent's output effect from request
// to reply over loopback TCP: decoded, decided, its decision, attempt and
// outcome acknowledged by JetStream, delivered, answered. It reports p50 and
// p99 of individually timed round trips.
func BenchmarkEffectRoundTrip(b *testing.B) {
	w, run := benchWorld(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, err := w.agent.Output(ctx, run, "ok", i)
		lat = append(lat, time.Since(t0))
		if err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			b.Fatalf("%v %+v", err, r)
		}
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkEffectThroughput drives the broker from many concurrent agents
// (b.RunParallel, 16 goroutines per core) and reports decisions per second.
func BenchmarkEffectThroughput(b *testing.B) {
	w, run := benchWorld(b)
	ctx := context.Background()
	b.SetParallelism(16)
	b.ResetTimer()
	t0 := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r, err := w.agent.Output(ctx, run, "ok", 1); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
				b.Errorf("%v", err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "decisions/s")
}

// BenchmarkBareRequestReply is the floor: a NATS request/reply of the same
// size on the same server and connection kind, with a responder that does
// nothing.
func BenchmarkBareRequestReply(b *testing.B) {
	w, run := benchWorld(b)
	nc, err := w.ns.Connect(embedded.RoleBroker)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	// A TCP connection like the agent's, not in-process.
	tcp, err := nats.Connect(w.ns.URL, mustNkey(b, w, embedded.RoleBroker))
	if err != nil {
		b.Fatal(err)
	}
	defer tcp.Close()
	sub, err := nc.QueueSubscribe("bench.echo", "q", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = nc.Flush()
	body, _ := json.Marshal(broker.EffectRequest{Run: run, Action: "deliver", Params: json.RawMessage(`{"status":"ok","result":1}`)})
	b.Run("sequential", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if _, err := tcp.Request("bench.echo", body, 5*time.Second); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportPercentiles(b, lat)
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(16)
		t0 := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := tcp.Request("bench.echo", body, 5*time.Second); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "requests/s")
	})
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
}
