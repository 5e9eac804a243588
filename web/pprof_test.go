package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/web"
)

// The handler serves the index and a named profile, and nothing outside
// /debug/pprof/.
func TestPprofHandlerServesProfiles(t *testing.T) {
	srv := httptest.NewServer(web.PprofHandler())
	defer srv.Close()
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/debug/pprof/", 200, "goroutine"},
		{"/debug/pprof/goroutine?debug=1", 200, "goroutine profile:"},
		{"/debug/pprof/cmdline", 200, ""},
		{"/", 404, ""},
		{"/metrics", 404, ""},
	} {
		resp, err := http.Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %.80q, want %d with %q", c.path, resp.StatusCode, body, c.code, c.want)
		}
	}
}

// The dashboard's own server never serves the profiles.
func TestDashboardHasNoPprof(t *testing.T) {
	e := web.New(web.Config{Status: nil})
	for _, host := range []string{"example.com", "127.0.0.1:8080"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil)
		req.Host = host
		e.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK || strings.Contains(rec.Body.String(), "goroutine") {
			t.Fatalf("/debug/pprof/ on the dashboard (host %s): %d %.80s", host, rec.Code, rec.Body.String())
		}
	}
}
