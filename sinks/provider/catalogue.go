package provider

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/idna"

	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
)

// AuthType says how a provider's credential is attached to a request.
type AuthType string

const (
	AuthBearer AuthType = "bearer" // Authorization: Bearer <token>
	AuthHeader AuthType = "header" // <Auth.Header>: <token>
	AuthBasic  AuthType = "basic"  // Authorization: Basic <username:password>
	AuthNone   AuthType = "none"   // no credential; nothing is looked up
)

// Defaults of a Provider's optional fields.
const (
	DefaultKeepaliveSeconds = 120
	DefaultTimeoutSeconds   = 30
	DefaultRetries          = 2
	DefaultMaxIdleConns     = 16
	DefaultMaxResponseBytes = 512 << 10
	// MaxResponseLimit bounds max_response_bytes: a reply travels back to
	// the agent over NATS, whose default message limit is 1 MiB.
	MaxResponseLimit = 700 << 10
)

// DefaultResponseHeaders are the response headers returned to an agent
// when a provider names none; Set-Cookie and other session headers are
// never among them.
var DefaultResponseHeaders = []string{"Content-Type", "Content-Language", "Etag", "Last-Modified", "Location", "Retry-After", "X-Request-Id", "Link"}

// Auth is how credentials are attached.
type Auth struct {
	Type AuthType `yaml:"type"`
	// Header names the header of AuthHeader (e.g. X-Api-Key).
	Header string `yaml:"header,omitempty"`
}

// Provider is one system Gatehouse calls for agents. Zero numeric fields
// take the defaults above.
type Provider struct {
	Name string `yaml:"name"`
	// BaseURL is http or https, with an optional base path every call's
	// path is joined to and must stay under; no query, fragment or user.
	BaseURL string `yaml:"base_url"`
	Auth    Auth   `yaml:"auth"`
	// KeepaliveSeconds is how long an idle connection is kept for reuse.
	KeepaliveSeconds int `yaml:"keepalive_seconds,omitempty"`
	// TimeoutSeconds bounds one attempt, from dialing to the last byte.
	TimeoutSeconds int `yaml:"timeout_seconds,omitempty"`
	// IdempotencyHeader is the header the provider deduplicates requests
	// by (Idempotency-Key). Only a provider with one is retried.
	IdempotencyHeader string `yaml:"idempotency_header,omitempty"`
	// Retries is how many times a transient failure is retried (only with
	// IdempotencyHeader); nil is DefaultRetries, 0 never retries.
	Retries *int `yaml:"retries,omitempty"`
	// MaxIdleConns bounds kept connections to the provider's host.
	MaxIdleConns int `yaml:"max_idle_conns,omitempty"`
	// MaxResponseBytes bounds a response body; a longer one fails the
	// call with response-too-large.
	MaxResponseBytes int64 `yaml:"max_response_bytes,omitempty"`
	// HeadersAllowed are the request headers an agent may set.
	HeadersAllowed []string `yaml:"headers_allowed,omitempty"`
	// ResponseHeaders are the response headers an agent gets back; empty
	// is DefaultResponseHeaders.
	ResponseHeaders []string `yaml:"response_headers,omitempty"`
	// PathCase says how the provider routes the literal segments of a
	// path: insensitive (the default: a path equal to a catalogued
	// operation's ignoring case is sent in the operation's spelling) or
	// sensitive (only the exact spelling is that operation, and a
	// spelling differing only in case is refused as ambiguous).
	PathCase string `yaml:"path_case,omitempty"`

	scheme   string // lower case
	host     string // lower case, an IDN as its A-label, no port
	port     int
	basePath string // as sent, "" for the root
	server   string // serverHost of host, for SameServer
	allowed  map[string]bool
	respHdrs []string
	// templates are the templates every integration of the provider
	// declares, by their number of segments, for resolving paths.
	templates map[int]*tmplIndex
	shapes    map[string]*opTemplate // by shape, to refuse two templates one path could fit
}

// Path cases of Provider.PathCase.
const (
	PathCaseInsensitive = "insensitive"
	PathCaseSensitive   = "sensitive"
)

