package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
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

// MaxQueue is how many pending requests the queue page lists; the count
// shows how many more wait.
const MaxQueue = 200

// app holds the signed-in part of the server.
type app struct {
	cfg      Config
	sessions *sessions
	limit    *limiter
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
	return &app{cfg: cfg, now: now,
		sessions: &sessions{m: map[string]*Session{}, ttl: ttl, now: now},
		limit:    &limiter{fails: map[string][]time.Time{}, max: 5, window: 15 * time.Minute, now: now},
		pending:  &pendingLogins{m: map[string]pendingLogin{}, now: now},
		totpUsed: &totpUsed{last: map[string]uint64{}}}
}

func (a *app) routes(e *echo.Echo) {
	e.Use(a.checkCSRF)
	e.GET("/", func(c echo.Context) error {
		ss := a.session(c)
		if ss == nil {
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
		e.POST("/approvals/:id/decide", a.decide, rev)
		e.POST("/approvals/:id/reconcile", a.reconcile, rev)
	}

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

func (a *app) loginForm(c echo.Context) error {
	if empty, _ := a.cfg.Users.Empty(); empty {
		return render(c, http.StatusOK, dashboard.LoginPage(dashboard.LoginView{CSRF: a.csrfToken(c),
			Error: "No user exists yet: open the setup link 'gatehouse serve' printed, or run 'gatehouse users add NAME --role admin'."}))
	}
	return render(c, http.StatusOK, dashboard.LoginPage(dashboard.LoginView{CSRF: a.csrfToken(c), Next: safeNext(c.QueryParam("next"))}))
}

func (a *app) login(c echo.Context) error {
	name, pw, next := c.FormValue("name"), c.FormValue("password"), safeNext(c.FormValue("next"))
	if tok := c.FormValue("pending"); tok != "" {
		return a.loginCode(c, tok, next)
	}
	ip := "ip:" + c.RealIP()
	if a.limit.blocked("user:"+name, ip) {
		a.log().Warn("login refused: too many failures", "user", name, "ip", c.RealIP())
		return render(c, http.StatusTooManyRequests, dashboard.LoginPage(dashboard.LoginView{CSRF: a.csrfToken(c), Next: next,
			Error: "Too many failed sign-ins. Wait 15 minutes and try again."}))
	}
	u, err := a.cfg.Users.Authenticate(name, pw)
	if err != nil {
		a.limit.fail("user:"+name, ip)
		a.log().Info("login failed", "user", name, "ip", c.RealIP())
		return render(c, http.StatusUnauthorized, dashboard.LoginPage(dashboard.LoginView{CSRF: a.csrfToken(c), Next: next,
			Error: "Wrong name or password."}))
	}
	if u.TOTPEnrolled { // the password was right; now the code
		if code := c.FormValue("code"); code != "" {
			return a.checkCode(c, *u, "", code, next)
		}
		return render(c, http.StatusOK, dashboard.LoginPage(dashboard.LoginView{CSRF: a.csrfToken(c), Next: next, Pending: a.pending.add(*u)}))
	}
	a.limit.reset("user:" + name)
	a.startSession(c, *u, AssurancePassword)
	if next == "/" {
		next = a.home(a.session(c))
	}
	return c.Redirect(http.StatusSeeOther, next)
}

func (a *app) startSession(c echo.Context, u User, assurance string) {
	if old, err := c.Cookie(sessionCookie); err == nil {
		a.sessions.drop(old.Value)
	}
	ss := a.sessions.create(u, assurance)
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: ss.ID, Path: "/", HttpOnly: true, Secure: a.cfg.SecureCookies,
		SameSite: http.SameSiteStrictMode, Expires: ss.Expires})
	c.Set("session", ss)
	a.newCSRF(c) // a fresh token for the new session
	a.log().Info("signed in", "user", u.Name, "roles", u.Roles, "assurance", assurance)
}

func (a *app) logout(c echo.Context) error {
	if ck, err := c.Cookie(sessionCookie); err == nil {
		a.sessions.drop(ck.Value)
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: a.cfg.SecureCookies, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	return c.Redirect(http.StatusSeeOther, "/login")
}

func (a *app) setupAllowed(token string) bool {
	if a.cfg.SetupToken == "" || len(token) != len(a.cfg.SetupToken) || !constantEqual(token, a.cfg.SetupToken) {
		return false
	}
	empty, err := a.cfg.Users.Empty()
	return err == nil && empty
}

func (a *app) setupForm(c echo.Context) error {
	tok := c.QueryParam("token")
	if !a.setupAllowed(tok) {
		return echo.NewHTTPError(http.StatusNotFound, "setup is over or the link is wrong")
	}
	return render(c, http.StatusOK, dashboard.SetupPage(dashboard.SetupView{CSRF: a.csrfToken(c), Token: tok}))
}

func (a *app) setup(c echo.Context) error {
	a.setupMu.Lock()
	defer a.setupMu.Unlock()
	tok := c.FormValue("token")
	if !a.setupAllowed(tok) {
		return echo.NewHTTPError(http.StatusNotFound, "setup is over or the link is wrong")
	}
	u := User{Name: c.FormValue("name"), Roles: []Role{RoleAdmin}}
	if err := a.cfg.Users.Add(u, c.FormValue("password")); err != nil {
		msg := "Could not create the admin."
		if errors.Is(err, ErrWeakPassword) || errors.Is(err, ErrBadUser) {
			msg = strings.TrimPrefix(err.Error(), "web: ")
		}
		return render(c, http.StatusBadRequest, dashboard.SetupPage(dashboard.SetupView{CSRF: a.csrfToken(c), Token: tok, Error: msg}))
	}
	a.log().Info("first admin created", "user", u.Name)
	signed, err := a.cfg.Users.Authenticate(u.Name, c.FormValue("password"))
	if err != nil {
		return err
	}
	a.startSession(c, *signed, AssurancePassword)
	return c.Redirect(http.StatusSeeOther, "/status")
}

// --- approvals

func (a *app) tenantOf(c echo.Context) string { return a.session(c).User.Tenant }

func (a *app) queue(ctx context.Context, tenant, csrf string) (dashboard.QueueView, error) {
	q := dashboard.QueueView{CSRF: csrf}
	if a.cfg.Approvals == nil {
		return q, errNoApprovals
	}
	// One List, split here: each List reads every request from the store.
	all, err := a.cfg.Approvals.List(ctx, approval.Filter{Tenant: tenant})
	if err != nil {
		return q, err
	}
	return queueOf(all, csrf), nil
}

// queueOf sorts requests into the queue's three lists.
func queueOf(all []approval.Request, csrf string) dashboard.QueueView {
	q := dashboard.QueueView{CSRF: csrf}
	var pending, recent []approval.Request
	for _, r := range all {
		switch r.State {
		case approval.StatePending, approval.StateReopened:
			pending = append(pending, r)
		case approval.StateOutcomeUnknown:
			q.Unknown = append(q.Unknown, r)
		default:
			recent = append(recent, r)
		}
	}
	sort.Slice(pending, func(i, j int) bool {
		if !pending[i].Requested.Equal(pending[j].Requested) {
			return pending[i].Requested.Before(pending[j].Requested)
		}
		return pending[i].ID < pending[j].ID
	})
	sort.Slice(q.Unknown, func(i, j int) bool { return q.Unknown[i].ID < q.Unknown[j].ID })
	q.Total = len(pending)
	if len(pending) > MaxQueue {
		pending = pending[:MaxQueue]
	}
	q.Pending = pending
	sort.Slice(recent, func(i, j int) bool {
		if !recent[i].Updated.Equal(recent[j].Updated) {
			return recent[i].Updated.After(recent[j].Updated)
		}
		return recent[i].ID < recent[j].ID
	})
	if len(recent) > 10 {
		recent = recent[:10]
	}
	q.Recent = recent
	return q
}

var errNoApprovals = errors.New("web: no approvals engine in this process")

func (a *app) approvalsPage(c echo.Context) error {
	n := a.nav(c, "approvals")
	q, err := a.queue(c.Request().Context(), a.tenantOf(c), n.CSRF)
	v := dashboard.ApprovalsView{Nav: n, Queue: q}
	if err != nil {
		a.log().Error("approvals queue", "err", err)
		v.Message = "The approvals queue could not be read; see the server log."
	}
	return render(c, http.StatusOK, dashboard.ApprovalsPage(v))
}

// approvalEvents streams the re-rendered queue as the server-sent event
// "queue" after every change Watch reports (changes arriving together are
// sent once), and a comment every 25 s to keep proxies from closing it.
// The stream lists the store once, then keeps the requests it shows up to
// date from Watch, so a change costs a render, not a store scan.
func (a *app) approvalEvents(c echo.Context) error {
	ctx := c.Request().Context()
	ch, err := a.cfg.Approvals.Watch(ctx) // before List: no change falls between
	if err != nil {
		return err
	}
	tenant, csrf := a.tenantOf(c), a.csrfToken(c)
	list, err := a.cfg.Approvals.List(ctx, approval.Filter{Tenant: tenant})
	if err != nil {
		return err
	}
	known := make(map[string]approval.Request, len(list))
	for _, r := range list {
		known[r.ID] = r
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set(echo.HeaderCacheControl, "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, ": connected\n\n")
	w.Flush()
	tick := time.NewTicker(25 * time.Second)
	defer tick.Stop()
	apply := func(r approval.Request) bool {
		if tenant != "" && r.Tenant != tenant {
			return false
		}
		if old, ok := known[r.ID]; ok && !r.Updated.After(old.Updated) && r.State == old.State {
			return false // a replay of what we have
		}
		known[r.ID] = r
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
				return nil
			}
			w.Flush()
		case r, ok := <-ch:
			if !ok {
				return nil
			}
			changed := apply(r)
		drain:
			for {
				select {
				case r2, ok := <-ch:
					if !ok {
						break drain
					}
					changed = apply(r2) || changed
				default:
					break drain
				}
			}
			if !changed {
				continue
			}
			all := make([]approval.Request, 0, len(known))
			for _, r := range known {
				all = append(all, r)
			}
			if err := writeSSE(w, "queue", dashboard.ApprovalQueue(queueOf(all, csrf)), ctx); err != nil {
				return nil
			}
			w.Flush()
		}
	}
}

// writeSSE writes one event whose data is the rendered component, one
// data: field per line.
func writeSSE(w io.Writer, event string, comp templ.Component, ctx context.Context) error {
	var b strings.Builder
	if err := comp.Render(ctx, &b); err != nil {
		return err
	}
	var out strings.Builder
	out.Grow(b.Len() + 64)
	out.WriteString("event: " + event + "\n")
	for _, line := range strings.Split(b.String(), "\n") {
		out.WriteString("data: ")
		out.WriteString(line)
		out.WriteByte('\n')
	}
	out.WriteByte('\n')
	_, err := io.WriteString(w, out.String())
	return err
}

// request loads a request the signed-in reviewer may see; another
// tenant's request is not found.
func (a *app) request(c echo.Context) (*approval.Request, error) {
	if a.cfg.Approvals == nil {
		return nil, approval.ErrNotFound
	}
	r, err := a.cfg.Approvals.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return nil, err
	}
	if t := a.tenantOf(c); t != "" && r.Tenant != t {
		return nil, approval.ErrNotFound
	}
	return r, nil
}

func roleNames(rs []Role) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func (a *app) decide(c echo.Context) error {
	r, err := a.request(c)
	if err != nil {
		return a.cardError(c, nil, err)
	}
	ss := a.session(c)
	var approved bool
	switch c.FormValue("decision") {
	case "approve":
		approved = true
	case "refuse":
	default:
		return echo.NewHTTPError(http.StatusBadRequest, "decision must be approve or refuse")
	}
	reason := strings.TrimSpace(c.FormValue("reason"))
	if !approved && reason == "" {
		return a.cardError(c, r, errReasonNeeded)
	}
	d := approval.Decision{Approved: approved, Approver: ss.User.Name, Roles: roleNames(ss.User.Roles), Assurance: ss.Assurance,
		Authenticated: "dashboard-session", Reason: reason, Time: a.now().UTC()}
	got, err := a.cfg.Approvals.Decide(c.Request().Context(), r.ID, d)
	if err != nil {
		return a.cardError(c, r, err)
	}
	a.log().Info("approval decided", "id", r.ID, "approved", approved, "by", ss.User.Name)
	return a.cardDone(c, got)
}

var errReasonNeeded = errors.New("web: a refusal needs a reason")

func (a *app) reconcile(c echo.Context) error {
	r, err := a.request(c)
	if err != nil {
		return a.cardError(c, nil, err)
	}
	ss := a.session(c)
	reason := strings.TrimSpace(c.FormValue("reason"))
	if reason == "" {
		return a.cardError(c, r, errReasonNeeded)
	}
	rec := approval.Reconciliation{Happened: c.FormValue("happened") == "yes", By: ss.User.Name, Reason: reason, Time: a.now().UTC()}
	got, err := a.cfg.Approvals.Reconcile(c.Request().Context(), r.ID, rec)
	if err != nil {
		return a.cardError(c, r, err)
	}
	a.log().Info("approval reconciled", "id", r.ID, "happened", rec.Happened, "by", ss.User.Name)
	return a.cardDone(c, got)
}

func (a *app) cardDone(c echo.Context, r *approval.Request) error {
	if c.Request().Header.Get("HX-Request") == "" {
		return c.Redirect(http.StatusSeeOther, "/approvals")
	}
	return render(c, http.StatusOK, dashboard.DecisionReply(dashboard.CardView{Req: *r, CSRF: a.csrfToken(c)}))
}

// errorCodes turns the approvals engine's sentinels into HTTP statuses and
// text for a person: the one table of this edge.
var errorCodes = []struct {
	err  error
	code int
	text string
}{
	{approval.ErrNotFound, http.StatusNotFound, "This request does not exist, or is not yours to see."},
	{approval.ErrAlreadyDecided, http.StatusConflict, "Someone decided this first; their decision stands."},
	{approval.ErrWrongState, http.StatusConflict, "This request has moved on (its state changed); the page shows where it is now."},
	{approval.ErrNotAllowed, http.StatusForbidden, "You may not decide this one: it needs another role or a stronger sign-in, or you asked for it yourself."},
	{errReasonNeeded, http.StatusBadRequest, "Say why: a refusal or a reconciliation needs a reason."},
}

func errorText(err error) (int, string) {
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.code, e.text
		}
	}
	return http.StatusInternalServerError, "Something went wrong; see the server log."
}

