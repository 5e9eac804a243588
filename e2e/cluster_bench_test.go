package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gatehouse/gatehouse/e2e/cluster"
)

// BenchmarkScaledOut drives effects with `gatehouse bench` (a separate
// process, 16 agents with a connection each, strict mode, journal on) and,
// in the same run on the same NATS, a bare request/reply of the same size,
// against:
//
//   - embedded:          `gatehouse serve` alone (embedded NATS, broker and
//     writer in one process)
//   - cluster3/1broker:  three nats-server nodes, JetStream R3, one
//     `gatehouse serve --no-writer`, one `gatehouse writer`
//   - cluster3/2brokers: the same with two brokers in the queue group
//
// b.N is the number of effects (spread over the agents); ns/op is wall
// time per decided effect. The figures bench measured itself are reported
// as extra metrics: decisions/s, p50/p99 in µs, the journal lag's maximum
// during the run, and the bare request/reply's rate and p50/p99.
//
//	go test -run '^$' -bench ScaledOut -benchtime 20000x ./e2e/
func BenchmarkScaledOut(b *testing.B) {
	const agents = 16
	for _, sc := range []struct {
		name    string
		cluster bool
		brokers int
	}{{"embedded", false, 1}, {"cluster3/1broker", true, 1}, {"cluster3/2brokers", true, 2}} {
		b.Run(sc.name, func(b *testing.B) {
			var target []string
			if sc.cluster {
				d := &deployment{nats: cluster.StartNATS(b, 3), dir: b.TempDir()}
				d.jdir = filepath.Join(d.dir, "journal")
				d.startWriter(b)
				for i := range sc.brokers {
					d.startBroker(b, "broker"+strconv.Itoa(i+1))
				}
				target = append([]string{"--nats-url", d.nats.URL()}, d.benchCreds()...)
			} else {
				s := serve(b, filepath.Join(b.TempDir(), "gh"), "--mode", "strict", "--sandbox-tiers", "unconfined")
				target = []string{"--data-dir", s.dataDir}
			}
			per := max(1, b.N/agents)
			args := append([]string{"bench", "--agents", strconv.Itoa(agents), "--requests", strconv.Itoa(per), "--bare", "--json"}, target...)
			cmd := exec.Command(bin, args...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			cmd.Env = cleanEnv()
			b.ResetTimer()
			err := cmd.Run()
			b.StopTimer()
			if err != nil {
				b.Fatalf("bench: %v\n%s\n%s", err, out.String(), errb.String())
			}
			var r struct {
				Gatehouse struct {
					PerSecond float64 `json:"per_second"`
					P50us     float64 `json:"p50_us"`
					P99us     float64 `json:"p99_us"`
				} `json:"gatehouse"`
				Bare *struct {
					PerSecond float64 `json:"per_second"`
					P50us     float64 `json:"p50_us"`
					P99us     float64 `json:"p99_us"`
				} `json:"bare"`
				JournalLag *struct {
					Max   uint64  `json:"max"`
					Drain float64 `json:"drain_seconds"`
				} `json:"journal_lag"`
			}
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				b.Fatalf("bench --json: %v\n%s", err, out.String())
			}
			b.ReportMetric(r.Gatehouse.PerSecond, "decisions/s")
			b.ReportMetric(r.Gatehouse.P50us, "p50-µs")
			b.ReportMetric(r.Gatehouse.P99us, "p99-µs")
			if r.JournalLag != nil {
				b.ReportMetric(float64(r.JournalLag.Max), "lag-max")
				b.ReportMetric(r.JournalLag.Drain, "drain-s")
			}
			if r.Bare != nil {
				b.ReportMetric(r.Bare.PerSecond, "bare-req/s")
				b.ReportMetric(r.Bare.P50us, "bare-p50-µs")
				b.ReportMetric(r.Bare.P99us, "bare-p99-µs")
			}
		})
	}
}
