package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/web"
)

// healthServer serves /healthz (the process is alive), /readyz (ready
// reports nil: it can do its work) and /metrics (Prometheus, from reg) for
// processes without the web status page, such as `gatehouse writer`. It
// listens at once (listenHealth), before the process has connected to
// anything, and answers /healthz from then on; /readyz and every other
// path answer 503 "starting" until install gives them their handlers. It
// owns its serving goroutine; Shutdown stops it.
type healthServer struct {
	srv     *http.Server
	ln      net.Listener
	handler atomic.Pointer[http.Handler] // nil: still starting
}

// listenHealth listens on addr and starts serving: alive, not yet ready.
func listenHealth(addr string, log *slog.Logger) (*healthServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %s: %w", addr, err)
	}
	h := &healthServer{ln: ln}
	h.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if next := h.handler.Load(); next != nil {
			(*next).ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
			fmt.Fprintln(w, "ok")
			return
		}
		http.Error(w, "starting: not ready yet", http.StatusServiceUnavailable)
	})}
	go func() {
		if err := h.srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Error("health listener stopped", "err", err)
		}
	}()
	return h, nil
}

// install gives the server its handlers. extra, when set, serves every
// other path (the writer's checkpoint endpoints).
func (h *healthServer) install(ready func() error, reg *prometheus.Registry, extra http.Handler) {
	mux := http.NewServeMux()
	if extra != nil {
		mux.Handle("/", extra)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	var hh http.Handler = mux
	h.handler.Store(&hh)
}

// URL is the listener's base URL.
func (h *healthServer) URL() string { return "http://" + h.ln.Addr().String() }

func (h *healthServer) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
}

// installWriterHealth serves the writer's health, readiness (connected to
// NATS, the journal writable), metrics (registerWriterMetrics and the Go
// runtime's) and the checkpoint endpoints of
// web.Integrity: /checkpoint (GET; POST signs one now and has the
// witnesses cosign it), /checkpoint/key, /checkpoint/proof and
// /.well-known/did.json, which without a signing key answer 404 saying
// so.
func installWriterHealth(h *healthServer, nc *nats.Conn, js jetstream.JetStream, w *writerLoop, in *web.Integrity) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerWriterMetrics(reg, js, w)
	broker.RegisterJournalLag(reg, js)
	ready := func() error {
		if nc.Status() != nats.CONNECTED {
			return fmt.Errorf("NATS connection is %s", nc.Status())
		}
		return w.Ready()
	}
	// Without a signing key the checkpoint endpoints say why there are
	// none (web.NoCheckpoints) rather than a bare 404.
	h.install(ready, reg, web.IntegrityHandler(in))
}

// registerWriterMetrics registers what a journal writer (standalone or in
// serve) says about itself: events written by every incarnation of the
// loop, and the writer's consumer's pending events.
func registerWriterMetrics(reg prometheus.Registerer, js jetstream.JetStream, w *writerLoop) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gatehouse_journal_events_written_total",
			Help: "Journal events this process's writer made durable.",
		}, func() float64 { return float64(w.Written()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gatehouse_journal_pending",
			Help: "Journal events recorded by brokers and not yet written (the writer's lag).",
		}, func() float64 { n, _ := journalPending(context.Background(), js); return float64(n) }),
	)
}

// writerIntegrity is what the writer publishes of its keys and
// checkpoints; nil without a signing key.
func writerIntegrity(f *integrityFlags, key *journal.SigningKey, w *writerLoop, log *slog.Logger) *web.Integrity {
	in := f.web(key, log)
	if in != nil && w != nil && w.checkpoints != nil {
		in.Checkpoints = w.checkpoints
	}
	return in
}
