package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
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

// serveWorld is serve's embedded shape in this process: NATS listening on
// loopback, the broker in strict mode recording through the journal
// writer in the same process (broker.Committed: decisions fsynced, group
// committed), full capture into a content folder, the output sink, and n
// agents each on its own TCP connection with a run of its own.
type serveWorld struct {
	ns     *embedded.Server
	agents []*client.Client
	runs   []string
	echo   []*nats.Conn // one per agent, for the bare request/reply
	b      *broker.Broker
}

func startServeWorld(b *testing.B, n int) *serveWorld {
	dir := b.TempDir()
	ns, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, "nats"), Port: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ns.Shutdown)
	nc, err := ns.Connect(embedded.RoleBroker)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := journal.EnsureStream(ctx, js, 1); err != nil {
		b.Fatal(err)
	}
	runs, err := broker.OpenKVRuns(ctx, js, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(runs.Stop)
	w, err := journal.Open(filepath.Join(dir, "journal"), journal.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	cm := journal.NewCommitter(w, journal.CommitterOptions{})
	b.Cleanup(cm.Close)
	store, err := content.Open(filepath.Join(dir, "content"), content.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	capt, _ := content.NewCapturer(store, content.ModeFull)
	out, err := output.New(ctx, js, 1)
	if err != nil {
		b.Fatal(err)
	}
	br, err := broker.New(broker.Config{Mode: policy.ModeStrict, Content: capt}, runs,
		broker.NewCommitted(func() *journal.Committer { return cm }), policy.Default(), out)
	if err != nil {
		b.Fatal(err)
	}
	svc, err := broker.Serve(nc, br, broker.ServiceConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = br.Flush(context.Background()) })
	b.Cleanup(func() { _ = svc.Close() })
	creds := func(r embedded.Role) string { return embedded.CredsPath(filepath.Join(dir, "nats"), r) }
	app, err := client.Dial(ns.URL, client.App, creds(embedded.RoleApp))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(app.Close)
	sw := &serveWorld{ns: ns, b: br}
	for i := range n {
		run, err := app.OpenWork(ctx, broker.OpenWork{Tenant: "bench", Person: fmt.Sprintf("agent-%d", i),
			Mandate: &policy.Mandate{Systems: []string{"output"}, ExpiresAt: time.Now().Add(24 * time.Hour)}})
		if err != nil {
			b.Fatal(err)
		}
		a, err := client.Dial(ns.URL, client.Agent, creds(embedded.RoleAgent))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(a.Close)
		e, err := nats.Connect(ns.URL, mustNkeyFile(b, creds(embedded.RoleBroker)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(e.Close)
		sw.agents, sw.runs, sw.echo = append(sw.agents, a), append(sw.runs, run), append(sw.echo, e)
	}
	return sw
}

func mustNkeyFile(b *testing.B, path string) nats.Option {
	o, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		b.Fatal(err)
	}
	return o
}

// drive runs op on every agent at once, each one request after another,
// perAgent times, and returns every request's latency.
func drive(agents, perAgent int, op func(agent, n int) error) ([]time.Duration, error) {
	lats := make([][]time.Duration, agents)
	errs := make(chan error, agents)
	var wg sync.WaitGroup
	for a := range agents {
		wg.Go(func() {
			for n := range perAgent {
				t0 := time.Now()
				if err := op(a, n); err != nil {
					errs <- err
					return
				}
				lats[a] = append(lats[a], time.Since(t0))
			}
		})
	}
	wg.Wait()
	close(errs)
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	return all, <-errs
}

// BenchmarkEffectsAgainstBare is the measure in one process:
// serve's embedded shape (strict, full capture, decisions fsynced before
// their effects) against a bare NATS request/reply of the same size on
// the same server with the same number of connections, 1 and 16 agents.
// The two alternate in rounds, so the machine's load weighs on both
// alike; b.N is the requests per agent of each. It reports both rates,
// p50s and p99s, and the two ratios gatehouse bench prints: effects/s ÷
// bare requests/s, and p50 ÷ bare p50.
//
//	go test -run '^$' -bench EffectsAgainstBare -benchtime 2000x ./broker/
func BenchmarkEffectsAgainstBare(b *testing.B) {
	for _, agents := range []int{1, 16} {
		b.Run(fmt.Sprintf("agents=%d", agents), func(b *testing.B) {
			w := startServeWorld(b, agents)
			subj := "bench.echo"
			reply := []byte(`{"run":"r_01m8n75ye327hsa7apgb8fqfxn","effect":"e_01m8n75yeky7b4540ms2e794md","decision":{"outcome":"allowed","mode":"strict","recorded":true}}`)
			resp, err := w.echo[0].Subscribe(subj, func(m *nats.Msg) { _ = m.Respond(reply) })
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Unsubscribe()
			_ = w.echo[0].Flush()
			req := []byte(`{"run":"r_01m8n75ye327hsa7apgb8fqfxn","action":"deliver","params":{"status":"ok","result":{"n":1,"rows":3}}}`)
			bare := func(a, _ int) error {
				_, err := w.echo[a].Request(subj, req, 10*time.Second)
				return err
			}
			effect := func(a, n int) error {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				r, err := w.agents[a].Output(ctx, w.runs[a], "ok", map[string]int{"n": n, "rows": 3})
				if err == nil && (r.Decision == nil || !r.Decision.Recorded) {
					err = fmt.Errorf("not recorded: %+v", r)
				}
				return err
			}
			const rounds = 4
			per := max(b.N/rounds, 1)
			var bareLat, ghLat []time.Duration
			var bareTime, ghTime time.Duration
			b.ResetTimer()
			for range rounds {
				t0 := time.Now()
				l, err := drive(agents, per, bare)
				if err != nil {
					b.Fatal(err)
				}
				bareTime += time.Since(t0)
				bareLat = append(bareLat, l...)
				t0 = time.Now()
				l, err = drive(agents, per, effect)
				if err != nil {
					b.Fatal(err)
				}
				ghTime += time.Since(t0)
				ghLat = append(ghLat, l...)
			}
			b.StopTimer()
			slices.Sort(bareLat)
			slices.Sort(ghLat)
			q := func(l []time.Duration, p float64) float64 { return float64(l[int(p*float64(len(l)-1))].Microseconds()) }
			bareRate, ghRate := float64(len(bareLat))/bareTime.Seconds(), float64(len(ghLat))/ghTime.Seconds()
			b.ReportMetric(ghRate, "effects/s")
			b.ReportMetric(bareRate, "bare-req/s")
			b.ReportMetric(100*ghRate/bareRate, "%-of-bare")
			b.ReportMetric(q(ghLat, .5), "p50-us")
			b.ReportMetric(q(bareLat, .5), "bare-p50-us")
			b.ReportMetric(q(ghLat, .5)/max(q(bareLat, .5), 1), "p50-x-bare")
			b.ReportMetric(q(ghLat, .99), "p99-us")
		})
	}
}
