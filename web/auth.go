package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/dashboard"
)

// Cookie names.
const (
	sessionCookie = "gh_session"
	csrfCookie    = "gh_csrf"
	// CSRFHeader carries the CSRF token on htmx requests (hx-headers);
	// forms send it as the field _csrf.
	CSRFHeader = "X-CSRF-Token"
)

// AssurancePassword is the assurance of a password login.
const AssurancePassword = "password"

// Session is one signed-in user. Its id is 32 random bytes; it lives in
// memory only, so a restart signs everyone out.
type Session struct {
	ID        string
	User      User
	Assurance string
	Created   time.Time
	Expires   time.Time
}

// sessions is the in-memory session table. Safe for concurrent use.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*Session
	ttl time.Duration
	now func() time.Time
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) create(u User, assurance string) *Session {
	now := s.now()
	ss := &Session{ID: randomToken(), User: u, Assurance: assurance, Created: now, Expires: now.Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, x := range s.m { // sweep expired ones while here
		if now.After(x.Expires) {
			delete(s.m, id)
		}
	}
	s.m[ss.ID] = ss
	return ss
}

func (s *sessions) get(id string) *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[id]
	if ss == nil {
		return nil
	}
	if s.now().After(ss.Expires) {
		delete(s.m, id)
		return nil
	}
	return ss
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// limiter counts failed logins per key (name, and client address) and
// refuses after max failures within window.
type limiter struct {
	mu     sync.Mutex
	fails  map[string][]time.Time
	max    int
	window time.Duration
	now    func() time.Time
}

func (l *limiter) blocked(keys ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for _, k := range keys {
		recent := l.fails[k][:0]
		for _, t := range l.fails[k] {
			if now.Sub(t) < l.window {
				recent = append(recent, t)
			}
		}
		l.fails[k] = recent
		if len(recent) >= l.max {
			return true
		}
	}
	return false
}

// limiterSweepAt is the table size at which fail drops keys whose
// failures are all older than the window, so names tried once and never
// again do not grow it without bound.
const limiterSweepAt = 4096

func (l *limiter) fail(keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.fails) >= limiterSweepAt {
		for k, ts := range l.fails {
			if len(ts) == 0 || now.Sub(ts[len(ts)-1]) >= l.window {
				delete(l.fails, k)
			}
		}
	}
	for _, k := range keys {
		l.fails[k] = append(l.fails[k], now)
	}
}

func (l *limiter) reset(key string) {
	l.mu.Lock()
	delete(l.fails, key)
	l.mu.Unlock()
}

// csrfToken returns the visitor's CSRF token, setting the cookie when it is
// missing. It is a double-submit token: an HttpOnly, SameSite=Strict cookie
// whose value pages repeat in a meta tag, forms in _csrf and htmx in
// X-CSRF-Token.
func (a *app) csrfToken(c echo.Context) string {
	if v, ok := c.Get("csrf").(string); ok {
		return v
	}
	if ck, err := c.Cookie(csrfCookie); err == nil && len(ck.Value) == 43 {
		c.Set("csrf", ck.Value)
		return ck.Value
	}
	return a.newCSRF(c)
}

func (a *app) newCSRF(c echo.Context) string {
	tok := randomToken()
	c.SetCookie(&http.Cookie{Name: csrfCookie, Value: tok, Path: "/", HttpOnly: true, Secure: a.cfg.SecureCookies, SameSite: http.SameSiteStrictMode})
	c.Set("csrf", tok)
	return tok
}

// checkCSRF refuses (403) a state-changing request whose token does not
// match its cookie, or whose Origin is another site.
func (a *app) checkCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		if o := c.Request().Header.Get("Origin"); o != "" && o != "null" {
			u, err := url.Parse(o)
			if err != nil || !strings.EqualFold(u.Host, c.Request().Host) {
				return echo.NewHTTPError(http.StatusForbidden, "cross-site request refused")
			}
		}
		ck, err := c.Cookie(csrfCookie)
		sent := c.Request().Header.Get(CSRFHeader)
		if sent == "" {
			sent = c.FormValue("_csrf")
		}
		if err != nil || sent == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(sent)) != 1 {
			return echo.NewHTTPError(http.StatusForbidden, "missing or wrong CSRF token: reload the page")
		}
		return next(c)
	}
}

// session returns the request's session, or nil.
func (a *app) session(c echo.Context) *Session {
	if ss, ok := c.Get("session").(*Session); ok {
		return ss
	}
	ck, err := c.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	ss := a.sessions.get(ck.Value)
	if ss != nil && !a.cfg.Users.Current(ss.User) {
		// Removed or changed since sign-in: the session ends now.
		a.sessions.drop(ck.Value)
		ss = nil
	}
	if ss != nil {
		c.Set("session", ss)
	}
	return ss
}

