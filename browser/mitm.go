package browser

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse/gatehouse/policy"
)

// Looking inside HTTPS tunnels.
//
// A plain forward proxy sees only the host of a CONNECT, so it could only
// refuse or allow a whole tunnel: refusing every tunnel to another site
// broke a page's own subresources on HTTPS CDNs, and allowing one would let
// any request (a shared worker's, a beacon on unload, a 307 re-sending a
// body) ride it to that site undecided, since a browser reuses its
// connections. So in report and strict mode the proxy terminates the TLS of
// every tunnel itself and decides the requests inside one by one, exactly
// as it decides plain http: plain reads pass, reads carrying data and sends
// are decided. No tunnel is blind, so a tunnel is no longer decided by its
// host: a page's reads from other HTTPS hosts work in strict mode, and what
// it sends there is decided per request.
//
// The proxy presents a certificate for the tunnel's host made on the fly
// and signed by a key the pool generates in memory when it is made (never
// written anywhere); Chromium is launched with
// --ignore-certificate-errors-spki-list naming that key alone, so it
// accepts these certificates and nothing else it would not accept anyway.
// The proxy then connects to the site itself and verifies the site's
// certificate against the system's roots (Config.TLSRoots when set): a
// site whose certificate does not verify answers 502, and the page sees
// that. Chromium speaks HTTP/1.1 to the proxy (ALPN offers nothing else).
//
// A WebSocket inside a tunnel (wss://) to a host other than the run's site
// is a "connect" effect, decided before its handshake is sent, and its
// outcome counts and digests the frames the page sent, as for ws://.
// Anything but HTTP inside the TLS (TURN over TLS) is a connect decided by
// host, reaching the site over TLS when allowed. A tunnel that does not
// start with a TLS handshake (a ws:// WebSocket, TURN over TCP) is decided
// by host too, with what it carries counted.
// Mode off decides nothing and tunnels blind.

// tlsRecordHandshake is the first byte of a TLS ClientHello.
const tlsRecordHandshake = 0x16

// interceptor makes the certificates the proxy presents inside tunnels,
// all with one key. Safe for concurrent use.
type interceptor struct {
	key   *ecdsa.PrivateKey
	spki  string // base64 SHA-256 of the key's SubjectPublicKeyInfo, for Chromium
	roots *x509.CertPool

	mu    sync.Mutex // a leaf: nothing else is locked while it is held
	certs map[string]*tls.Certificate
}

// maxCerts bounds the certificate cache; it is cleared when full.
const maxCerts = 4096

func newInterceptor(roots *x509.CertPool) (*interceptor, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &interceptor{key: key, spki: base64.StdEncoding.EncodeToString(sum[:]), roots: roots,
		certs: map[string]*tls.Certificate{}}, nil
}

// launchArg is the Chromium flag that accepts the interceptor's
// certificates.
func (ic *interceptor) launchArg() string { return "--ignore-certificate-errors-spki-list=" + ic.spki }

// certFor returns a certificate for host (a name or an IP address, without
// port), made on first use.
func (ic *interceptor) certFor(host string) (*tls.Certificate, error) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if c, ok := ic.certs[host]; ok && time.Now().Before(c.Leaf.NotAfter) {
		return c, nil
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: host, Organization: []string{"Gatehouse browser proxy"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tpl.IPAddresses = []net.IP{ip}
	} else {
		tpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &ic.key.PublicKey, ic.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if len(ic.certs) >= maxCerts {
		clear(ic.certs)
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: ic.key, Leaf: leaf}
	ic.certs[host] = c
	return c, nil
}

// upstreamTLS is the client configuration the proxy reaches sites with.
func (ic *interceptor) upstreamTLS(serverName string, protos ...string) *tls.Config {
	return &tls.Config{RootCAs: ic.roots, ServerName: serverName, NextProtos: protos, MinVersion: tls.VersionTLS12}
}

// connListener hands hijacked tunnel connections to the proxy's inner
// server.
type connListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{}), addr: addr}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *connListener) Addr() net.Addr { return l.addr }

// push hands c to the inner server; false (c not taken) once closed.
func (l *connListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

// tunnelConn is a hijacked CONNECT: reads come through the reader that
// peeked at its first byte; authority is the CONNECT's host:port.
type tunnelConn struct {
	net.Conn
	r         *bufio.Reader
	authority string
}

func (c *tunnelConn) Read(b []byte) (int, error) { return c.r.Read(b) }

type authorityKey struct{}

// newInner returns the server for the requests inside px's tunnels.
func (px *proxy) newInner(log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           http.HandlerFunc(px.serveIntercepted),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){}, // HTTP/1.1 only
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if t, ok := c.(*tunnelConn); ok {
				return context.WithValue(ctx, authorityKey{}, t.authority)
			}
			return ctx
		},
	}
}

