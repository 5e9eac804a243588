// Package provider is the provider sink: an agent's call to a connected
// provider (an ERP, a CRM, a payment API), decided on before anything
// leaves Gatehouse and carried out with the credential of the person the
// work is for.
//
// # Params (action "call")
//
//	{"provider": "erp", "method": "POST", "path": "/payments",
//	 "query": {"expand": ["lines"]}, "headers": {"Accept": "application/json"},
//	 "body": {...} | "body_base64": "...", "content_type": "...",
//	 "atom": "erp.pay", "declared": "write", "operation_id": "pay-INV-7"}
//
// Params are decoded strictly. provider must be in the Catalogue; method is
// GET, HEAD, OPTIONS, POST, PUT, PATCH or DELETE; path is joined to the
// provider's base path and must stay under it (a "." or ".." segment, a
// backslash or a control character is BAD_REQUEST); headers must be in
// the provider's headers_allowed. body is JSON sent byte for byte as
// given (content type application/json, or a JSON content_type);
// body_base64 is any other content, with content_type. operation_id is the
// idempotency key, for providers that have an idempotency_header; it
// defaults to the id of the approval the call runs under (see
// broker.ApprovalFrom: the same for every retry of that approved
// action), else to the effect id.
//
// # What is decided
//
// Describe builds the policy.Effect from what is about to be sent, never
// from the agent's account of it: Provider, Method (upper case), Host (of
// the base URL, with its port), Path (as sent, without the query), Target
// (host + path), and the body's Size and Digest. The authority comes from
// the catalogue:
//
//   - Atom names an integration. For one in the catalogue, Declared is the
//     catalogue's effect and Contract its operations (templates joined to
//     the base path; nil when the catalogue gives none). An agent that
//     states declared must state the catalogue's, else BAD_REQUEST: it can
//     never widen it. An atom the catalogue does not know has no declared
//     effect and no contract, so it may only read.
//   - Origin is the request's origin. With an atom, an origin the
//     catalogue's does not allow is BAD_REQUEST: the request may say
//     registry or model for any integration (code the model wrote or
//     repaired is trusted less, and its contract is then nil unless the
//     catalogue's origin is itself registry or model, since the operations
//     read were the original code's), otherwise it must say the
//     catalogue's origin or nothing. Without an atom the origin is the
//     request's (direct for an application's own client).
//   - Values, for scope limits, are the top-level numbers and strings of a
//     JSON object body or of a form body, as written. A name sent twice
//     gets a value that is not a number, so a limit on it refuses.
//
// The policy then applies the origin table, the four built-in refusals and
// the deployment rules; this package does not repeat them.
//
// # Credentials
//
// Perform looks up the person's own credential (tenant, person, provider
// from the run's record) only after the decision, attaches it to the
// outgoing request, and nowhere else: not in the reply, the journal, a log
// or an error. Credentials are cached for Config.CredentialTTL under that
// same key, so a credential cached for one person is never served to
// another. A person without a credential fails the call with a *CallError
// of type "no-credential"; no other credential is tried.
//
// # Connections, retries, responses
//
// Each provider has one http.Client whose connections are kept
// keepalive_seconds (default 120) and reused. Redirects are returned to
// the agent, never followed. A provider with an idempotency_header gets
// the key on every request, and a call that got no answer, or a 502, 503
// or 504, is tried again up to retries times (default 2) with the same
// key; a provider without one is never retried. The agent gets the
// status, the allowed response headers and the body (JSON inline,
// anything else base64), at most max_response_bytes.
//
// # What is recorded
//
// The outcome records the status code (detail status_code, attempts) or
// the error type (connect, reset, timeout, tls, canceled,
// no-credential, credential-store, response-too-large, record-store), and the size and
// "sha256:<hex>" digest of the response body. Status is ok for 1xx to
// 3xx, failed for 4xx and 5xx (error "http-status"). Query strings,
// bodies, headers and credentials are never recorded; paths are, so they
// must not carry secrets.
//
// # Grounding
//
// With Config.Grounding, Describe runs the rule that applies to the call
// and puts its result on the Effect and its citations on the Proposal; see
// ground.go for the records kept, the workflow they belong to, rereads
// and what selectors_from: [input] gets.
//
// The Sink is safe for concurrent use. Close closes idle connections.
package provider

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jellydator/ttlcache/v3"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/net/http/httpguts"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
)