// Integration is one integration (atom): the provider it calls, the effect
// it declares, where its code came from, and its contract.
type Integration struct {
	Name     string             `yaml:"name"`
	Provider string             `yaml:"provider"`
	Effect   policy.EffectClass `yaml:"effect"`
	Origin   policy.Origin      `yaml:"origin"`
	// Operations is the contract: method and URL template, relative to the
	// provider's base URL. Omitted (nil) means the contract cannot be read;
	// an empty list is a contract with no operations.
	Operations []Operation `yaml:"operations"`

	contract *policy.Contract // templates joined to the base path
}

// Operation is one method and URL template of a contract.
type Operation struct {
	Method   string `yaml:"method"`
	Template string `yaml:"template"`
}

// Catalogue is the providers and integrations Gatehouse knows. Build one
// with ParseCatalogue, or fill the slices and call Validate.
type Catalogue struct {
	Name         string        `yaml:"-"` // the file it came from, for messages
	Providers    []Provider    `yaml:"providers"`
	Integrations []Integration `yaml:"integrations"`

	providers    map[string]*Provider
	integrations map[string]*Integration
}

// ErrCatalogue is wrapped by every error of ParseCatalogue and Validate.
var ErrCatalogue = errors.New("provider catalogue")

// LoadCatalogue reads and parses the catalogue file at p.
func LoadCatalogue(p string) (*Catalogue, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCatalogue, err)
	}
	return ParseCatalogue(p, data)
}

// ParseCatalogue decodes a catalogue file (YAML or JSON) strictly: unknown
// keys, aliases, duplicate names and values out of range are errors naming
// name and the entry.
func ParseCatalogue(name string, data []byte) (*Catalogue, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrCatalogue, name, fmt.Sprintf(format, args...))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fail("%v", err)
	}
	if err := noAliases(&doc); err != nil {
		return nil, fail("%v", err)
	}
	var c Catalogue
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fail("%v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fail("more than one YAML document")
	}
	c.Name = name
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func noAliases(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode {
		return fmt.Errorf("line %d: YAML aliases are not supported in a catalogue", n.Line)
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "<<" && n.Content[i].Tag != "!!str" {
				return fmt.Errorf("line %d: YAML merge keys are not supported in a catalogue", n.Content[i].Line)
			}
		}
	}
	for _, c := range n.Content {
		if err := noAliases(c); err != nil {
			return err
		}
	}
	return nil
}

// headers an agent may never set, whatever headers_allowed says: they
// carry credentials, decide where the request goes or how it is framed,
// are set by Gatehouse itself, or make servers and proxies act on another
// method, path, host or client than the one decided (method overrides,
// rewritten URLs, forwarded addresses). Every Content-* header is
// reserved too (reservedHeader): Content-Encoding makes servers inflate a
// body other than the one decided on, Content-Range makes a PUT partial,
// and the content type is the content_type param's.
var reservedHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Host": true,
	"Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Te": true, "Trailer": true, "Upgrade": true, "Proxy-Connection": true,
	"Expect": true, "Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true,
	"X-Forwarded-Proto": true, "X-Forwarded-Port": true, "X-Forwarded-Prefix": true, "X-Forwarded-Path": true,
	"X-Forwarded-Uri": true, "X-Forwarded-Url": true, "X-Forwarded-Method": true, "X-Forwarded-Server": true,
	"X-Forwarded-Scheme": true, "X-Forwarded-Ssl": true, "X-Url-Scheme": true, "X-Scheme": true, "Front-End-Https": true,
	"X-Host": true, "X-Original-Host": true, "X-Real-Ip": true, "X-Client-Ip": true, "True-Client-Ip": true, "X-Cluster-Client-Ip": true,
	"X-Http-Method-Override": true, "X-Http-Method": true, "X-Method-Override": true, "X-Method": true, "X-Original-Method": true,
	"X-Original-Url": true, "X-Rewrite-Url": true, "X-Original-Uri": true, "X-Original-Path": true, "X-Envoy-Original-Path": true,
	"Destination": true, // WebDAV MOVE and COPY: another path
}

// headerIdentity is the name servers file a header under: CGI, Rack and
// PHP read "X_HTTP_METHOD_OVERRIDE" and "X-Http-Method-Override" as one
// (HTTP_X_HTTP_METHOD_OVERRIDE), so "_" counts as "-".
func headerIdentity(h string) string {
	return textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(h, "_", "-"))
}

// reservedHeader reports whether a header (as headerIdentity gives it) may
// never come from an agent.
func reservedHeader(k string) bool {
	return reservedHeaders[k] || strings.HasPrefix(k, "Content-")
}

