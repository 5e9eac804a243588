package browser

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

const (
	// DriverVersion is the playwright-core release the playwright-go in
	// go.mod drives; .ci/install-deps installs the same one.
	DriverVersion = "1.64.1"
	// DefaultDriverDir is where .ci/install-deps puts the driver.
	DefaultDriverDir = "/var/cache/gatehouse/playwright-driver-" + DriverVersion
	// DefaultExecutable is Debian's Chromium binary (the /usr/bin/chromium
	// wrapper starts slower and prints noise).
	DefaultExecutable = "/usr/lib/chromium/chromium"
	// MaxReplyBytes bounds an action's result: replies travel as one NATS
	// message (1 MiB by default), with room for the decision.
	MaxReplyBytes = 768 << 10
)

// launchArgs keep Chromium headless-friendly and quiet. Chromium still makes
// some background calls despite them; the runtime's proxy listener refuses
// and records those (proxy.go).
var launchArgs = []string{
	"--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
}

// Decider decides and records one effect, and carries it out through its
// sink when allowed: *broker.Broker. The pool proposes the sends its pages
// make through it, in process, as Gatehouse itself (broker.Internal) with
// the origin the pool established, never one a page or an agent wrote.
type Decider interface {
	Propose(ctx context.Context, from broker.Caller, sink policy.Sink, data []byte) *broker.EffectReply
	Mode() policy.Mode
	// Policy is the policy in force: the pool reads the browser section
	// and whether scopes name browser targets from it.
	Policy() *policy.Policy
	// Open opens the runtime's run, under which the browser's own traffic
	// is recorded (as Gatehouse itself, broker.Internal).
	Open(ctx context.Context, from broker.Caller, w *broker.OpenWork) (*broker.Run, error)
}

var _ Decider = (*broker.Broker)(nil)

// Config configures a Pool. The zero value of each field is useful.
type Config struct {
	// ExecutablePath is Chromium; "" is DefaultExecutable.
	ExecutablePath string
	// DriverDir holds the driver (package/cli.js and a node link); "" is
	// $PLAYWRIGHT_DRIVER_PATH, else DefaultDriverDir.
	DriverDir string
	// IdleTimeout closes a run's context after this long without an
	// action; 0 is 10 minutes.
	IdleTimeout time.Duration
	// ActionTimeout bounds each Playwright action and navigation; 0 is 30 s.
	ActionTimeout time.Duration
	// SendTimeout bounds deciding one send; 0 is 15 s. A send whose
	// decision does not come in time is aborted in strict mode.
	SendTimeout time.Duration
	// RetryAfter is how long a browser that failed to start is not tried
	// again; 0 is 30 s.
	RetryAfter time.Duration
	// Artifacts is where screenshots are stored (the deployment's artifact
	// store); nil stores none, and a screenshot must then be asked for
	// inline.
	Artifacts ArtifactStore
	// ArtifactName is the store name of a tenant's artifact key; set it to
	// what the artifact sink uses (artifact.TenantDir(tenant) + "/" + key)
	// so its get finds screenshots. nil is "~" and 32 hex digits of the
	// tenant's SHA-256, then "/" and the key.
	ArtifactName func(tenant, key string) string
	// TLSRoots verifies the sites the proxy reaches over HTTPS on the
	// browser's behalf (it looks inside tunnels; see mitm.go); nil is the
	// system's roots.
	TLSRoots *x509.CertPool
	Now      func() time.Time // nil is time.Now
	Logger   *slog.Logger     // nil discards
	Getenv   func(string) string
}

// Pool owns the Playwright driver, one Chromium and one BrowserContext per
// run, and is the browser sink (broker.Sink). Safe for concurrent use.
//
// Lock order: startMu before mu. mu and a session's mu are never held
// together; a session's act is taken before its mu.
type Pool struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	decider atomic.Pointer[deciderBox]

	base   context.Context // ends at Close; bounds sends being decided
	cancel context.CancelFunc

	startMu sync.Mutex // serializes starting the browser

	mu       sync.Mutex // guards the fields below
	pw       *playwright.Playwright
	br       playwright.Browser
	startErr error
	failedAt time.Time
	sessions map[string]*session
	closed   bool
	rtProxy  *proxy // the runtime's listener, given to Chromium at launch

	ic    *interceptor // the key and certificates the proxy presents inside tunnels
	icErr error        // why there is no interceptor (crypto/rand failed)
	// testArgs are more Chromium flags, set only by tests (export_test.go)
	// before the browser starts.
	testArgs []string

	runtimeMu sync.Mutex // guards runtime
	runtime   string     // the runtime's run; "" until the first background request

	inflight   sync.WaitGroup // sends being decided; entered through enter
	stopReaper chan struct{}
	reaperDone chan struct{}
}

