package browser

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/gatehouse/gatehouse/broker"
)

// session is one run's BrowserContext and the page the agent drives.
//
// Lock order: act before mu; mu and actMu are leaves (nothing else is
// locked while one is held, and never both).
type session struct {
	run string
	// owner is the run itself, set by each action, for noting its
	// writes (writes.go).
	owner atomic.Pointer[broker.Run]
	act   sync.Mutex   // serializes the agent's actions on this run
	busy  atomic.Int32 // actions in progress; the reaper skips busy sessions
	used  atomic.Int64 // unix nanoseconds of the last action
	url   atomic.Pointer[string]

	// lastSeen is when the run's proxy last saw a request arrive (unix
	// nanoseconds): the settle barrier waits for it to grow quiet.
	lastSeen atomic.Int64

	// lastDone is when a request the proxy forwarded last finished.
	lastDone atomic.Int64

	actMu   sync.Mutex          // guards pending, drained, active and nextReq
	pending int                 // decisions of the run's requests being made and recorded
	drained chan struct{}       // closed when pending falls to 0; nil while it is 0
	active  map[uint64]inFlight // requests being forwarded
	nextReq uint64
	// issued are requests Chromium said it made (Playwright's request
	// events) that have neither reached the proxy nor finished: "METHOD
	// url" -> unix nanoseconds, oldest first.
	issued map[string][]int64

	mu      sync.Mutex         // guards the fields below
	br      playwright.Browser // the browser the context was made in
	bctx    playwright.BrowserContext
	page    playwright.Page   // the page actions act on
	pages   []playwright.Page // every page of the context, by index; 0 is the first
	proxy   *proxy            // the run's proxy listener
	site    string            // the run's site: the host of the agent's last goto
	gotoURL string            // the agent's goto in progress
	lang    string            // the Accept-Language Chromium sent on the agent's goto
	// expect are the follow-ups of redirects decided at the redirect
	// ("METHOD url"), each passed once without a second decision.
	expect map[string]int
	// preflights are the header names CORS preflights announced for the
	// request each precedes ("METHOD url").
	preflights map[string][]string
	// cookies are the cookies each site (host:port) set through the
	// proxy, by name: in strict mode only those reach it from a page of
	// another site (doc.go, "Data in a read").
	cookies map[string]map[string]string
	// ownCookies are, per site, the cookies its pages read when the run
	// last left it; hidden are the cookies moveCookies took out of the
	// jar when the run came to its site, put back when it leaves.
	ownCookies map[string]map[string]bool
	hidden     []playwright.Cookie
	closed     bool
}

// Bounds on what a session remembers for its proxy.
const (
	maxExpect     = 1 << 10
	maxPreflights = 1 << 10
	maxCookieSite = 256
	maxCookies    = 64
)

// maxPages bounds the pages a run can address.
const maxPages = 64

// pageInfo is one of a run's pages, as the pages action lists it.
type pageInfo struct {
	Page   int    `json:"page"`
	URL    string `json:"url"`
	Closed bool   `json:"closed,omitempty"`
}

// addPage makes pg addressable (popups the context opens); a page already
// known, or one past maxPages, is not added.
func (s *session) addPage(pg playwright.Page) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, known := range s.pages {
		if known == pg {
			return
		}
	}
	if len(s.pages) < maxPages {
		s.pages = append(s.pages, pg)
	}
}

func (s *session) pageCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pages)
}

// pagesSince lists the pages added after the first n.
func (s *session) pagesSince(n int) []pageInfo {
	all := s.listPages()
	if n >= len(all) {
		return nil
	}
	return all[n:]
}

func (s *session) listPages() []pageInfo {
	s.mu.Lock()
	pages := slices.Clone(s.pages)
	s.mu.Unlock()
	out := make([]pageInfo, len(pages))
	for i, pg := range pages {
		out[i] = pageInfo{Page: i, URL: pg.URL(), Closed: pg.IsClosed()}
	}
	return out
}

