package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// send is one request leaving a run's browser that the pool decides: data
// going out (a send), a read of another site carrying data in its address
// or headers, a read of a target a scope names (decided as a navigate), a
// tunnel to another host, or the browser's own traffic. It reaches Describe
// only through a context value under sendKey, which no code outside this
// package can set: that is what keeps agents from proposing any of these.
type send struct {
	run      string
	sess     *session // nil for the runtime's
	action   string   // EffectSend, EffectNavigate, policy.BrowserConnect, policy.BrowserBackground
	method   string
	to       place // as the effect names it: host and path redacted when they carry the data
	pageHost string
	size     int64
	digest   string // "" for no body
	data     readData
	offRead  bool // a plain read of another site, decided because off_site_reads is named

	held     bool        // the proxy holds the request until decided
	released atomic.Bool // Perform let the held request go
	redirect bool        // decided at a redirect, for the redirect's target

	// A connect: Perform runs the tunnel. For a plain tunnel (ws://, TURN
	// over TCP), conn and br are the accepted CONNECT; for a wss://
	// handshake from inside an intercepted tunnel (secure), w and r are the
	// inner request; for another protocol inside TLS (TURN over TLS), conn
	// and br are the decrypted tunnel and tlsUp says to reach the site over
	// TLS.
	proxy     *proxy
	authority string // the site's host:port
	conn      net.Conn
	br        *bufio.Reader
	secure    bool
	tlsUp     bool
	ending    func() // ends the decision for the settle barrier (finish)
	w         http.ResponseWriter
	r         *http.Request
}

type sendKey struct{}

// sendParams are the params of the pool's own send request. They are
// informational: Describe builds the effect from the send in the context.
type sendParams struct {
	Method     string `json:"method"`
	URL        string `json:"url"`      // host and path as the effect names them, never the query
	PageURL    string `json:"page_url"` // the page's host
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

// request is what classify reads of one request.
type request struct {
	method      string
	url         string // absolute
	header      http.Header
	hasBody     bool
	preflighted []string // header names a CORS preflight announced for it
	// announced is, for a CORS preflight, what it announces that the page
	// chose: header names and a method no browser sets itself.
	announced []string
}

// classify returns the send a request of s's is decided as, nil for a plain
// read that is neither decided nor recorded. Under pol: anything but GET,
// HEAD and OPTIONS is a send, and so is any request with a body; a GET,
// HEAD or OPTIONS to another site is a send when it carries data (a
// query, a long path, a long name, a header the page set: readData), or
// when off_site_reads is named; a read of a target a scope names is a
// navigate. A request is to another site when its host is not pageHost,
// or when a document of another origin made it (initiator): a page of the
// run's last site still unloading, a popup of it left open, a frame of
// another site on the run's page. Only sizes and a digest of what was
// carried are kept, and a host or path of another site that could carry
// data is redacted (redactedHost, redactedPath) whatever the method, so
// what a page puts in an address never reaches the journal. A method
// other than the ones HTTP and WebDAV define is named ExtensionMethod.
func (p *Pool) classify(pol *policy.Policy, s *session, req request, pageHost string) *send {
	method := strings.ToUpper(req.method)
	to := hostPath(req.url)
	snd := &send{run: s.run, sess: s, action: EffectSend, method: recordedMethod(method), to: to, pageHost: pageHost}
	offSite := to.host != "" && !strings.EqualFold(to.host, pageHost)
	if !offSite && to.host != "" {
		if from, ok := initiator(req.header, pageHost); ok {
			offSite, snd.pageHost = true, from
		}
	}
	b := pol.Browser()
	rd := &snd.data
	if offSite {
		if len(to.path) > b.MaxOffSitePathBytes {
			rd.path = len(to.path)
			rd.parts = append(rd.parts, to.path)
			snd.to.path = redactedPath
		}
		if sub, _ := subdomain(hostOnly(to.host)); len(sub) > b.MaxOffSiteNameBytes {
			rd.name = len(sub)
			rd.parts = append(rd.parts, sub)
			snd.to.host = redactedHost(to.host)
		}
	}
	if carriesData(method) || req.hasBody {
		// The body is what is recorded of a send: its size and digest.
		snd.data = readData{}
		return snd
	}
	if to.host == "" {
		return nil
	}
	if offSite { // GET, HEAD or OPTIONS without a body
		if q := rawQuery(req.url); len(q) > b.MaxOffSiteQueryBytes {
			rd.query = len(q)
			rd.parts = append(rd.parts, "?"+q)
		}
		rd.header = pageHeaders(req.header, s.browserLanguage(), req.preflighted, &rd.parts)
		for _, a := range req.announced {
			rd.header += len(a)
			rd.parts = append(rd.parts, "announced: "+a)
		}
		if rd.any() {
			snd.size, snd.digest = rd.size(), digest([]byte(strings.Join(rd.parts, "\n")))
			return snd
		}
		if b.OffSiteReads == policy.OffSiteReadsNamed {
			snd.offRead = true
			return snd
		}
	}
	if pol.ScopedBrowserRead(policy.Effect{Sink: policy.SinkBrowser, Action: EffectNavigate, Method: "GET",
		Host: to.host, Path: to.path, PageHost: pageHost, Target: to.target()}) {
		snd.action, snd.method = EffectNavigate, "GET"
		snd.to, snd.pageHost = to, pageHost
		return snd
	}
	return nil
}

// ExtensionMethod is how an effect names a request method that neither
// HTTP nor WebDAV defines: a page chooses its method, so a method is data
// like a path, and only the known ones are recorded by name.
const ExtensionMethod = "EXTENSION"

var knownMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true, "PATCH": true, "OPTIONS": true,
	"QUERY": true, "PROPFIND": true, "PROPPATCH": true, "MKCOL": true, "COPY": true, "MOVE": true, "LOCK": true,
	"UNLOCK": true, "REPORT": true, "SEARCH": true, "MKCALENDAR": true, "ACL": true, "BIND": true, "UNBIND": true,
	"REBIND": true, "MERGE": true, "CHECKOUT": true, "CHECKIN": true, "MKACTIVITY": true, "LABEL": true, "UPDATE": true,
}

