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

// launchArgs keep Chromium headless-friendly and quiet, and leave it no way
// out but the proxy. Chromium still makes some background calls despite
// them; the runtime's proxy listener refuses and records those (proxy.go).
//
//   - --webrtc-ip-handling-policy=disable_non_proxied_udp (Chromium's
//     WebRTCIPHandlingPolicy) sends no UDP for WebRTC at all: no STUN, no
//     TURN over UDP, no host candidates; WebRTC may only relay over TCP or
//     TLS through the proxy, where each tunnel is a connect effect;
//   - --host-resolver-rules maps every name Chromium would resolve itself
//     to "not found", so it never asks DNS (prefetch, preconnect, a STUN
//     server's name); with a proxy it hands names to the proxy, which
//     resolves only for a request it lets out. The proxy's own address is
//     an IP, excluded;
//   - --disable-quic keeps HTTP/3 (UDP) off.
var launchArgs = []string{
	"--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--webrtc-ip-handling-policy=disable_non_proxied_udp",
	"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
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
	// SettleQuiet and SettleMax bound the barrier every action that
	// touches a page ends with: it returns once the run's proxy has seen
	// no new request for SettleQuiet and every decision under way is
	// recorded, or after SettleMax. 0 is 250 ms and 2 s.
	SettleQuiet, SettleMax time.Duration
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
	noter   atomic.Pointer[WriteNoter] // NoteWrites; writes.go

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
	if cfg.SettleQuiet <= 0 {
		cfg.SettleQuiet = 250 * time.Millisecond
	}
	if cfg.SettleMax <= 0 {
		cfg.SettleMax = 2 * time.Second
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
	for _, s := range sessions {
		s.close(p.cfg.SettleQuiet, p.cfg.SettleMax)
	}
	p.cancel()
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

// CloseRun closes run's context if it has one, letting its pages leave
// first: what their pagehide and unload handlers send is decided and
// recorded under the run before it returns (session.close). The broker's
// run close calls it; the idle timeout closes contexts whose run never
// closes.
func (p *Pool) CloseRun(run string) {
	p.mu.Lock()
	s := p.sessions[run]
	delete(p.sessions, run)
	p.mu.Unlock()
	if s != nil {
		s.close(p.cfg.SettleQuiet, p.cfg.SettleMax)
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
	// Nothing is routed through Playwright: the run's proxy listener sees
	// every request the context makes and decides it (doc.go, "One eye").
	bctx.OnPage(func(pg playwright.Page) {
		// A popup opening is a page about to send: the settle barrier
		// waits for its load (or longLived). The pool's own page (no
		// opener) is not one.
		if opener, err := pg.Opener(); err == nil && opener != nil {
			key := fmt.Sprintf("PAGE %p", pg)
			s.issue("PAGE", key)
			pg.OnLoad(func(playwright.Page) { s.arrived("PAGE", key) })
			pg.OnClose(func(playwright.Page) { s.arrived("PAGE", key) })
		}
		s.addPage(pg)
	})
	// Chromium's own word on what it sends: the settle barrier waits for
	// each request it made to reach the proxy (or to finish without it).
	bctx.OnRequest(func(r playwright.Request) { s.issue(r.Method(), r.URL()) })
	bctx.OnRequestFinished(func(r playwright.Request) { s.arrived(r.Method(), r.URL()) })
	bctx.OnRequestFailed(func(r playwright.Request) { s.arrived(r.Method(), r.URL()) })
	page, err = bctx.NewPage()
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
			s.close(p.cfg.SettleQuiet, p.cfg.SettleMax)
		}
	}
}
