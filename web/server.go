// Package web is Gatehouse's HTTP server (echo): the pages of package
// dashboard, static assets embedded in the binary, health, readiness and
// Prometheus metrics. It listens on loopback by default.
package web

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/gatehouse/gatehouse/dashboard"
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
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	e.Server = srv
	go func() { s.err <- srv.Serve(ln) }()
	return s, nil
}

// New returns the echo instance with every route, for tests that serve it
// themselves.
func New(cfg Config) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Use(middleware.Recover())
	e.Use(middleware.SecureWithConfig(middleware.SecureConfig{
		XSSProtection: "0", ContentTypeNosniff: "nosniff", XFrameOptions: "DENY",
		ReferrerPolicy:        "no-referrer",
		ContentSecurityPolicy: "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
	}))
	sub, _ := fs.Sub(static, "static")
	e.StaticFS("/static", sub)

	e.GET("/", func(c echo.Context) error {
		st := cfg.Status()
		return render(c, http.StatusOK, dashboard.StatusPage(st))
	})
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", func(c echo.Context) error {
		if cfg.Ready != nil {
			if err := cfg.Ready(); err != nil {
				return c.String(http.StatusServiceUnavailable, "not ready: "+err.Error()+"\n")
			}
		}
		return c.String(http.StatusOK, "ready\n")
	})
	e.GET("/api/status", func(c echo.Context) error { return c.JSON(http.StatusOK, cfg.Status()) })
	if cfg.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(cfg.Metrics))
	}
	return e
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
