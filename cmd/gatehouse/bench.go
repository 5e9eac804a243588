package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/policy"
)

const benchUsage = `Usage: gatehouse bench [--agents N] [--duration D | --requests N] [--bare] [--sink output|memory] [--json]

Drives many agents over NATS against running brokers: each agent has its
own NATS connection and its own run (opened as the application), and
proposes effects one after another for --duration (or --requests each).
It reports requests, decisions acknowledged as recorded, errors by code,
sustained decisions per second and p50/p99 latency, and the journal lag
(stream last sequence minus the writer's ack floor) sampled during the run.

--bare first measures a bare NATS request/reply of the same size, with the
same number of connections, on the same NATS, for comparison, and the last
line gives the two ratios: decisions per second as a share of bare
requests per second, and the p50 as a multiple of the bare p50.
--acked FILE writes "<run> <effect>" for every decision acknowledged as
recorded, one a line, so a test can look for each in the journal.

It finds NATS like the other client commands (--nats-url, or the local
serve's endpoints file); --creds is the agents' credential (the shared
agent's: bench opens runs without an agent), --app-creds the one it opens
work with, and --observer-creds (default: the local serve's broker
credential, if any) is used for the journal lag and the bare responder.
`

// benchReport is what bench prints with --json.
type benchReport struct {
	Agents     int           `json:"agents"`
	Sink       string        `json:"sink"`
	Gatehouse  benchFigures  `json:"gatehouse"`
	Bare       *benchFigures `json:"bare,omitempty"`
	JournalLag *benchLag     `json:"journal_lag,omitempty"`
	// Ratios compares the two, with --bare.
	Ratios *benchRatios `json:"ratios,omitempty"`
}

// benchRatios is Gatehouse against the bare request/reply of the same run:
// decisions per second as a share of bare requests per second, and p50
// as a multiple of the bare p50.
type benchRatios struct {
	Throughput float64 `json:"throughput"` // 0.14: 14% of bare
	P50        float64 `json:"p50"`        // 6.6: 6.6 times bare
}

func ratios(g, bare *benchFigures) *benchRatios {
	if bare == nil || bare.PerSecond == 0 || bare.P50us == 0 {
		return nil
	}
	return &benchRatios{Throughput: g.PerSecond / bare.PerSecond, P50: g.P50us / bare.P50us}
}

type benchFigures struct {
	Seconds   float64        `json:"seconds"`
	Requests  int            `json:"requests"`
	Acked     int            `json:"acked"`
	Errors    map[string]int `json:"errors,omitempty"`
	PerSecond float64        `json:"per_second"`
	P50us     float64        `json:"p50_us"`
	P99us     float64        `json:"p99_us"`
}

type benchLag struct {
	Max   uint64 `json:"max"`
	Final uint64 `json:"final"`
	// DrainSeconds is how long after the load stopped the writer took to
	// reach the stream's last sequence (-1: not within 30 s).
	DrainSeconds float64 `json:"drain_seconds"`
}

type benchConfig struct {
	cf            connFlags
	agents        int
	duration      time.Duration
	requests      int
	bare          bool
	sink          string
	acked         string
	observerCreds string
	appCreds      string
	tenant        string
}