// ActionCall is the provider sink's one action.
const ActionCall = "call"

// DefaultCredentialTTL is how long a credential is cached.
const DefaultCredentialTTL = time.Minute

// Config configures the sink. Catalogue is required; the rest may be zero.
type Config struct {
	Catalogue *Catalogue
	// Credentials finds each person's credential; nil means no person
	// has one (every provider with auth other than none fails
	// no-credential).
	Credentials CredentialStore
	// CredentialTTL is how long a credential is cached; 0 is
	// DefaultCredentialTTL, negative does not cache.
	CredentialTTL time.Duration
	// Grounding are the grounding rules; nil checks nothing.
	Grounding *grounding.Rules
	// Records keeps the responses grounding relies on, shared by every
	// broker; nil is a *KVRecords on the js given to New.
	Records RecordStore
	// Logger logs failures (never content); nil discards.
	Logger *slog.Logger
	// Now stamps records; nil is time.Now.
	Now func() time.Time
}

// Sink carries out provider calls. Safe for concurrent use.
type Sink struct {
	cat     *Catalogue
	creds   CredentialStore
	cache   *ttlcache.Cache[credKey, Credential]
	ttl     time.Duration
	rules   atomic.Pointer[grounding.Rules] // swapped by SetGrounding
	records RecordStore
	log     *slog.Logger
	now     func() time.Time
	clients map[string]*http.Client

	rereads rereader
	content keeper
}

var _ broker.Sink = (*Sink)(nil)

// New returns the sink. js is used only for the default record store (when
// cfg.Grounding is set and cfg.Records is nil) and may be nil otherwise.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Sink, error) {
	if cfg.Catalogue == nil {
		return nil, fmt.Errorf("%w: no catalogue given", ErrCatalogue)
	}
	if cfg.Catalogue.providers == nil {
		if err := cfg.Catalogue.Validate(); err != nil {
			return nil, err
		}
	}
	s := &Sink{cat: cfg.Catalogue, creds: cfg.Credentials, ttl: cfg.CredentialTTL,
		records: cfg.Records, log: cfg.Logger, now: cfg.Now, clients: map[string]*http.Client{}}
	s.rules.Store(cfg.Grounding)
	if s.ttl == 0 {
		s.ttl = DefaultCredentialTTL
	}
	if s.ttl > 0 {
		s.cache = ttlcache.New[credKey, Credential](ttlcache.WithDisableTouchOnHit[credKey, Credential]())
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	for name, p := range s.cat.providers {
		s.clients[name] = newClient(p)
	}
	if cfg.Grounding != nil && s.records == nil {
		if js == nil {
			return nil, errors.New("provider sink: grounding rules need a record store: give Records or a JetStream context")
		}
		kv, err := OpenKVRecords(ctx, js, KVConfig{})
		if err != nil {
			return nil, err
		}
		s.records = kv
	}
	return s, nil
}

// Close closes idle connections to every provider.
func (s *Sink) Close() {
	for _, c := range s.clients {
		c.CloseIdleConnections()
	}
}

// Params are the params of a call.
type Params struct {
	Provider    string              `json:"provider"`
	Method      string              `json:"method"`
	Path        string              `json:"path"`
	Query       map[string][]string `json:"query,omitempty"`
	Headers     map[string]string   `json:"headers,omitempty"`
	Body        json.RawMessage     `json:"body,omitempty"`
	BodyBase64  string              `json:"body_base64,omitempty"`
	ContentType string              `json:"content_type,omitempty"`
	Atom        string              `json:"atom,omitempty"`
	Declared    policy.EffectClass  `json:"declared,omitempty"`
	OperationID string              `json:"operation_id,omitempty"`
}