// Validate checks the catalogue and indexes it. It is called by
// ParseCatalogue; call it after building a Catalogue by hand.
func (c *Catalogue) Validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrCatalogue, c.name(), fmt.Sprintf(format, args...))
	}
	c.providers = make(map[string]*Provider, len(c.Providers))
	c.integrations = make(map[string]*Integration, len(c.Integrations))
	for i := range c.Providers {
		p := &c.Providers[i]
		where := fmt.Sprintf("providers[%d] (%s)", i, p.Name)
		if err := checkIdent(p.Name); err != nil {
			return fail("providers[%d]: name: %v", i, err)
		}
		if _, dup := c.providers[p.Name]; dup {
			return fail("%s: provider named twice", where)
		}
		if err := p.compile(); err != nil {
			return fail("%s: %v", where, err)
		}
		c.providers[p.Name] = p
	}
	for i := range c.Integrations {
		in := &c.Integrations[i]
		where := fmt.Sprintf("integrations[%d] (%s)", i, in.Name)
		if err := checkIdent(in.Name); err != nil {
			return fail("integrations[%d]: name: %v", i, err)
		}
		if _, dup := c.integrations[in.Name]; dup {
			return fail("%s: integration named twice", where)
		}
		p, ok := c.providers[in.Provider]
		if !ok {
			return fail("%s: provider %q is not in providers", where, in.Provider)
		}
		switch in.Effect {
		case policy.EffectRead, policy.EffectWrite, policy.EffectDestructive, policy.EffectNotify:
		default:
			return fail("%s: effect %q is not read, write, destructive or notify", where, in.Effect)
		}
		switch in.Origin {
		case policy.OriginShipped, policy.OriginRuntime, policy.OriginRegistry, policy.OriginModel:
		default:
			return fail("%s: origin %q is not shipped, runtime, registry or model", where, in.Origin)
		}
		in.contract = nil
		if in.Operations != nil {
			in.contract = &policy.Contract{Operations: make([]policy.Operation, 0, len(in.Operations))}
			for j, op := range in.Operations {
				m := strings.ToUpper(op.Method)
				if !knownMethods[m] {
					return fail("%s: operations[%d]: method %q is not GET, HEAD, OPTIONS, POST, PUT, PATCH or DELETE", where, j, op.Method)
				}
				t, err := compileTemplate(op.Template)
				if err != nil {
					return fail("%s: operations[%d]: template %q: %v", where, j, op.Template, err)
				}
				if err := p.addTemplate(t); err != nil {
					return fail("%s: operations[%d]: %v", where, j, err)
				}
				in.contract.Operations = append(in.contract.Operations, policy.Operation{Method: m, Template: p.basePath + op.Template})
			}
		}
		c.integrations[in.Name] = in
	}
	return nil
}

func (c *Catalogue) name() string {
	if c.Name == "" {
		return "(in memory)"
	}
	return c.Name
}

// Provider returns the provider named name.
func (c *Catalogue) Provider(name string) (*Provider, bool) {
	p, ok := c.providers[name]
	return p, ok
}

// SameServer returns the names of the providers whose base URL may reach
// p's server (p's own included), in catalogue order: one server, whatever
// base path or credential each uses, so a change sent through one can
// show in the records read through another, and a rule about one's
// operations holds for the other's. It errs towards one server: hosts
// are compared without a final dot and with IP literals in one form, every
// loopback name or address is one host, and ports 80 and 443 are one
// port (a site answering both schemes).
func (c *Catalogue) SameServer(p *Provider) []string { return c.onServer(p.server, p.port) }

// onServer returns the names of the providers on server (a serverHost)
// and port, as SameServer compares them, in catalogue order.
func (c *Catalogue) onServer(server string, port int) []string {
	var out []string
	for i := range c.Providers {
		q := &c.Providers[i]
		if q.server == server && (q.port == port || webPort(q.port) && webPort(port)) {
			out = append(out, q.Name)
		}
	}
	return out
}

func webPort(port int) bool { return port == 80 || port == 443 }

// urlHost is u's host in lower case, a domain name as its A-label (IDN),
// without the port.
func urlHost(u *url.URL) (string, error) {
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") { // an IPv6 literal
		return host, nil
	}
	host, err := idna.Lookup.ToASCII(host)
	if err == nil && host == "" {
		err = errors.New("no host")
	}
	return host, err
}

