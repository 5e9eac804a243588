package policy

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Refusals of the browser sink beyond browser-send-off-site.
const (
	// RefuseBrowserQueryOffSite: a GET to another site whose query carries
	// more than BrowserRules.MaxOffSiteQueryBytes (data in the address).
	// Enforced in strict mode, recorded in report.
	RefuseBrowserQueryOffSite Refusal = "browser-query-off-site"
	// RefuseBrowserBackground: a request the browser made on its own
	// (update checks, safe browsing, ...), attributed to no run's page.
	// It is the runtime's, never let out, and enforced in every mode that
	// decides: no agent asked for it and no page needs it.
	RefuseBrowserBackground Refusal = "browser-background"
)

// Browser effect actions the policy knows.
const (
	// BrowserSend is a request carrying data out of a page.
	BrowserSend = "send"
	// BrowserConnect is a CONNECT tunnel (HTTPS, WebSocket) the browser
	// asks the broker's proxy for; Method is "CONNECT".
	BrowserConnect = "connect"
	// BrowserBackground is a request of the browser's own; Origin is
	// OriginRuntime.
	BrowserBackground = "background"
	// BrowserQueryBytes is the Effect.Values key of a GET's query size.
	BrowserQueryBytes = "query_bytes"
	// BrowserBodyBytes is the Effect.Values key of the body size of a send
	// whose method is GET, HEAD or OPTIONS (an OPTIONS can carry one): a
	// body is data going out whatever the method.
	BrowserBodyBytes = "body_bytes"
)

// DefaultMaxOffSiteQueryBytes is the query size above which a GET to
// another site is decided as a send, when the rules file sets none: large
// enough for the analytics and image URLs pages make (a few hundred bytes),
// small enough that a page cannot carry a form's worth of data out in an
// address unnoticed.
const DefaultMaxOffSiteQueryBytes = 1024

// BrowserRules are the deployment's settings for the browser sink, from the
// rules file's browser section:
//
//	browser:
//	  max_off_site_query_bytes: 1024
//
// A GET to a host other than the page's whose query is longer than
// MaxOffSiteQueryBytes is decided as a send (the query's size and digest,
// never its text, are recorded) and refused in strict mode
// (browser-query-off-site) unless an effects allow rule names its target.
type BrowserRules struct {
	MaxOffSiteQueryBytes int
}

type browserSection struct {
	set  bool
	main BrowserRules
}

// Browser returns the browser sink's settings; defaults when the rules file
// has no browser section. Safe on a nil or unreadable policy.
func (p *Policy) Browser() BrowserRules {
	if p == nil || !p.browser.set {
		return BrowserRules{MaxOffSiteQueryBytes: DefaultMaxOffSiteQueryBytes}
	}
	return p.browser.main
}

// ScopesNameBrowserTargets reports whether a scope requirement could match
// a browser read: its match names the browser sink (or no sink) and a
// target or host. The browser sink then intercepts requests in report mode
// too, so the scope's refusal holds.
func (p *Policy) ScopesNameBrowserTargets() bool {
	if p == nil {
		return false
	}
	for i := range p.scopes {
		m := &p.scopes[i].m
		if (m.sink == nil || contains(m.sink, string(SinkBrowser))) && (m.target != nil || m.host != nil) {
			return true
		}
	}
	return false
}

// ScopedBrowserRead reports whether a read of e (a browser effect: its
// Target, Host and Path set) needs a scope, so the browser decides it like
// a navigation. Pure, like Decide.
func (p *Policy) ScopedBrowserRead(e Effect) bool {
	if p == nil || len(p.scopes) == 0 {
		return false
	}
	d := decider{p: p, in: Input{Effect: e}, method: strings.ToUpper(e.Method)}
	for i := range p.scopes {
		if p.scopes[i].m.matches(&d) {
			return true
		}
	}
	return false
}

// browserBuiltins are the browser sink's built-in rules.
func (d *decider) browserBuiltins() {
	e := &d.in.Effect
	switch e.Action {
	case BrowserBackground:
		d.add(RefuseBrowserBackground, string(RefuseBrowserBackground),
			fmt.Sprintf("The browser itself (no run's page) asked for %q; Gatehouse lets none of the browser's own traffic out.", e.Host), true)
		return
	case BrowserSend, BrowserConnect:
	default:
		return
	}
	if e.PageHost != "" && strings.EqualFold(e.Host, e.PageHost) {
		return
	}
	var refusal Refusal
	var detail string
	switch {
	case e.Action == BrowserConnect:
		refusal = RefuseBrowserSendOffSite
		detail = fmt.Sprintf("The page on %q asked for a tunnel (CONNECT, for HTTPS or a WebSocket) to %q, another site, whose content Gatehouse cannot see; if that site should be reached, add an effects allow rule with its target.", e.PageHost, e.Host)
	case !isSafe(d.method) || e.Values[BrowserBodyBytes] != "":
		refusal = RefuseBrowserSendOffSite
		detail = fmt.Sprintf("The page on %q tried to send data (%s) to %q, another site; if that site should receive it, add an effects allow rule with its target.", e.PageHost, d.method, e.Host)
	default:
		n, err := strconv.Atoi(e.Values[BrowserQueryBytes])
		max := d.p.Browser().MaxOffSiteQueryBytes
		if err != nil || n <= max {
			return
		}
		refusal = RefuseBrowserQueryOffSite
		detail = fmt.Sprintf("The page on %q asked %q for an address whose query carries %d bytes, more than the %d the deployment allows to another site (browser.max_off_site_query_bytes); if that site should receive it, add an effects allow rule with its target.", e.PageHost, e.Host, n, max)
	}
	if name := d.allowRule(&d.p.effects, true); name != "" {
		d.lifted(name)
		return
	}
	d.add(refusal, string(refusal), detail, false)
}

// browserSettings reads the rules file's browser section.
func (c *compiler) browserSettings(n *yaml.Node) (browserSection, error) {
	pairs, err := c.Mapping(n, "browser", "max_off_site_query_bytes")
	if err != nil {
		return browserSection{}, err
	}
	out := browserSection{set: true, main: BrowserRules{MaxOffSiteQueryBytes: DefaultMaxOffSiteQueryBytes}}
	for _, kv := range pairs {
		v, err := c.Scalar(kv.Value, "browser."+kv.Key)
		if err != nil {
			return browserSection{}, err
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<20 {
			return browserSection{}, c.At(kv.Value, "browser."+kv.Key, "want a number of bytes from 0 to %d, got %q", 1<<20, v)
		}
		out.main.MaxOffSiteQueryBytes = n
	}
	return out, nil
}
