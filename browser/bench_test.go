package browser_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// BenchmarkPageWith200Requests loads a page that makes 200 requests to its
// own site (the agent's goto, then a wait until the page says it is done).
// Every mode goes through the run's loopback proxy and nothing is routed
// through Playwright: "off" decides nothing, "report" and "strict" classify
// every request (all of them plain reads here) and end the goto with the
// settle barrier; "strict-no-barrier" is strict on a second pool whose
// barrier gives up at once, so the barrier's own cost shows. Compare the
// medians in one run.
func BenchmarkPageWith200Requests(b *testing.B) {
	bare := browser.New(browser.Config{ActionTimeout: 10 * time.Second, SettleMax: time.Nanosecond})
	b.Cleanup(func() { _ = bare.Close() })
	for _, c := range []struct {
		name string
		mode policy.Mode
		pool *browser.Pool
	}{{"off", policy.ModeOff, pool}, {"report", policy.ModeReport, pool}, {"strict", policy.ModeStrict, pool},
		{"strict-no-barrier", policy.ModeStrict, bare}} {
		b.Run(c.name, func(b *testing.B) {
			var env *sinktest.Env
			if c.pool == pool {
				env = start(b, c.mode, "")
			} else {
				env = sinktest.Start(b, c.mode, "", func(testing.TB, *sinktest.Env) []broker.Sink { return []broker.Sink{c.pool} })
				c.pool.Bind(env.Broker)
			}
			run := env.Open(b, broker.OpenWork{Tenant: "acme", Person: "ada"})
			b.Cleanup(func() { c.pool.CloseRun(run) })
			do(b, env, run, "goto", map[string]any{"url": pageURL("/")}) // the context and page exist
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				do(b, env, run, "goto", map[string]any{"url": pageURL("/many.html")})
				do(b, env, run, "text", map[string]any{"selector": "#done"})
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "page-p50-ms")
		})
	}
}

// BenchmarkHTTPSPageWith200Requests is the same page over HTTPS. In report
// and strict mode the proxy terminates TLS inside the tunnel (mitm.go) and
// reaches the site itself; "blind" is the obvious alternative, Chromium's
// own TLS straight through a blind tunnel (mode off, on a second pool that
// is told to accept the test site's certificate). Compare the medians in
// one run.
func BenchmarkHTTPSPageWith200Requests(b *testing.B) {
	blind := browser.New(browser.Config{ActionTimeout: 10 * time.Second})
	blind.IgnoreCertificateErrorsForTest()
	b.Cleanup(func() { _ = blind.Close() })
	for _, mode := range []policy.Mode{policy.ModeOff, policy.ModeReport, policy.ModeStrict} {
		name := string(mode)
		if mode == policy.ModeOff {
			name = "blind"
		}
		b.Run(name, func(b *testing.B) {
			var env *sinktest.Env
			if mode == policy.ModeOff {
				env = sinktest.Start(b, mode, "", func(testing.TB, *sinktest.Env) []broker.Sink { return []broker.Sink{blind} })
				blind.Bind(env.Broker)
			} else {
				env = start(b, mode, "")
			}
			run := env.Open(b, broker.OpenWork{Tenant: "acme", Person: "ada"})
			do(b, env, run, "goto", map[string]any{"url": tlsA.URL + "/"})
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				do(b, env, run, "goto", map[string]any{"url": tlsA.URL + "/many.html"})
				do(b, env, run, "text", map[string]any{"selector": "#done"})
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			pool.CloseRun(run)
			blind.CloseRun(run)
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "page-p50-ms")
		})
	}
}

// BenchmarkSessionStart is the time from a run's first browser action to
// its page loaded: a new context, a new page and a navigation (the browser
// itself already running).
func BenchmarkSessionStart(b *testing.B) {
	env := start(b, policy.ModeStrict, "")
	warm := openRun(b, env)
	do(b, env, warm, "goto", map[string]any{"url": pageURL("/")}) // Chromium is up
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run := openRun(b, env)
		t0 := time.Now()
		do(b, env, run, "goto", map[string]any{"url": pageURL("/")})
		lat = append(lat, time.Since(t0))
		pool.CloseRun(run)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "start-p50-ms")
}

// BenchmarkClick is one click on a page that sends nothing: the barrier an
// action that touches a page ends with (SettleQuiet after the action) is
// what it costs, against a pool whose barrier gives up at once.
func BenchmarkClick(b *testing.B) {
	bare := browser.New(browser.Config{ActionTimeout: 10 * time.Second, SettleMax: time.Nanosecond})
	b.Cleanup(func() { _ = bare.Close() })
	for _, c := range []struct {
		name string
		pool *browser.Pool
	}{{"strict", pool}, {"strict-no-barrier", bare}} {
		b.Run(c.name, func(b *testing.B) {
			var env *sinktest.Env
			if c.pool == pool {
				env = start(b, policy.ModeStrict, "")
			} else {
				env = sinktest.Start(b, policy.ModeStrict, "", func(testing.TB, *sinktest.Env) []broker.Sink { return []broker.Sink{c.pool} })
				c.pool.Bind(env.Broker)
			}
			run := env.Open(b, broker.OpenWork{Tenant: "acme", Person: "ada"})
			b.Cleanup(func() { c.pool.CloseRun(run) })
			do(b, env, run, "goto", map[string]any{"url": pageURL("/form.html")})
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				do(b, env, run, "click", map[string]any{"selector": "#show"})
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "click-p50-ms")
		})
	}
}
