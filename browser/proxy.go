package browser

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// The forward proxy: the one place every request of a run's browser is
// decided (doc.go, "One eye").
//
// Every BrowserContext the pool makes is given its own proxy listener on
// loopback (BrowserNewContextOptions.Proxy), so a request arriving on a
// listener is that run's, whatever made it: a page, a frame that removed
// itself, a dedicated or shared worker, a beacon fired while the page
// unloads or after page.Close, a redirect re-sending a body. Chromium itself
// is launched with one more listener, the runtime's: what arrives there
// belongs to no context (update checks, safe browsing and the like).
// Playwright sends loopback through the proxy too (it adds
// --proxy-bypass-list=<-loopback>), so test sites on 127.0.0.1 are seen.
//
// Each request is classified (Pool.classify) against the run's site. A
// plain read goes out (in strict mode a read of another site first loses
// its Referer beyond the origin and the cookies that site did not set
// itself). A request that needs deciding is held until decided in strict
// mode and answered 403 (204 for a navigation) when refused; in report mode
// it goes out at once and is recorded in the background (observed=true).
// A response that redirects is decided at the redirect, for the redirect's
// target, before Chromium sees it: a refused one is answered in its place,
// an allowed one's follow-up passes once without a second decision. A CORS
// preflight to another site no rule allows is answered by the proxy in
// strict mode, so the request it precedes comes and is decided with its
// body.
//
// CONNECT: in report and strict mode a tunnel that starts with a TLS
// handshake is intercepted, and HTTP inside it is decided request by
// request as above (mitm.go); anything else inside TLS (TURN over TLS), and
// any tunnel that is not TLS (a ws:// WebSocket, TURN over TCP), is decided
// by host: to the run's site it is a read; to any other host it is a
// "connect" effect, refused in strict mode (browser-send-off-site) unless
// an effects allow rule names the host, whose outcome, recorded when the
// tunnel closes, counts and digests what the page sent. Mode off tunnels
// blind.
//
// The proxy resolves names only for what it lets out, and never asks DNS
// about localhost names (RFC 6761): "localhost" and "*.localhost" are
// 127.0.0.1, as Chromium itself would take them.
//
// The runtime's listener refuses everything (403, and CONNECT too). Each
// request is recorded, in report and strict mode, under a run of its own:
// the pool opens work for tenant RuntimeTenant, person RuntimePerson, and
// proposes Effect{Action: "background", Origin: runtime}, which the policy
// refuses in every mode (browser-background). So the journal names the
// runtime, never an agent's run, as the one that asked.
const (
	// maxHeldBody bounds a body the proxy holds to digest it; a larger one
	// that needs deciding is refused (413) without leaving.
	maxHeldBody = 32 << 20
	// RuntimeTenant and RuntimePerson name the run the browser's own
	// traffic is recorded under.
	RuntimeTenant = "gatehouse"
	RuntimePerson = "browser-runtime"
)

// proxy is one listener: a run's (s set) or the runtime's (s nil). Its
// goroutines (the server, its handlers, tunnels) end at close.
type proxy struct {
	pool *Pool
	s    *session
	ln   net.Listener
	srv  *http.Server
	fwd  *httputil.ReverseProxy
	tr   *http.Transport
	// inner serves the requests inside the tunnels it intercepts
	// (mitm.go); innerLn hands it their connections.
	inner   *http.Server
	innerLn *connListener

	mu      sync.Mutex
	tunnels map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup // Serve and the tunnels
}

// fwdKey carries a forwarded request's fwdInfo to Rewrite and
// ModifyResponse.
type fwdKey struct{}

// fwdInfo is what the proxy knows of a request it forwards.
type fwdInfo struct {
	mode policy.Mode
	// strip: a plain read of another site in strict mode, sent without
	// its Referer beyond the origin and the cookies the site did not set.
	strip bool
	site  string // the request's host (with port), whose cookies are kept
	// body is the size and digest of a body the proxy read, for a 307 or
	// 308 that re-sends it.
	size   int64
	digest string
	// preflight is, in report mode, the send a CORS preflight to another
	// site that carries data is recorded as if the site's answer stops
	// the request it precedes.
	preflight *send
}

