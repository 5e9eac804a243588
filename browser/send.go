package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/mxschmitt/playwright-go"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// send is one request carrying data out of a run's page, as the pool saw it.
// It reaches Describe only through a context value under sendKey, which no
// code outside this package can set: that is what keeps agents from
// proposing sends.
type send struct {
	run      string
	method   string
	to       place
	pageHost string
	size     int64
	digest   string // "" for no body

	route    playwright.Route // strict: held until decided; nil when observed
	released atomic.Bool      // Perform let the held request go
}

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
// GET, HEAD and OPTIONS. (Data in a GET's address is not decided yet.)
func carriesData(method string) bool {
	switch strings.ToUpper(method) {
	case "GET", "HEAD", "OPTIONS":
		return false
	}
	return true
}

// route is the strict-mode handler for every request of s's context. Plain
// reads continue at once; a send is held until decided and aborted unless
// Perform released it.
func (p *Pool) route(s *session) func(playwright.Route) {
	return func(r playwright.Route) {
		req := r.Request()
		if !carriesData(req.Method()) {
			_ = r.Continue()
			return
		}
		snd := p.newSend(s, req)
		snd.route = r
		if p.enter() {
			p.proposeSend(snd)
			p.inflight.Done()
		}
		if !snd.released.Load() {
			_ = r.Abort("blockedbyclient")
		}
	}
}

// observe is the report-mode listener: sends have already left, and are
// decided and recorded in the background so the page never waits.
func (p *Pool) observe(s *session) func(playwright.Request) {
	return func(req playwright.Request) {
		if !carriesData(req.Method()) {
			return
		}
		snd := p.newSend(s, req)
		if !p.enter() {
			return
		}
		go func() {
			defer p.inflight.Done()
			p.proposeSend(snd)
		}()
	}
}

// newSend describes req. The page's host is that of the top-level page the
// request comes from: its opener's while a popup is still about:blank, the
// run's current page for requests without a frame (workers).
func (p *Pool) newSend(s *session, req playwright.Request) *send {
	snd := &send{run: s.run, method: strings.ToUpper(req.Method()), to: hostPath(req.URL())}
	if body, err := req.PostDataBuffer(); err == nil && len(body) > 0 {
		snd.size, snd.digest = int64(len(body)), digest(body)
	}
	snd.pageHost = framePageHost(req)
	if snd.pageHost == "" {
		snd.pageHost = hostPath(s.currentURL()).host
	}
	return snd
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
// decides nothing, and the send is aborted.
func (p *Pool) proposeSend(snd *send) {
	d := p.boundDecider()
	if d == nil {
		p.log.Error("send aborted: the browser pool is not bound to a broker", "run", snd.run)
		return
	}
	params, _ := json.Marshal(sendParams{Method: snd.method, URL: snd.to.target(), PageURL: snd.pageHost,
		BodyDigest: snd.digest, BodySize: snd.size})
	data, err := json.Marshal(broker.EffectRequest{Run: snd.run, Action: EffectSend, Params: params})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(p.base, p.cfg.SendTimeout)
	defer cancel()
	reply := d.Propose(context.WithValue(ctx, sendKey{}, snd), policy.SinkBrowser, data)
	if reply.Error != nil && !snd.released.Load() {
		p.log.Warn("send not decided", "run", snd.run, "host", snd.to.host, "err", reply.Error)
	}
}

// describeSend builds the effect of a send the pool proposed; any other
// "send" (an agent's, over NATS) is a bad request and nothing is decided.
func (p *Pool) describeSend(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	snd, ok := ctx.Value(sendKey{}).(*send)
	if !ok || snd.run != run.ID {
		return nil, fmt.Errorf("%w: %q is decided by the browser for the requests its pages make; an agent cannot propose it",
			broker.ErrBadRequest, EffectSend)
	}
	if err := broker.DecodeParams(req.Params, &sendParams{}); err != nil {
		return nil, err
	}
	return &broker.Proposal{
		Effect: policy.Effect{Sink: policy.SinkBrowser, Action: EffectSend, Method: snd.method,
			Host: snd.to.host, Path: snd.to.path, PageHost: snd.pageHost, Target: snd.to.target()},
		Size: snd.size, Digest: snd.digest, State: snd,
	}, nil
}

// perform releases a held send; an observed one has already left.
func (snd *send) perform(prop *broker.Proposal) (*broker.Performed, error) {
	detail := map[string]string{"method": snd.method, "page_host": snd.pageHost}
	if snd.route == nil {
		detail["observed"] = strconv.FormatBool(true)
	} else {
		if err := snd.route.Continue(); err != nil {
			return nil, fmt.Errorf("%w: the page went away before the send was released: %v", ErrAction, err)
		}
		snd.released.Store(true)
	}
	return &broker.Performed{Result: journal.Result{Status: "ok", Size: prop.Size, Digest: prop.Digest, Detail: detail}}, nil
}