// Reply is what the agent gets back: the provider's answer.
type Reply struct {
	Status     int               `json:"status"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       json.RawMessage   `json:"body,omitempty"`        // a JSON response
	BodyBase64 string            `json:"body_base64,omitempty"` // any other response
	Size       int64             `json:"size"`
	Digest     string            `json:"digest,omitempty"`
	Attempts   int               `json:"attempts"`
	// IdempotencyKey is the key every attempt carried, when the provider
	// has an idempotency header.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// call is a decoded request, handed from Describe to Perform.
type call struct {
	prov        *Provider
	method      string
	path        string // as sent, without the query
	query       url.Values
	rawQuery    string
	headers     http.Header
	body        []byte // nil: no body
	contentType string
	opID        string
	ground      *content.Grounding // what the grounding check was given, when a rule applied
}

// Name implements broker.Sink.
func (s *Sink) Name() policy.Sink { return policy.SinkProvider }

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", broker.ErrBadRequest, fmt.Sprintf(format, args...))
}

// Describe implements broker.Sink.
func (s *Sink) Describe(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	if req.Action != ActionCall {
		return nil, bad("the provider sink's action is %q", ActionCall)
	}
	var p Params
	if err := broker.DecodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	c, e, err := s.decode(req, &p)
	if err != nil {
		return nil, err
	}
	prop := &broker.Proposal{Effect: e, State: c}
	s.programContract(ctx, &prop.Effect, c.prov)
	if c.body != nil {
		prop.Size, prop.Digest = int64(len(c.body)), digest(c.body)
	}
	if s.rules.Load() != nil {
		if err := s.ground(ctx, run, c, prop); err != nil {
			return nil, err
		}
	}
	return prop, nil
}

// decode validates p and builds the call and its effect.
func (s *Sink) decode(req *broker.EffectRequest, p *Params) (*call, policy.Effect, error) {
	var e policy.Effect
	prov, ok := s.cat.Provider(p.Provider)
	if !ok {
		return nil, e, bad("provider %q is not in the catalogue", clip(p.Provider))
	}
	c := &call{prov: prov, method: strings.ToUpper(p.Method)}
	if !knownMethods[c.method] {
		return nil, e, bad("method %q is not GET, HEAD, OPTIONS, POST, PUT, PATCH or DELETE", clip(p.Method))
	}
	full, err := joinPath(prov.basePath, p.Path)
	if err != nil {
		return nil, e, err
	}
	c.path = full
	if len(p.Query) > 0 {
		c.query = url.Values{}
		for k, vs := range p.Query {
			if k == "" || !utf8.ValidString(k) || strings.IndexFunc(k, unicode.IsControl) >= 0 {
				return nil, e, bad("query names must be printable")
			}
			for _, v := range vs {
				if !utf8.ValidString(v) {
					return nil, e, bad("query values must be UTF-8")
				}
			}
			c.query[k] = vs
		}
		c.rawQuery = c.query.Encode()
	}
	if len(p.Headers) > 0 {
		c.headers = http.Header{}
		for k, v := range p.Headers {
			ck := textproto.CanonicalMIMEHeaderKey(k)
			if !prov.allowed[ck] {
				return nil, e, bad("header %q may not be set on provider %s; the catalogue's headers_allowed lists those that may", clip(k), prov.Name)
			}
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, e, bad("header %s has a value that is not valid in HTTP", ck)
			}
			c.headers.Set(ck, v)
		}
	}
	switch {
	case p.Body != nil && p.BodyBase64 != "":
		return nil, e, bad("give body or body_base64, not both")
	case p.Body != nil:
		if string(p.Body) == "null" {
			return nil, e, bad("body may not be null; leave it out to send no body")
		}
		c.body, c.contentType = []byte(p.Body), "application/json"
		if p.ContentType != "" {
			if !isJSONType(p.ContentType) {
				return nil, e, bad("body is JSON, so content_type must be a JSON type; use body_base64 for other content")
			}
			c.contentType = p.ContentType
		}
	case p.BodyBase64 != "":
		b, err := base64.StdEncoding.DecodeString(p.BodyBase64)
		if err != nil {
			return nil, e, bad("body_base64 is not standard base64")
		}
		c.body, c.contentType = b, p.ContentType
		if c.contentType == "" {
			c.contentType = "application/octet-stream"
		}
	case p.ContentType != "":
		return nil, e, bad("content_type without a body")
	}
	if c.contentType != "" {
		if _, _, err := mime.ParseMediaType(c.contentType); err != nil || !httpguts.ValidHeaderFieldValue(c.contentType) {
			return nil, e, bad("content_type %q is not a media type", clip(c.contentType))
		}
	}
	if p.OperationID != "" {
		if prov.IdempotencyHeader == "" {
			return nil, e, bad("provider %s has no idempotency_header, so operation_id cannot be sent; leave it out", prov.Name)
		}
		if len(p.OperationID) > 255 || !httpguts.ValidHeaderFieldValue(p.OperationID) || strings.IndexFunc(p.OperationID, unicode.IsSpace) >= 0 {
			return nil, e, bad("operation_id must be 1 to 255 printable characters without spaces")
		}
		c.opID = p.OperationID
	}

	e = policy.Effect{
		Sink: policy.SinkProvider, Action: ActionCall, Origin: req.Origin, Tool: req.Tool,
		Provider: prov.Name, Method: c.method, Host: prov.base.Host, Path: c.path,
		Target: prov.base.Host + c.path, Atom: p.Atom,
	}
	if err := s.authority(&e, prov, req.Origin, p); err != nil {
		return nil, e, err
	}
	if c.body != nil {
		e.Values = values(c.body, c.contentType)
	}
	return c, e, nil
}

// authority sets Declared, Contract and Origin from the catalogue.
func (s *Sink) authority(e *policy.Effect, prov *Provider, origin policy.Origin, p *Params) error {
	if p.Atom == "" {
		if p.Declared != "" {
			return bad("declared without an atom: an effect is declared by an integration in the catalogue")
		}
		return nil
	}
	if err := checkIdent(p.Atom); err != nil {
		return bad("atom: %v", err)
	}
	in, ok := s.cat.Integration(p.Atom)
	if !ok {
		if p.Declared != "" {
			return bad("integration %q is not in the catalogue, so it declares no effect; an agent cannot declare one for it", p.Atom)
		}
		return nil
	}
	if in.Provider != prov.Name {
		return bad("integration %q calls provider %s, not %s", p.Atom, in.Provider, prov.Name)
	}
	if p.Declared != "" && p.Declared != in.Effect {
		return bad("integration %q declares %s in the catalogue; an agent cannot declare %q for it", p.Atom, in.Effect, clip(string(p.Declared)))
	}
	e.Declared = in.Effect
	e.Contract = in.Contract()
	switch {
	case origin == "" || origin == in.Origin:
		e.Origin = in.Origin
	case untrusted(origin):
		e.Origin = origin
		if !untrusted(in.Origin) {
			e.Contract = nil // repaired code: the operations read were the original's
		}
	default:
		return bad("integration %q has origin %s in the catalogue; a request cannot say %s for it", p.Atom, in.Origin, origin)
	}
	return nil
}

func untrusted(o policy.Origin) bool { return o == policy.OriginRegistry || o == policy.OriginModel }

// joinPath joins an agent's path to the base path and refuses anything
// that could leave it or be read two ways.
func joinPath(base, p string) (string, error) {
	if p == "" {
		return "", bad("path is required")
	}
	if len(p) > 2048 || !utf8.ValidString(p) || strings.IndexFunc(p, unicode.IsControl) >= 0 {
		return "", bad("path must be at most 2048 printable UTF-8 bytes")
	}
	if strings.ContainsAny(p, "?#\\") {
		return "", bad("path may not contain ?, # or \\; give the query in query")
	}
	rel := strings.TrimPrefix(p, "/")
	for seg := range strings.SplitSeq(rel, "/") {
		if seg == "." || seg == ".." {
			return "", bad("path %q has a \".\" or \"..\" segment", clip(p))
		}
	}
	full := path.Join("/", base, rel)
	if strings.HasSuffix(p, "/") && full != "/" {
		full += "/"
	}
	if base != "" && full != base && !strings.HasPrefix(full, base+"/") {
		return "", bad("path %q leaves the provider's base path %s", clip(p), base)
	}
	return full, nil
}

func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// Perform implements broker.Sink.
func (s *Sink) Perform(ctx context.Context, run *broker.Run, req *broker.EffectRequest, prop *broker.Proposal) (*broker.Performed, error) {
	c := prop.State.(*call)
	p := c.prov
	var cred *Credential
	if p.Auth.Type != AuthNone {
		got, err := s.credential(ctx, run.For, p)
		if err != nil {
			return nil, err
		}
		cred = &got
	}
	if isMutating(c.method) && s.rules.Load() != nil {
		if err := s.markWritten(ctx, run, c); err != nil {
			return nil, err
		}
	}
	key := c.opID
	if key == "" {
		key = broker.ApprovalFrom(ctx) // an approved action's retries share its approval's id
	}
	if key == "" {
		key = prop.ID
	}
	resp, err := s.send(ctx, c, cred, key)
	if err != nil {
		return nil, err
	}
	dg := digest(resp.body)
	res := journal.Result{Status: "ok", Size: int64(len(resp.body)), Digest: dg,
		Detail: map[string]string{"status_code": strconv.Itoa(resp.status), "attempts": strconv.Itoa(resp.attempts)}}
	if resp.status >= 400 {
		res.Status, res.Error = "failed", "http-status"
	}
	r := Reply{Status: resp.status, Size: res.Size, Digest: dg, Attempts: resp.attempts}
	if p.IdempotencyHeader != "" {
		r.IdempotencyKey = key
	}
	for _, h := range p.respHdrs {
		if v := resp.header.Get(h); v != "" {
			if r.Headers == nil {
				r.Headers = map[string]string{}
			}
			r.Headers[h] = v
		}
	}
	if len(resp.body) > 0 {
		if isJSONType(resp.header.Get("Content-Type")) && json.Valid(resp.body) {
			r.Body = resp.body
		} else {
			r.BodyBase64 = base64.StdEncoding.EncodeToString(resp.body)
		}
	}
	if s.rules.Load() != nil && c.method == http.MethodGet && resp.status >= 200 && resp.status < 300 {
		if err := s.keep(ctx, run, prop, c, resp, dg); err != nil {
			// The read happened and is answered; it only cannot ground.
			s.log.Warn("provider response not kept for grounding", "run", run.ID, "effect", prop.ID, "provider", p.Name, "err", err)
			res.Detail["kept"] = "false"
		}
	}
	reply, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return &broker.Performed{Result: res, Reply: reply}, nil
}

// credential returns who's credential for p, cached under who and p alone.
func (s *Sink) credential(ctx context.Context, who policy.Principal, p *Provider) (Credential, error) {
	k := credKey{who.Tenant, who.Person, p.Name}
	if s.cache != nil {
		if it := s.cache.Get(k); it != nil {
			return it.Value(), nil
		}
	}
	if s.creds == nil {
		return Credential{}, noCredential(who, p, ErrNoCredential, "no credential store is configured")
	}
	c, err := s.creds.Credential(ctx, who, p.Name)
	if errors.Is(err, ErrNoCredential) {
		return Credential{}, noCredential(who, p, err, "")
	}
	if err != nil {
		return Credential{}, &CallError{Provider: p.Name, Type: "credential-store", Err: err,
			Detail: "the credential store could not be read (" + err.Error() + "); nothing was sent. Operator: make the store reachable"}
	}
	switch {
	case (p.Auth.Type == AuthBearer || p.Auth.Type == AuthHeader) && c.Token.IsZero():
		return Credential{}, noCredential(who, p, ErrNoCredential, "the stored credential has no token, which auth type "+string(p.Auth.Type)+" needs")
	case p.Auth.Type == AuthBasic && c.Username == "":
		return Credential{}, noCredential(who, p, ErrNoCredential, "the stored credential has no username, which basic auth needs")
	}
	if s.cache != nil {
		s.cache.Set(k, c, s.ttl)
	}
	return c, nil
}

func noCredential(who policy.Principal, p *Provider, err error, why string) error {
	if why == "" {
		why = err.Error()
	}
	return &CallError{Provider: p.Name, Type: "no-credential", Err: err,
		Detail: fmt.Sprintf("%s (%s) has no credential for provider %s (%s); nothing was sent. Operator: add one for tenant %q, person %q, provider %q to the credentials file (--credentials) or the credentials bucket; no other credential is used in its place",
			who.Person, who.Tenant, p.Name, why, who.Tenant, who.Person, p.Name)}
}

func isMutating(m string) bool {
	switch m {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// digest returns "sha256:<hex>" of b.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// clip shortens untrusted text before it goes into an error message.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