func (p *Pool) newProxy(s *session) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%w: the browser's proxy cannot listen: %v", ErrUnavailable, err)
	}
	px := &proxy{pool: p, s: s, ln: ln, tunnels: map[net.Conn]struct{}{}}
	px.tr = &http.Transport{
		Proxy: nil, DialContext: px.dial, DisableCompression: true,
		MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second, TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig: p.ic.upstreamTLS(""),
	}
	px.fwd = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = pr.In.URL
			pr.Out.Host = pr.In.Host
			if info, ok := pr.In.Context().Value(fwdKey{}).(*fwdInfo); ok && info.strip && px.s != nil {
				if ref := pr.Out.Header.Get("Referer"); ref != "" {
					pr.Out.Header.Set("Referer", originOf(ref))
				}
				px.s.siteCookies(info.site, pr.Out.Header)
			}
		},
		ModifyResponse: px.response,
		Transport:      px.tr,
		FlushInterval:  -1,
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// The query is never logged: the host only, and why.
			p.log.Debug("the browser's proxy could not reach a site", "host", r.URL.Host, "err", err)
			http.Error(w, "gatehouse: the site could not be reached, or its certificate did not verify", http.StatusBadGateway)
		},
	}
	px.srv = &http.Server{Handler: px, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug)}
	px.inner, px.innerLn = px.newInner(p.log), newConnListener(ln.Addr())
	px.wg.Add(2)
	go func() {
		defer px.wg.Done()
		_ = px.srv.Serve(ln)
	}()
	go func() {
		defer px.wg.Done()
		_ = px.inner.Serve(px.innerLn)
	}()
	return px, nil
}

// url is what Chromium is given.
func (px *proxy) url() string { return "http://" + px.ln.Addr().String() }

// close stops the listener, its connections and tunnels, and waits for them.
func (px *proxy) close() {
	px.mu.Lock()
	px.closed = true
	for c := range px.tunnels {
		_ = c.Close()
	}
	px.mu.Unlock()
	_ = px.srv.Close()
	_ = px.inner.Close()
	px.tr.CloseIdleConnections()
	px.wg.Wait()
}

// dial opens the proxy's outbound connections: only for requests that were
// decided (or are plain reads, which are not decided). Localhost names are
// loopback and never asked of DNS (RFC 6761).
func (px *proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 15 * time.Second}
	return d.DialContext(ctx, network, loopbackName(addr))
}

// loopbackName maps "localhost" and "*.localhost" in a host:port to
// 127.0.0.1.
func loopbackName(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if h := strings.ToLower(strings.TrimSuffix(host, ".")); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

func (px *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		px.connect(w, r)
		return
	}
	px.serveRequest(w, r)
}