// serverHost is host as SameServer compares it: without a final dot, an
// IP literal in its canonical form (an IPv4-mapped IPv6 as IPv4), and
// "loopback" for localhost, its subdomains and every loopback address.
func serverHost(host string) string {
	host = strings.TrimSuffix(host, ".")
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		a = a.Unmap()
		if a.IsLoopback() {
			return "loopback"
		}
		return a.String()
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return "loopback"
	}
	return host
}

// Integration returns the integration named name.
func (c *Catalogue) Integration(name string) (*Integration, bool) {
	in, ok := c.integrations[name]
	return in, ok
}

// Contract returns the integration's contract with templates joined to its
// provider's base path, nil when its operations were not given.
func (in *Integration) Contract() *policy.Contract { return in.contract }

// addTemplate indexes t for resolving paths. Two templates that one path
// could fit with different spellings (differing only in case on a
// case-insensitive provider, or only in a trailing "/") are an error:
// which one a path is would be a guess.
func (p *Provider) addTemplate(t *opTemplate) error {
	key := t.shape(p.PathCase == PathCaseSensitive)
	if prev, ok := p.shapes[key]; ok {
		if prev.trailing != t.trailing {
			return fmt.Errorf("template %q and %q differ only in a trailing /, so which one a call is cannot be told", prev.text, t.text)
		}
		for i := range t.segs {
			if t.segs[i].lit != prev.segs[i].lit {
				return fmt.Errorf("template %q and %q differ only in case, and provider %s routes paths without regard to case (path_case: insensitive)", prev.text, t.text, p.Name)
			}
		}
		return nil
	}
	p.shapes[key] = t
	x := p.templates[len(t.segs)]
	if x == nil {
		x = &tmplIndex{}
		p.templates[len(t.segs)] = x
	}
	x.add(t)
	return nil
}

var _ grounding.Catalogue = (*Catalogue)(nil)

// Operations implements grounding.Catalogue: every operation the
// integrations of provider declare, templates as sent.
func (c *Catalogue) Operations(provider string) ([]grounding.Operation, bool) {
	if _, ok := c.providers[provider]; !ok {
		return nil, false
	}
	var out []grounding.Operation
	for i := range c.Integrations {
		in := &c.Integrations[i]
		if in.Provider != provider || in.contract == nil {
			continue
		}
		for _, op := range in.contract.Operations {
			out = append(out, grounding.Operation{Integration: in.Name, Method: op.Method, Template: op.Template})
		}
	}
	return out, true
}

// BasePath implements grounding.Catalogue: the path of the provider's base
// URL as sent, "" for none.
func (c *Catalogue) BasePath(provider string) string {
	if p, ok := c.providers[provider]; ok {
		return p.basePath
	}
	return ""
}

