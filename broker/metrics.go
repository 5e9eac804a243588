package broker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// Metrics are the broker's Prometheus collectors. A nil *Metrics records
// nothing, so tests and benchmarks need not register any.
type Metrics struct {
	decisions *prometheus.CounterVec
	effects   *prometheus.HistogramVec
	record    *prometheus.HistogramVec
	recordErr *prometheus.CounterVec
}

// NewMetrics creates the broker's collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_decisions_total",
			Help: "Effects decided, by sink, outcome (allowed, refused, held), rule and whether the refusal was enforced.",
		}, []string{"sink", "outcome", "rule", "enforced"}),
		effects: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gatehouse_effect_seconds",
			Help:    "Time from an effect request to its reply, including recording and the effect itself.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"sink"}),
		record: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gatehouse_journal_ack_seconds",
			Help:    "Time for the journal stream to acknowledge one event.",
			Buckets: prometheus.ExponentialBuckets(20e-6, 2, 16),
		}, []string{"type"}),
		recordErr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_journal_errors_total",
			Help: "Journal events that could not be recorded, by type.",
		}, []string{"type"}),
	}
	reg.MustRegister(m.decisions, m.effects, m.record, m.recordErr)
	return m
}

func (m *Metrics) observeDecision(s policy.Sink, d *DecisionBody) {
	if m == nil {
		return
	}
	enforced := "false"
	if d.Enforced {
		enforced = "true"
	}
	m.decisions.WithLabelValues(string(s), string(d.Outcome), d.Rule, enforced).Inc()
}

func (m *Metrics) observeEffect(s policy.Sink, _ *EffectReply, d time.Duration) {
	if m == nil {
		return
	}
	m.effects.WithLabelValues(string(s)).Observe(d.Seconds())
}

func (m *Metrics) observeRecord(t journal.Type, err error, d time.Duration) {
	if m == nil {
		return
	}
	if err != nil {
		m.recordErr.WithLabelValues(string(t)).Inc()
		return
	}
	m.record.WithLabelValues(string(t)).Observe(d.Seconds())
}
