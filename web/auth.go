package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
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

// Session is one signed-in user. Its id is 32 random bytes; the
// StateStore keeps it under the SHA-256 of the id, so sessions survive a
// restart and are shared by every dashboard process on that store.
type Session struct {
	ID        string
	User      User
	Assurance string
	Created   time.Time
	Expires   time.Time
}

// sessionRecord is a Session as stored: the user without credentials, and
// the stamp of the credentials it signed in with (Users.Current).
type sessionRecord struct {
	Name         string    `json:"name"`
	Roles        []Role    `json:"roles"`
	Tenant       string    `json:"tenant,omitempty"`
	Stamp        string    `json:"stamp"`
	TOTPEnrolled bool      `json:"totp,omitempty"`
	Assurance    string    `json:"assurance"`
	Created      time.Time `json:"created"`
	Expires      time.Time `json:"exp"`
}

func recordOf(u User) sessionRecord {
	return sessionRecord{Name: u.Name, Roles: u.Roles, Tenant: u.Tenant, Stamp: u.stamp, TOTPEnrolled: u.TOTPEnrolled}
}

func (r sessionRecord) user() User {
	return User{Name: r.Name, Roles: r.Roles, Tenant: r.Tenant, TOTPEnrolled: r.TOTPEnrolled, stamp: r.Stamp}
}

// sessions is the session table over a StateStore. Safe for concurrent
// use, by any number of processes sharing the store.
type sessions struct {
	st  StateStore
	ttl time.Duration
	now func() time.Time
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// validToken reports whether s can be a token randomToken made, so
// anything else is refused without a store lookup.
func validToken(s string) bool {
	if len(s) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil
}

func (s *sessions) create(ctx context.Context, u User, assurance string) (*Session, error) {
	now := s.now().UTC()
	ss := &Session{ID: randomToken(), User: u, Assurance: assurance, Created: now, Expires: now.Add(s.ttl)}
	rec := recordOf(u)
	rec.Assurance, rec.Created, rec.Expires = assurance, ss.Created, ss.Expires
	b, _ := json.Marshal(rec)
	if _, err := s.st.Create(ctx, stateKey("s", ss.ID), b, s.ttl); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateStore, err)
	}
	return ss, nil
}

// get returns the session of id, nil when there is none (or it expired);
// an error when the store cannot say.
func (s *sessions) get(ctx context.Context, id string) (*Session, error) {
	if !validToken(id) {
		return nil, nil
	}
	b, _, err := s.st.Get(ctx, stateKey("s", id))
	if errors.Is(err, ErrNoState) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateStore, err)
	}
	var rec sessionRecord
	if json.Unmarshal(b, &rec) != nil || !s.now().Before(rec.Expires) {
		_ = s.st.Delete(ctx, stateKey("s", id))
		return nil, nil
	}
	return &Session{ID: id, User: rec.user(), Assurance: rec.Assurance, Created: rec.Created, Expires: rec.Expires}, nil
}

func (s *sessions) drop(ctx context.Context, id string) {
	if validToken(id) {
		_ = s.st.Delete(ctx, stateKey("s", id))
	}
}

// csrfToken returns the visitor's CSRF token, setting the cookie when it is
// missing. It is a double-submit token: an HttpOnly, SameSite=Strict cookie
// whose value pages repeat in a meta tag, forms in _csrf and htmx in
// X-CSRF-Token.
func (a *app) csrfToken(c echo.Context) string {
	if v, ok := c.Get("csrf").(string); ok {
		return v
	}
	if ck, err := c.Cookie(csrfCookie); err == nil && validToken(ck.Value) {
		c.Set("csrf", ck.Value)
		return ck.Value
	}
	return a.newCSRF(c)
}

func (a *app) newCSRF(c echo.Context) string {
	tok := randomToken()
	c.SetCookie(&http.Cookie{Name: csrfCookie, Value: tok, Path: "/", HttpOnly: true, Secure: a.secure(c), SameSite: http.SameSiteStrictMode})
	c.Set("csrf", tok)
	return tok
}