// requireRole lets through a signed-in user holding one of roles; others
// are sent to the login page (GET) or refused 401/403.
func (a *app) requireRole(roles ...Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ss := a.session(c)
			if ss == nil {
				if c.Request().Method == http.MethodGet && c.Request().Header.Get("HX-Request") == "" {
					return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
				}
				return echo.NewHTTPError(http.StatusUnauthorized, "sign in first")
			}
			for _, r := range roles {
				if ss.User.Has(r) {
					return next(c)
				}
			}
			return echo.NewHTTPError(http.StatusForbidden, "your role does not allow this page")
		}
	}
}

// safeNext keeps a post-login redirect on this site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

func constantEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// NewSetupToken returns a random token for the first-run setup link.
func NewSetupToken() string { return randomToken() }

// pendingLogins holds sign-ins whose password was right and whose TOTP
// code is still to come: a random token (in the code form) to the user,
// for five minutes. Safe for concurrent use.
type pendingLogins struct {
	mu  sync.Mutex
	m   map[string]pendingLogin
	now func() time.Time
}

type pendingLogin struct {
	user    User
	expires time.Time
}

const pendingTTL = 5 * time.Minute

func (p *pendingLogins) add(u User) string {
	tok := randomToken()
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, x := range p.m {
		if now.After(x.expires) {
			delete(p.m, k)
		}
	}
	p.m[tok] = pendingLogin{user: u, expires: now.Add(pendingTTL)}
	return tok
}

func (p *pendingLogins) get(tok string) (User, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	x, ok := p.m[tok]
	if !ok || p.now().After(x.expires) {
		delete(p.m, tok)
		return User{}, false
	}
	return x.user, true
}

func (p *pendingLogins) drop(tok string) {
	p.mu.Lock()
	delete(p.m, tok)
	p.mu.Unlock()
}

// loginCode is the second step of a TOTP user's sign-in: the form carries
// the pending token the password step issued and the code. A wrong or
// replayed code counts as a failed sign-in; the right one starts a session
// of assurance mfa.
func (a *app) loginCode(c echo.Context, tok, next string) error {
	u, ok := a.pending.get(tok)
	if !ok {
		return render(c, http.StatusUnauthorized, dashboard.LoginPage(dashboard.LoginView{CSRF: a.csrfToken(c), Next: next,
			Error: "That sign-in took too long. Start again."}))
	}
	return a.checkCode(c, u, tok, c.FormValue("code"), next)
}

// checkCode verifies u's TOTP code; tok is the pending sign-in to keep
// (on a wrong code) or drop (on success).
func (a *app) checkCode(c echo.Context, u User, tok, code, next string) error {
	ip := "ip:" + c.RealIP()
	if a.limit.blocked("user:"+u.Name, ip) {
		a.pending.drop(tok)
		return render(c, http.StatusTooManyRequests, dashboard.LoginPage(dashboard.LoginView{CSRF: a.csrfToken(c), Next: next,
			Error: "Too many failed sign-ins. Wait 15 minutes and try again."}))
	}
	step, ok := a.cfg.Users.CheckTOTP(u.Name, code, a.now())
	if ok && !a.totpUsed.claim(u.Name, step) {
		ok = false
		a.log().Warn("login refused: TOTP code replayed", "user", u.Name, "ip", c.RealIP())
	}
	if !ok {
		a.limit.fail("user:"+u.Name, ip)
		a.log().Info("login failed: wrong TOTP code", "user", u.Name, "ip", c.RealIP())
		if tok == "" {
			tok = a.pending.add(u)
		}
		return render(c, http.StatusUnauthorized, dashboard.LoginPage(dashboard.LoginView{CSRF: a.csrfToken(c), Next: next,
			Pending: tok, Error: "Wrong or already used code. Enter the current code from your authenticator."}))
	}
	a.pending.drop(tok)
	a.limit.reset("user:" + u.Name)
	a.startSession(c, u, AssuranceMFA)
	if next == "/" {
		next = a.home(a.session(c))
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// apiRole is requireRole for JSON endpoints: 401 without a session (no
// redirect to the sign-in page), 403 without the role.
func (a *app) apiRole(roles ...Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ss := a.session(c)
			if ss == nil {
				return echo.NewHTTPError(http.StatusUnauthorized, "sign in first")
			}
			for _, r := range roles {
				if ss.User.Has(r) {
					return next(c)
				}
			}
			return echo.NewHTTPError(http.StatusForbidden, "your role does not allow this")
		}
	}
}

// reloadPolicy re-reads the policy file, as SIGHUP does, and shows the
// status page: the new digest, or in red why the file could not be read
// (everything is refused then).
func (a *app) reloadPolicy(c echo.Context) error {
	err := a.cfg.ReloadPolicy()
	a.log().Info("policy reload asked from the dashboard", "by", a.session(c).User.Name, "ok", err == nil)
	return c.Redirect(http.StatusSeeOther, "/status")
}