type deciderBox struct{ d Decider }

var (
	_ broker.Sink      = (*Pool)(nil)
	_ broker.RunCloser = (*Pool)(nil) // the broker closes a run's context on work.close
)

// New returns a pool; nothing starts until the first action needs a page.
// Close it to stop the reaper, the contexts, Chromium and the driver.
func New(cfg Config) *Pool {
	if cfg.ExecutablePath == "" {
		cfg.ExecutablePath = DefaultExecutable
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.DriverDir == "" {
		cfg.DriverDir = cfg.Getenv("PLAYWRIGHT_DRIVER_PATH")
	}
	if cfg.DriverDir == "" {
		cfg.DriverDir = DefaultDriverDir
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.ActionTimeout <= 0 {
		cfg.ActionTimeout = 30 * time.Second
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 15 * time.Second
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 30 * time.Second
	}
	p := &Pool{cfg: cfg, log: cfg.Logger, now: cfg.Now, sessions: map[string]*session{},
		stopReaper: make(chan struct{}), reaperDone: make(chan struct{})}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.base, p.cancel = context.WithCancel(context.Background())
	if p.ic, p.icErr = newInterceptor(cfg.TLSRoots); p.icErr != nil {
		p.ic = &interceptor{roots: cfg.TLSRoots, certs: map[string]*tls.Certificate{}}
	}
	go p.reap()
	return p
}

// Bind gives the pool the broker that decides the sends its pages make. Call
// it once the broker (which holds this pool as a sink) is built, before
// serving; until then the pool opens no page (ErrNotBound).
func (p *Pool) Bind(d Decider) { p.decider.Store(&deciderBox{d}) }

func (p *Pool) boundDecider() Decider {
	if b := p.decider.Load(); b != nil {
		return b.d
	}
	return nil
}

// Name implements broker.Sink.
func (p *Pool) Name() policy.Sink { return policy.SinkBrowser }

// Close closes every run's context, waits for the sends being decided, and
// stops Chromium and the driver. Effects after Close fail with ErrClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	sessions := make([]*session, 0, len(p.sessions))
	for _, s := range p.sessions {
		sessions = append(sessions, s)
	}
	clear(p.sessions)
	pw, br, rt := p.pw, p.br, p.rtProxy
	p.pw, p.br, p.rtProxy = nil, nil, nil
	p.mu.Unlock()

	close(p.stopReaper)
	<-p.reaperDone
	p.cancel()
	for _, s := range sessions {
		s.close()
	}
	p.inflight.Wait()
	var errs []error
	if br != nil {
		errs = append(errs, br.Close())
	}
	if pw != nil {
		errs = append(errs, pw.Stop())
	}
	if rt != nil {
		rt.close()
	}
	return errors.Join(errs...)
}

// CloseRun closes run's context if it has one. The broker's run close should
// call it; the idle timeout closes contexts whose run never closes.
func (p *Pool) CloseRun(run string) {
	p.mu.Lock()
	s := p.sessions[run]
	delete(p.sessions, run)
	p.mu.Unlock()
	if s != nil {
		s.close()
	}
}

// enter registers a send about to be decided; false once the pool closes.
// A true return must be paired with p.inflight.Done.
func (p *Pool) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.inflight.Add(1)
	return true
}

// browser returns the running Chromium, starting it (and the driver) on first
// use. A failed start is remembered for RetryAfter.
func (p *Pool) browser() (playwright.Browser, error) {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return nil, ErrClosed
	case p.br != nil && p.br.IsConnected():
		br := p.br
		p.mu.Unlock()
		return br, nil
	case p.br == nil && p.startErr != nil && p.now().Sub(p.failedAt) < p.cfg.RetryAfter:
		err := p.startErr
		p.mu.Unlock()
		return nil, err
	}
	oldPW, oldBR := p.pw, p.br // a browser that went away
	p.pw, p.br = nil, nil
	p.mu.Unlock()
	if oldBR != nil {
		p.log.Warn("browser disconnected; starting a new one")
		_ = oldBR.Close()
	}
	if oldPW != nil {
		_ = oldPW.Stop()
	}

	p.mu.Lock()
	rt := p.rtProxy
	p.mu.Unlock()
	if rt == nil {
		var err error
		if rt, err = p.newProxy(nil); err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.rtProxy = rt
		p.mu.Unlock()
	}
	start := time.Now()
	pw, br, err := p.start(rt.url())
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.startErr, p.failedAt = err, p.now()
		p.log.Error("browser cannot start", "err", err)
		return nil, err
	}
	if p.closed {
		_ = br.Close()
		_ = pw.Stop()
		return nil, ErrClosed
	}
	p.pw, p.br, p.startErr = pw, br, nil
	p.log.Info("browser started", "version", br.Version(), "took", time.Since(start))
	return br, nil
}