// checkCSRF refuses (403) a state-changing request whose token does not
// match its cookie, or whose Origin is another site. POST /checkpoint is
// let through without a token while no dashboard user exists (there is no
// session a forged request could ride; `gatehouse checkpoint` sends
// people there with curl), still only from this site's Origin.
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
		if c.Path() == "/checkpoint" {
			if empty, err := a.cfg.Users.Empty(); err == nil && empty {
				return next(c)
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

// session returns the request's session, or nil. A store that cannot be
// read counts as no session (fail closed) and is logged.
func (a *app) session(c echo.Context) *Session {
	if ss, ok := c.Get("session").(*Session); ok {
		return ss
	}
	ck, err := c.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	ctx := c.Request().Context()
	ss, err := a.sessions.get(ctx, ck.Value)
	if err != nil {
		a.log().Error("session store", "err", err)
		c.Set("sessionErr", err)
		return nil
	}
	if ss != nil && !a.cfg.Users.Current(ss.User) {
		// Removed or changed since sign-in: the session ends now.
		a.sessions.drop(ctx, ck.Value)
		ss = nil
	}
	if ss != nil {
		c.Set("session", ss)
	}
	return ss
}

// requireRole lets through a signed-in user holding one of roles; others
// are sent to the login page (GET) or refused 401/403. An htmx request
// without a session gets 401 with HX-Trigger "gh-signed-out", which the
// page turns into its sign-in banner.
func (a *app) requireRole(roles ...Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ss := a.session(c)
			if ss == nil {
				if c.Request().Method == http.MethodGet && c.Request().Header.Get("HX-Request") == "" &&
					c.Request().Header.Get("Accept") != "text/event-stream" {
					return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
				}
				c.Response().Header().Set("HX-Trigger", "gh-signed-out")
				return echo.NewHTTPError(http.StatusUnauthorized, "Your session has ended: sign in again.")
			}
			for _, r := range roles {
				if ss.User.Has(r) {
					return next(c)
				}
			}
			return echo.NewHTTPError(http.StatusForbidden, "Your role does not allow this page.")
		}
	}
}

func constantEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// NewSetupToken returns a random token for the first-run setup link.
func NewSetupToken() string { return randomToken() }

// pendingLogins holds sign-ins whose password was right and whose TOTP
// code is still to come, in the StateStore (so the code may reach another
// dashboard process than the password did): the SHA-256 of a random token
// (in the code form) to the user, for five minutes.
type pendingLogins struct {
	st  StateStore
	now func() time.Time
}

type pendingRecord struct {
	sessionRecord
}

const pendingTTL = 5 * time.Minute

func (p *pendingLogins) add(ctx context.Context, u User) (string, error) {
	tok := randomToken()
	rec := pendingRecord{recordOf(u)}
	rec.Expires = p.now().Add(pendingTTL)
	b, _ := json.Marshal(rec)
	if _, err := p.st.Create(ctx, stateKey("p", tok), b, pendingTTL); err != nil {
		return "", fmt.Errorf("%w: %w", ErrStateStore, err)
	}
	return tok, nil
}

func (p *pendingLogins) get(ctx context.Context, tok string) (User, bool, error) {
	if !validToken(tok) {
		return User{}, false, nil
	}
	b, _, err := p.st.Get(ctx, stateKey("p", tok))
	if errors.Is(err, ErrNoState) {
		return User{}, false, nil
	}
	if err != nil {
		return User{}, false, fmt.Errorf("%w: %w", ErrStateStore, err)
	}
	var rec pendingRecord
	if json.Unmarshal(b, &rec) != nil || !p.now().Before(rec.Expires) {
		p.drop(ctx, tok)
		return User{}, false, nil
	}
	return rec.user(), true, nil
}

func (p *pendingLogins) drop(ctx context.Context, tok string) {
	if validToken(tok) {
		_ = p.st.Delete(ctx, stateKey("p", tok))
	}
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
