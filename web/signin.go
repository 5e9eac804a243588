package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/dashboard"
)

// Limits on what a person may send the dashboard, enforced here whatever
// the form says (README, "The dashboard"). A longer value is refused with
// a message, never cut silently.
const (
	MaxReason   = 500      // characters of a decision's or reconciliation's reason
	MaxPassword = 1024     // bytes of a password (argon2id of more is work for nothing)
	MaxNext     = 512      // bytes of a post-sign-in path
	MaxSearch   = 200      // characters of the approvals search
	MaxFilter   = 128      // characters of one approvals filter value
	MaxBody     = "64K"    // a request body (forms only; nothing uploads)
	maxBodyN    = 64 << 10 // MaxBody in bytes
)

// safeNext keeps a post-sign-in redirect on this site: a path of one of
// the dashboard's pages, nothing else. It refuses (returns "/") anything
// with a scheme or host, "//" or "\" anywhere, a control or space
// character, a percent-encoding of any of these (decoded up to three
// times), and anything over MaxNext bytes.
func safeNext(next string) string {
	if next == "" || len(next) > MaxNext || !utf8.ValidString(next) {
		return "/"
	}
	s := next
	for range 4 {
		if !sameSitePath(s) {
			return "/"
		}
		dec, err := url.PathUnescape(s)
		if err != nil {
			return "/"
		}
		if dec == s {
			break
		}
		s = dec
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	for _, p := range nextPages {
		if u.Path == p || strings.HasPrefix(u.Path, p+"/") {
			return next
		}
	}
	return "/"
}

// nextPages are the pages a sign-in may go on to.
var nextPages = []string{"/approvals", "/review", "/evidence", "/status", "/runs"}

func sameSitePath(s string) bool {
	if !strings.HasPrefix(s, "/") || strings.Contains(s, "//") || strings.Contains(s, `\`) {
		return false
	}
	for _, r := range s {
		if r <= ' ' || !unicode.IsPrint(r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// tooLong reports a value over max characters.
func tooLong(s string, max int) bool { return utf8.RuneCountInString(s) > max }

func (a *app) loginPage(c echo.Context, code int, v dashboard.LoginView) error {
	v.CSRF = a.csrfToken(c)
	return render(c, code, dashboard.LoginPage(v))
}

func (a *app) loginForm(c echo.Context) error {
	if empty, _ := a.cfg.Users.Empty(); empty {
		return c.Redirect(http.StatusSeeOther, "/setup")
	}
	v := dashboard.LoginView{Next: safeNext(c.QueryParam("next"))}
	if c.QueryParam("ended") != "" {
		v.Notice = "Your session ended (it expired, you signed out elsewhere, or your account changed). Sign in again to go on."
	}
	return a.loginPage(c, http.StatusOK, v)
}

func (a *app) attemptOf(c echo.Context, name string) attempt {
	return attempt{name: strings.ToLower(name), addr: c.RealIP()}
}

// throttled answers 429 when at must still wait, and 503 when the store
// that counts failures cannot be read; ok is true when at may try.
func (a *app) throttled(c echo.Context, at attempt, v dashboard.LoginView) (ok bool, err error) {
	wait, werr := a.limit.wait(c.Request().Context(), at)
	if werr != nil {
		a.log().Error("sign-in refused: the sign-in state store cannot be read", "err", werr)
		v.Error = "Sign-in is unavailable for a moment (the session store cannot be reached). Try again shortly."
		return false, a.loginPage(c, http.StatusServiceUnavailable, v)
	}
	if wait > 0 {
		secs := int((wait + 999_999_999) / 1_000_000_000)
		a.log().Warn("sign-in slowed: too many failures", "user", at.name, "ip", at.addr, "wait_s", secs)
		c.Response().Header().Set("Retry-After", fmt.Sprint(secs))
		v.Error = fmt.Sprintf("Too many failed sign-ins for this name. Try again in %s.", plural(secs, "second"))
		return false, a.loginPage(c, http.StatusTooManyRequests, v)
	}
	return true, nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func (a *app) login(c echo.Context) error {
	name, pw, next := c.FormValue("name"), c.FormValue("password"), safeNext(c.FormValue("next"))
	if tok := c.FormValue("pending"); tok != "" {
		return a.loginCode(c, tok, next)
	}
	v := dashboard.LoginView{Next: next, Name: name}
	if len(name) > 64 || len(pw) > MaxPassword {
		v.Name, v.Error = "", "Wrong name or password."
		return a.loginPage(c, http.StatusBadRequest, v)
	}
	at := a.attemptOf(c, name)
	if ok, err := a.throttled(c, at, v); !ok {
		return err
	}
	u, err := a.cfg.Users.Authenticate(name, pw)
	if err != nil {
		if ferr := a.limit.fail(c.Request().Context(), at); ferr != nil {
			a.log().Error("sign-in failure not counted", "err", ferr)
		}
		a.log().Info("login failed", "user", name, "ip", c.RealIP())
		v.Error = "Wrong name or password."
		return a.loginPage(c, http.StatusUnauthorized, v)
	}
	if u.TOTPEnrolled { // the password was right; now the code
		if code := c.FormValue("code"); code != "" {
			return a.checkCode(c, *u, "", code, next)
		}
		tok, err := a.pending.add(c.Request().Context(), *u)
		if err != nil {
			return a.storeDown(c, err, v)
		}
		v.Pending = tok
		return a.loginPage(c, http.StatusOK, v)
	}
	a.limit.success(c.Request().Context(), at)
	if err := a.startSession(c, *u, AssurancePassword); err != nil {
		return a.storeDown(c, err, v)
	}
	return c.Redirect(http.StatusSeeOther, a.after(c, next))
}

func (a *app) storeDown(c echo.Context, err error, v dashboard.LoginView) error {
	a.log().Error("sign-in state store", "err", err)
	v.Pending, v.Error = "", "Sign-in is unavailable for a moment (the session store cannot be reached). Try again shortly."
	return a.loginPage(c, http.StatusServiceUnavailable, v)
}

// after is where a sign-in goes: next, or the user's first page.
func (a *app) after(c echo.Context, next string) string {
	if next == "/" {
		return a.home(a.session(c))
	}
	return next
}

// loginCode is the second step of a TOTP user's sign-in: the form carries
// the pending token the password step issued and the code. A wrong or
// replayed code counts as a failed sign-in; the right one starts a session
// of assurance mfa.
func (a *app) loginCode(c echo.Context, tok, next string) error {
	u, ok, err := a.pending.get(c.Request().Context(), tok)
	v := dashboard.LoginView{Next: next}
	if err != nil {
		return a.storeDown(c, err, v)
	}
	if !ok {
		v.Error = "That sign-in took too long. Start again."
		return a.loginPage(c, http.StatusUnauthorized, v)
	}
	return a.checkCode(c, u, tok, c.FormValue("code"), next)
}

// checkCode verifies u's TOTP code; tok is the pending sign-in to keep
// (on a wrong code) or drop (on success).
func (a *app) checkCode(c echo.Context, u User, tok, code, next string) error {
	ctx := c.Request().Context()
	at := a.attemptOf(c, u.Name)
	v := dashboard.LoginView{Next: next}
	if ok, err := a.throttled(c, at, v); !ok {
		a.pending.drop(ctx, tok)
		return err
	}
	step, ok := a.cfg.Users.CheckTOTP(u.Name, code, a.now())
	if ok {
		fresh, err := a.totpUsed.claim(ctx, u.Name, step)
		if err != nil {
			return a.storeDown(c, err, v)
		}
		if !fresh {
			ok = false
			a.log().Warn("login refused: TOTP code replayed", "user", u.Name, "ip", c.RealIP())
		}
	}
	if !ok {
		if ferr := a.limit.fail(ctx, at); ferr != nil {
			a.log().Error("sign-in failure not counted", "err", ferr)
		}
		a.log().Info("login failed: wrong TOTP code", "user", u.Name, "ip", c.RealIP())
		if tok == "" {
			var err error
			if tok, err = a.pending.add(ctx, u); err != nil {
				return a.storeDown(c, err, v)
			}
		}
		v.Pending, v.Error = tok, "Wrong or already used code. Enter the current code from your authenticator."
		return a.loginPage(c, http.StatusUnauthorized, v)
	}
	a.pending.drop(ctx, tok)
	a.limit.success(ctx, at)
	if err := a.startSession(c, u, AssuranceMFA); err != nil {
		return a.storeDown(c, err, v)
	}
	return c.Redirect(http.StatusSeeOther, a.after(c, next))
}

func (a *app) startSession(c echo.Context, u User, assurance string) error {
	ctx := c.Request().Context()
	if old, err := c.Cookie(sessionCookie); err == nil {
		a.sessions.drop(ctx, old.Value)
	}
	ss, err := a.sessions.create(ctx, u, assurance)
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: ss.ID, Path: "/", HttpOnly: true, Secure: a.secure(c),
		SameSite: http.SameSiteStrictMode, Expires: ss.Expires})
	c.Set("session", ss)
	a.newCSRF(c) // a fresh token for the new session
	a.log().Info("signed in", "user", u.Name, "roles", u.Roles, "assurance", assurance)
	return nil
}

func (a *app) logout(c echo.Context) error {
	if ck, err := c.Cookie(sessionCookie); err == nil {
		a.sessions.drop(c.Request().Context(), ck.Value)
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: a.secure(c), SameSite: http.SameSiteStrictMode, MaxAge: -1})
	return c.Redirect(http.StatusSeeOther, "/login")
}

// secure reports whether cookies set on this response are marked Secure:
// always with CookieSecure "on", never with "off", and by default (auto)
// when the request came over TLS, directly or as a proxy in front says
// (X-Forwarded-Proto or Forwarded proto=https). A client can only make
// its own cookies stricter that way, never another's weaker.
func (a *app) secure(c echo.Context) bool {
	switch a.cfg.CookieSecure {
	case CookieSecureOn:
		return true
	case CookieSecureOff:
		return false
	}
	r := c.Request()
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		return true
	}
	return strings.Contains(strings.ToLower(r.Header.Get("Forwarded")), "proto=https")
}

// CookieSecure says when cookies are marked Secure.
type CookieSecure string

// The CookieSecure settings; "" is CookieSecureAuto.
const (
	CookieSecureAuto CookieSecure = "auto" // when the request came over TLS (or a proxy says so)
	CookieSecureOn   CookieSecure = "on"
	CookieSecureOff  CookieSecure = "off"
)

// ParseCookieSecure reads auto, on/true or off/false.
func ParseCookieSecure(s string) (CookieSecure, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return CookieSecureAuto, nil
	case "on", "true", "yes", "1":
		return CookieSecureOn, nil
	case "off", "false", "no", "0":
		return CookieSecureOff, nil
	}
	return "", fmt.Errorf("%w: %q (auto, on or off)", ErrBadConfig, s)
}

// ErrBadConfig: a Config value that cannot be used.
var ErrBadConfig = errors.New("web: bad configuration")

// --- first run

func (a *app) setupAllowed(token string) bool {
	if a.cfg.SetupToken == "" || len(token) != len(a.cfg.SetupToken) || !constantEqual(token, a.cfg.SetupToken) {
		return false
	}
	empty, err := a.cfg.Users.Empty()
	return err == nil && empty
}

// setupForm is the first-run page. With the token serve printed it asks
// for the first admin; without one (a visitor who opened / on first run)
// it says where the link is and takes the token or the whole link pasted.
func (a *app) setupForm(c echo.Context) error {
	empty, _ := a.cfg.Users.Empty()
	if !empty {
		if c.QueryParam("token") != "" {
			return echo.NewHTTPError(http.StatusNotFound, "Setup is over: the first admin exists. Sign in instead.")
		}
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	tok := setupTokenOf(c.QueryParam("token"))
	v := dashboard.SetupView{CSRF: a.csrfToken(c), Enabled: a.cfg.SetupToken != ""}
	switch {
	case tok == "":
	case a.setupAllowed(tok):
		v.Token = tok
	default:
		v.Error = "That setup token is not the one 'gatehouse serve' printed (it changes each time serve starts). Copy the link from serve's output again."
		return render(c, http.StatusNotFound, dashboard.SetupPage(v))
	}
	return render(c, http.StatusOK, dashboard.SetupPage(v))
}

// setupTokenOf takes a token, or a pasted setup link holding one.
func setupTokenOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "token="); i >= 0 {
		s = s[i+len("token="):]
		if j := strings.IndexAny(s, "&# "); j >= 0 {
			s = s[:j]
		}
	}
	return s
}

func (a *app) setup(c echo.Context) error {
	a.setupMu.Lock()
	defer a.setupMu.Unlock()
	tok := c.FormValue("token")
	if !a.setupAllowed(tok) {
		return echo.NewHTTPError(http.StatusNotFound, "Setup is over or the link is wrong: sign in, or copy the link 'gatehouse serve' printed again.")
	}
	if len(c.FormValue("password")) > MaxPassword {
		return render(c, http.StatusBadRequest, dashboard.SetupPage(dashboard.SetupView{CSRF: a.csrfToken(c), Token: tok, Enabled: true,
			Error: fmt.Sprintf("A password may be at most %d bytes.", MaxPassword)}))
	}
	u := User{Name: c.FormValue("name"), Roles: []Role{RoleAdmin}}
	if err := a.cfg.Users.Add(u, c.FormValue("password")); err != nil {
		msg := "Could not create the admin."
		if errors.Is(err, ErrWeakPassword) || errors.Is(err, ErrBadUser) {
			msg = strings.TrimPrefix(err.Error(), "web: ")
		}
		return render(c, http.StatusBadRequest, dashboard.SetupPage(dashboard.SetupView{CSRF: a.csrfToken(c), Token: tok, Enabled: true, Error: msg}))
	}
	a.log().Info("first admin created", "user", u.Name)
	signed, err := a.cfg.Users.Authenticate(u.Name, c.FormValue("password"))
	if err != nil {
		return err
	}
	if err := a.startSession(c, *signed, AssurancePassword); err != nil {
		return a.storeDown(c, err, dashboard.LoginView{})
	}
	return c.Redirect(http.StatusSeeOther, "/status")
}