func (s *session) currentIndex() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, pg := range s.pages {
		if pg == s.page {
			return i
		}
	}
	return 0
}

// pageURL is the URL of page i; false when there is none.
func (s *session) pageURL(i int) (string, bool) {
	if s == nil {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.pages) {
		return "", false
	}
	return s.pages[i].URL(), true
}

// switchTo makes page i the one actions act on.
func (s *session) switchTo(i int) (playwright.Page, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.pages) {
		return nil, fmt.Errorf("%w: the run has %d pages, no page %d", ErrNoPage, len(s.pages), i)
	}
	if s.pages[i].IsClosed() {
		return nil, fmt.Errorf("%w: page %d is closed", ErrNoPage, i)
	}
	s.page = s.pages[i]
	return s.page, nil
}

// needsBrowser reports whether an action on s would start the browser: no
// page yet, or the browser it was made in went away.
func (s *session) needsBrowser() bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.page == nil || (s.br != nil && !s.br.IsConnected())
}

// crashed reports whether the browser s's context was made in went away
// (Chromium crashed or was killed): the context, its pages, cookies and
// storage are gone.
func (s *session) crashed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.br != nil && !s.br.IsConnected()
}

// pageHost is the run's site: the host of the agent's last goto (its
// target while it is in progress, the page's host once it returns); "" before
// the first. Requests are decided against it, whichever of the run's pages
// or frames they come from: a page that took itself elsewhere (a link, a
// script, a popup) does not take the run's site with it (doc.go).
func (s *session) pageHost() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.site
}

// runSite is the run's site for a session that may be nil ("" then).
func (s *session) runSite() string {
	if s == nil {
		return ""
	}
	return s.pageHost()
}

// startGoto notes the agent's decided goto: its navigation request is not
// decided again, and its host is the run's site from now.
func (s *session) startGoto(rawURL string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gotoURL = rawURL
	if h := hostPath(rawURL).host; h != "" {
		s.site = h
	}
}

// endGoto ends the agent's goto; the page's host (after any redirects)
// becomes the run's site.
func (s *session) endGoto(finalURL string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gotoURL = ""
	if h := hostPath(finalURL).host; h != "" {
		s.site = h
	}
}

func (s *session) isAgentGoto(rawURL string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gotoURL != "" && requestKey(http.MethodGet, s.gotoURL) == requestKey(http.MethodGet, rawURL)
}

// learnLanguage keeps the Accept-Language of the agent's goto, which is
// Chromium's own: another value on a read of another site is the page's.
func (s *session) learnLanguage(v string) {
	if v == "" {
		return
	}
	s.mu.Lock()
	s.lang = v
	s.mu.Unlock()
}

func (s *session) browserLanguage() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lang
}

// expectFollowUp notes that the request Chromium makes to follow a redirect
// was decided at the redirect.
func (s *session) expectFollowUp(method, rawURL string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expect == nil {
		s.expect = map[string]int{}
	}
	if len(s.expect) < maxExpect {
		s.expect[requestKey(method, rawURL)]++
	}
}

// followUp reports whether a request is the follow-up of a redirect
// decided at the redirect, using the note up.
func (s *session) followUp(method, rawURL string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := requestKey(method, rawURL)
	if s.expect[k] == 0 {
		return false
	}
	if s.expect[k]--; s.expect[k] == 0 {
		delete(s.expect, k)
	}
	return true
}

// notePreflight keeps the header names a CORS preflight announced for the
// request it precedes.
func (s *session) notePreflight(method, rawURL string, names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.preflights == nil {
		s.preflights = map[string][]string{}
	}
	if len(s.preflights) >= maxPreflights {
		clear(s.preflights)
	}
	s.preflights[requestKey(method, rawURL)] = names
}

// preflighted returns (and forgets) the header names a preflight announced
// for this request.
func (s *session) preflighted(method, rawURL string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := requestKey(method, rawURL)
	names := s.preflights[k]
	delete(s.preflights, k)
	return names
}