// serveRequest decides one request with an absolute URL: a plain http one,
// or one from inside an intercepted tunnel.
func (px *proxy) serveRequest(w http.ResponseWriter, r *http.Request) {
	if !r.URL.IsAbs() || r.URL.Host == "" || (r.URL.Scheme != "http" && r.URL.Scheme != "https") {
		http.Error(w, "gatehouse: this is the browser's proxy", http.StatusBadRequest)
		return
	}
	if px.s == nil || browserService(hostPath(r.URL.String()).host) {
		px.background(w, r, r.Method, r.URL.String())
		return
	}
	px.s.seen()
	// In flight from here (so the settle barrier never sees a gap between
	// Chromium's note of the request and its decision under way).
	defer px.s.forwarding(navigation(r.Header))()
	px.s.arrived(r.Method, r.URL.String())
	d := px.pool.boundDecider()
	if d == nil {
		http.Error(w, "gatehouse: not bound", http.StatusForbidden)
		return
	}
	mode := d.Mode()
	if mode != policy.ModeOff && r.Header.Get("Upgrade") != "" {
		// The one upgrade decided is a WebSocket's, through CONNECT (or
		// inside an intercepted tunnel, serveIntercepted); forwarded, any
		// other would become a blind tunnel to whoever answered 101.
		http.Error(w, "gatehouse: an upgrade goes through CONNECT", http.StatusBadRequest)
		return
	}
	rawURL := r.URL.String()
	hasBody := r.Body != nil && r.Body != http.NoBody
	info := &fwdInfo{mode: mode, site: hostPath(rawURL).host}
	// The agent's goto passes undecided (it was decided as a navigate), but
	// only as what it is, a GET: anything sent to its URL is a send.
	agentGoto := r.Method == http.MethodGet && !hasBody && px.s.isAgentGoto(rawURL)
	if agentGoto {
		px.s.learnLanguage(r.Header.Get("Accept-Language"))
	}
	if mode == policy.ModeOff || agentGoto || px.s.followUp(r.Method, rawURL) {
		px.forward(w, r, info)
		return
	}
	pageHost := px.s.pageHost()
	if preflight(r) {
		from, foreign := initiator(r.Header, pageHost)
		if !strings.EqualFold(info.site, pageHost) {
			px.preflight(w, r, d, info, pageHost)
			return
		}
		if foreign {
			px.preflight(w, r, d, info, from)
			return
		}
	}
	req := request{method: r.Method, url: rawURL, header: r.Header, hasBody: hasBody,
		preflighted: px.s.preflighted(r.Method, rawURL)}
	snd := px.pool.classify(d.Policy(), px.s, req, pageHost)
	if snd == nil {
		info.strip = mode == policy.ModeStrict && !strings.EqualFold(info.site, pageHost)
		px.forward(w, r, info)
		return
	}
	if hasBody {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxHeldBody+1))
		if err != nil {
			http.Error(w, "gatehouse: body not read", http.StatusBadRequest)
			return
		}
		if len(body) > maxHeldBody {
			px.pool.log.Warn("send refused: body too large to decide", "run", px.s.run, "host", snd.to.host)
			http.Error(w, "gatehouse: the body is too large to decide", http.StatusRequestEntityTooLarge)
			return
		}
		if len(body) > 0 {
			snd.size, snd.digest = int64(len(body)), digest(body)
			info.size, info.digest = snd.size, snd.digest
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if !px.decide(d, snd) {
		refuse(w, r)
		return
	}
	px.forward(w, r, info)
}

// decide decides snd for the run. In report mode a send (unless a scope
// names a browser target) is observed: it goes out at once and is recorded
// in the background, and decide returns true. Otherwise the request is
// held: decide returns whether it was allowed and released. Either way the
// decision counts as under way for the run's settle barrier until it is
// recorded.
func (px *proxy) decide(d Decider, snd *send) bool {
	if d.Mode() == policy.ModeReport && snd.action == EffectSend && !px.pool.scopesIntercept(d) {
		if px.pool.enter() {
			px.s.begin()
			go func() {
				defer px.pool.inflight.Done()
				defer px.s.end()
				px.pool.proposeSend(snd)
			}()
		}
		return true
	}
	snd.held = true
	if px.pool.enter() {
		px.s.begin()
		px.pool.proposeSend(snd)
		px.s.end()
		px.pool.inflight.Done()
	}
	return snd.released.Load()
}

// forward sends r on, with info for the rewrite and the response.
// A request that can change state is noted first (writes.go), and refused
// when it cannot be.
func (px *proxy) forward(w http.ResponseWriter, r *http.Request, info *fwdInfo) {
	if changesState(r) {
		if err := px.noteWrite(r.Context(), r.URL); err != nil {
			px.writeRefused(r.URL.Host, err)
			refuse(w, r)
			return
		}
	}
	px.fwd.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), fwdKey{}, info)))
}

// refuse answers a refused request: 403, and for a navigation a page that
// says so.
func refuse(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintln(w, "gatehouse: refused")
}

