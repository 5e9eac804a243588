package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/review"
	"github.com/gatehouse/gatehouse/dashboard"
)

// Approvals is what the dashboard needs of the approvals engine;
// *approval.Service satisfies it.
type Approvals interface {
	List(ctx context.Context, f approval.Filter) ([]approval.Request, error)
	Get(ctx context.Context, id string) (*approval.Request, error)
	Decide(ctx context.Context, id string, d approval.Decision) (*approval.Request, error)
	Reconcile(ctx context.Context, id string, r approval.Reconciliation) (*approval.Request, error)
	Watch(ctx context.Context) (<-chan approval.Request, error)
}

// Exporter writes one tenant's evidence export as a tar.gz. nil in Config
// uses package evidence's WriteArchive over JournalDir.
type Exporter interface {
	Export(w io.Writer, tenant string) error
}

// PerPage is how many requests one page of the approvals list shows.
const PerPage = 50

// app holds the signed-in part of the server.
type app struct {
	cfg      Config
	sessions *sessions
	limit    *throttle
	pending  *pendingLogins
	totpUsed *totpUsed
	now      func() time.Time

	setupMu sync.Mutex
}

func newApp(cfg Config) *app {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	ttl := cfg.SessionTTL
	if ttl <= 0 {
		ttl = 12 * time.Hour
	}
	st := cfg.State
	if st == nil {
		st = NewMemoryState(now)
	}
	return &app{cfg: cfg, now: now,
		sessions: &sessions{st: st, ttl: ttl, now: now},
		limit:    &throttle{st: st, now: now},
		pending:  &pendingLogins{st: st, now: now},
		totpUsed: &totpUsed{st: st, now: now}}
}

// noStore keeps every dynamic page out of browser and proxy caches: they
// show people, arguments and evidence.
func noStore(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !strings.HasPrefix(c.Request().URL.Path, "/static/") {
			c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		}
		return next(c)
	}
}

func (a *app) routes(e *echo.Echo) {
	e.Use(a.checkCSRF, noStore)
	e.GET("/", func(c echo.Context) error {
		ss := a.session(c)
		if ss == nil {
			if empty, _ := a.cfg.Users.Empty(); empty {
				return c.Redirect(http.StatusSeeOther, "/setup")
			}
			return c.Redirect(http.StatusSeeOther, "/login")
		}
		return c.Redirect(http.StatusSeeOther, a.home(ss))
	})
	e.GET("/login", a.loginForm)
	e.POST("/login", a.login)
	e.POST("/logout", a.logout)
	e.GET("/setup", a.setupForm)
	e.POST("/setup", a.setup)

	any := a.requireRole(RoleReviewer, RoleOperator, RoleAuditor, RoleAdmin)
	e.GET("/status", func(c echo.Context) error {
		if !a.runsDeployment(c) {
			return render(c, http.StatusOK, dashboard.StatusReducedShell(a.nav(c, "status"), a.cfg.Status()))
		}
		return render(c, http.StatusOK, dashboard.StatusShell(a.nav(c, "status"), a.cfg.Status()))
	}, any)
	e.GET("/api/status", func(c echo.Context) error {
		if !a.runsDeployment(c) {
			return echo.NewHTTPError(http.StatusForbidden, "status details are for operators of the whole deployment; your account is bound to a tenant")
		}
		return c.JSON(http.StatusOK, a.cfg.Status())
	}, a.apiRole(RoleOperator))
	if a.cfg.ReloadPolicy != nil {
		e.POST("/status/reload-policy", a.reloadPolicy, a.requireRole(RoleOperator), a.noTenant)
	}

	if a.cfg.Approvals != nil {
		rev := a.requireRole(RoleReviewer)
		e.GET("/approvals", a.approvalsPage, rev)
		e.GET("/approvals/events", a.approvalEvents, rev)
		e.GET("/approvals/:id", a.approvalPage, rev)
		e.GET("/approvals/:id/pane", a.approvalPane, rev)
		e.POST("/approvals/:id/decide", a.decide, rev)
		e.POST("/approvals/:id/reconcile", a.reconcile, rev)
	}
	e.GET("/api/session", a.sessionJSON)
	e.GET("/runs/:run", a.runPage, a.requireRole(RoleReviewer, RoleOperator, RoleAuditor))

	// Policy review spans every tenant: not for tenant-bound users.
	e.GET("/review", a.reviewPage, a.requireRole(RoleOperator), a.noTenant)
	e.GET("/api/review", a.reviewJSON, a.requireRole(RoleOperator), a.noTenant)

	ev := a.requireRole(RoleAuditor)
	e.GET("/evidence", a.evidenceIndex, ev)
	e.GET("/evidence/:tenant/export.tar.gz", a.export, ev)
	e.GET("/evidence/:tenant/:person", a.personPage, ev)
}

// runsDeployment reports whether the signed-in user runs the whole
// deployment (an operator or admin bound to no tenant): only they see the
// status details that say where things are (the NATS URL, credentials,
// journal and policy paths, the policy's read error), on /status and
// /api/status alike; everyone else gets the reduced status page.
func (a *app) runsDeployment(c echo.Context) bool {
	ss := a.session(c)
	return ss != nil && ss.User.Has(RoleOperator) && ss.User.Tenant == ""
}

// home is the first page a user's roles open.
func (a *app) home(ss *Session) string {
	switch u := &ss.User; {
	case u.Has(RoleReviewer) && a.cfg.Approvals != nil:
		return "/approvals"
	case u.Has(RoleOperator) && u.Tenant == "":
		return "/review"
	case u.Has(RoleAuditor):
		return "/evidence"
	}
	return "/status"
}