// noteCookies keeps the cookies a response from site (host:port) set.
func (s *session) noteCookies(site string, set []*http.Cookie) {
	if len(set) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cookies == nil {
		s.cookies = map[string]map[string]string{}
	}
	jar := s.cookies[site]
	if jar == nil {
		if len(s.cookies) >= maxCookieSite {
			return
		}
		jar = map[string]string{}
		s.cookies[site] = jar
	}
	for _, c := range set {
		if c.MaxAge < 0 {
			delete(jar, c.Name)
		} else if len(jar) < maxCookies || jar[c.Name] != "" {
			jar[c.Name] = c.Value
		}
	}
}

// siteCookies filters a Cookie header on a request to site down to the
// cookies site itself set; the rest (set by a page's script, or by another
// port or subdomain of the same name, which browsers send along) are the
// page's data.
func (s *session) siteCookies(site string, h http.Header) {
	if h.Get("Cookie") == "" {
		return
	}
	r := &http.Request{Header: http.Header{"Cookie": h.Values("Cookie")}}
	s.mu.Lock()
	jar := s.cookies[site]
	var kept []string
	for _, c := range r.Cookies() {
		if v, ok := jar[c.Name]; ok && v == c.Value {
			kept = append(kept, c.Name+"="+c.Value)
		}
	}
	s.mu.Unlock()
	if len(kept) == 0 {
		h.Del("Cookie")
		return
	}
	h.Set("Cookie", strings.Join(kept, "; "))
}

// seen notes a request arriving at the run's proxy.
func (s *session) seen() { s.lastSeen.Store(time.Now().UnixNano()) }

// inFlight is a request the proxy is forwarding: when it arrived, and how
// long it holds the settle barrier.
type inFlight struct {
	at    int64 // unix nanoseconds
	holds time.Duration
}

// forwarding notes a request the proxy forwards, until the returned func
// is called when it is done: what its response sets off (a frame's
// document, a preflight's answer) comes after it, so the settle barrier
// waits for it, unless it lives long: longLived, or documentLived for a
// navigation (a frame's or a popup's document, which a slow site may take
// seconds to answer, and whose page then sends).
func (s *session) forwarding(navigation bool) func() {
	s.actMu.Lock()
	if s.active == nil {
		s.active = map[uint64]inFlight{}
	}
	s.nextReq++
	id := s.nextReq
	holds := longLived
	if navigation {
		holds = documentLived
	}
	s.active[id] = inFlight{at: time.Now().UnixNano(), holds: holds}
	s.actMu.Unlock()
	return func() {
		s.actMu.Lock()
		delete(s.active, id)
		s.actMu.Unlock()
		s.lastDone.Store(time.Now().UnixNano())
	}
}

// issue notes a request Chromium says it made; the settle barrier waits
// for it to reach the proxy or to finish.
func (s *session) issue(method, rawURL string) {
	if !strings.HasPrefix(rawURL, "http:") && !strings.HasPrefix(rawURL, "https:") && method != "PAGE" {
		return
	}
	s.actMu.Lock()
	defer s.actMu.Unlock()
	if s.issued == nil {
		s.issued = map[string][]int64{}
	}
	now := time.Now()
	if len(s.issued) >= maxExpect {
		// Forget what went unanswered for longer than longLived: it no
		// longer holds the barrier.
		for k, q := range s.issued {
			if now.Sub(time.Unix(0, q[len(q)-1])) >= longLived {
				delete(s.issued, k)
			}
		}
	}
	if len(s.issued) < maxExpect {
		k := requestKey(method, rawURL)
		s.issued[k] = append(s.issued[k], now.UnixNano())
	}
}

// arrived clears the oldest note of a request Chromium made, as it reaches
// the proxy, finishes or fails.
func (s *session) arrived(method, rawURL string) {
	s.actMu.Lock()
	defer s.actMu.Unlock()
	k := requestKey(method, rawURL)
	if q := s.issued[k]; len(q) > 1 {
		s.issued[k] = q[1:]
	} else {
		delete(s.issued, k)
	}
}