// preflight handles a CORS preflight to a host other than the run's site.
// The header names it announces mark the request it precedes as carrying
// headers the page set. In strict mode, unless an allow rule names the
// target, the proxy answers it itself (allowing exactly what was asked),
// so the request comes and is decided, and refused, with its body; the
// site hears nothing. Otherwise the site answers.
func (px *proxy) preflight(w http.ResponseWriter, r *http.Request, d Decider, info *fwdInfo, pageHost string) {
	asked := r.Header.Get("Access-Control-Request-Method")
	method := strings.ToUpper(asked)
	rawURL := r.URL.String()
	px.s.notePreflight(method, rawURL, preflightedHeaders(r))
	to := hostPath(rawURL)
	e := policy.Effect{Sink: policy.SinkBrowser, Action: EffectSend, Method: method, Host: to.host, Path: to.path,
		PageHost: pageHost, Target: to.target()}
	if d.Mode() == policy.ModeStrict && !d.Policy().BrowserTargetAllowed(e) {
		h := w.Header()
		if o := r.Header.Get("Origin"); o != "" {
			h.Set("Access-Control-Allow-Origin", o)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Vary", "Origin")
		}
		h.Set("Access-Control-Allow-Methods", asked) // as asked: an extension method is compared case by case
		if ah := r.Header.Get("Access-Control-Request-Headers"); ah != "" {
			h.Set("Access-Control-Allow-Headers", ah)
		}
		if r.Header.Get("Access-Control-Request-Private-Network") != "" {
			h.Set("Access-Control-Allow-Private-Network", "true")
		}
		h.Set("Access-Control-Max-Age", "0")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	info.strip = d.Mode() == policy.ModeStrict
	if d.Mode() == policy.ModeReport && !px.pool.scopesIntercept(d) {
		// The preflight goes out with what its address and the header
		// names it announces carry; if the site's answer stops the
		// request it precedes, the preflight is all that left, and it is
		// recorded at the answer (response).
		if snd := px.pool.classifyPreflight(d.Policy(), px.s, r, pageHost); snd != nil {
			info.preflight = snd
		}
	}
	px.forward(w, r, info)
}

// response sees every response the proxy forwards: it keeps the cookies
// the site set, and decides a redirect at the redirect, for its target.
func (px *proxy) response(resp *http.Response) error {
	info, _ := resp.Request.Context().Value(fwdKey{}).(*fwdInfo)
	if px.s == nil || info == nil || info.mode == policy.ModeOff {
		return nil
	}
	px.s.noteCookies(info.site, resp.Cookies())
	if info.strip {
		// No HTTP authentication with another site in strict mode: the
		// credentials Chromium would answer a challenge with are the
		// page's (a URL's userinfo), and it keeps them for every later
		// request to that site, the agent's goto included.
		resp.Header.Del("Www-Authenticate")
	}
	if info.preflight != nil {
		if !corsAllows(resp, resp.Request.Header) {
			if d := px.pool.boundDecider(); d != nil {
				px.decide(d, info.preflight)
			}
		}
		return nil
	}
	loc := resp.Header.Get("Location")
	if loc == "" || resp.StatusCode < 300 || resp.StatusCode > 399 || resp.StatusCode == http.StatusNotModified {
		return nil
	}
	target, err := resp.Request.URL.Parse(loc)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") {
		return nil
	}
	method, body := resp.Request.Method, info.size > 0
	switch resp.StatusCode {
	case http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	case http.StatusSeeOther:
		if method != http.MethodHead {
			method, body = http.MethodGet, false
		}
	default:
		if method == http.MethodPost {
			method, body = http.MethodGet, false
		}
	}
	d := px.pool.boundDecider()
	if d == nil {
		return nil
	}
	header := resp.Request.Header.Clone()
	// Origin and Referer stay: they name the document that made the
	// request (initiator), which makes the follow-up too.
	for _, h := range []string{"Cookie", "Authorization", "Content-Type", "Content-Length"} {
		header.Del(h)
	}
	next := target.String()
	snd := px.pool.classify(d.Policy(), px.s, request{method: method, url: next, header: header, hasBody: body}, px.s.pageHost())
	if snd == nil {
		return nil
	}
	snd.redirect = true
	if body {
		snd.size, snd.digest = info.size, info.digest
	}
	if px.decide(d, snd) {
		px.s.expectFollowUp(method, next)
		return nil
	}
	// Refused at the redirect: Chromium gets the refusal in its place and
	// never follows it.
	_ = resp.Body.Close()
	status, msg := http.StatusForbidden, "gatehouse: refused\n"
	resp.StatusCode, resp.Status = status, fmt.Sprintf("%d %s", status, http.StatusText(status))
	resp.Header = http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	resp.Body, resp.ContentLength = io.NopCloser(strings.NewReader(msg)), int64(len(msg))
	return nil
}

