package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/gatehouse/gatehouse/dashboard"
	"github.com/gatehouse/gatehouse/policy"
)

//go:embed static
var static embed.FS

// Config configures the server. Status and Ready are called per request.
type Config struct {
	Addr    string                  // default 127.0.0.1:8080
	Status  func() dashboard.Status // required
	Ready   func() error            // nil: always ready
	Metrics http.Handler            // /metrics; nil: 404
	Logger  *slog.Logger

	// Users turns on the signed-in dashboard; nil serves the status page
	// alone at /, as before.
	Users *Users
	// SetupToken, when no user exists, lets /setup?token=... create the
	// first admin once. "" disables /setup.
	SetupToken string
	// Approvals is the approvals engine; nil hides the approvals pages.
	Approvals Approvals
	// JournalDir is read by policy review and evidence.
	JournalDir string
	// Exporter writes a tenant's evidence export; nil uses the built-in one.
	Exporter Exporter
	// CookieSecure says when cookies are marked Secure; "" is auto (when
	// the request came over TLS, or a proxy in front says it did).
	CookieSecure CookieSecure
	// State keeps sessions, half-done sign-ins, failure counts and the
	// TOTP replay guard; nil keeps them in this process's memory.
	State StateStore
	// Hosts are the names (besides IP literals and localhost) the
	// dashboard answers to in the Host header, e.g. the name a proxy
	// serves it under.
	Hosts []string
	// TrustedProxies are the addresses (CIDR or IP) of proxies whose
	// X-Forwarded-For names the client; without them the connection's
	// address is the client's.
	TrustedProxies []string
	// SessionTTL is how long a session lasts; 0 is 12 hours.
	SessionTTL time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Integrity serves /.well-known/did.json and the checkpoint
	// endpoints (wellknown.go); nil serves neither.
	Integrity *Integrity
	// Policy returns the policy of a digest a decision recorded (the one
	// in force, or one kept in the content store), nil when it is not at
	// hand; policy review names what the rule that held an effect asks.
	Policy func(digest string) *policy.Policy
	// ReloadPolicy re-reads the policy file (serve's SIGHUP does the
	// same); the status page offers it to operators. It returns the
	// error of a file that could not be read, after which everything is
	// refused. nil hides the button.
	ReloadPolicy func() error
}

// ipExtractor trusts X-Forwarded-For only from the given proxies.
func ipExtractor(proxies []string) echo.IPExtractor {
	if len(proxies) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range proxies {
		if !strings.Contains(p, "/") {
			if ip := net.ParseIP(p); ip != nil && ip.To4() != nil {
				p += "/32"
			} else {
				p += "/128"
			}
		}
		if _, n, err := net.ParseCIDR(p); err == nil {
			opts = append(opts, echo.TrustIPRange(n))
		}
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// ParseTrustedProxy checks one Config.TrustedProxies entry.
func ParseTrustedProxy(s string) error {
	if net.ParseIP(s) != nil {
		return nil
	}
	if _, _, err := net.ParseCIDR(s); err != nil {
		return fmt.Errorf("%w: trusted proxy %q is not an IP or CIDR", ErrBadConfig, s)
	}
	return nil
}

// Server is a running HTTP server.
type Server struct {
	e   *echo.Echo
	ln  net.Listener
	log *slog.Logger
	err chan error
}

// Start listens on cfg.Addr and serves until Shutdown.
func Start(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8080"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := New(cfg)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	s := &Server{e: e, ln: ln, log: log, err: make(chan error, 1)}
	// Requests' contexts end when Shutdown begins, so long-lived streams
	// (the approvals queue's server-sent events) let it finish.
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return base }}
	srv.RegisterOnShutdown(cancel)
	e.Server = srv
	go func() { s.err <- srv.Serve(ln) }()
	return s, nil
}

// New returns the echo instance with every route, for tests that serve it
// themselves.
func New(cfg Config) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// The client's address is the connection's: X-Forwarded-For and
	// X-Real-IP are not trusted unless the connection comes from one of
	// Config.TrustedProxies, so a client cannot change its address per
	// request to slip past the sign-in throttle.
	e.IPExtractor = ipExtractor(cfg.TrustedProxies)
	var a *app
	if cfg.Users != nil {
		a = newApp(cfg)
	}
	e.HTTPErrorHandler = errorHandler(a, cfg.Logger)
	e.Use(middleware.Recover())
	e.Use(middleware.SecureWithConfig(middleware.SecureConfig{
		XSSProtection: "0", ContentTypeNosniff: "nosniff", XFrameOptions: "DENY",
		ReferrerPolicy:        "no-referrer",
		ContentSecurityPolicy: csp,
	}))
	e.Use(newHostGuard(cfg.Hosts).middleware)
	e.Use(middleware.BodyLimit(MaxBody))
	sub, _ := fs.Sub(static, "static")
	e.Group("/static", cacheStatic).StaticFS("/", sub)

	var guard integrityGuard // no users: anyone may have a checkpoint signed, as before
	if a != nil {
		a.routes(e)
		guard.authorize = a.maySign
	} else {
		e.GET("/", func(c echo.Context) error {
			st := cfg.Status()
			return render(c, http.StatusOK, dashboard.StatusPage(st))
		})
	}
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", func(c echo.Context) error {
		if cfg.Ready != nil {
			if err := cfg.Ready(); err != nil {
				return c.String(http.StatusServiceUnavailable, "not ready: "+err.Error()+"\n")
			}
		}
		return c.String(http.StatusOK, "ready\n")
	})
	if cfg.Users == nil {
		// No dashboard users: the status is as public as the page at /.
		e.GET("/api/status", func(c echo.Context) error { return c.JSON(http.StatusOK, cfg.Status()) })
	}
	if cfg.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(cfg.Metrics))
	}
	registerIntegrity(e, cfg.Integrity, guard)
	return e
}

// csp allows scripts, styles and connections (SSE) from this origin only:
// no inline script or style. htmx runs under it because the pages turn
// off its indicator styles (htmx-config meta) and never use hx-on or eval.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// cacheStatic lets browsers keep the embedded assets; their names carry
// their versions.
func cacheStatic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=86400")
		return next(c)
	}
}

func render(c echo.Context, code int, t templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(code)
	return t.Render(c.Request().Context(), c.Response())
}

// URL is the server's base URL.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Shutdown stops the server, waiting up to ctx for requests in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.e.Shutdown(ctx)
	if serr := <-s.err; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}
