// Package browser is the browser sink: an agent drives a real Chromium over
// NATS (gatehouse.v1.agent.<agent>.effect.browser), and no data leaves the browser for a
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
// Every goroutine the pool starts (the idle reaper, the proxy listeners and
// their tunnels, sends recorded in the background)
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
//	screenshot  {inline}                    screenshot     page host+path
//	pages       {}                          pages          page host+path
//	switch      {page}                      switch         host+path of that page
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
// A run's pages are the one it started on (index 0) and every popup its
// pages open, in order; pages lists them ({"pages": [{page, url, closed}],
// "current"}), switch makes one the page later actions (goto included) act
// on, and an action during which popups opened lists them in its reply's
// "opened" (best effort: a popup that opens after the action returns is
// only in pages).
//
// Results: text returns {"text"}, content {"html"}, the others {"url"} of
// the page after the action. A reply larger than MaxReplyBytes is refused
// with ErrTooLarge.
//
// # Screenshots are artifacts
//
// A screenshot is stored in the deployment's artifact store (Config.Artifacts,
// the store the artifact sink writes: NATS Object Store, a folder or Redis)
// under the key ScreenshotKey: "screenshots/<run>/<sha256 hex>.png", in the
// run's tenant's folder (Config.ArtifactName), and the reply names it:
// {"artifact": {key, size, digest, content_type}, "publish_effect"}. The
// agent reads it back with the artifact sink's get {"key"}. Only with
// params {"inline": true} does the PNG come back in the reply instead
// ({"png_base64", "size", "digest"}), and nothing is stored. A pool without
// an artifact store answers a stored screenshot UNAVAILABLE
// (ErrNoArtifactStore) before anything is decided.
//
// Storing it is decided on its own (screenshot.go): the screenshot action is
// decided on the page, before the picture exists; the store publishes
// content, so the pool then proposes Effect{Sink: artifact, Action:
// publish, Target: key} with the PNG's size and digest, decided under the
// artifact rules, mandate and scopes exactly like an agent's publish, and
// recorded before the store happens. A refused or held publish stores
// nothing and fails the screenshot with ErrNotStored, naming the refusal;
// the journal holds both effects, the screenshot's outcome naming the
// publish effect (whose attempt names the browser sink, which carries it
// out). Only the pool can propose that publish (a context value,
// as for sends); an agent's "publish" to the browser sink is a bad request.
//
// # Sends: data leaving the browser
//
// Every request a run's pages make whose method is not GET, HEAD or OPTIONS
// (a form, fetch, XHR, sendBeacon, <a ping>) is a "send" effect, decided and
// recorded by the broker: Effect{Action: "send", Method, Host, PageHost,
// Target: host+path, Path}, with the body's size and digest. PageHost is the
// host of the top-level page the request comes from (for a popup that is
// still about:blank, its opener's; for a request without a frame, such as a
// worker's, the run's current page). The policy's built-in
// browser-send-off-site refuses a send to a host other than PageHost in
// strict mode unless an effects allow rule with a target matches, e.g.
// {sink: browser, target: "api.example.com/**"}.
//
// Also decided, by the same path (rules in policy/browser.go):
//   - a GET, HEAD or OPTIONS with a body (an OPTIONS can carry one) is a
//     send like a POST (Values[policy.BrowserBodyBytes] says so); the
//     agent's goto passes undecided only as the GET it is, and an Upgrade
//     other than a WebSocket's through CONNECT is refused (400);
//   - a GET to another site whose query is longer than the rules file's
//     browser.max_off_site_query_bytes (policy.DefaultMaxOffSiteQueryBytes,
//     1024, when unset) is a send with Method GET; its size and digest are
//     the query's (never its text), and strict mode refuses it
//     (browser-query-off-site) unless an allow rule names the target;
//   - a read (a frame, fetch, image) of a target a scope names is decided
//     like a navigation (Action navigate), so a run without the scope is
//     refused (scope-missing) in report mode too; when a scope names a
//     browser target, report mode routes requests as strict mode does;
//   - HTTPS is looked into, not decided by host (mitm.go): in report and
//     strict mode the proxy terminates the TLS of every tunnel with a
//     certificate only this pool's Chromium accepts, verifies the site's
//     certificate itself (system roots, or Config.TLSRoots), and decides
//     the requests inside one by one like plain http. So a page's reads
//     from other HTTPS hosts (CDNs, fonts, images) work in strict mode
//     without a rule, and every send there is decided, including those
//     routing never sees;
//   - a WebSocket (ws://, or wss:// inside an intercepted tunnel) to a host
//     other than the page's or one the agent navigated to is a "connect"
//     effect, refused in strict mode (browser-send-off-site) unless an
//     allow rule names the host; the outcome, recorded when it closes,
//     counts and digests the frames the page sent (detail websocket,
//     frames, path; Size and Digest are the payloads');
//   - the browser's own traffic is a "background" effect of origin runtime,
//     refused in every mode (browser-background) and recorded under a run
//     the pool opens for tenant RuntimeTenant and person RuntimePerson, never
//     under an agent's run.
//
// None of these travel over NATS. The pool proposes them to the broker
// through the Decider it was bound to (Bind), in process. An agent cannot
// propose one: Describe accepts them only when the context carries the
// request the pool saw, under a context key unexported from this package,
// and the effect is built from that request, never from params. An agent's
// "send" over NATS is refused as a bad request and nothing is decided.
//
// # Two eyes, one decision per request
//
// The route handler (context.Route("**/*")) sees requests with their frame,
// so it knows the page they come from; the forward proxy (proxy.go) inside
// the broker process sees everything Chromium sends, including what routing
// never sees: shared workers, 307/308 redirects re-sending a body, beacons
// fired on pagehide or while a page closes, iframes that remove themselves,
// WebSocket handshakes, and Chromium's own traffic. Each context gets its own
// proxy listener (the per-context Proxy option), so the listener a request
// arrives on names its run; Chromium is launched with the runtime's listener
// for traffic of no context.
//
// A request is decided once. The route handler continues what it decided
// (http and https alike: the proxy sees inside every tunnel whenever
// routing is on) with a one-time token header the proxy strips and spends; the proxy
// decides whatever arrives without an unspent token, under the same
// classification (Pool.classify), with the run's current top-level page as
// PageHost. A body a redirect re-sends carries a spent token and is decided
// again, as a send to its new host.
//
// By mode (the bound broker's):
//   - strict: every request is routed. Plain reads continue at once,
//     neither decided nor recorded. A decided request is held until its
//     decision: Perform releases it only after the decision and attempt are
//     recorded; a refusal, a decision that cannot be recorded or a closing
//     pool aborts it (net::ERR_BLOCKED_BY_CLIENT from routing, 403 from the
//     proxy), so nothing reaches the other site.
//   - report: nothing is routed (unless a scope names a browser target), so
//     the page pays only the loopback proxy hop. The proxy lets sends out at
//     once and proposes them in the background; what strict mode would
//     refuse is recorded as such, and the send's outcome carries detail
//     observed=true (it had already left).
//   - off: nothing is routed, decided or recorded; the proxy passes
//     everything but the browser's own traffic, and HTTPS tunnels are
//     blind (Chromium verifies the sites itself).
//
// A pool that is not bound opens no page (ErrNotBound); a send seen while
// the pool is closing, or by a pool that lost its binding, is aborted.
//
// # Failures
//
// A goto on a run without a page starts the browser first; one that cannot
// start answers with a broker.ErrSinkUnavailable error (code UNAVAILABLE),
// naming what is missing and FixCommand, and nothing is decided. A browser
// that went away (crashed, killed) is started again by the next goto; the
// first action of a run whose context died with it fails with ErrRestarted
// (its pages, cookies and storage are gone) and the run's context is
// dropped.
//
// # Not covered
//
//   - between Chromium and the proxy HTTPS is HTTP/1.1 only (the proxy
//     reaches sites with HTTP/1.1 too); a site whose certificate the
//     deployment's roots do not verify answers 502 (the proxy's), where
//     Chromium would have shown its own certificate error; client
//     certificates are not supported;
//   - the browser's own traffic inside a context is recognised by a list of
//     Chromium's service hosts (browserServiceHosts); a host not on it is
//     taken for the run's: its reads pass, its sends are decided;
//   - a beacon fired while the agent's close action tears the context down
//     is decided or lost with the context, never let out undecided;
//   - WebRTC; navigations the page starts itself are decided only when they
//     carry data;
//   - a screenshot's publish that an approval rule matches is held, and the
//     screenshot fails (ErrNotStored): the pool does not wait for the
//     approval, and the agent cannot resend the pool's publish. Keep
//     approval rules off "screenshots/**", or ask for it inline.
package browser