// background refuses a request of the browser's own and records it under
// the runtime's run, in the background.
func (px *proxy) background(w http.ResponseWriter, _ *http.Request, method, rawURL string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintln(w, "gatehouse: the browser's own traffic is refused")
	d := px.pool.boundDecider()
	if d == nil || d.Mode() == policy.ModeOff || !px.pool.enter() {
		return
	}
	snd := &send{action: policy.BrowserBackground, method: strings.ToUpper(method), to: hostPath(rawURL)}
	if method == http.MethodConnect {
		snd.to = place{host: tunnelHost(rawURL), path: "/"}
	}
	go func() {
		defer px.pool.inflight.Done()
		px.pool.proposeBackground(d, snd)
	}()
}

// connect answers a CONNECT. Mode off tunnels it blind. Otherwise a tunnel
// that starts with a TLS handshake is intercepted (mitm.go); any other
// tunnel (a ws:// WebSocket, TURN over TCP) to a host other than the run's
// site is a connect effect, and is closed unless allowed.
func (px *proxy) connect(w http.ResponseWriter, r *http.Request) {
	if px.s == nil || browserService(tunnelHost(r.Host)) {
		px.background(w, r, http.MethodConnect, r.Host)
		return
	}
	px.s.seen()
	d := px.pool.boundDecider()
	if d == nil {
		http.Error(w, "gatehouse: not bound", http.StatusForbidden)
		return
	}
	if d.Mode() == policy.ModeOff {
		px.tunnel(w, r, nil)
		return
	}
	conn, br, ok := px.accept(w)
	if !ok {
		return
	}
	first, err := br.Peek(1)
	if err != nil {
		px.untrack(conn)
		return
	}
	if first[0] == tlsRecordHandshake {
		px.intercept(d, conn, br, r.Host)
		return
	}
	px.connectTunnel(d, conn, br, r.Host, false)
}

// connectTunnel decides a tunnel whose content is not HTTP the proxy can
// decide request by request (conn is accepted and tracked): to the run's
// site it is piped as a read; to any other host it is a connect effect,
// run by Perform when allowed. tlsUp reaches the site over TLS (the page's
// side was TLS the proxy terminated).
func (px *proxy) connectTunnel(d Decider, conn net.Conn, br *bufio.Reader, authority string, tlsUp bool) {
	host := tunnelHost(authority)
	if tlsUp {
		host = hostPath("https://" + authority).host
	}
	page := px.s.pageHost()
	if host == page {
		// A WebSocket to the run's site that a document of another
		// origin opens is to another site (initiator).
		from, foreign := "", false
		br = bufio.NewReaderSize(br, maxTunnelHead) // a handshake with a large cookie jar fits
		switch head, started := peekHead(conn, br); {
		case head != nil && strings.EqualFold(head.Header.Get("Upgrade"), "websocket"):
			from, foreign = initiator(head.Header, page)
		case head == nil && started:
			// A request head too large, malformed or not finished
			// within the wait: who opened it cannot be told, so it is
			// another site's until decided (fail closed).
			from, foreign = OpaqueOrigin, true
		}
		if !foreign {
			px.pipe(conn, br, authority, tlsUp, nil)
			return
		}
		page = from
	}
	snd := &send{run: px.s.run, sess: px.s, action: policy.BrowserConnect, method: http.MethodConnect,
		to: connectPlace(d.Policy(), host), pageHost: page, held: true, proxy: px, conn: conn, br: br,
		authority: authority, tlsUp: tlsUp}
	if px.pool.enter() {
		px.pool.proposeTunnel(snd)
		px.pool.inflight.Done()
	}
	if !snd.released.Load() {
		px.untrack(conn) // the page sees the tunnel close
	}
}