// intercept terminates the TLS of a hijacked, tracked tunnel. When what
// the page sends inside is HTTP, the inner server takes the connection and
// decides its requests one by one; anything else (TURN over TLS, a raw
// protocol) is a tunnel decided by host (connectTunnel), reaching the site
// over TLS when allowed.
func (px *proxy) intercept(d Decider, conn net.Conn, br *bufio.Reader, authority string) {
	host, _, err := net.SplitHostPort(authority)
	if err != nil {
		host = authority
	}
	host = strings.Trim(host, "[]")
	cfg := &tls.Config{
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return px.pool.ic.certFor(strings.ToLower(host))
		},
	}
	tc := tls.Server(&tunnelConn{Conn: conn, r: br, authority: authority}, cfg)
	ctx, cancel := context.WithTimeout(px.pool.base, 30*time.Second)
	err = tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		px.untrack(conn)
		return
	}
	inner := bufio.NewReader(tc)
	head, err := inner.Peek(8)
	if err != nil && len(head) == 0 {
		px.untrack(conn)
		return
	}
	dec := &tunnelConn{Conn: tc, r: inner, authority: authority}
	if !httpMethodLine(head) {
		px.retrack(conn, dec)
		px.connectTunnel(d, dec, inner, authority, true)
		return
	}
	px.release(conn)
	if !px.innerLn.push(dec) {
		_ = tc.Close()
	}
}

// httpMethodLine reports whether b starts like an HTTP/1 request line: a
// method in capitals and a space.
func httpMethodLine(b []byte) bool {
	for i, c := range b {
		switch {
		case c == ' ':
			return i >= 3
		case c < 'A' || c > 'Z':
			return false
		}
	}
	return false
}

// serveIntercepted decides one request from inside a tunnel, as ServeHTTP
// decides a plain one.
func (px *proxy) serveIntercepted(w http.ResponseWriter, r *http.Request) {
	authority, _ := r.Context().Value(authorityKey{}).(string)
	host := hostPath("https://" + authority).host
	if authority == "" || host == "" || hostPath("https://"+r.Host).host != host {
		// The Host a request names inside a tunnel is the tunnel's.
		http.Error(w, "gatehouse: the request's host is not the tunnel's", http.StatusBadRequest)
		return
	}
	r.URL.Scheme, r.URL.Host = "https", host
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		px.interceptWebSocket(w, r, authority)
		return
	}
	px.serveRequest(w, r)
}

// interceptWebSocket decides a wss:// handshake like a ws:// tunnel: by
// host, as a connect effect when it goes to another site.
func (px *proxy) interceptWebSocket(w http.ResponseWriter, r *http.Request, authority string) {
	px.s.seen()
	d := px.pool.boundDecider()
	if d == nil {
		http.Error(w, "gatehouse: not bound", http.StatusForbidden)
		return
	}
	host := hostPath(r.URL.String()).host
	page := px.s.pageHost()
	if d.Mode() == policy.ModeOff {
		px.webSocket(w, r, authority, nil)
		return
	}
	if host == page {
		// Opened by a document of another origin, it is to another site.
		from, foreign := initiator(r.Header, page)
		if !foreign {
			px.webSocket(w, r, authority, nil)
			return
		}
		page = from
	}
	snd := &send{run: px.s.run, sess: px.s, action: policy.BrowserConnect, method: http.MethodConnect,
		to: connectPlace(d.Policy(), host), pageHost: page, held: true, proxy: px, w: w, r: r,
		authority: authority, secure: true}
	if px.pool.enter() {
		px.pool.proposeTunnel(snd)
		px.pool.inflight.Done()
	}
	if !snd.released.Load() {
		http.Error(w, "gatehouse: refused", http.StatusForbidden)
	}
}

// webSocket sends the handshake r to the site over TLS and pipes the
// connection both ways until either side closes; when st is set it counts
// and digests the frames the page sends. It is noted as a write first
// (writes.go), and refused when it cannot be.
func (px *proxy) webSocket(w http.ResponseWriter, r *http.Request, authority string, st *tunnelStats) {
	if err := px.noteTunnel(authority, true); err != nil {
		px.writeRefused(authority, err)
		refuse(w, r)
		return
	}
	name, _, err := net.SplitHostPort(authority)
	if err != nil {
		name = authority
	}
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 15 * time.Second},
		Config: px.pool.ic.upstreamTLS(strings.Trim(name, "[]"), "http/1.1")}
	up, err := dialer.DialContext(r.Context(), "tcp", loopbackName(authority))
	if err != nil {
		http.Error(w, "gatehouse: the site cannot be reached", http.StatusBadGateway)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if !px.track(conn, up) {
		return
	}
	defer px.untrack(conn, up)
	if st == nil {
		st = &tunnelStats{}
	}
	st.websocket, st.path = true, hostPath(r.URL.String()).path
	if err := r.Write(up); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(conn, up)
		_ = conn.Close()
		close(done)
	}()
	count := &countWriter{w: up}
	copyFrames(brw.Reader, count, st)
	st.bytes = count.n
	_ = up.Close()
	<-done
}
