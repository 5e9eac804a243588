package contract_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/sinks/code/contract"
)

// BenchmarkRead measures the reader's own work (reading the parser's
// tree and the analysis, no parser run) over every corpus program; it
// reports the p50 and p99 of one reading and the tree's median size.
func BenchmarkRead(b *testing.B) {
	_, srcs := corpus(b)
	trees := make([][]byte, len(srcs))
	sizes := make([]int, len(srcs))
	for i, s := range srcs {
		trees[i] = batchTrees[s]
		sizes[i] = len(trees[i])
	}
	var times []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, tree := range trees {
			t0 := time.Now()
			contract.ReadJSON(tree, corpusOptions(srcs[j]))
			times = append(times, time.Since(t0))
		}
	}
	b.StopTimer()
	slices.Sort(times)
	slices.Sort(sizes)
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "read-p50-us")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "read-p99-us")
	b.ReportMetric(float64(sizes[len(sizes)/2]), "tree-p50-bytes")
}