func (p *Provider) compile() error {
	u, err := url.Parse(p.BaseURL)
	if err != nil {
		return fmt.Errorf("base_url: %v", err)
	}
	p.scheme = strings.ToLower(u.Scheme)
	if p.scheme != "http" && p.scheme != "https" {
		return fmt.Errorf("base_url %q: the scheme must be http or https", p.BaseURL)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("base_url %q: give a scheme, a host and an optional path, without user, query or fragment", p.BaseURL)
	}
	host, err := urlHost(u)
	if err != nil {
		return fmt.Errorf("base_url %q: the host is not a valid domain name", p.BaseURL)
	}
	p.host, p.port = host, defaultPort(p.scheme)
	p.server = serverHost(host)
	if ps := u.Port(); ps != "" {
		if p.port, err = strconv.Atoi(ps); err != nil || p.port < 1 || p.port > 65535 {
			return fmt.Errorf("base_url %q: the port is not 1 to 65535", p.BaseURL)
		}
	}
	switch p.PathCase {
	case "":
		p.PathCase = PathCaseInsensitive
	case PathCaseInsensitive, PathCaseSensitive:
	default:
		return fmt.Errorf("path_case %q is not insensitive or sensitive", p.PathCase)
	}
	p.basePath = ""
	if bp := u.EscapedPath(); bp != "" && bp != "/" {
		segs, _, err := splitPath(bp)
		if err != nil {
			return fmt.Errorf("base_url %q: the path cannot be sent one way: %v", p.BaseURL, err)
		}
		for _, s := range segs {
			p.basePath += "/" + s.enc
		}
	}
	p.templates, p.shapes = map[int]*tmplIndex{}, map[string]*opTemplate{}
	switch p.Auth.Type {
	case AuthBearer, AuthBasic, AuthNone:
		if p.Auth.Header != "" {
			return fmt.Errorf("auth: header is only for type header")
		}
	case AuthHeader:
		if !httpguts.ValidHeaderFieldName(p.Auth.Header) {
			return fmt.Errorf("auth: type header needs header, a valid header name (e.g. X-Api-Key)")
		}
	default:
		return fmt.Errorf("auth: type %q is not bearer, header, basic or none", p.Auth.Type)
	}
	if p.KeepaliveSeconds < 0 || p.TimeoutSeconds < 0 || p.MaxIdleConns < 0 || p.MaxResponseBytes < 0 {
		return fmt.Errorf("keepalive_seconds, timeout_seconds, max_idle_conns and max_response_bytes may not be negative")
	}
	if p.MaxResponseBytes > MaxResponseLimit {
		return fmt.Errorf("max_response_bytes %d is above the limit of %d", p.MaxResponseBytes, MaxResponseLimit)
	}
	if p.Retries != nil && (*p.Retries < 0 || *p.Retries > 10) {
		return fmt.Errorf("retries %d: give 0 to 10", *p.Retries)
	}
	if p.IdempotencyHeader != "" {
		if !httpguts.ValidHeaderFieldName(p.IdempotencyHeader) {
			return fmt.Errorf("idempotency_header %q is not a header name", p.IdempotencyHeader)
		}
		p.IdempotencyHeader = textproto.CanonicalMIMEHeaderKey(p.IdempotencyHeader)
	}
	p.allowed = map[string]bool{}
	for _, h := range p.HeadersAllowed {
		if !httpguts.ValidHeaderFieldName(h) {
			return fmt.Errorf("headers_allowed: %q is not a header name", h)
		}
		k := textproto.CanonicalMIMEHeaderKey(h)
		if n := headerIdentity(h); reservedHeader(n) || n == headerIdentity(p.IdempotencyHeader) || (p.Auth.Type == AuthHeader && n == headerIdentity(p.Auth.Header)) {
			return fmt.Errorf("headers_allowed: %s is set by Gatehouse or changes what the provider does with the request, and may not come from an agent", k)
		}
		p.allowed[k] = true
	}
	p.respHdrs = DefaultResponseHeaders
	if len(p.ResponseHeaders) > 0 {
		p.respHdrs = nil
		for _, h := range p.ResponseHeaders {
			k := textproto.CanonicalMIMEHeaderKey(h)
			if !httpguts.ValidHeaderFieldName(h) || k == "Set-Cookie" || k == "Set-Cookie2" || k == "Www-Authenticate" {
				return fmt.Errorf("response_headers: %q may not be returned to an agent", h)
			}
			p.respHdrs = append(p.respHdrs, k)
		}
	}
	return nil
}

func (p *Provider) keepalive() int { return orDefault(p.KeepaliveSeconds, DefaultKeepaliveSeconds) }
func (p *Provider) timeout() int   { return orDefault(p.TimeoutSeconds, DefaultTimeoutSeconds) }
func (p *Provider) idle() int      { return orDefault(p.MaxIdleConns, DefaultMaxIdleConns) }

func (p *Provider) maxResponse() int64 {
	if p.MaxResponseBytes == 0 {
		return DefaultMaxResponseBytes
	}
	return p.MaxResponseBytes
}

// retries is how many times a transient failure is retried: never without
// an idempotency header, since a retried mutation could happen twice.
func (p *Provider) retries() int {
	switch {
	case p.IdempotencyHeader == "":
		return 0
	case p.Retries == nil:
		return DefaultRetries
	}
	return *p.Retries
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodOptions: true,
	http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true,
}

// checkIdent accepts provider and integration names: 1 to 128 bytes of
// [A-Za-z0-9._-], since they are recorded and matched by rules.
func checkIdent(s string) error {
	if s == "" || len(s) > 128 {
		return errors.New("1 to 128 characters are required")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%q: use A-Z, a-z, 0-9, '.', '_' and '-'", s)
		}
	}
	return nil
}