// connectPlace is how a connect's host is named: redacted when its name
// carries data (classify).
func connectPlace(pol *policy.Policy, host string) place {
	if sub, _ := subdomain(hostOnly(host)); len(sub) > pol.Browser().MaxOffSiteNameBytes {
		host = redactedHost(host)
	}
	return place{host: host, path: "/"}
}

// browserServiceHosts are the hosts of Chromium's own services (autofill,
// updates, safe browsing, optimization hints, network time). Chromium sends
// some of them through a context's proxy too, since the context's profile
// makes them; a request to one of them, on any listener, is the runtime's,
// refused and recorded as such. This is a list, so a service Chromium adds
// later is taken for the run's traffic when it comes through a context's
// listener: its reads pass like a page's, its sends are decided as the
// run's.
var browserServiceHosts = []string{
	"content-autofill.googleapis.com", "update.googleapis.com", "safebrowsing.googleapis.com",
	"sb-ssl.google.com", "optimizationguide-pa.googleapis.com", "clientservices.googleapis.com",
	"clients1.google.com", "clients2.google.com", "clients3.google.com", "clients4.google.com",
	"accounts.google.com", "redirector.gvt1.com", "edgedl.me.gvt1.com", "dl.google.com",
	"android.clients.google.com", "passwordsleakcheck-pa.googleapis.com", "chromesyncpasswords-pa.googleapis.com",
}

func browserService(host string) bool {
	h, _, _ := strings.Cut(host, ":")
	for _, s := range browserServiceHosts {
		if h == s {
			return true
		}
	}
	return false
}

// tunnelHost is a CONNECT authority as effects name hosts: lower case,
// without :443 or :80 (a tunnel may be HTTPS or a ws:// WebSocket).
func tunnelHost(authority string) string {
	h := strings.ToLower(authority)
	h = strings.TrimSuffix(h, ":443")
	return strings.TrimSuffix(h, ":80")
}

// tunnelStats is what a tunnel carried from the page.
type tunnelStats struct {
	bytes     int64
	websocket bool
	path      string
	frames    int64
	payload   int64
	digest    string
}

// tunnel answers 200 and pipes until either side closes, the session ends
// or the proxy closes (mode off: a blind tunnel). When st is set it fills
// it: the bytes the page sent and, for a ws:// handshake, the frames and
// their digest.
func (px *proxy) tunnel(w http.ResponseWriter, r *http.Request, st *tunnelStats) {
	conn, br, ok := px.accept(w)
	if !ok {
		return
	}
	px.pipe(conn, br, r.Host, false, st)
}

// accept hijacks a CONNECT, answers 200 and tracks the connection; pair a
// true return with untrack, release or pipe.
func (px *proxy) accept(w http.ResponseWriter) (net.Conn, *bufio.Reader, bool) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, false
	}
	if !px.track(conn) {
		return nil, nil, false
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		px.untrack(conn)
		return nil, nil, false
	}
	return conn, brw.Reader, true
}

// pipe connects an accepted tunnel to authority (over TLS when tlsUp,
// verifying the site) and copies both ways until either side closes; it
// untracks conn. What it carries is not read, so it is noted as a write
// first (writes.go); one that cannot be noted is closed unsent.
func (px *proxy) pipe(conn net.Conn, br *bufio.Reader, authority string, tlsUp bool, st *tunnelStats) {
	if err := px.noteTunnel(authority, tlsUp); err != nil {
		px.writeRefused(authority, err)
		px.untrack(conn)
		return
	}
	var up net.Conn
	var err error
	if tlsUp {
		name, _, _ := net.SplitHostPort(authority)
		dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 15 * time.Second}, Config: px.pool.ic.upstreamTLS(strings.Trim(name, "[]"))}
		up, err = dialer.DialContext(context.Background(), "tcp", loopbackName(authority))
	} else {
		up, err = px.dial(context.Background(), "tcp", authority)
	}
	if err != nil || !px.also(up) {
		if up != nil {
			_ = up.Close()
		}
		px.untrack(conn)
		return
	}
	defer px.untrack(conn, up)
	if st == nil {
		st = &tunnelStats{}
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(conn, up)
		_ = conn.Close()
		close(done)
	}()
	pageSide(br, up, st)
	_ = up.Close()
	<-done
}

