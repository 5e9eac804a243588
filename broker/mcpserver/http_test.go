package mcpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/gatehouse/gatehouse/broker/mcpserver"
)

// The guards around the SDK's bearer check, as serve --mcp-http chains
// them: Origin first, then the challenge on every 401.
func guarded() http.Handler {
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		if tok != "good" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "bob", Expiration: time.Now().Add(time.Hour)}, nil
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("through")) })
	return mcpserver.CheckOrigin(mcpserver.Challenge("gatehouse", auth.RequireBearerToken(verify, nil)(ok)))
}

func TestHTTPGuards(t *testing.T) {
	srv := httptest.NewServer(guarded())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	port := host[strings.LastIndex(host, ":"):]
	for _, tc := range []struct {
		name                 string
		host, origin, bearer string
		status               int
		challenge            string
	}{
		{name: "no token", status: 401, challenge: `Bearer realm="gatehouse"`},
		{name: "another scheme", bearer: "Basic Ym9iOng=", status: 401, challenge: `Bearer realm="gatehouse"`},
		{name: "a bad token", bearer: "Bearer forged", status: 401, challenge: `Bearer realm="gatehouse", error="invalid_token"`},
		{name: "a good token", bearer: "Bearer good", status: 200},
		{name: "its own origin", bearer: "Bearer good", origin: srv.URL, status: 200},
		{name: "localhost", host: "localhost" + port, origin: "http://localhost" + port, bearer: "Bearer good", status: 200},
		{name: "a rebinding page", host: "evil.example" + port, origin: "http://evil.example" + port, bearer: "Bearer good", status: 403},
		{name: "another port", origin: "http://127.0.0.1:1", bearer: "Bearer good", status: 403},
		{name: "another page", origin: "https://evil.example", bearer: "Bearer good", status: 403},
		{name: "an opaque origin", origin: "null", bearer: "Bearer good", status: 403},
		{name: "origin before the token", origin: "https://evil.example", status: 403},
	} {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("{}"))
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if tc.bearer != "" {
			req.Header.Set("Authorization", tc.bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != tc.status || !strings.HasPrefix(got, tc.challenge) || (tc.challenge == "" && got != "") ||
			(tc.challenge == `Bearer realm="gatehouse"` && got != tc.challenge) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, got, tc.status, tc.challenge)
		}
	}
}
