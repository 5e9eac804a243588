package mcpserver

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/gatehouse/gatehouse/broker"
)

// The streamable HTTP transport's guards, around the SDK's handler and its
// bearer-token check (serve --mcp-http).

// Challenge makes every 401 of next carry the challenge RFC 9110 requires
// of a 401 and RFC 6750 spells for bearer tokens: `Bearer realm="REALM"`,
// and error="invalid_token" when the request did send a bearer token (one
// that is unknown, remade or removed). The SDK's bearer check answers 401
// without it, and clients then cannot tell that a token is what is wanted.
func Challenge(realm string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := `Bearer realm="` + realm + `"`
		if f := strings.Fields(r.Header.Get("Authorization")); len(f) == 2 && strings.EqualFold(f[0], "bearer") {
			c += `, error="invalid_token", error_description="the token is unknown, remade or removed; 'gatehouse mcp token NAME' gives an agent its token"`
		}
		next.ServeHTTP(&challenger{ResponseWriter: w, challenge: c}, r)
	})
}

type challenger struct {
	http.ResponseWriter
	challenge string
}

func (c *challenger) WriteHeader(status int) {
	if status == http.StatusUnauthorized && c.Header().Get("WWW-Authenticate") == "" {
		c.Header().Set("WWW-Authenticate", c.challenge)
	}
	c.ResponseWriter.WriteHeader(status)
}

// Flush and Unwrap keep the SSE streams working through the wrapper.
func (c *challenger) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *challenger) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// CheckOrigin refuses, with 403, a request whose Origin header (which
// browsers send, and MCP clients outside a browser do not) is not the
// endpoint's own origin reached by an IP address or localhost: the
// specification requires servers to validate Origin on every request
// against DNS rebinding, where a web page's own name is made to resolve to
// the server, so a rebinding page is same-origin by name but never by
// address. A request without Origin goes on (the bearer token is what
// authenticates). Gatehouse serves no CORS, so no cross-origin page could
// use the endpoint anyway.
func CheckOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origins := r.Header.Values("Origin")
		if len(origins) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		if len(origins) != 1 || !ownOrigin(origins[0], r.Host) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": broker.ErrorBody{Code: broker.CodeNotAllowed,
				Message: "requests from web pages of another origin are refused (Origin " + clipHeader(origins[0]) + "); MCP clients send no Origin"}})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ownOrigin says whether origin is http://HOST with HOST the request's
// Host, an IP address or localhost (with its port, if any).
func ownOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" || u.User != nil || u.Path != "" || u.RawQuery != "" || !strings.EqualFold(u.Host, host) {
		return false
	}
	name := u.Hostname()
	return strings.EqualFold(name, "localhost") || net.ParseIP(name) != nil
}

func clipHeader(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
