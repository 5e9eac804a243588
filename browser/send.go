package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// send is one request leaving a run's browser that the pool decides: data
// going out (a send), a GET carrying data in its query to another site, a
// read of a target a scope names (decided as a navigate), a CONNECT to
// another host, or the browser's own traffic. It reaches Describe only
// through a context value under sendKey, which no code outside this package
// can set: that is what keeps agents from proposing any of these.
type send struct {
	run      string
	sess     *session // nil for the runtime's
	action   string   // EffectSend, EffectNavigate, policy.BrowserConnect, policy.BrowserBackground
	method   string
	to       place
	pageHost string
	size     int64
	digest   string // "" for no body
	query    int    // bytes of the query, for a GET decided by its query

	via      sendVia
	route    playwright.Route // routed: held until decided
	held     bool             // proxy: held until decided
	released atomic.Bool      // Perform let the held request go

	// A connect: Perform runs the tunnel. For a ws:// tunnel, conn and br
	// are the accepted CONNECT; for a wss:// handshake from inside an
	// intercepted tunnel (secure), w and r are the inner request.
	proxy     *proxy
	authority string // the site's host:port
	conn      net.Conn
	br        *bufio.Reader
	secure    bool
	w         http.ResponseWriter
	r         *http.Request
}

// sendVia says which of the pool's two eyes saw the request.
type sendVia uint8

const (
	viaRoute sendVia = iota
	viaProxy
)

type sendKey struct{}

// sendParams are the params of the pool's own send request. They are
// informational: Describe builds the effect from the send in the context.
type sendParams struct {
	Method     string `json:"method"`
	URL        string `json:"url"`      // without query or fragment
	PageURL    string `json:"page_url"` // the page's host and path
	BodyDigest string `json:"body_digest,omitempty"`
	BodySize   int64  `json:"body_size"`
}

// carriesData reports whether a request of method is a send: anything but
// GET, HEAD and OPTIONS.
func carriesData(method string) bool {
	switch strings.ToUpper(method) {
	case "GET", "HEAD", "OPTIONS":
		return false
	}
	return true
}

// classify returns the send a request is decided as, nil for a plain read
// that is neither decided nor recorded. Under pol: anything but GET, HEAD and
// OPTIONS is a send, and so is any request with a body (an OPTIONS can
// carry one); a GET to a host other than pageHost whose query is
// longer than pol.Browser().MaxOffSiteQueryBytes is a send (the query's size
// and digest recorded, never its text); a read of a target a scope names is
// a navigate. The route handler and the proxy both classify with it, so a
// request either sees is decided alike.
func (p *Pool) classify(pol *policy.Policy, s *session, method, rawURL, pageHost string, hasBody bool) *send {
	method = strings.ToUpper(method)
	to := hostPath(rawURL)
	snd := &send{run: s.run, sess: s, action: EffectSend, method: method, to: to, pageHost: pageHost}
	if carriesData(method) || hasBody {
		return snd
	}
	if method == "GET" && to.host != "" && !strings.EqualFold(to.host, pageHost) {
		if q := rawQuery(rawURL); len(q) > pol.Browser().MaxOffSiteQueryBytes {
			snd.query, snd.size, snd.digest = len(q), int64(len(q)), digest([]byte(q))
			return snd
		}
	}
	if pol.ScopedBrowserRead(policy.Effect{Sink: policy.SinkBrowser, Action: EffectNavigate, Method: "GET",
		Host: to.host, Path: to.path, PageHost: pageHost, Target: to.target()}) {
		snd.action, snd.method = EffectNavigate, "GET"
		return snd
	}
	return nil
}

func rawQuery(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.RawQuery
}

// route is the handler for every request of s's context, installed in
// strict mode and in report mode when a scope names a browser target. A
// plain read continues at once. A request classify decides is held until
// its decision: released with a one-time token the proxy honours (so it is
// not decided twice), aborted otherwise.
func (p *Pool) route(s *session) func(playwright.Route) {
	return func(r playwright.Route) {
		req := r.Request()
		d := p.boundDecider()
		if d == nil {
			_ = r.Abort("blockedbyclient")
			return
		}
		// The agent's goto (a GET) was decided as a navigate; a form posted
		// to its URL meanwhile is a send like any other.
		if req.Method() == "GET" && s.isAgentGoto(req.URL()) && req.IsNavigationRequest() {
			p.continueDecided(s, r)
			return
		}
		pageHost := framePageHost(req)
		if pageHost == "" {
			pageHost = s.pageHost()
		}
		body, _ := req.PostDataBuffer()
		snd := p.classify(d.Policy(), s, req.Method(), req.URL(), pageHost, len(body) > 0)
		if snd == nil {
			_ = r.Continue()
			return
		}
		if len(body) > 0 {
			snd.size, snd.digest = int64(len(body)), digest(body)
		}
		snd.via, snd.route = viaRoute, r
		if p.enter() {
			p.proposeSend(snd)
			p.inflight.Done()
		}
		if !snd.released.Load() {
			_ = r.Abort("blockedbyclient")
		}
	}
}

// continueDecided continues r, decided, so the proxy does not decide it
// again.
func (p *Pool) continueDecided(s *session, r playwright.Route) error {
	return r.Continue(decidedOptions(s, r.Request()))
}

