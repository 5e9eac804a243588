package policy

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Refusals of the browser sink beyond browser-send-off-site.
const (
	// RefuseBrowserQueryOffSite: a read (GET, HEAD, OPTIONS) of another site whose
	// query carries more than BrowserRules.MaxOffSiteQueryBytes (by
	// default any query at all: data in the address). Enforced in strict
	// mode, recorded in report.
	RefuseBrowserQueryOffSite Refusal = "browser-query-off-site"
	// RefuseBrowserDataOffSite: a read of another site carrying data
	// elsewhere than its query: a path longer than MaxOffSitePathBytes,
	// a host name whose labels below its registrable domain are longer
	// than MaxOffSiteNameBytes, or request headers the page set itself;
	// or, with OffSiteReads "named", any read of another site. Enforced
	// in strict mode, recorded in report.
	RefuseBrowserDataOffSite Refusal = "browser-data-off-site"
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
	// BrowserConnect is a tunnel the browser asks the broker's proxy for
	// whose content is not HTTP the proxy can decide request by request:
	// a WebSocket, WebRTC's TURN over TCP or TLS; Method is "CONNECT".
	BrowserConnect = "connect"
	// BrowserBackground is a request of the browser's own; Origin is
	// OriginRuntime.
	BrowserBackground = "background"
	// BrowserQueryBytes is the Effect.Values key of a read's query size.
	BrowserQueryBytes = "query_bytes"
	// BrowserPathBytes is the Effect.Values key of a read's path size,
	// set when the path is longer than MaxOffSitePathBytes.
	BrowserPathBytes = "path_bytes"
	// BrowserNameBytes is the Effect.Values key of the size of a host
	// name's labels below its registrable domain, set when they are
	// longer than MaxOffSiteNameBytes.
	BrowserNameBytes = "name_bytes"
	// BrowserHeaderBytes is the Effect.Values key of the size of the
	// request headers the page set itself on a read.
	BrowserHeaderBytes = "header_bytes"
	// BrowserOffSiteRead is the Effect.Values key set ("true") on a read
	// of another site decided because OffSiteReads is "named".
	BrowserOffSiteRead = "off_site_read"
	// BrowserBodyBytes is the Effect.Values key of the body size of a send
	// whose method is GET, HEAD or OPTIONS (an OPTIONS can carry one): a
	// body is data going out whatever the method.
	BrowserBodyBytes = "body_bytes"
)

// The defaults of the browser section. A read of another site is a plain
// read (neither decided nor recorded) only when it carries no data: no
// query, a path no longer than a file's name on a CDN, a host name no
// longer than a CDN's own labels, and no header the page set itself.
const (
	// DefaultMaxOffSiteQueryBytes: any query to another site is data. A
	// query is the page's parameters; no realistic secret is smaller than
	// a byte.
	DefaultMaxOffSiteQueryBytes = 0
	// DefaultMaxOffSitePathBytes: a CDN's paths (a library's version
	// folder and file, a font's hashed name) stay under it; a page's
	// worth of data (a token, a cookie jar) does not.
	DefaultMaxOffSitePathBytes = 128
	// DefaultMaxOffSiteNameBytes: the labels a CDN puts below its
	// registrable domain ("fonts", "d1a2b3c4d5e6f7" of CloudFront) stay
	// under it; a key or token spelt into a name does not.
	DefaultMaxOffSiteNameBytes = 24
)

// Values of BrowserRules.OffSiteReads.
const (
	// OffSiteReadsPlain: reads of other sites that carry no data pass
	// without a rule (the default).
	OffSiteReadsPlain = "plain"
	// OffSiteReadsNamed: every read of another site needs an effects
	// allow rule naming it, so not even the choice of which plain read
	// to make reaches a site the deployment did not name.
	OffSiteReadsNamed = "named"
)

// BrowserRules are the deployment's settings for the browser sink, from the
// rules file's browser section:
//
//	browser:
//	  max_off_site_query_bytes: 0
//	  max_off_site_path_bytes: 128
//	  max_off_site_name_bytes: 24
//	  off_site_reads: plain        # or named
//
// A read (GET, HEAD) of a host other than the page's whose query, path or
// host name is longer than its limit, or that carries a header the page set
// itself, is decided as a send (its sizes and digest, never its text, are
// recorded) and refused in strict mode (browser-query-off-site,
// browser-data-off-site) unless an effects allow rule names its target.
type BrowserRules struct {
	MaxOffSiteQueryBytes int
	MaxOffSitePathBytes  int
	MaxOffSiteNameBytes  int
	OffSiteReads         string
}

type browserSection struct {
	set  bool
	main BrowserRules
}

func defaultBrowserRules() BrowserRules {
	return BrowserRules{MaxOffSiteQueryBytes: DefaultMaxOffSiteQueryBytes, MaxOffSitePathBytes: DefaultMaxOffSitePathBytes,
		MaxOffSiteNameBytes: DefaultMaxOffSiteNameBytes, OffSiteReads: OffSiteReadsPlain}
}

// Browser returns the browser sink's settings; defaults when the rules file
// has no browser section. Safe on a nil or unreadable policy.
func (p *Policy) Browser() BrowserRules {
	if p == nil || !p.browser.set {
		return defaultBrowserRules()
	}
	return p.browser.main
}

// ScopesNameBrowserTargets reports whether a scope requirement could match
// a browser read: its match names the browser sink (or no sink) and a
// target or host. The browser sink then holds scoped reads until decided
// in report mode too, so the scope's refusal holds.
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