// longLived is how long a request in flight holds the settle barrier: one
// still open after it (an event stream, a long poll) is taken to be a
// page's standing connection, not part of what an action set off.
const longLived = time.Second

// documentLived is how long a navigation in flight holds the barrier (at
// most Config.SettleMax in any one barrier).
const documentLived = 5 * time.Second

// young reports whether a request still being forwarded holds the barrier
// (it arrived less than its holds ago), or one Chromium made was issued
// less than longLived ago and has not reached the proxy.
func (s *session) young(now time.Time) bool {
	s.actMu.Lock()
	defer s.actMu.Unlock()
	for _, f := range s.active {
		if now.Sub(time.Unix(0, f.at)) < f.holds {
			return true
		}
	}
	for _, q := range s.issued {
		if now.Sub(time.Unix(0, q[len(q)-1])) < longLived {
			return true
		}
	}
	return false
}

// begin notes a decision of one of the run's requests under way; pair it
// with end once it is recorded (or failed).
func (s *session) begin() {
	s.actMu.Lock()
	defer s.actMu.Unlock()
	if s.pending == 0 {
		s.drained = make(chan struct{})
	}
	s.pending++
}

func (s *session) end() {
	s.actMu.Lock()
	defer s.actMu.Unlock()
	if s.pending--; s.pending == 0 {
		close(s.drained)
		s.drained = nil
	}
}

// drain waits until no decision of the run's requests is under way, or
// until deadline; false when the deadline came first.
func (s *session) drain(deadline time.Time) bool {
	s.actMu.Lock()
	ch := s.drained
	s.actMu.Unlock()
	if ch == nil {
		return true
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// settle is the barrier every action starts with, and an action that
// touches a page ends with: it waits until every decision under way is
// recorded, no request the proxy is forwarding arrived less than longLived
// ago, no request Chromium said it made in that time is still on its way
// to the proxy, and the run's proxy has seen no request arrive or finish for quiet;
// for at most max. So what an action sets off (a beacon, twenty frames that
// load and remove themselves, a preflight and its request, a redirect) is
// decided and on record before the action returns, and before the next one
// does, unless the page keeps sending for longer than limit. On a page that
// has gone quiet it returns at once.
//
// from is when the action that ends with the barrier finished: the quiet
// is counted from it at the earliest, so what it set off has quiet to show
// up in. The barrier an action starts with passes the zero time.
func (s *session) settle(quiet, limit time.Duration, from time.Time) {
	deadline := time.Now().Add(limit)
	for {
		if !s.drain(deadline) {
			return
		}
		now := time.Now()
		left := deadline.Sub(now)
		if left <= 0 {
			return
		}
		last := time.Unix(0, max64(max64(s.lastSeen.Load(), s.lastDone.Load()), from.UnixNano()))
		wait := quiet - now.Sub(last)
		if s.young(now) {
			wait = max(wait, 10*time.Millisecond)
		}
		if wait <= 0 {
			return
		}
		time.Sleep(min(wait, left))
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// close closes the session's context after letting its pages leave: each
// page is closed first (its pagehide and unload handlers run, and what they
// send reaches the proxy and is decided under the run), the run settles,
// then the context and the proxy listener go. Pass settleFor 0 to close at
// once (the pool is closing).
func (s *session) close(quiet, settleFor time.Duration) {
	s.mu.Lock()
	bctx, px, pages := s.bctx, s.proxy, slices.Clone(s.pages)
	s.closed, s.bctx, s.page, s.proxy, s.pages = true, nil, nil, nil, nil
	s.mu.Unlock()
	if bctx != nil && settleFor > 0 {
		for _, pg := range pages {
			if !pg.IsClosed() {
				_ = pg.Close()
			}
		}
		s.settle(quiet, settleFor, time.Now())
	}
	if bctx != nil {
		_ = bctx.Close()
	}
	s.drain(time.Now().Add(settleFor))
	if px != nil {
		px.close()
	}
}