// recordedMethod is method (upper case) as an effect names it.
func recordedMethod(method string) string {
	if knownMethods[method] {
		return method
	}
	return ExtensionMethod
}

func rawQuery(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.RawQuery
}

// proposeSend has the broker decide snd, record it and, when allowed, carry
// it out through Perform. The caller has entered the pool. An unbound pool
// decides nothing, and a held send is refused.
func (p *Pool) proposeSend(snd *send) {
	d := p.boundDecider()
	if d == nil {
		p.log.Error("send refused: the browser pool is not bound to a broker", "run", snd.run)
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
	case snd.data.any():
		e.Values = map[string]string{}
		for key, n := range map[string]int{policy.BrowserQueryBytes: snd.data.query, policy.BrowserPathBytes: snd.data.path,
			policy.BrowserNameBytes: snd.data.name, policy.BrowserHeaderBytes: snd.data.header} {
			if n > 0 {
				e.Values[key] = strconv.Itoa(n)
			}
		}
	case snd.offRead:
		e.Values = map[string]string{policy.BrowserOffSiteRead: "true"}
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
	detail := map[string]string{"method": snd.method, "page_host": snd.pageHost, "via": "proxy"}
	if snd.redirect {
		detail["redirect"] = "true"
	}
	if snd.held {
		snd.released.Store(true) // the proxy forwards it when Propose returns
	} else {
		detail["observed"] = strconv.FormatBool(true)
	}
	return &broker.Performed{Result: journal.Result{Status: "ok", Size: prop.Size, Digest: prop.Digest, Detail: detail}}, nil
}

// classifyPreflight returns the send a CORS preflight to another site
// (or from a document of another origin) is recorded as in report mode
// when the site's answer stops the request it precedes: a read carrying
// what its address carries and what it announces that no browser sets
// itself (header names outside standardHeaderNames, an extension method);
// nil when it carries nothing.
func (p *Pool) classifyPreflight(pol *policy.Policy, s *session, r *http.Request, pageHost string) *send {
	var announced []string
	for _, name := range preflightedHeaders(r) {
		if !standardHeaderNames[name] {
			announced = append(announced, name)
		}
	}
	if m := r.Header.Get("Access-Control-Request-Method"); recordedMethod(strings.ToUpper(m)) == ExtensionMethod {
		announced = append(announced, m)
	}
	snd := p.classify(pol, s, request{method: http.MethodOptions, url: r.URL.String(), header: r.Header, announced: announced}, pageHost)
	if snd == nil || !snd.data.any() {
		return nil
	}
	return snd
}

// standardHeaderNames are request headers pages commonly set on a CORS
// request (lower case): announcing one says nothing a secret rides on.
var standardHeaderNames = map[string]bool{
	"accept": true, "accept-language": true, "content-language": true, "content-type": true, "range": true,
	"authorization": true, "x-requested-with": true, "cache-control": true, "pragma": true, "if-match": true,
	"if-none-match": true, "if-modified-since": true, "if-unmodified-since": true, "x-csrf-token": true,
	"x-xsrf-token": true, "last-event-id": true,
}

// corsAllows reports whether a site's answer to a CORS preflight (req is
// the preflight sent) lets the request it precedes follow: a 2xx, an
// Access-Control-Allow-Origin of the request's Origin or "*", the method
// (unless GET, HEAD or POST) among Access-Control-Allow-Methods, every
// announced header among Access-Control-Allow-Headers (or "*"), and for a
// private network request, Access-Control-Allow-Private-Network. When in
// doubt it answers true: the request, if it comes, is recorded itself.
func corsAllows(resp *http.Response, req http.Header) bool {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false
	}
	h := resp.Header
	if o := h.Get("Access-Control-Allow-Origin"); o != "*" && o != req.Get("Origin") {
		return false
	}
	list := func(name string) []string {
		var out []string
		for _, v := range h.Values(name) {
			for item := range strings.SplitSeq(v, ",") {
				if item = strings.TrimSpace(item); item != "" {
					out = append(out, item)
				}
			}
		}
		return out
	}
	method := req.Get("Access-Control-Request-Method")
	switch strings.ToUpper(method) {
	case "GET", "HEAD", "POST":
	default:
		methods := list("Access-Control-Allow-Methods")
		if !slices.Contains(methods, "*") && !slices.ContainsFunc(methods, func(m string) bool {
			return m == method || (knownMethods[strings.ToUpper(m)] && strings.EqualFold(m, method))
		}) {
			return false
		}
	}
	allowed := list("Access-Control-Allow-Headers")
	if !slices.Contains(allowed, "*") {
		for _, v := range req.Values("Access-Control-Request-Headers") {
			for name := range strings.SplitSeq(v, ",") {
				if name = strings.TrimSpace(name); name != "" && !slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, name) }) {
					return false
				}
			}
		}
	}
	if req.Get("Access-Control-Request-Private-Network") != "" && !strings.EqualFold(h.Get("Access-Control-Allow-Private-Network"), "true") {
		return false
	}
	return true
}