func cmdBench(ctx context.Context, env *cliEnv, args []string) error {
	var c benchConfig
	fs := newEnvFlags(env, "bench", benchUsage)
	c.cf.register(fs)
	fs.IntVar(&c.agents, "agents", 16, "agents, each with its own NATS connection and run")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to drive effects (ignored with --requests)")
	fs.IntVar(&c.requests, "requests", 0, "effects per agent (0: run for --duration)")
	fs.BoolVar(&c.bare, "bare", false, "also measure a bare NATS request/reply on the same NATS")
	fs.StringVar(&c.sink, "sink", "output", "output (deliver a small result) or memory (put a small value)")
	fs.StringVar(&c.acked, "acked", "", "write each recorded decision's run and effect id to this file")
	fs.StringVar(&c.observerCreds, "observer-creds", "", "nkey seed for the journal lag and bare responder (default: the local serve's broker credential)")
	fs.StringVar(&c.tenant, "tenant", "bench", "tenant of the runs bench opens")
	fs.StringVar(&c.appCreds, "app-creds", "", "nkey seed bench opens work with (default: --creds, else the local serve's app credential)")
	if _, err := fs.parse(args); err != nil {
		return err
	}
	if c.agents < 1 || c.duration <= 0 || c.requests < 0 {
		return usageError("--agents must be at least 1, --duration positive, --requests not negative")
	}
	if c.sink != "output" && c.sink != "memory" {
		return usageError("--sink must be output or memory, not %q", c.sink)
	}
	url, observer := c.cf.natsURL, c.observerCreds
	if url == "" || observer == "" {
		if ep, err := readEndpoints(c.cf.dataDir); err == nil {
			if url == "" {
				url = ep.NATSURL
			}
			if observer == "" && ep.AppCreds != "" {
				observer = embedded.CredsPath(filepath.Join(c.cf.dataDir, "nats"), embedded.RoleBroker)
			}
		}
	}
	if c.cf.natsURL == "" && url == "" {
		return fmt.Errorf("no NATS to bench: pass --nats-url or run 'gatehouse serve' here")
	}
	c.cf.natsURL = url

	rep := benchReport{Agents: c.agents, Sink: c.sink}
	var obs *nats.Conn
	if o, err := connectNATS(url, observer, "gatehouse-bench-observer"); err == nil {
		obs = o
		defer obs.Close()
	} else {
		fmt.Fprintf(env.stderr, "bench: no observer connection (%v): no journal lag, no bare figures\n", err)
	}
	if c.bare && obs != nil {
		f, err := benchBare(ctx, &c, url, observer, obs)
		if err != nil {
			return err
		}
		rep.Bare = &f
	}

	var lag *lagSampler
	if obs != nil {
		if js, err := jetstream.New(obs); err == nil {
			lag = startLagSampler(js)
		}
	}
	f, acked, err := benchGatehouse(ctx, env, &c)
	if lag != nil {
		rep.JournalLag = lag.stop(ctx)
	}
	if err != nil {
		return err
	}
	rep.Gatehouse = f
	rep.Ratios = ratios(&rep.Gatehouse, rep.Bare)
	if c.acked != "" {
		if err := os.WriteFile(c.acked, []byte(strings.Join(acked, "")), 0o600); err != nil {
			return fmt.Errorf("--acked: %w", err)
		}
	}
	if c.cf.json {
		if err := printJSON(env, rep); err != nil {
			return err
		}
	} else {
		printBench(env, &rep)
	}
	if f.Acked == 0 {
		return &exitError{code: exitFindings}
	}
	return nil
}

func printBench(env *cliEnv, r *benchReport) {
	row := func(name string, f *benchFigures) {
		fmt.Fprintf(env.stdout, "%-28s %9.0f/s  p50 %8.0f µs  p99 %8.0f µs  %d requests, %d recorded",
			name, f.PerSecond, f.P50us, f.P99us, f.Requests, f.Acked)
		if len(f.Errors) > 0 {
			fmt.Fprintf(env.stdout, ", errors %v", f.Errors)
		}
		fmt.Fprintln(env.stdout)
	}
	fmt.Fprintf(env.stdout, "%d agents, sink %s\n", r.Agents, r.Sink)
	row("gatehouse effect (decided)", &r.Gatehouse)
	if r.Bare != nil {
		row("bare NATS request/reply", r.Bare)
	}
	if r.JournalLag != nil {
		fmt.Fprintf(env.stdout, "journal lag: max %d, at the end %d, drained %.2fs after the load\n",
			r.JournalLag.Max, r.JournalLag.Final, r.JournalLag.DrainSeconds)
	}
	if r.Ratios != nil { // the last line, for scripts
		fmt.Fprintf(env.stdout, "effects ÷ bare: %.1f%% of bare requests/s, p50 %.1f× bare p50\n",
			100*r.Ratios.Throughput, r.Ratios.P50)
	}
}

