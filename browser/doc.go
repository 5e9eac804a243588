// Package browser is the browser sink: an agent drives a real Chromium over
// NATS (gatehouse.v1.effect.browser), and no data leaves the browser for a
// site it should not reach.
//
// # Pool
//
// A Pool owns one Playwright driver (playwright.Run) and one headless
// Chromium (Debian's, at /usr/lib/chromium/chromium), both started lazily by
// the first effect that needs a page and stopped by Close. Each run gets its
// own BrowserContext (cookies, storage, cache and pages of one run are never
// visible to another), created at the run's first action and closed by the
// "close" action, by CloseRun, after Config.IdleTimeout without an action,
// or by Close. Service workers are blocked in every context the pool makes.
// Every goroutine the pool starts (the idle reaper, report-mode observers)
// and every route handler in flight is waited for by Close.
//
// The driver is playwright-core from the npm registry (never Playwright's
// CDN), found in Config.DriverDir, else $PLAYWRIGHT_DRIVER_PATH, else
// DefaultDriverDir; `bash .ci/install-deps` installs it and Chromium. A
// browser that cannot start does not stop Gatehouse: every effect that needs
// a page is decided and recorded, then fails with ErrUnavailable, whose
// message names what is missing and the command that fixes it. The pool
// retries the start at most once every Config.RetryAfter.
//
// # Actions and effects
//
// The agent's actions and the effect each is decided as (Effect.Sink is
// browser for all of them; Host and PageHost are URL hosts, lower case, with
// the port when it is not the scheme's default):
//
//	action      params                      Effect.Action  Target              Method
//	goto        {url}                       navigate       host+path of url    GET
//	click       {selector}                  click          page host+path
//	fill        {selector, value}           fill           page host+path
//	select      {selector, values}          select         page host+path
//	press       {selector, key}             press          page host+path
//	text        {selector}                  text           page host+path
//	content     {}                          content        page host+path
//	screenshot  {}                          screenshot     page host+path
//	close       {}                          close          page host+path
//
// For a navigate, Host is the url's host and PageHost the host of the page
// the run is on (empty before its first page). For the other actions Host
// and PageHost are both the current page's host: the target is the page the
// action touches, so a scope or rule naming "bank.example.com/**" covers
// every action on that site's pages. The selector and values are not in the
// target; the proposal's Size and Digest are those of the action's params
// (so a filled password is recorded only as a digest). Only http and https
// URLs can be opened. The query of a URL is never recorded.
//
// Results: text returns {"text"}, content {"html"}, screenshot
// {"png_base64"} (in the reply for now; an artifact later), the others
// {"url"} of the page after the action. A reply larger than MaxReplyBytes is
// refused with ErrTooLarge.
//
// # Sends: data leaving the browser
//
// Every request a run's pages make whose method is not GET, HEAD or OPTIONS
// (a form, fetch, XHR, sendBeacon, <a ping>) is a "send" effect, decided and
// recorded by the broker: Effect{Action: "send", Method, Host, PageHost,
// Target: host+path, Path}, with the body's size and digest. PageHost is the
// host of the top-level page the request comes from (for a popup that is
// still about:blank, its opener's; for a request without a frame, such as a
// dedicated worker's, the run's current page). The policy's built-in
// browser-send-off-site refuses a send to a host other than PageHost in
// strict mode unless an effects allow rule with a target matches, e.g.
// {sink: browser, target: "api.example.com/**"}.
//
// Sends never travel over NATS. The pool proposes them to the broker
// through the Decider it was bound to (Bind), in process. An agent cannot
// propose a send: Describe accepts one only when its context carries the
// request the pool saw, under a context key unexported from this package,
// and the effect is built from that request, never from params. An agent's
// "send" over NATS is refused as a bad request and nothing is decided.
//
// By mode (the bound broker's):
//   - strict: the context routes every request (context.Route("**/*")).
//     Plain reads continue at once, neither decided nor recorded. A send is
//     held until its decision: Perform releases it (route.Continue) only
//     after the decision and attempt are recorded; a refusal, a decision
//     that cannot be recorded or a closing pool aborts it
//     (net::ERR_BLOCKED_BY_CLIENT), so nothing reaches the other site.
//   - report: nothing is routed, so the page pays nothing. Sends are
//     observed (context.OnRequest) as they leave and proposed in the
//     background; what strict mode would refuse is recorded as such, and the
//     send's outcome carries detail observed=true (it had already left).
//   - off: nothing is routed, observed, decided or recorded.
//
// A pool that is not bound opens no page (ErrNotBound); a send seen while
// the pool is closing, or by a pool that lost its binding, is aborted.
//
// # Not in this slice
//
// Left for the rest of issue 5, with the seams named:
//   - the forward proxy backstop inside the broker (Launch's Proxy) for what
//     routing never sees: shared workers, 307 redirects that re-send a body,
//     beacons fired on pagehide or page close, self-removing iframes,
//     WebSocket handshakes, and Chromium's own background traffic; it would
//     decide through the same proposeSend;
//   - WebSocket connections (RouteWebSocket) and rules for data carried in
//     GET addresses to other sites (plain reads are never decided here);
//   - reads of targets a scope names (frames and fetches decided like a
//     navigation), and with them routing in report mode when a scope names
//     a browser target;
//   - navigations the page makes itself (a link, location=) are not decided
//     as navigate effects; data-carrying ones are sends;
//   - screenshots as artifacts.
//
// The journal's decision event has no page_host field yet: the broker
// records Host, Method, Path and Target of a send, and PageHost is decided on
// but not recorded (see the report for the broker change).
package browser
