package sandbox_test

import (
	"context"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/sandbox"
)

// BenchmarkStart measures the start overhead of each tier on /usr/bin/true and `python3 -c pass` against a
// plain exec of the same program in the same run, reporting the median as ms/median.
func BenchmarkStart(b *testing.B) {
	programs := []struct {
		name string
		argv []string
	}{
		{"true", []string{"/usr/bin/true"}},
		{"python", []string{"/usr/bin/python3", "-c", "pass"}},
	}
	median := func(b *testing.B, once func() error) {
		b.Helper()
		var ds []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if err := once(); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		b.ReportMetric(float64(ds[len(ds)/2])/float64(time.Millisecond), "ms/median")
	}
	b.Run("plain", func(b *testing.B) {
		for _, p := range programs {
			b.Run(p.name, func(b *testing.B) {
				median(b, func() error { return exec.Command(p.argv[0], p.argv[1:]...).Run() })
			})
		}
	})
	b.Run("host", func(b *testing.B) { // RunHost: a leased uid, its own pid namespace and /proc
		sb, rep := sandbox.Detect(context.Background(), testConfig(sandbox.TierUnconfined))
		if !rep.Host.SeparateUID {
			b.Skipf("host commands cannot switch uids here: %s", rep.Host.Err)
		}
		for _, p := range programs {
			b.Run(p.name, func(b *testing.B) {
				median(b, func() error {
					res, err := sb.RunHost(context.Background(), sandbox.Spec{Argv: p.argv})
					if err == nil && res.ExitCode != 0 {
						b.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
					}
					return err
				})
			})
		}
	})
	for _, tier := range append(confinedTiers, sandbox.TierUnconfined) {
		b.Run(string(tier), func(b *testing.B) {
			sb, rep := sandbox.Detect(context.Background(), testConfig(tier))
			if tr := rep.Tier(tier); tr == nil || tr.Err != "" || sb.Tier() != tier {
				b.Skipf("tier %s cannot start here: %+v", tier, tr)
			}
			for _, p := range programs {
				b.Run(p.name, func(b *testing.B) {
					median(b, func() error {
						res, err := sb.Run(context.Background(), sandbox.Spec{Argv: p.argv})
						if err == nil && res.ExitCode != 0 {
							b.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
						}
						return err
					})
				})
			}
		})
	}
}
