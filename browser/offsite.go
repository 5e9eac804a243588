package browser

import (
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"

	"github.com/gatehouse/gatehouse/policy"
)

// What a read of another site carries (doc.go, "Data in a read"). A read is
// data-free when its query is empty, its path and host name are short
// enough to be a CDN's names, and every header on it is one Chromium sets
// itself. These functions measure; the limits are the policy's.

// readData is what one request to another site carries besides its body.
type readData struct {
	query  int // bytes of the raw query
	path   int // bytes of the escaped path, when over the limit (else 0)
	name   int // bytes of the host's labels below its registrable domain, when over the limit
	header int // bytes of the headers the page set itself
	// parts are the carried bytes, digested together for the record.
	parts []string
}

func (rd *readData) any() bool { return rd.query > 0 || rd.path > 0 || rd.name > 0 || rd.header > 0 }

// size is the bytes the read carries, as recorded.
func (rd *readData) size() int64 { return int64(rd.query + rd.path + rd.name + rd.header) }

// subdomain splits host (lower case, without port) into the labels below
// its registrable domain and that domain: "a.b.example.co.uk" is "a.b" and
// "example.co.uk". An IP address has none. Names under "localhost" (which
// resolves to loopback, RFC 6761) count every label before it.
func subdomain(host string) (sub, registrable string) {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" || net.ParseIP(host) != nil {
		return "", host
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return strings.TrimSuffix(strings.TrimSuffix(host, "localhost"), "."), "localhost"
	}
	reg, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil || reg == host {
		return "", host
	}
	return strings.TrimSuffix(host, "."+reg), reg
}

// hostOnly is an effect host without its port.
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}

// redactedHost is how a host whose name carries data is named in the
// effect and the journal: its registrable domain under "*." and its port,
// never the labels that carried the data.
func redactedHost(host string) string {
	_, reg := subdomain(hostOnly(host))
	if _, port, err := net.SplitHostPort(host); err == nil {
		return "*." + reg + ":" + port
	}
	return "*." + reg
}

// redactedPath is the path a read decided for its long path is named by.
const redactedPath = "/..."

// browserHeaders are the headers Chromium sets on a request by itself, and
// that a page cannot set (forbidden header names), or sets only through a
// CORS preflight the proxy sees. Their values are the browser's, not the
// page's; the few a page can set without a preflight are checked by value
// (pageHeaders).
var browserHeaders = map[string]bool{
	"Host": true, "Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Te": true,
	"User-Agent": true, "Accept-Encoding": true, "Referer": true, "Origin": true, "Cookie": true,
	"Upgrade-Insecure-Requests": true, "Priority": true, "Dnt": true, "Purpose": true, "X-Client-Data": true,
	"If-None-Match": true, "If-Modified-Since": true, "If-Range": true, "Cache-Control": true, "Pragma": true,
	"Content-Length": true, "Via": true, "Forwarded": true, "X-Forwarded-For": true,
	"Access-Control-Request-Method": true, "Access-Control-Request-Headers": true,
	"Access-Control-Request-Private-Network": true,
	// An EventSource's reconnection carries the id its server last sent;
	// a page cannot set it without a CORS preflight (which announces it)
	// and no-cors drops it.
	"Last-Event-Id": true,
}

// mediaRanges are the media types an Accept header may name and still be
// the browser's (Chromium's own values, and the plain types a page asks an
// API for): naming one of them says nothing a secret could ride on.
var mediaRanges = map[string]bool{
	"*/*": true, "text/*": true, "image/*": true, "audio/*": true, "video/*": true, "application/*": true,
	"text/html": true, "application/xhtml+xml": true, "application/xml": true, "text/xml": true,
	"image/avif": true, "image/webp": true, "image/apng": true, "image/svg+xml": true, "image/png": true,
	"image/jpeg": true, "image/gif": true, "image/jxl": true, "image/x-icon": true, "image/bmp": true,
	"application/wasm": true, "application/pdf": true, "audio/webm": true, "video/webm": true, "application/signed-exchange": true, "text/css": true,
	"text/event-stream": true, "application/json": true, "text/plain": true, "text/javascript": true,
	"application/javascript": true, "application/ld+json": true, "application/manifest+json": true,
	"application/octet-stream": true, "font/woff2": true, "font/woff": true,
}

var (
	acceptParam = regexp.MustCompile(`^(q=[01](\.[0-9]{0,3})?|v=b3)$`)
	plainRange  = regexp.MustCompile(`^bytes=0-$`)
	mediaRange  = regexp.MustCompile(`^bytes=[0-9]{1,15}-[0-9]{0,15}$`)
)

// plainAccept reports whether an Accept value is made of known media
// ranges with q (or Chromium's v=b3) parameters only.
func plainAccept(v string) bool {
	if len(v) > 256 {
		return false
	}
	for item := range strings.SplitSeq(v, ",") {
		parts := strings.Split(strings.TrimSpace(item), ";")
		if !mediaRanges[strings.ToLower(strings.TrimSpace(parts[0]))] {
			return false
		}
		for _, p := range parts[1:] {
			if !acceptParam.MatchString(strings.TrimSpace(p)) {
				return false
			}
		}
	}
	return true
}

