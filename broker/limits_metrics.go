package broker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse/gatehouse/policy"
)

// WaitsRefusedMetric counts waiting requests (tools.wait) refused because
// their agent identity already had as many waiting as it may.
const WaitsRefusedMetric = "gatehouse_waits_refused_total"

// RefusalsSuppressedMetric counts caller refusals not written to a run's
// journal because the same identity repeated the same refusal in that run
// past its budget (refusalflood.go); each burst is summarised by one
// record carrying the count.
const RefusalsSuppressedMetric = "gatehouse_refusals_suppressed_total"

type limitMetrics struct {
	waits      *prometheus.CounterVec
	suppressed *prometheus.CounterVec
}

func newLimitMetrics(reg prometheus.Registerer) limitMetrics {
	l := limitMetrics{
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: WaitsRefusedMetric,
			Help: "Waiting requests refused (TOO_MANY_WAITS) because the agent identity already had its bound of them waiting on this broker, by operation.",
		}, []string{"op"}),
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RefusalsSuppressedMetric,
			Help: "Repeated identical caller refusals answered but not recorded one by one in the run's journal (a summary record carries their count), by refusal.",
		}, []string{"refusal"}),
	}
	reg.MustRegister(l.waits, l.suppressed)
	return l
}

func (m *Metrics) observeWaitRefused(op string) {
	if m == nil || m.limits.waits == nil {
		return
	}
	m.limits.waits.WithLabelValues(op).Inc()
}

func (m *Metrics) observeRefusalsSuppressed(r policy.Refusal, n int) {
	if m == nil || m.limits.suppressed == nil || n <= 0 {
		return
	}
	m.limits.suppressed.WithLabelValues(string(r)).Add(float64(n))
}