// benchGatehouse runs the agents and returns the figures and the
// "<run> <effect>\n" lines of every recorded decision.
func benchGatehouse(ctx context.Context, env *cliEnv, c *benchConfig) (benchFigures, []string, error) {
	acf := c.cf
	if c.appCreds != "" {
		acf.creds = c.appCreds
	}
	app, err := acf.dial(client.App)
	if err != nil {
		return benchFigures{}, nil, err
	}
	defer app.Close()
	type agentResult struct {
		lat    []time.Duration
		acked  []string
		errors map[string]int
		// unsettled: a request ended without the broker's answer (no
		// reply in time, a lost connection), so the broker may still
		// decide and record it; its run stays open.
		unsettled bool
	}
	results := make([]agentResult, c.agents)
	agents := make([]*client.Client, c.agents)
	runs := make([]string, c.agents)
	for i := range c.agents {
		octx, cancel := context.WithTimeout(ctx, c.cf.timeout)
		runs[i], err = app.OpenWork(octx, broker.OpenWork{Tenant: c.tenant, Person: fmt.Sprintf("agent-%d", i),
			Mandate: &policy.Mandate{Systems: []string{c.sink}, ExpiresAt: time.Now().Add(24 * time.Hour)}})
		cancel()
		if err != nil {
			closeBenchRuns(app, runs[:i], c.cf.timeout, env)
			return benchFigures{}, nil, fmt.Errorf("open work: %w", err)
		}
		cf := c.cf
		if agents[i], err = cf.dial(client.Agent); err != nil {
			closeBenchRuns(app, runs[:i+1], c.cf.timeout, env)
			return benchFigures{}, nil, err
		}
		defer agents[i].Close()
	}
	stop := time.Now().Add(c.duration)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range c.agents {
		wg.Go(func() {
			r := &results[i]
			r.errors = map[string]int{}
			for n := 0; ; n++ {
				if c.requests > 0 && n >= c.requests || c.requests == 0 && time.Now().After(stop) || ctx.Err() != nil {
					return
				}
				// Not cancelled by an interrupt: a request in flight finishes
				// (its attempt and outcome recorded) before bench closes the run.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cf.timeout)
				t0 := time.Now()
				reply, err := benchEffect(rctx, agents[i], c.sink, runs[i], n)
				d := time.Since(t0)
				cancel()
				switch {
				case err != nil:
					code := benchErrCode(err)
					r.errors[code]++
					var eb *broker.ErrorBody
					r.unsettled = r.unsettled || !errors.As(err, &eb)
				case reply.Decision != nil && reply.Decision.Recorded:
					r.lat = append(r.lat, d)
					r.acked = append(r.acked, runs[i]+" "+reply.Effect+"\n")
				default:
					r.errors["NOT_RECORDED"]++
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// A run with a request the broker may still be deciding stays open:
	// closed now, that request's decision could be recorded after the
	// close, which verify reports.
	var closing []string
	open := 0
	for i, r := range results {
		if r.unsettled {
			open++
			continue
		}
		closing = append(closing, runs[i])
	}
	closeBenchRuns(app, closing, c.cf.timeout, env)
	if open > 0 {
		fmt.Fprintf(env.stderr, "bench: %d of its %d runs left open: a request of each ended without the broker's answer (it may still be recorded); close them with gatehouse work close RUN\n", open, len(runs))
	}
	f := benchFigures{Seconds: elapsed.Seconds(), Errors: map[string]int{}}
	var lat []time.Duration
	var acked []string
	for _, r := range results {
		lat = append(lat, r.lat...)
		acked = append(acked, r.acked...)
		for k, v := range r.errors {
			f.Errors[k] += v
			f.Requests += v
		}
	}
	f.Requests += len(lat)
	f.Acked = len(lat)
	fillLatency(&f, lat, elapsed)
	if len(f.Errors) == 0 {
		f.Errors = nil
	}
	return f, acked, nil
}

func benchEffect(ctx context.Context, a *client.Client, sink, run string, n int) (*broker.EffectReply, error) {
	if sink == "memory" {
		params, _ := json.Marshal(map[string]any{"key": fmt.Sprintf("bench-%d", n%64), "value": map[string]int{"n": n}})
		return a.Effect(ctx, policy.SinkMemory, broker.EffectRequest{Run: run, Action: "put", Params: params})
	}
	return a.Output(ctx, run, "ok", map[string]int{"n": n, "rows": 3})
}

// benchErrCode is the broker's stable code, or a name for what went wrong
// on the way (no reply in time, no broker answering).
func benchErrCode(err error) string {
	var eb *broker.ErrorBody
	switch {
	case errors.As(err, &eb):
		return string(eb.Code)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return "TIMEOUT"
	case errors.Is(err, client.ErrNoBroker):
		return "NO_BROKER"
	}
	return "NATS"
}

// benchBare measures a bare request/reply of about an effect's size: one
// responder on the observer connection, one requester connection per agent.
func benchBare(ctx context.Context, c *benchConfig, url, creds string, obs *nats.Conn) (benchFigures, error) {
	subj := "gatehouse.bench.echo." + nats.NewInbox()[len(nats.InboxPrefix):]
	reply := []byte(`{"run":"r_01m8n75ye327hsa7apgb8fqfxn","effect":"e_01m8n75yeky7b4540ms2e794md","decision":{"outcome":"allowed","mode":"report","recorded":true}}`)
	sub, err := obs.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond(reply) })
	if err != nil {
		return benchFigures{}, fmt.Errorf("bare responder: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := obs.Flush(); err != nil {
		return benchFigures{}, err
	}
	req := []byte(`{"run":"r_01m8n75ye327hsa7apgb8fqfxn","action":"deliver","params":{"status":"ok","result":{"n":1,"rows":3}}}`)
	conns := make([]*nats.Conn, c.agents)
	for i := range conns {
		nc, err := connectNATS(url, creds, "gatehouse-bench-bare")
		if err != nil {
			return benchFigures{}, err
		}
		defer nc.Close()
		conns[i] = nc
	}
	lats := make([][]time.Duration, c.agents)
	errs := make([]int, c.agents)
	stop := time.Now().Add(c.duration)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			for n := 0; ; n++ {
				if c.requests > 0 && n >= c.requests || c.requests == 0 && time.Now().After(stop) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if _, err := conns[i].Request(subj, req, c.cf.timeout); err != nil {
					errs[i]++
					continue
				}
				lats[i] = append(lats[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	f := benchFigures{Seconds: elapsed.Seconds()}
	var lat []time.Duration
	for i := range lats {
		lat = append(lat, lats[i]...)
		if errs[i] > 0 {
			if f.Errors == nil {
				f.Errors = map[string]int{}
			}
			f.Errors["NATS"] += errs[i]
		}
	}
	f.Requests = len(lat) + f.Errors["NATS"]
	f.Acked = len(lat)
	fillLatency(&f, lat, elapsed)
	return f, nil
}

func fillLatency(f *benchFigures, lat []time.Duration, elapsed time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	f.P50us, f.P99us = q(0.50), q(0.99)
	f.PerSecond = float64(len(lat)) / elapsed.Seconds()
}

// lagSampler reads the journal lag every 100 ms while the load runs. Its
// goroutine is stopped by stop.
type lagSampler struct {
	js   jetstream.JetStream
	max  uint64
	done chan struct{}
	wg   sync.WaitGroup
}

func startLagSampler(js jetstream.JetStream) *lagSampler {
	s := &lagSampler{js: js, done: make(chan struct{})}
	s.wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if l, err := broker.ReadJournalLag(ctx, js); err == nil && l.Lag > s.max {
				s.max = l.Lag
			}
			cancel()
		}
	})
	return s
}

// stop ends sampling and waits (up to 30 s) for the writer to catch up.
func (s *lagSampler) stop(ctx context.Context) *benchLag {
	close(s.done)
	s.wg.Wait()
	r := &benchLag{Max: s.max, DrainSeconds: -1}
	t0 := time.Now()
	for first := true; time.Since(t0) < 30*time.Second && ctx.Err() == nil; first = false {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		l, err := broker.ReadJournalLag(qctx, s.js)
		cancel()
		if err != nil {
			return nil // no permission or no JetStream: no lag figures
		}
		if first {
			r.Final = l.Lag
		}
		if l.Lag == 0 {
			r.DrainSeconds = time.Since(t0).Seconds()
			return r
		}
		if l.Lag > r.Max {
			r.Max = l.Lag
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// closeBenchRuns closes the runs bench opened, so they do not stay open in
// the journal (verify would note each as still being written). It runs
// after an interrupt too, on its own deadline.
func closeBenchRuns(app *client.Client, runs []string, timeout time.Duration, env *cliEnv) {
	failed := 0
	for _, r := range runs {
		if r == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		if err := app.CloseWork(ctx, r, "bench done"); err != nil {
			failed++
		}
		cancel()
	}
	if failed > 0 {
		fmt.Fprintf(env.stderr, "bench: %d of its %d runs could not be closed; they stay open in the journal\n", failed, len(runs))
	}
}