// pageHeaders returns the bytes (name and value) of the headers on a
// request that the page set itself rather than Chromium: any header not in
// browserHeaders (a Sec- header is the browser's: pages cannot set one),
// an Accept of unknown media ranges, an Accept-Language other than the
// browser's own (lang; "" when not yet seen), a Range other than a media
// element's, and every header a CORS preflight announced for the request
// (preflighted: names, lower case). parts gets each such header.
func pageHeaders(h http.Header, lang string, preflighted []string, parts *[]string) int {
	n := 0
	add := func(name string, values []string) {
		for _, v := range values {
			n += len(name) + len(v)
			*parts = append(*parts, name+": "+v)
		}
	}
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names) // the digest does not depend on map order
	dest := h.Get("Sec-Fetch-Dest")
	for _, name := range names {
		values := h[name]
		lower := strings.ToLower(name)
		switch {
		case slices.Contains(preflighted, lower):
			add(name, values)
		case strings.HasPrefix(lower, "sec-"):
		case name == "Accept":
			if len(values) != 1 || !plainAccept(values[0]) {
				add(name, values)
			}
		case name == "Accept-Language":
			if len(values) != 1 || lang == "" || values[0] != lang {
				add(name, values)
			}
		case name == "Range":
			media := dest == "audio" || dest == "video"
			if len(values) != 1 || !(plainRange.MatchString(values[0]) || media && mediaRange.MatchString(values[0])) {
				add(name, values)
			}
		case browserHeaders[name]:
		default:
			add(name, values)
		}
	}
	return n
}

// preflight reports whether r is a CORS preflight: an OPTIONS without a
// body naming the method of the request it precedes.
func preflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" &&
		(r.Body == nil || r.Body == http.NoBody)
}

// preflightedHeaders are the header names a preflight announces, lower
// case.
func preflightedHeaders(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("Access-Control-Request-Headers") {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.ToLower(strings.TrimSpace(name)); name != "" {
				out = append(out, name)
			}
		}
	}
	return out
}

// originOf is rawURL's scheme://host/, what a Referer to another site is
// cut to in strict mode; "" when rawURL has no host.
func originOf(rawURL string) string {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return ""
	}
	host, _, _ := strings.Cut(rest, "/")
	host, _, _ = strings.Cut(host, "?")
	host, _, _ = strings.Cut(host, "#")
	if host == "" {
		return ""
	}
	return scheme + "://" + host + "/"
}

// pagePlace is how an action names the page it acts on (its target): the
// page's host and path, except that a path longer than
// max_off_site_path_bytes is redacted on any site, and a page a page took
// to another site by itself has its host redacted where it carries data,
// as a request there would (classify), so what a page put in its own
// address does not reach the journal through the agent's next action.
func pagePlace(pol *policy.BrowserRules, site string, pl place) place {
	// A page sets its own path (history.replaceState), on the run's site
	// too: a long one is redacted wherever the page is.
	if len(pl.path) > pol.MaxOffSitePathBytes {
		pl.path = redactedPath
	}
	if pl.host == "" || site == "" || strings.EqualFold(pl.host, site) {
		return pl
	}
	if sub, _ := subdomain(hostOnly(pl.host)); len(sub) > pol.MaxOffSiteNameBytes {
		pl.host = redactedHost(pl.host)
	}
	return pl
}

// requestKey names a request so that a URL Gatehouse saw before Chromium
// asked for it (a redirect's Location, the agent's goto) matches the
// request Chromium makes for it: the method, the scheme and host in lower
// case (an IDN host in its ASCII form), without the scheme's default port,
// without userinfo and fragment (never sent), dot segments resolved, and
// path and query compared unescaped (Chromium escapes what a Location or a
// goto may leave raw). Two requests whose URLs differ only in escaping
// share a key.
func requestKey(method, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return strings.ToUpper(method) + " " + rawURL
	}
	u = u.ResolveReference(&url.URL{}) // resolves "." and ".." segments
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if a, err := idna.Lookup.ToASCII(host); err == nil {
		host = a
	}
	if port := u.Port(); port != "" && !(scheme == "http" && port == "80") && !(scheme == "https" && port == "443") {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	path := u.EscapedPath()
	if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	if path == "" {
		path = "/"
	}
	query := u.RawQuery
	if q, err := url.PathUnescape(query); err == nil {
		query = q
	}
	return strings.ToUpper(method) + " " + scheme + "://" + host + path + "?" + query
}

// OpaqueOrigin is the page host an effect names when a document of another
// origin than the run's site made the request but the request does not say
// which (an opaque origin: a sandboxed or data: frame, or a page that hides
// its origin with referrer policy no-referrer).
const OpaqueOrigin = "null"

// initiator tells whether a request to the run's site (site) was made by a
// document of another origin, and that document's host, as far as the
// request itself says: its Origin (unless "null"), else its Referer, names
// the document's origin; a request that names neither but says, in
// Sec-Fetch-Site, that it crossed origins comes from an origin it does not
// name (OpaqueOrigin). Chromium sets all three itself; a page can only hide
// its origin (Origin "null", no Referer), never name another, and
// Sec-Fetch-Site goes to https and loopback sites only.
func initiator(h http.Header, site string) (string, bool) {
	name := func(origin string) (string, bool) {
		host := hostPath(origin).host
		if host == "" {
			return OpaqueOrigin, true
		}
		return host, !strings.EqualFold(host, site)
	}
	if o := h.Get("Origin"); o != "" && o != "null" {
		return name(o)
	}
	if ref := h.Get("Referer"); ref != "" {
		return name(ref)
	}
	switch strings.ToLower(h.Get("Sec-Fetch-Site")) {
	case "cross-site", "same-site":
		return OpaqueOrigin, true
	}
	return "", false
}