// cardError answers a failed decision: htmx gets the card (status 200, so
// htmx swaps it) with the error and the request's current state; a plain
// form gets the status code.
func (a *app) cardError(c echo.Context, r *approval.Request, err error) error {
	code, text := errorText(err)
	if code == http.StatusInternalServerError {
		a.log().Error("approval", "err", err)
	}
	if r != nil && a.cfg.Approvals != nil {
		if cur, gerr := a.cfg.Approvals.Get(c.Request().Context(), r.ID); gerr == nil {
			r = cur
		}
	}
	if r == nil || c.Request().Header.Get("HX-Request") == "" {
		return echo.NewHTTPError(code, text)
	}
	return render(c, http.StatusOK, dashboard.DecisionReply(dashboard.CardView{Req: *r, CSRF: a.csrfToken(c), Error: text}))
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
	rep, err := review.Review(a.cfg.JournalDir)
	if err != nil {
		v.Error = "The journal could not be read: " + err.Error()
	}
	v.Report = rep
	return render(c, http.StatusOK, dashboard.ReviewPage(v))
}

func (a *app) reviewJSON(c echo.Context) error {
	rep, err := review.Review(a.cfg.JournalDir)
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
	return render(c, http.StatusOK, dashboard.PersonPage(dashboard.PersonView{Nav: a.nav(c, "evidence"), Timeline: tl,
		Verify: dashboard.VerifyStatusOf(tl, a.now())}))
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
