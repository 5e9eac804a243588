package web

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/dashboard"
)

func TestRoutes(t *testing.T) {
	ready := errors.New("NATS connection is RECONNECTING")
	e := New(Config{
		Status:  func() dashboard.Status { return dashboard.Status{Mode: "strict", Started: time.Now(), Now: time.Now()} },
		Ready:   func() error { return ready },
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("m 1\n")) }),
		Hosts:   []string{"example.com"},
	})
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/", 200, `data-testid="mode">strict<`},
		{"/healthz", 200, "ok"},
		{"/readyz", 503, "RECONNECTING"},
		{"/metrics", 200, "m 1"},
		{"/api/status", 200, `"Mode":"strict"`},
		{"/static/gatehouse-2.css", 200, "body"},
		{"/static/gatehouse-2.js", 200, "EventSource"},
		{"/static/", 404, ""},
		{"/nope", 404, ""},
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("GET %s: %d %q, want %d containing %q", tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
		if got := rec.Header().Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("GET %s: X-Frame-Options %q", tc.path, got)
		}
		if got := rec.Header().Get("Content-Security-Policy"); !strings.Contains(got, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", tc.path, got)
		}
	}
}
