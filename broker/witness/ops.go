package witness

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Refusal reasons, the values of gatehouse_witness_refused_total's
// reason label: one per sentinel error of AddCheckpoint.
const (
	ReasonFork         = "fork"
	ReasonRollback     = "rollback"
	ReasonBadProof     = "bad_proof"
	ReasonBadSignature = "bad_signature"
	ReasonUnknownLog   = "unknown_log"
	ReasonMalformed    = "malformed"
	ReasonError        = "error" // the witness's own failure (its state)
)

// reasonOf names the refusal err is, for the metrics.
func reasonOf(err error) string {
	switch {
	case errors.Is(err, ErrFork):
		return ReasonFork
	case errors.Is(err, ErrRollback):
		return ReasonRollback
	case errors.Is(err, ErrBadProof):
		return ReasonBadProof
	case errors.Is(err, ErrBadLogSignature):
		return ReasonBadSignature
	case errors.Is(err, ErrUnknownLog):
		return ReasonUnknownLog
	case errors.Is(err, ErrMalformed):
		return ReasonMalformed
	}
	return ReasonError
}

// metrics are the witness's Prometheus collectors. A nil *metrics counts
// nothing.
type metrics struct {
	cosigned  *prometheus.CounterVec
	refused   *prometheus.CounterVec
	conflicts prometheus.Counter
}

func (m *metrics) observe(origin string, err error) {
	if m == nil {
		return
	}
	var conflict *ConflictError
	switch {
	case err == nil:
		m.cosigned.WithLabelValues(origin).Inc()
	case errors.As(err, &conflict):
		m.conflicts.Inc()
	default:
		m.refused.WithLabelValues(reasonOf(err)).Inc()
	}
}

// sizeCollector reports, per log, the size of the latest checkpoint
// cosigned, read from the witness's state at each scrape.
type sizeCollector struct {
	w    *Witness
	desc *prometheus.Desc
}

func (c *sizeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sizeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, origin := range c.w.origins() {
		c.w.mu.Lock()
		_, cp, err := c.w.latest(origin)
		c.w.mu.Unlock()
		if err != nil || cp == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(cp.Size), origin)
	}
}

// origins lists the logs the witness knows, sorted. w.logs is fixed by New.
func (w *Witness) origins() []string {
	out := make([]string, 0, len(w.logs))
	for o := range w.logs {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

// Ready is nil when the witness can do its work: its state folder is
// there and the latest checkpoint of every log it knows can be read and
// opened under the log's key.
func (w *Witness) Ready() error {
	if fi, err := os.Stat(filepath.Join(w.dir, "logs")); err != nil || !fi.IsDir() {
		return fmt.Errorf("witness: state folder: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for o := range w.logs {
		if _, _, err := w.latest(o); err != nil {
			return err
		}
	}
	return nil
}

// OpsHandler is Handler plus the operator's endpoints: /healthz (the
// process is alive), /readyz (Ready) and /metrics (reg, with the
// witness's collectors registered on it):
//
//	gatehouse_witness_cosigned_total{origin}   checkpoints cosigned
//	gatehouse_witness_refused_total{reason}    checkpoints refused: fork,
//	        rollback, bad_proof, bad_signature, unknown_log, malformed, error
//	gatehouse_witness_size_conflicts_total     submissions from a size the
//	        witness does not hold (the client resubmits; not a refusal)
//	gatehouse_witness_checkpoint_size{origin}  size of the latest cosigned
//
// Refusals carry no origin label: an unknown log's name is the sender's
// to choose. Call it once per Witness and registry.
func (w *Witness) OpsHandler(reg *prometheus.Registry) http.Handler {
	m := &metrics{
		cosigned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_witness_cosigned_total",
			Help: "Checkpoints this witness cosigned, by log origin.",
		}, []string{"origin"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_witness_refused_total",
			Help: "Checkpoints this witness refused, by reason (fork, rollback, bad_proof, bad_signature, unknown_log, malformed, error).",
		}, []string{"reason"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_witness_size_conflicts_total",
			Help: "Submissions from an old size the witness does not hold; the client resubmits from the size it names.",
		}),
	}
	for _, o := range w.origins() {
		m.cosigned.WithLabelValues(o) // 0 before the first
	}
	for _, r := range []string{ReasonFork, ReasonRollback, ReasonBadProof, ReasonBadSignature, ReasonUnknownLog, ReasonMalformed, ReasonError} {
		m.refused.WithLabelValues(r)
	}
	reg.MustRegister(m.cosigned, m.refused, m.conflicts, &sizeCollector{w: w, desc: prometheus.NewDesc(
		"gatehouse_witness_checkpoint_size", "Size of the latest checkpoint this witness cosigned, by log origin.", []string{"origin"}, nil)})
	mux := http.NewServeMux()
	mux.Handle("/", w.handler(m))
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprintln(rw, "ok") })
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		if err := w.Ready(); err != nil {
			http.Error(rw, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}