// pageSide copies what the page sends into up, counting it; a ws://
// handshake is read first so the frames after it can be counted.
func pageSide(br *bufio.Reader, up net.Conn, st *tunnelStats) {
	count := &countWriter{w: up}
	defer func() { st.bytes = count.n }()
	if head, err := br.Peek(4); err == nil && string(head) == "GET " {
		raw, req, err := readHead(br)
		if err == nil && strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
			st.websocket, st.path = true, hostPath("http://x"+req.URL.EscapedPath()).path
		}
		if _, err := count.Write(raw); err != nil || !st.websocket {
			_, _ = io.Copy(count, br)
			return
		}
		copyFrames(br, count, st)
		return
	}
	_, _ = io.Copy(count, br)
}

// copyFrames copies a WebSocket's frames from the page into count, counting
// and digesting them into st.
func copyFrames(br io.Reader, count *countWriter, st *tunnelStats) {
	pr, pw := io.Pipe()
	res := make(chan wsStats, 1)
	go func() {
		s, _ := countFrames(pr)
		_, _ = io.Copy(io.Discard, pr)
		res <- s
	}()
	_, _ = io.Copy(io.MultiWriter(count, pw), br)
	_ = pw.Close()
	s := <-res
	st.frames, st.payload, st.digest = s.frames, s.bytes, s.digest
}

// readHead reads one HTTP request head (at most 64 KiB) and returns its raw
// bytes with the parsed request.
func readHead(br *bufio.Reader) ([]byte, *http.Request, error) {
	var raw []byte
	for len(raw) < 64<<10 {
		line, err := br.ReadSlice('\n')
		raw = append(raw, line...)
		if err != nil {
			return raw, nil, err
		}
		if len(line) <= 2 && strings.TrimRight(string(line), "\r\n") == "" {
			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
			return raw, req, err
		}
	}
	return raw, nil, errors.New("request head too large")
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

func (px *proxy) track(cs ...net.Conn) bool {
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		px.tunnels[c] = struct{}{}
	}
	px.wg.Add(1)
	return true
}

// also tracks one more connection of a tracked tunnel; false (c closed)
// once the proxy closes.
func (px *proxy) also(c net.Conn) bool {
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.closed {
		_ = c.Close()
		return false
	}
	px.tunnels[c] = struct{}{}
	return true
}

// retrack tracks c in place of old, a connection it wraps.
func (px *proxy) retrack(old, c net.Conn) {
	px.mu.Lock()
	delete(px.tunnels, old)
	px.tunnels[c] = struct{}{}
	px.mu.Unlock()
}

// release stops tracking an accepted connection without closing it: its
// new owner (the inner server) closes it.
func (px *proxy) release(c net.Conn) {
	px.mu.Lock()
	delete(px.tunnels, c)
	px.mu.Unlock()
	px.wg.Done()
}

func (px *proxy) untrack(cs ...net.Conn) {
	px.mu.Lock()
	for _, c := range cs {
		delete(px.tunnels, c)
		_ = c.Close()
	}
	px.mu.Unlock()
	px.wg.Done()
}

// scopesIntercept reports whether a scope names a browser target, so even
// report mode holds requests until decided.
func (p *Pool) scopesIntercept(d Decider) bool {
	return d.Policy().ScopesNameBrowserTargets()
}

// proposeBackground records one request of the browser's own under the
// runtime's run, opening it on first use (again if the broker lost it).
func (p *Pool) proposeBackground(d Decider, snd *send) {
	for attempt := 0; attempt < 2; attempt++ {
		run, err := p.runtimeRun(d)
		if err != nil {
			p.log.Error("the browser's own request not recorded: no runtime run", "host", snd.to.host, "err", err)
			return
		}
		snd.run = run
		reply := p.propose(d, snd, p.cfg.SendTimeout)
		if reply.Error == nil || (reply.Error.Code != broker.CodeUnknownRun && reply.Error.Code != broker.CodeRunClosed) {
			return
		}
		p.runtimeMu.Lock()
		if p.runtime == run {
			p.runtime = ""
		}
		p.runtimeMu.Unlock()
	}
}