// decidedOptions continue a decided request with a fresh one-time token
// the proxy strips and spends, so it is not decided again. An https request
// gets one too: whenever routing is on (report or strict mode) the proxy
// intercepts every TLS tunnel (mitm.go), so no token reaches a site.
func decidedOptions(s *session, req playwright.Request) playwright.RouteContinueOptions {
	if !strings.HasPrefix(req.URL(), "http:") && !strings.HasPrefix(req.URL(), "https:") {
		return playwright.RouteContinueOptions{}
	}
	h := req.Headers()
	h[decidedHeader] = s.token(req.Method(), req.URL())
	return playwright.RouteContinueOptions{Headers: h}
}

// framePageHost is the host of the top-level page req's frame belongs to,
// following openers past about:blank popups; "" when there is none. A panic
// in a route handler would break the driver connection for every run, so a
// request Playwright cannot place counts as having no frame.
func framePageHost(req playwright.Request) (host string) {
	defer func() {
		if recover() != nil {
			host = ""
		}
	}()
	f := req.Frame()
	if f == nil {
		return ""
	}
	for pg, i := f.Page(), 0; pg != nil && i < 8; i++ {
		if host = hostPath(pg.URL()).host; host != "" {
			return host
		}
		next, err := pg.Opener()
		if err != nil || next == nil {
			return ""
		}
		pg = next
	}
	return ""
}

// proposeSend has the broker decide snd, record it and, when allowed, carry
// it out through Perform. The caller has entered the pool. An unbound pool
// decides nothing, and a held send is aborted.
func (p *Pool) proposeSend(snd *send) {
	d := p.boundDecider()
	if d == nil {
		p.log.Error("send aborted: the browser pool is not bound to a broker", "run", snd.run)
		return
	}
	p.propose(d, snd, p.cfg.SendTimeout)
}

// propose hands snd to d in process; timeout 0 bounds it only by the pool.
func (p *Pool) propose(d Decider, snd *send, timeout time.Duration) *broker.EffectReply {
	params, _ := json.Marshal(sendParams{Method: snd.method, URL: snd.to.target(), PageURL: snd.pageHost,
		BodyDigest: snd.digest, BodySize: snd.size})
	data, err := json.Marshal(broker.EffectRequest{Run: snd.run, Action: snd.action, Params: params})
	if err != nil {
		return &broker.EffectReply{Error: &broker.ErrorBody{Code: broker.CodeInternal}}
	}
	ctx, cancel := p.base, context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(p.base, timeout)
	}
	defer cancel()
	// The origin is the pool's to set in describeSend (runtime for the
	// browser's own background traffic), not the request's.
	reply := d.Propose(context.WithValue(ctx, sendKey{}, snd), broker.Internal(""), policy.SinkBrowser, data)
	if reply.Error != nil && !snd.released.Load() {
		p.log.Warn("send not decided", "run", snd.run, "action", snd.action, "host", snd.to.host, "err", reply.Error)
	}
	return reply
}

// describeSend builds the effect of a request the pool proposed; a "send"
// without one (an agent's, over NATS) is a bad request and nothing is
// decided.
func (p *Pool) describeSend(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	snd, ok := ctx.Value(sendKey{}).(*send)
	if !ok || snd.run != run.ID || snd.action != req.Action {
		return nil, fmt.Errorf("%w: %q is decided by the browser for the requests its pages make; an agent cannot propose it",
			broker.ErrBadRequest, clip(req.Action))
	}
	if err := broker.DecodeParams(req.Params, &sendParams{}); err != nil {
		return nil, err
	}
	e := policy.Effect{Sink: policy.SinkBrowser, Action: snd.action, Method: snd.method,
		Host: snd.to.host, Path: snd.to.path, PageHost: snd.pageHost, Target: snd.to.target()}
	switch {
	case snd.action == policy.BrowserBackground:
		e.Origin = policy.OriginRuntime
	case snd.query > 0:
		e.Values = map[string]string{policy.BrowserQueryBytes: strconv.Itoa(snd.query)}
	case snd.action == EffectSend && snd.size > 0 && !carriesData(snd.method):
		e.Values = map[string]string{policy.BrowserBodyBytes: strconv.FormatInt(snd.size, 10)}
	}
	return &broker.Proposal{Effect: e, Size: snd.size, Digest: snd.digest, State: snd}, nil
}

// perform releases a held send; an observed one has already left.
func (snd *send) perform(prop *broker.Proposal) (*broker.Performed, error) {
	if snd.action == policy.BrowserConnect {
		return snd.performTunnel(prop)
	}
	detail := map[string]string{"method": snd.method, "page_host": snd.pageHost}
	if snd.via == viaProxy {
		detail["via"] = "proxy"
	}
	switch {
	case snd.route != nil:
		if err := snd.route.Continue(decidedOptions(snd.sess, snd.route.Request())); err != nil {
			return nil, fmt.Errorf("%w: the page went away before the send was released: %v", ErrAction, err)
		}
		snd.released.Store(true)
	case snd.held:
		snd.released.Store(true) // the proxy forwards it when Propose returns
	default:
		detail["observed"] = strconv.FormatBool(true)
	}
	return &broker.Performed{Result: journal.Result{Status: "ok", Size: prop.Size, Digest: prop.Digest, Detail: detail}}, nil
}
