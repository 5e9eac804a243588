package web

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/dashboard"
)

// hostGuard refuses requests whose Host header is not an address this
// server answers to, so a page on another site whose name was made to
// resolve to this server's address (DNS rebinding) cannot read the
// dashboard, its status or its metrics with the visitor's browser. It
// accepts any IP literal (a browser that connected by IP puts it in Host,
// and a rebinding page cannot), "localhost" and its subdomains, and the
// names in allowed (Config.Hosts: the names a proxy or DNS gives the
// dashboard, serve's --http-host), with any port. Health probes and the
// public verifier endpoints (did.json, the latest checkpoint and proofs:
// the same for everyone, meant to be read from anywhere) are not checked.
type hostGuard struct {
	allowed map[string]bool
}

func newHostGuard(names []string) hostGuard {
	g := hostGuard{allowed: map[string]bool{}}
	for _, n := range names {
		if h := normalHost(n); h != "" {
			g.allowed[h] = true
		}
	}
	return g
}

// normalHost is the lower-case host of a Host header or a name, without
// the port, brackets or a trailing dot.
func normalHost(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if i := strings.Index(s, "://"); i >= 0 { // a URL was given
		s = s[i+3:]
		if j := strings.IndexAny(s, "/?#"); j >= 0 {
			s = s[:j]
		}
	}
	if h, _, err := net.SplitHostPort(s); err == nil {
		s = h
	}
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(s, "]"), "["), ".")
	return s
}

func (g hostGuard) ok(host string) bool {
	h := normalHost(host)
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil || h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	return g.allowed[h]
}

// publicPaths are answered whatever the Host (GET only).
var publicPaths = map[string]bool{"/healthz": true, "/readyz": true, "/.well-known/did.json": true,
	"/checkpoint": true, "/checkpoint/key": true, "/checkpoint/proof": true}

func (g hostGuard) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if g.ok(r.Host) || (r.Method == http.MethodGet || r.Method == http.MethodHead) && publicPaths[r.URL.Path] {
			return next(c)
		}
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		msg := fmt.Sprintf("This server does not answer to the name %q. If that is how you reach Gatehouse (through a proxy or DNS name), start serve with --http-host %s.",
			clipText(r.Host, 80), clipText(normalHost(r.Host), 80))
		return render(c, http.StatusMisdirectedRequest, dashboard.ErrorPage(dashboard.ErrorView{Code: http.StatusMisdirectedRequest,
			Title: "Unknown address", Message: msg}))
	}
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