// start checks what the browser needs, then runs the driver and Chromium.
// Every error wraps ErrUnavailable and names the fix.
func (p *Pool) start(proxyURL string) (*playwright.Playwright, playwright.Browser, error) {
	unavailable := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s; %s", ErrUnavailable, fmt.Sprintf(format, args...), FixCommand)
	}
	if p.icErr != nil {
		return nil, nil, unavailable("no key for the browser proxy's certificates: %v", p.icErr)
	}
	if _, err := os.Stat(p.cfg.ExecutablePath); err != nil {
		return nil, nil, unavailable("Chromium not found at %s", p.cfg.ExecutablePath)
	}
	dir := p.cfg.DriverDir
	if _, err := os.Stat(filepath.Join(dir, "package", "cli.js")); err != nil {
		return nil, nil, unavailable("the Playwright driver %s is not in %s", DriverVersion, dir)
	}
	if p.cfg.Getenv("PLAYWRIGHT_NODEJS_PATH") == "" {
		if _, err := os.Stat(filepath.Join(dir, "node")); err != nil {
			return nil, nil, unavailable("no node beside the driver in %s (link it, or set PLAYWRIGHT_NODEJS_PATH)", dir)
		}
	}
	pw, err := playwright.Run(&playwright.RunOptions{
		DriverDirectory: dir, Verbose: false, Stdout: io.Discard, Stderr: io.Discard, Logger: p.log,
	})
	if err != nil {
		return nil, nil, unavailable("the Playwright driver in %s does not run: %v", dir, err)
	}
	br, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(p.cfg.ExecutablePath),
		Headless:       playwright.Bool(true),
		Args:           append(append(slices.Clone(launchArgs), p.ic.launchArg()), p.testArgs...),
		Proxy:          &playwright.Proxy{Server: proxyURL},
	})
	if err != nil {
		_ = pw.Stop()
		return nil, nil, unavailable("Chromium at %s does not start: %v", p.cfg.ExecutablePath, err)
	}
	return pw, br, nil
}

// session is one run's BrowserContext and the page the agent drives.
type session struct {
	run  string
	act  sync.Mutex   // serializes the agent's actions on this run
	busy atomic.Int32 // actions in progress; the reaper skips busy sessions
	used atomic.Int64 // unix nanoseconds of the last action
	url  atomic.Pointer[string]

	mu      sync.Mutex         // guards the fields below
	br      playwright.Browser // the browser the context was made in
	bctx    playwright.BrowserContext
	page    playwright.Page     // the page actions act on
	pages   []playwright.Page   // every page of the context, by index; 0 is the first
	proxy   *proxy              // the run's proxy listener
	tokens  map[string]string   // one-time tokens of requests the route handler decided -> "METHOD host"
	hosts   map[string]struct{} // hosts the agent navigated to (tunnels to them are reads)
	gotoURL string              // the agent's goto in progress
	closed  bool
}

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

// token returns a fresh one-time token for a request the route handler
// decided.
func (s *session) token(method, rawURL string) string {
	t := newToken()
	s.mu.Lock()
	if s.tokens == nil {
		s.tokens = map[string]string{}
	}
	if len(s.tokens) < 1<<16 {
		s.tokens[t] = tokenFor(method, rawURL)
	}
	s.mu.Unlock()
	return t
}

// spend reports whether t is an unused token of s issued for a request
// with this method to this host, using it up. A token carried by any
// other request (a redirect's follow-on to another site, say) does not
// pass it undecided.
func (s *session) spend(t, method, rawURL string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	want, ok := s.tokens[t]
	delete(s.tokens, t)
	return ok && want == tokenFor(method, rawURL)
}

// tokenFor is what a token is bound to: the method and the host.
func tokenFor(method, rawURL string) string {
	return strings.ToUpper(method) + " " + strings.ToLower(hostPath(rawURL).host)
}

// pageHost is the host of the run's top-level page now ("" before one).
func (s *session) pageHost() string {
	s.mu.Lock()
	page := s.page
	s.mu.Unlock()
	if page != nil {
		if h := hostPath(page.URL()).host; h != "" {
			return h
		}
	}
	return hostPath(s.currentURL()).host
}

// navigated reports whether the agent navigated the run to host.
func (s *session) navigated(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.hosts[host]
	return ok
}