// BrowserTargetAllowed reports whether an effects allow rule with a target
// matches e, as it would lift browser-send-off-site. The browser asks it of
// a CORS preflight to another site: one no rule allows is answered by the
// proxy itself, so the request it precedes arrives and is decided (and
// refused) with its body; one a rule allows goes to the site, whose CORS
// answer stands. Rules that match on the run's agent are not known here
// and do not match. Pure, like Decide.
func (p *Policy) BrowserTargetAllowed(e Effect) bool {
	if p == nil || !p.usable {
		return false
	}
	d := decider{p: p, in: Input{Effect: e}, method: strings.ToUpper(e.Method)}
	return d.allowRule(&p.effects, true) != ""
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
	refusal, detail := d.offSite(e)
	if refusal == "" {
		return
	}
	if name := d.allowRule(&d.p.effects, true); name != "" {
		d.lifted(name)
		return
	}
	d.add(refusal, string(refusal), detail, false)
}

// offSite names what makes e, a send or connect to a host other than its
// page's, data leaving for another site; "" when it carries none.
func (d *decider) offSite(e *Effect) (Refusal, string) {
	const allow = "if that site should receive it, add an effects allow rule with its target"
	switch {
	case e.Action == BrowserConnect:
		return RefuseBrowserSendOffSite, fmt.Sprintf("The page on %q asked for a tunnel (a WebSocket, or WebRTC relayed over TCP or TLS) to %q, another site, whose content Gatehouse cannot decide request by request; if that site should be reached, add an effects allow rule with its target.", e.PageHost, e.Host)
	case !isSafe(d.method) || e.Values[BrowserBodyBytes] != "":
		return RefuseBrowserSendOffSite, fmt.Sprintf("The page on %q tried to send data (%s) to %q, another site; %s.", e.PageHost, d.method, e.Host, allow)
	}
	b := d.p.Browser()
	over := func(key string, limit int) int {
		n, err := strconv.Atoi(e.Values[key])
		if e.Values[key] != "" && (err != nil || n > limit) {
			return max(n, 1) // an unreadable size counts as over
		}
		return 0
	}
	var carried []string
	if n := over(BrowserPathBytes, b.MaxOffSitePathBytes); n > 0 {
		carried = append(carried, fmt.Sprintf("a path of %d bytes (browser.max_off_site_path_bytes is %d)", n, b.MaxOffSitePathBytes))
	}
	if n := over(BrowserNameBytes, b.MaxOffSiteNameBytes); n > 0 {
		carried = append(carried, fmt.Sprintf("%d bytes in the labels of its host name (browser.max_off_site_name_bytes is %d)", n, b.MaxOffSiteNameBytes))
	}
	if n := over(BrowserHeaderBytes, 0); n > 0 {
		carried = append(carried, fmt.Sprintf("%d bytes in request headers the page set itself", n))
	}
	if q := over(BrowserQueryBytes, b.MaxOffSiteQueryBytes); q > 0 {
		detail := fmt.Sprintf("The page on %q asked %q for an address whose query carries %d bytes, more than the %d the deployment lets go to another site (browser.max_off_site_query_bytes)", e.PageHost, e.Host, q, b.MaxOffSiteQueryBytes)
		if len(carried) > 0 {
			detail += ", and " + strings.Join(carried, " and ")
		}
		return RefuseBrowserQueryOffSite, detail + "; " + allow + "."
	}
	if len(carried) > 0 {
		return RefuseBrowserDataOffSite, fmt.Sprintf("The page on %q asked %q, another site, for a read carrying data: %s; %s.", e.PageHost, e.Host, strings.Join(carried, " and "), allow)
	}
	if e.Values[BrowserOffSiteRead] != "" && b.OffSiteReads == OffSiteReadsNamed {
		return RefuseBrowserDataOffSite, fmt.Sprintf("The page on %q asked %q, another site, for a read, and browser.off_site_reads is named: only sites an allow rule names are read; %s.", e.PageHost, e.Host, allow)
	}
	return "", ""
}

// browserSettings reads the rules file's browser section.
func (c *compiler) browserSettings(n *yaml.Node) (browserSection, error) {
	pairs, err := c.Mapping(n, "browser", "max_off_site_query_bytes", "max_off_site_path_bytes", "max_off_site_name_bytes", "off_site_reads")
	if err != nil {
		return browserSection{}, err
	}
	out := browserSection{set: true, main: defaultBrowserRules()}
	for _, kv := range pairs {
		v, err := c.Scalar(kv.Value, "browser."+kv.Key)
		if err != nil {
			return browserSection{}, err
		}
		if kv.Key == "off_site_reads" {
			if v != OffSiteReadsPlain && v != OffSiteReadsNamed {
				return browserSection{}, c.At(kv.Value, "browser."+kv.Key, "want %s or %s, got %q", OffSiteReadsPlain, OffSiteReadsNamed, v)
			}
			out.main.OffSiteReads = v
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<20 {
			return browserSection{}, c.At(kv.Value, "browser."+kv.Key, "want a number of bytes from 0 to %d, got %q", 1<<20, v)
		}
		switch kv.Key {
		case "max_off_site_query_bytes":
			out.main.MaxOffSiteQueryBytes = n
		case "max_off_site_path_bytes":
			out.main.MaxOffSitePathBytes = n
		case "max_off_site_name_bytes":
			out.main.MaxOffSiteNameBytes = n
		}
	}
	return out, nil
}
