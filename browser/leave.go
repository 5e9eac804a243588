package browser

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/gatehouse/gatehouse/policy"
)

// Changing site (doc.go, "Changing site").
//
// The run's site is the one place its pages may send to. When the agent's
// goto takes the run to another site, what the pages of the old site hold
// must not come along: the old page unloading (its pagehide, unload and
// visibilitychange handlers, a fetchLater), a popup of the old site left
// open (it holds a reference to the first page and could send, or post to
// the new site's page, at any time), window.name (which Chromium keeps
// across a browser-initiated navigation, even to another site), and
// cookies a page's script planted where the new site reads them (browsers
// share cookies across the ports of a host, and a parent domain's among
// its subdomains). leaveSite runs before such a goto, while the old site
// is still the run's, so what the old pages send on their way out is
// decided against the old site (refused when it goes elsewhere), on
// record before the goto.

// leaveSite ends the run's stay on its site before the agent's goto to
// next, another site (not in mode off, and not on the run's first goto):
// it closes every other page of the run (popups), takes page (the one the
// goto acts on) to about:blank and clears its window.name, waits for what
// that set off to be decided and recorded (settle), closes any popup the
// old page opened meanwhile, and in strict mode moves the cookies
// (moveCookies). In strict mode a step that fails fails the goto (an
// error wrapping nothing the agent may not see): the old site's page,
// or its planted cookies, would otherwise come along. In report mode it
// is logged and the goto goes on. The caller holds s.act.
func (p *Pool) leaveSite(s *session, page playwright.Page, next string) error {
	d := p.boundDecider()
	old := s.pageHost()
	if d == nil || d.Mode() == policy.ModeOff || old == "" || next == "" || strings.EqualFold(old, next) {
		return nil
	}
	strict := d.Mode() == policy.ModeStrict
	s.mu.Lock()
	bctx := s.bctx
	s.mu.Unlock()
	closeOthers := func() {
		s.mu.Lock()
		pages := slices.Clone(s.pages)
		s.mu.Unlock()
		for _, pg := range pages {
			if pg != page && !pg.IsClosed() {
				_ = pg.Close()
			}
		}
	}
	closeOthers()
	_, err := page.Goto("about:blank")
	if err == nil {
		_, err = page.Evaluate("() => { window.name = ''; }")
	}
	if err != nil {
		p.log.Warn("the old site's page was not left", "run", s.run, "err", err)
		if strict {
			return fmt.Errorf("the page of %s could not be left before going to %s: %w", old, next, err)
		}
	}
	s.settle(p.cfg.SettleQuiet, p.cfg.SettleMax, time.Now())
	closeOthers() // popups the old page opened while it was left
	if strict && bctx != nil {
		if err := s.moveCookies(bctx, old, next); err != nil {
			p.log.Warn("cookies not moved on a change of site", "run", s.run, "err", err)
			return fmt.Errorf("the cookies of %s could not be set aside before going to %s: %w", old, next, err)
		}
	}
	return nil
}

// cookieKey names a cookie in the jar.
func cookieKey(c playwright.Cookie) string {
	return c.Domain + "|" + c.Path + "|" + c.Name + "=" + c.Value
}

// visibleTo reports whether a page of host (with or without port) reads
// cookie c: its domain is the host, or, for a domain cookie (".example.com"),
// a parent of it. Ports are not told apart, as browsers do not.
func visibleTo(c playwright.Cookie, host string) bool {
	h := strings.ToLower(strings.Trim(hostOnly(host), "[]"))
	d := strings.ToLower(c.Domain)
	if strings.HasPrefix(d, ".") {
		return h == d[1:] || strings.HasSuffix(h, d)
	}
	return h == d
}

// moveCookies takes the run from site old to site next in the jar: it
// notes the cookies old's pages read as old's own, puts back what was
// hidden when the run came to old, and hides, while next is the run's
// site, every cookie next's pages would read that is not next's own: not
// set by next's responses through the proxy (or, for a domain cookie, by a
// response of a host under its domain), and not read by next's pages when
// the run last left it. So a cookie a page's script planted (or another
// port's server set) is not read by the next site's pages, and comes back
// when the run leaves that site.
func (s *session) moveCookies(bctx playwright.BrowserContext, old, next string) error {
	jar, err := bctx.Cookies()
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.ownCookies == nil {
		s.ownCookies = map[string]map[string]bool{}
	}
	own := map[string]bool{}
	for _, c := range jar {
		if visibleTo(c, old) {
			own[cookieKey(c)] = true
		}
	}
	s.ownCookies[old] = own
	restore := s.hidden // hidden until they are back in the jar
	s.mu.Unlock()

	if len(restore) > 0 {
		present := map[string]bool{}
		for _, c := range jar {
			present[c.Domain+"|"+c.Path+"|"+c.Name] = true
		}
		var back []playwright.OptionalCookie
		for _, c := range restore {
			if present[c.Domain+"|"+c.Path+"|"+c.Name] {
				continue
			}
			back = append(back, playwright.OptionalCookie{Name: c.Name, Value: c.Value, Domain: playwright.String(c.Domain),
				Path: playwright.String(c.Path), Expires: playwright.Float(c.Expires), HttpOnly: playwright.Bool(c.HttpOnly),
				Secure: playwright.Bool(c.Secure), SameSite: c.SameSite, PartitionKey: c.PartitionKey})
			jar = append(jar, c)
		}
		if len(back) > 0 {
			if err := bctx.AddCookies(back); err != nil {
				return err
			}
		}
	}

	var hide []playwright.Cookie
	s.mu.Lock()
	seen := s.ownCookies[next]
	for _, c := range jar {
		if visibleTo(c, next) && !seen[cookieKey(c)] && !s.setByResponse(c, next) {
			hide = append(hide, c)
		}
	}
	s.hidden = hide
	s.mu.Unlock()
	for _, c := range hide {
		if err := bctx.ClearCookies(playwright.BrowserContextClearCookiesOptions{Name: c.Name, Domain: c.Domain, Path: c.Path}); err != nil {
			return err
		}
	}
	return nil
}

// setByResponse reports whether a response through the proxy set cookie c
// (its name and value) as next's own: from next itself, or, for a domain
// cookie, from a host under its domain. s.mu is held.
func (s *session) setByResponse(c playwright.Cookie, next string) bool {
	for site, jar := range s.cookies {
		if v, ok := jar[c.Name]; !ok || v != c.Value {
			continue
		}
		if strings.EqualFold(site, next) || (strings.HasPrefix(c.Domain, ".") && visibleTo(c, site)) {
			return true
		}
	}
	return false
}
