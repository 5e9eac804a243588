package browser_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/policy"
)

// BenchmarkPageWith200Requests loads a page that makes 200 requests to its
// own site (the agent's goto, then a wait until the page says it is done):
// in strict mode every request is routed through Gatehouse, in report mode
// nothing is routed (sends are only observed). Compare the two medians in
// one run; the bar is that interception stays within 2x.
func BenchmarkPageWith200Requests(b *testing.B) {
	for _, mode := range []policy.Mode{policy.ModeReport, policy.ModeStrict} {
		b.Run(string(mode), func(b *testing.B) {
			env := start(b, mode, "")
			run := openRun(b, env)
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
