package web

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/dashboard"
)

// errorHandler answers every error the routes return. A browser gets a
// page (the signed-in layout when there is a session) saying what
// happened and what to do; an htmx request gets the message as text
// (the page's script shows it in its notice, and a 401 as the sign-in
// banner); JSON endpoints (/api/...) get {"code","message"}. A 5xx is
// logged with the underlying error, which is never shown.
func errorHandler(a *app, log *slog.Logger) echo.HTTPErrorHandler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		code, msg := http.StatusInternalServerError, "Something went wrong on the server; the details are in its log."
		var he *echo.HTTPError
		if errors.As(err, &he) {
			code = he.Code
			if m, ok := he.Message.(string); ok && m != "" && (code < 500 || he.Internal == nil) {
				msg = m
			}
		}
		if code >= 500 {
			log.Error("http", "path", c.Request().URL.Path, "code", code, "err", err)
		}
		if code == http.StatusNotFound && (he == nil || he.Message == http.StatusText(http.StatusNotFound)) {
			msg = "There is no page at this address."
		}
		if code == http.StatusRequestEntityTooLarge {
			msg = fmt.Sprintf("That is more than the dashboard takes in one request (%sB); a reason may be at most %d characters.", MaxBody, MaxReason)
		}
		if code == http.StatusMethodNotAllowed {
			msg = "This address does not take that kind of request."
		}
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		r := c.Request()
		if r.Method == http.MethodHead {
			_ = c.NoContent(code)
			return
		}
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/"):
			_ = c.JSON(code, map[string]string{"code": strings.ReplaceAll(strings.ToUpper(http.StatusText(code)), " ", "_"), "message": msg})
		case r.Header.Get("HX-Request") != "" || r.Header.Get("Accept") == "text/event-stream":
			_ = c.String(code, msg)
		default:
			v := dashboard.ErrorView{Code: code, Title: http.StatusText(code), Message: msg}
			if a != nil {
				if ss := a.session(c); ss != nil {
					v.Nav = a.nav(c, "")
					v.SignedIn = true
				}
			}
			_ = render(c, code, dashboard.ErrorPage(v))
		}
	}
}
