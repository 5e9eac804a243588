package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/sinks/provider"
)

// A server that pages its tool list on forever (empty pages, a cursor that
// never ends) is asked for at most maxListPages pages, and its listing is
// refused, not followed until the call times out.
func TestRelistRefusesEndlessPages(t *testing.T) {
	var lists atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&msg) != nil {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var result string
		switch msg.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"pager","version":"1"}}`
		case "tools/list":
			n := lists.Add(1)
			result = fmt.Sprintf(`{"tools":[],"nextCursor":"c%d"}`, n)
		default:
			if len(msg.ID) == 0 { // a notification
				w.WriteHeader(http.StatusAccepted)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, msg.ID)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
	}))
	defer up.Close()
	k := &Sink{http: http.DefaultTransport, now: time.Now}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := k.connect(ctx, &Server{Name: "pager", URL: up.URL, Auth: Auth{Type: AuthNone}}, provider.Credential{})
	if err == nil {
		s.stop()
		t.Fatal("an endless listing was accepted")
	}
	if !errors.Is(err, ErrToolList) || ctx.Err() != nil {
		t.Fatalf("connect: %v (ctx %v)", err, ctx.Err())
	}
	if n := lists.Load(); n != maxListPages {
		t.Fatalf("%d pages asked for, want %d", n, maxListPages)
	}
}

// A server's list-changed notifications, however many, run one relisting
// at a time: those that come while one runs make exactly one more after
// it, so no change is missed and none is paid for twice.
func TestRelistOneAtATime(t *testing.T) {
	r := &relister{}
	var running, most, runs atomic.Int64
	entered, release := make(chan struct{}), make(chan struct{})
	run := func() {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if runs.Add(1) == 1 {
			close(entered)
			<-release // the first relisting is slow; notifications pile up
		}
		running.Add(-1)
	}
	first := make(chan struct{})
	go func() { defer close(first); r.changed(run) }()
	<-entered
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { r.changed(run) }) // each returns at once: one is under way
	}
	wg.Wait()
	close(release)
	<-first
	if n, m := runs.Load(), most.Load(); n != 2 || m != 1 {
		t.Fatalf("51 notifications ran %d relistings, at most %d at once; want 2, one at a time", n, m)
	}
	r.changed(run) // later, on its own: runs at once
	if n := runs.Load(); n != 3 {
		t.Fatalf("a later notification ran %d relistings in all, want 3", n)
	}
}
