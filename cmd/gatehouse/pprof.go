package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gatehouse/gatehouse/web"
)

// pprofUsage is the --pprof flag's help, shared by serve and writer.
const pprofUsage = "serve Go's /debug/pprof/ profiles on this operator-only address (empty: off; never expose it)"

// startPprof serves web.PprofHandler on addr, a listener of its own (never
// the dashboard's), and returns the function that stops it. An empty addr
// serves nothing.
func startPprof(addr string, log *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof %s: %w", addr, err)
	}
	// No write timeout: a CPU profile or trace streams for ?seconds=N.
	srv := &http.Server{Handler: web.PprofHandler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Error("pprof listener stopped", "err", err)
		}
	}()
	log.Warn("Go profiles served for operators: keep this address private", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
