package web

import (
	"net/http"
	"net/http/pprof"
)

// PprofHandler serves Go's runtime profiles under /debug/pprof/ (the index,
// cmdline, profile, symbol, trace and every named profile: heap, goroutine,
// allocs, block, mutex, threadcreate), for `go tool pprof URL`. It has no
// sign-in of its own: mount it only on an operator's listener (serve and
// writer --pprof ADDR), never on the dashboard's address, because a CPU
// profile or trace costs the process CPU for as long as it is asked to run
// and the profiles name the code paths, goroutines and memory of the
// process. Its routes live on a mux of their own, never on
// http.DefaultServeMux.
func PprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // named profiles too: /debug/pprof/heap
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
