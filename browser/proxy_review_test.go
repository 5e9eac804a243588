package browser

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// These tests send to a run's proxy listener directly, as Chromium would
// for a beacon on unload or a worker, with a real
// broker deciding; they need no Chromium.

// offSite records what reached it: method, path and body.
type offSite struct {
	mu   sync.Mutex
	got  []string
	srv  *httptest.Server
	host string
}

func newOffSite(t *testing.T) *offSite {
	o := &offSite{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		o.mu.Lock()
		o.got = append(o.got, r.Method+" "+r.URL.Path+" "+string(b)+" host="+r.Host)
		o.mu.Unlock()
		if r.Header.Get("Upgrade") != "" {
			// Accept any upgrade: what follows would be a blind tunnel.
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", r.Header.Get("Upgrade"))
			w.WriteHeader(http.StatusSwitchingProtocols)
			return
		}
		fmt.Fprintln(w, "received")
	}))
	t.Cleanup(o.srv.Close)
	o.host = strings.TrimPrefix(o.srv.URL, "http://")
	return o
}

func (o *offSite) received() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.got...)
}

// strictProxy is a pool bound to a real broker in strict mode (with the
// rules file text rules, if any), a run, its session and its proxy
// listener.
func strictProxy(t *testing.T, rules ...string) (*session, *proxy) {
	s, px, _ := strictProxyEnv(t, rules...)
	return s, px
}

func strictProxyEnv(t *testing.T, rules ...string) (*session, *proxy, *sinktest.Env) {
	t.Helper()
	p := New(Config{})
	t.Cleanup(func() { _ = p.Close() })
	env := sinktest.Start(t, policy.ModeStrict, strings.Join(rules, ""), func(testing.TB, *sinktest.Env) []broker.Sink { return []broker.Sink{p} })
	p.Bind(env.Broker)
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	s := &session{run: run}
	px, err := p.newProxy(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.close)
	return s, px, env
}

func proxyClient(t *testing.T, px *proxy) *http.Client {
	u, _ := url.Parse(px.url())
	tr := &http.Transport{Proxy: http.ProxyURL(u)}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// A POST to the URL of the agent's goto in progress is a send like any
// other: only the goto's own navigation (a GET) passes undecided. The goto
// makes its host the run's site, so the POST is decided (and allowed, as a
// send to the run's own site) and on record.
func TestProxyAgentGotoURLDoesNotPassASend(t *testing.T) {
	site := newOffSite(t)
	s, px, env := strictProxyEnv(t)
	target := site.srv.URL + "/landing"
	s.startGoto(target)
	defer s.endGoto("")
	resp, err := proxyClient(t, px).Post(target, "text/plain", strings.NewReader("secret-on-unload"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sends := 0
	for _, ev := range env.Events(t, s.run) {
		if ev.Type == journal.TypeDecision && strings.Contains(string(ev.Data), `"action":"send"`) {
			sends++
		}
	}
	if resp.StatusCode != http.StatusOK || sends != 1 {
		t.Errorf("POST to the goto's URL: status %d, %d send decisions; want 200 and one", resp.StatusCode, sends)
	}
	// The goto's own GET passes undecided.
	resp, err = proxyClient(t, px).Get(target)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the goto's GET: status %d, want 200", resp.StatusCode)
	}
}

// OPTIONS may carry a body (fetch and XMLHttpRequest send one): a request
// with a body is a send whatever its method.
func TestProxyOptionsWithBodyIsASend(t *testing.T) {
	site := newOffSite(t)
	_, px := strictProxy(t)
	req, _ := http.NewRequest(http.MethodOptions, site.srv.URL+"/opt", strings.NewReader("secret-options"))
	resp, err := proxyClient(t, px).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("OPTIONS with a body: status %d, want 403", resp.StatusCode)
	}
	if got := site.received(); len(got) != 0 {
		t.Errorf("the site received %q undecided", got)
	}
	// A preflight (no body) is still a read.
	req, _ = http.NewRequest(http.MethodOptions, site.srv.URL+"/preflight", nil)
	resp, err = proxyClient(t, px).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("OPTIONS without a body: status %d, want 200", resp.StatusCode)
	}
}

// An Upgrade other than through CONNECT would turn the request into a
// blind tunnel to whatever host answered 101.
func TestProxyRefusesUpgradeOutsideConnect(t *testing.T) {
	site := newOffSite(t)
	_, px := strictProxy(t)
	c, err := net.Dial("tcp", strings.TrimPrefix(px.url(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s/up HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: x-blind\r\n\r\n", site.srv.URL, site.host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		t.Errorf("an upgrade outside CONNECT was carried out: status %d", resp.StatusCode)
	}
	if got := site.received(); len(got) != 0 {
		t.Errorf("the site received %q", got)
	}
}

// The request decided is the one that leaves: a Host header naming another
// site than the absolute URL (which the decision is about) does not reach
// the site, which sees the URL's host (RFC 9112 3.2.2; net/http takes it).
func TestProxyHostIsTheURLs(t *testing.T) {
	site := newOffSite(t)
	allow := fmt.Sprintf("effects:\n  - name: allow-site\n    decision: allow\n    match: {sink: browser, target: %q}\n", site.host+"/**")
	_, px := strictProxy(t, allow)
	c, err := net.Dial("tcp", strings.TrimPrefix(px.url(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s/x HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 6\r\n\r\nsecret", site.srv.URL)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := site.received()
	if resp.StatusCode != http.StatusOK || len(got) != 1 || !strings.HasSuffix(got[0], " host="+site.host) {
		t.Errorf("status %d, site received %q; want 200 and the URL's host", resp.StatusCode, got)
	}
}