// startGoto notes the agent's decided goto: its navigation request is not
// decided again, and tunnels to its host are reads.
func (s *session) startGoto(rawURL string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gotoURL = rawURL
	if s.hosts == nil {
		s.hosts = map[string]struct{}{}
	}
	if h := tunnelHost(hostPath(rawURL).host); h != "" {
		s.hosts[h] = struct{}{}
	}
}

func (s *session) endGoto() { s.mu.Lock(); s.gotoURL = ""; s.mu.Unlock() }

func (s *session) isAgentGoto(rawURL string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gotoURL != "" && s.gotoURL == rawURL
}

// acquire returns run's session marked busy, making an empty one when create
// is set and there is none; nil (and nothing to release) otherwise. Marking
// under p.mu keeps the reaper from closing a session an action is about to
// use. Pair a non-nil session with release.
func (p *Pool) acquire(run string, create bool) (*session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	s := p.sessions[run]
	if s == nil && create {
		s = &session{run: run}
		p.sessions[run] = s
	}
	if s != nil {
		s.busy.Add(1)
	}
	return s, nil
}

func (p *Pool) release(s *session) {
	s.used.Store(p.now().UnixNano())
	s.busy.Add(-1)
}

// lookup returns run's session without marking it, nil for none.
func (p *Pool) lookup(run string) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sessions[run]
}

// currentURL is the URL of the run's page after its last action, "" before
// its first page.
func (s *session) currentURL() string {
	if s == nil {
		return ""
	}
	if u := s.url.Load(); u != nil {
		return *u
	}
	return ""
}

func (s *session) setURL(u string) { s.url.Store(&u) }

// open returns the session's page, making its context and page first if
// needed. The caller holds s.act.
func (p *Pool) open(s *session) (playwright.Page, error) {
	s.mu.Lock()
	page, closed := s.page, s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if page != nil {
		return page, nil
	}
	d := p.boundDecider()
	if d == nil {
		return nil, ErrNotBound
	}
	br, err := p.browser()
	if err != nil {
		return nil, err
	}
	px, err := p.newProxy(s)
	if err != nil {
		return nil, err
	}
	bctx, err := br.NewContext(playwright.BrowserNewContextOptions{
		ServiceWorkers: playwright.ServiceWorkerPolicyBlock,
		Proxy:          &playwright.Proxy{Server: px.url()},
	})
	if err != nil {
		px.close()
		return nil, fmt.Errorf("%w: new context: %v", ErrAction, err)
	}
	ms := float64(p.cfg.ActionTimeout.Milliseconds())
	bctx.SetDefaultTimeout(ms)
	bctx.SetDefaultNavigationTimeout(ms)
	// Strict mode routes every request; report mode only when a scope
	// names a browser target (so its refusal holds); otherwise the proxy
	// alone observes.
	if m := d.Mode(); m == policy.ModeStrict || (m == policy.ModeReport && d.Policy().ScopesNameBrowserTargets()) {
		err = bctx.Route("**/*", p.route(s))
	}
	if err == nil {
		bctx.OnPage(s.addPage)
		page, err = bctx.NewPage()
	}
	if err != nil {
		_ = bctx.Close()
		px.close()
		return nil, fmt.Errorf("%w: new page: %v", ErrAction, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = bctx.Close()
		px.close()
		return nil, ErrClosed
	}
	s.br, s.bctx, s.page, s.proxy = br, bctx, page, px
	s.mu.Unlock()
	s.addPage(page)
	return page, nil
}

// close closes the session's context; its pages and routes go with it.
func (s *session) close() {
	s.mu.Lock()
	bctx, px := s.bctx, s.proxy
	s.closed, s.bctx, s.page, s.proxy, s.pages = true, nil, nil, nil, nil
	s.mu.Unlock()
	if bctx != nil {
		_ = bctx.Close()
	}
	if px != nil {
		px.close()
	}
}

// reap closes contexts idle for longer than IdleTimeout. It is the pool's
// one long-lived goroutine, stopped by Close.
func (p *Pool) reap() {
	defer close(p.reaperDone)
	every := min(max(p.cfg.IdleTimeout/4, 10*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stopReaper:
			return
		case <-t.C:
		}
		cutoff := p.now().Add(-p.cfg.IdleTimeout).UnixNano()
		var idle []*session
		p.mu.Lock()
		for run, s := range p.sessions {
			if s.busy.Load() == 0 && s.used.Load() < cutoff {
				idle = append(idle, s)
				delete(p.sessions, run)
			}
		}
		p.mu.Unlock()
		for _, s := range idle {
			p.log.Info("closing idle browser context", "run", s.run)
			s.close()
		}
	}
}