func (p *Pool) runtimeRun(d Decider) (string, error) {
	p.runtimeMu.Lock()
	defer p.runtimeMu.Unlock()
	if p.runtime != "" {
		return p.runtime, nil
	}
	ctx, cancel := context.WithTimeout(p.base, p.cfg.SendTimeout)
	defer cancel()
	r, err := d.Open(ctx, broker.Internal(policy.OriginRuntime), &broker.OpenWork{Tenant: RuntimeTenant, Person: RuntimePerson})
	if err != nil {
		return "", err
	}
	p.runtime = r.ID
	return r.ID, nil
}

// proposeTunnel decides a CONNECT; Perform (performTunnel) runs the tunnel
// and returns when it closes, so the outcome records what the page sent
// through it. It is not bounded by SendTimeout, only by the pool.
func (p *Pool) proposeTunnel(snd *send) {
	d := p.boundDecider()
	if d == nil {
		return
	}
	snd.sess.begin()
	snd.ending = snd.sess.end
	defer snd.finish()
	p.propose(d, snd, 0)
}

// finish ends a connect's decision for the run's settle barrier, once.
func (snd *send) finish() {
	if f := snd.ending; f != nil {
		snd.ending = nil
		f()
	}
}

// performTunnel is Perform for an allowed CONNECT.
func (snd *send) performTunnel(prop *broker.Proposal) (*broker.Performed, error) {
	snd.released.Store(true)
	// The decision is on record: the run's settle barrier need not wait
	// for the tunnel to close.
	snd.finish()
	st := &tunnelStats{}
	if snd.secure {
		snd.proxy.webSocket(snd.w, snd.r, snd.authority, st)
	} else {
		snd.proxy.pipe(snd.conn, snd.br, snd.authority, snd.tlsUp, st)
	}
	detail := map[string]string{"method": snd.method, "page_host": snd.pageHost,
		"sent_bytes": strconv.FormatInt(st.bytes, 10)}
	res := journal.Result{Status: "ok", Size: st.bytes, Detail: detail}
	if st.websocket {
		detail["websocket"], detail["path"] = "true", st.path
		if d := snd.proxy.pool.boundDecider(); d != nil && len(st.path) > d.Policy().Browser().MaxOffSitePathBytes {
			detail["path"] = redactedPath
		}
		detail["frames"] = strconv.FormatInt(st.frames, 10)
		res.Size, res.Digest = st.payload, st.digest
	}
	return &broker.Performed{Result: res}, nil
}

// maxTunnelHead bounds the request head peekHead reads at the start of
// a tunnel to the run's site.
const maxTunnelHead = 64 << 10

// peekHead looks at the HTTP request head at the start of an accepted
// tunnel without taking it from br (a ws:// WebSocket's handshake, always
// a GET). started says the tunnel starts as a GET; the head is nil when
// it does not (TURN over TCP), or when it does but the head does not fit
// br, is malformed, or does not come within 10 s.
func peekHead(conn net.Conn, br *bufio.Reader) (head *http.Request, started bool) {
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	if first, err := br.Peek(4); err != nil || string(first) != "GET " {
		return nil, false
	}
	for n := 4; ; {
		b, err := br.Peek(n)
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:i+4])))
			if err != nil {
				return nil, true
			}
			return req, true
		}
		if err != nil || n >= br.Size() {
			return nil, true
		}
		// What has arrived first; then wait for one byte more.
		if buffered := br.Buffered(); buffered > n {
			n = buffered
		} else {
			n++
		}
	}
}

// navigation reports whether a request is for a document (a page, frame
// or popup): Sec-Fetch-Mode navigate, or, where Chromium sends no fetch
// metadata (plain http sites), an Accept that puts HTML first.
func navigation(h http.Header) bool {
	if m := h.Get("Sec-Fetch-Mode"); m != "" {
		return m == "navigate"
	}
	return strings.HasPrefix(h.Get("Accept"), "text/html")
}
