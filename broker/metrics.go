package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// Metrics are the broker's Prometheus collectors. A nil *Metrics records
// nothing, so tests and benchmarks need not register any.
type Metrics struct {
	decisions *prometheus.CounterVec
	effects   *prometheus.HistogramVec
	record    *prometheus.HistogramVec
	recordErr *prometheus.CounterVec
	approvals prometheus.Gauge
	// replies counts requests dropped because their reply subject was
	// outside the requester's inbox (Service).
	replies *prometheus.CounterVec
	// limits count what the per-agent bounds refused (limits_metrics.go).
	limits limitMetrics
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
	m.replies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: RepliesRefusedMetric,
		Help: "Requests dropped unanswered and undecided because their reply subject was not inside the requester's own inbox, by requester class (agent, app).",
	}, []string{"class"})
	m.approvals = newApprovalsGauge()
	// Series an operator alerts on exist from the start, at 0, so a rate()
	// or an absent() alert works before the first error, not only after.
	for _, t := range []journal.Type{journal.TypeRunOpen, journal.TypeRunClose, journal.TypeDecision, journal.TypeAttempt, journal.TypeOutcome} {
		m.recordErr.WithLabelValues(string(t))
	}
	for _, c := range []subject.Class{subject.ClassAgent, subject.ClassApp} {
		m.replies.WithLabelValues(string(c))
	}
	reg.MustRegister(m.decisions, m.effects, m.record, m.recordErr, m.approvals, m.replies)
	m.limits = newLimitMetrics(reg)
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

// RepliesRefusedMetric counts requests whose reply subject was outside
// the requester's inbox.
const RepliesRefusedMetric = "gatehouse_replies_refused_total"

func (m *Metrics) observeReplyRefused(c subject.Class) {
	if m == nil {
		return
	}
	if c != subject.ClassAgent && c != subject.ClassApp {
		c = "unknown"
	}
	m.replies.WithLabelValues(string(c)).Inc()
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

// ApprovalsPendingMetric is the gauge of effects held for a person's
// approval and not yet decided; the approvals engine sets it with
// SetApprovalsPending.
const ApprovalsPendingMetric = "gatehouse_approvals_pending"

// SetApprovalsPending sets gatehouse_approvals_pending. Safe on a nil
// *Metrics and for concurrent use.
func (m *Metrics) SetApprovalsPending(n int) {
	if m == nil || m.approvals == nil {
		return
	}
	m.approvals.Set(float64(n))
}

// newApprovalsGauge makes the gatehouse_approvals_pending gauge.
func newApprovalsGauge() prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Name: ApprovalsPendingMetric,
		Help: "Effects held for a person's approval and not yet approved or refused.",
	})
}

// JournalLag is how far the journal writer is behind the brokers, read
// from JetStream: LastSeq is the journal stream's last sequence, AckFloor
// the writer consumer's ack floor (every event at or below it is durable in
// the journal files), Lag their difference, Pending what the consumer has
// not delivered plus what it delivered and has not had acknowledged.
type JournalLag struct {
	LastSeq  uint64 `json:"last_seq"`
	AckFloor uint64 `json:"ack_floor"`
	Lag      uint64 `json:"lag"`
	Pending  uint64 `json:"pending"`
}

// ReadJournalLag asks JetStream for the journal stream and the writer's
// consumer. Before any writer ever ran there is no consumer: the ack floor
// is then 0 and the lag the whole stream, with the error nil.
func ReadJournalLag(ctx context.Context, js jetstream.JetStream) (JournalLag, error) {
	var l JournalLag
	s, err := js.Stream(ctx, subject.JournalStream)
	if err != nil {
		return l, fmt.Errorf("%w: journal stream: %v", ErrJournal, err)
	}
	si, err := s.Info(ctx)
	if err != nil {
		return l, fmt.Errorf("%w: journal stream: %v", ErrJournal, err)
	}
	l.LastSeq = si.State.LastSeq
	ci, err := s.Consumer(ctx, subject.JournalConsumer)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		l.Lag, l.Pending = l.LastSeq, si.State.Msgs
		return l, nil
	case err != nil:
		return l, fmt.Errorf("%w: journal consumer: %v", ErrJournal, err)
	}
	info, err := ci.Info(ctx)
	if err != nil {
		return l, fmt.Errorf("%w: journal consumer: %v", ErrJournal, err)
	}
	// A writer that restarted re-creates its consumer to start right after
	// the old ack floor (journal.Consume); until it acks something new, the
	// new consumer's own ack floor is 0, but everything before its start is
	// durable.
	l.AckFloor = info.AckFloor.Stream
	if info.Config.DeliverPolicy == jetstream.DeliverByStartSequencePolicy && info.Config.OptStartSeq > 0 {
		l.AckFloor = max(l.AckFloor, info.Config.OptStartSeq-1)
	}
	if l.LastSeq > l.AckFloor {
		l.Lag = l.LastSeq - l.AckFloor
	}
	l.Pending = info.NumPending + uint64(info.NumAckPending)
	return l, nil
}

// RegisterJournalLag registers gatehouse_journal_lag, read from JetStream
// at each scrape (within a second; -1 when JetStream cannot be asked).
func RegisterJournalLag(reg prometheus.Registerer, js jetstream.JetStream) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gatehouse_journal_lag",
		Help: "Journal stream last sequence minus the journal writer's ack floor: events recorded by brokers and not yet durable in the journal files (-1: JetStream did not answer).",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l, err := ReadJournalLag(ctx, js)
		if err != nil {
			return -1
		}
		return float64(l.Lag)
	}))
}