func (a *app) nav(c echo.Context, active string) dashboard.Nav {
	ss := a.session(c)
	n := dashboard.Nav{CSRF: a.csrfToken(c), Active: active}
	if ss != nil {
		n.User, n.Tenant, n.Assurance = ss.User.Name, ss.User.Tenant, ss.Assurance
		n.Approvals = ss.User.Has(RoleReviewer) && a.cfg.Approvals != nil
		n.Review = ss.User.Has(RoleOperator) && ss.User.Tenant == ""
		n.Evidence = ss.User.Has(RoleAuditor)
		n.Reload = a.cfg.ReloadPolicy != nil && ss.User.Has(RoleOperator) && ss.User.Tenant == ""
	}
	return n
}

// --- policy review

// noTenant refuses users bound to one tenant.
func (a *app) noTenant(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if a.tenantOf(c) != "" {
			return echo.NewHTTPError(http.StatusForbidden, "policy review covers every tenant; your account is bound to one")
		}
		return next(c)
	}
}

func (a *app) reviewPage(c echo.Context) error {
	v := dashboard.ReviewView{Nav: a.nav(c, "review")}
	rep, err := review.ReviewWith(a.cfg.JournalDir, review.Options{Policy: a.cfg.Policy})
	if err != nil {
		v.Error = "The journal could not be read: " + err.Error()
	}
	v.Report = rep
	return render(c, http.StatusOK, dashboard.ReviewPage(v))
}

func (a *app) reviewJSON(c echo.Context) error {
	rep, err := review.ReviewWith(a.cfg.JournalDir, review.Options{Policy: a.cfg.Policy})
	if err != nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "journal unreadable")
	}
	return c.JSON(http.StatusOK, rep)
}

// --- evidence

// tenantAllowed reports whether the signed-in user may see tenant: admins
// every tenant, anyone bound to a tenant only theirs.
func (a *app) tenantAllowed(c echo.Context, tenant string) bool {
	u := &a.session(c).User
	if u.Tenant != "" {
		return u.Tenant == tenant
	}
	return slices.Contains(u.Roles, RoleAdmin)
}

func (a *app) evidenceIndex(c echo.Context) error {
	v := dashboard.EvidenceIndexView{Nav: a.nav(c, "evidence")}
	tenants, err := evidence.Tenants(a.cfg.JournalDir)
	if err != nil {
		v.Error = "The journal could not be read."
		a.log().Error("evidence", "err", err)
	}
	if t := a.tenantOf(c); t != "" {
		tenants = []string{t}
	}
	for _, t := range tenants {
		if !a.tenantAllowed(c, t) {
			continue
		}
		people, err := evidence.People(a.cfg.JournalDir, t)
		if err != nil {
			continue
		}
		v.Tenants = append(v.Tenants, dashboard.TenantPeople{Tenant: t, People: people})
	}
	return render(c, http.StatusOK, dashboard.EvidenceIndexPage(v))
}

func (a *app) personPage(c echo.Context) error {
	tenant, person := c.Param("tenant"), c.Param("person")
	if !a.tenantAllowed(c, tenant) {
		return echo.NewHTTPError(http.StatusNotFound, "no such tenant")
	}
	if person == "" {
		return echo.NewHTTPError(http.StatusNotFound, "no such person")
	}
	// The same timeline `gatehouse evidence` prints; it verifies the
	// journal with one worker, not to starve the broker of CPU.
	tl, err := evidence.TimelineWith(a.cfg.JournalDir, evidence.Selector{Tenant: tenant, Person: person},
		evidence.TimelineOptions{Verify: journal.VerifyOptions{Workers: 1}})
	if errors.Is(err, evidence.ErrBadSelector) {
		return echo.NewHTTPError(http.StatusNotFound, "no such person")
	}
	if err != nil {
		a.log().Error("timeline", "err", err)
		return echo.NewHTTPError(http.StatusServiceUnavailable, "the journal could not be read")
	}
	vs := dashboard.VerifyStatusOf(tl, a.now())
	if a.tenantOf(c) != "" {
		if vs.Error != "" {
			a.log().Error("evidence: journal verify", "err", vs.Error)
		}
		vs = vs.ForTenant()
	}
	return render(c, http.StatusOK, dashboard.PersonPage(dashboard.PersonView{Nav: a.nav(c, "evidence"), Timeline: tl, Verify: vs}))
}

func (a *app) export(c echo.Context) error {
	tenant := c.Param("tenant")
	if !a.tenantAllowed(c, tenant) {
		return echo.NewHTTPError(http.StatusNotFound, "no such tenant")
	}
	ex := a.cfg.Exporter
	if ex == nil {
		ex = evidenceExporter{dir: a.cfg.JournalDir}
	}
	name := fmt.Sprintf("%s-evidence-%s.tar.gz", safeFileName(tenant), a.now().UTC().Format("20060102T150405Z"))
	c.Response().Header().Set(echo.HeaderContentType, "application/gzip")
	c.Response().Header().Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	c.Response().WriteHeader(http.StatusOK)
	if err := ex.Export(c.Response(), tenant); err != nil {
		a.log().Error("evidence export", "tenant", tenant, "err", err)
		return nil // headers are out; the archive is cut short and fails to open
	}
	a.log().Info("evidence exported", "tenant", tenant, "by", a.session(c).User.Name)
	return nil
}

func safeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// evidenceExporter is the default export: package evidence's archive
// (the tenant's runs exactly as written, the head log and a manifest).
type evidenceExporter struct{ dir string }

func (x evidenceExporter) Export(w io.Writer, tenant string) error {
	return evidence.WriteArchive(w, x.dir, evidence.Selector{Tenant: tenant})
}

func (a *app) log() *slog.Logger {
	if a.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.cfg.Logger
}
