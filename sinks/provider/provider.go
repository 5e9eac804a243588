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
	"github.com/gatehouse/gatehouse/grounding/strictjson"
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
	// Grounding are the grounding rules; nil checks nothing. New checks
	// them against Catalogue and ToolServers (grounding.Rules.Resolve) and
	// fails when they do not fit; LoadGrounding reads a file that way.
	Grounding *grounding.Rules
	// ToolServers names the upstream MCP servers whose tool calls the
	// mcp sink grounds with these rules (as POST /tools/<tool> on provider
	// <server>), so rules may match them.
	ToolServers []string
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
	gcat    grounding.Catalogue             // what rules are resolved against
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
	s.gcat = cfg.Catalogue.WithToolServers(cfg.ToolServers...)
	rules, err := cfg.Grounding.Resolve(s.gcat)
	if err != nil {
		return nil, err
	}
	s.rules.Store(rules)
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
	canon       Canonical
	method      string // canon.Method
	path        string // canon.Path: as sent, without the query
	query       url.Values
	rawQuery    string
	headers     http.Header
	body        []byte // nil: no body
	contentType string
	opID        string
	// ambiguous, when set, says why the request has no canonical form:
	// Decide refuses it and Perform never sends it.
	ambiguous string
	ground    *content.Grounding // what the grounding check was given, when a rule applied
	// grounded: a rule applied and found nothing wrong. spends are the
	// records its amounts were bounded by, spent when the call is carried
	// out.
	grounded bool
	spends   []grounding.Spend
}

// setAmbiguous keeps the first reason a request cannot be sent one way.
func (c *call) setAmbiguous(why string) {
	if c.ambiguous == "" {
		c.ambiguous = why
	}
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
	bodyTwice, err := paramsOnce(req.Params)
	if err != nil {
		return nil, err
	}
	var p Params
	if err := broker.DecodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	c, e, err := s.decode(ctx, req, &p)
	if err != nil {
		return nil, err
	}
	if bodyTwice {
		c.setAmbiguous("the body has a key twice in one object, which parsers resolve in different ways")
		e.Ambiguous = c.ambiguous
	}
	prop := &broker.Proposal{Effect: e, State: c}
	if c.body != nil {
		prop.Size, prop.Digest = int64(len(c.body)), digest(c.body)
	}
	if s.rules.Load() != nil && c.ambiguous == "" {
		if err := s.ground(ctx, run, c, prop); err != nil {
			return nil, err
		}
	}
	return prop, nil
}

// paramsOnce refuses params with a key written twice (BAD_REQUEST), but
// for a key twice inside body, which it reports: that is a body no two
// servers need read alike, refused as ambiguous-request on the record.
func paramsOnce(raw json.RawMessage) (bodyTwice bool, err error) {
	if raw == nil {
		return false, nil
	}
	dups, err := strictjson.Scan(raw, strictjson.Options{})
	if err != nil {
		return false, bad("params: %s", jsonProblem(err))
	}
	for _, d := range dups {
		if len(d.Path) < 2 || d.Path[0].Key != "body" {
			return false, bad("params: %s (%s)", strictjson.ErrDuplicateKey, clip(d.Path[0].Key))
		}
		bodyTwice = true
	}
	return bodyTwice, nil
}

// decode validates p and builds the canonical call and its effect.
func (s *Sink) decode(ctx context.Context, req *broker.EffectRequest, p *Params) (*call, policy.Effect, error) {
	var e policy.Effect
	prov, ok := s.cat.Provider(p.Provider)
	if !ok {
		return nil, e, bad("provider %q is not in the catalogue", clip(p.Provider))
	}
	c := &call{prov: prov, method: strings.ToUpper(p.Method)}
	if !knownMethods[c.method] {
		return nil, e, bad("method %q is not GET, HEAD, OPTIONS, POST, PUT, PATCH or DELETE", clip(p.Method))
	}
	rel, tmpl, err := prov.resolvePath(p.Path)
	var amb *AmbiguousError
	switch {
	case errors.As(err, &amb):
		c.setAmbiguous(amb.Reason)
		c.path = prov.basePath + "/" + strings.TrimPrefix(p.Path, "/") // recorded as asked; never sent
	case err != nil:
		return nil, e, err
	default:
		c.path = prov.basePath + rel
	}
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
			if strings.EqualFold(k, "_method") {
				c.setAmbiguous("the query names _method, which frameworks read as a method override")
			}
			c.query[k] = vs
		}
		c.rawQuery = c.query.Encode()
	}
	if len(p.Headers) > 0 {
		c.headers = http.Header{}
		for k, v := range p.Headers {
			ck := textproto.CanonicalMIMEHeaderKey(k)
			if _, twice := c.headers[ck]; twice {
				// Both would be set as one header, the one map order puts
				// last: which value is sent would be chance.
				return nil, e, bad("header %s is given twice, in spellings that differ only in case; give it once", ck)
			}
			if !prov.allowed[ck] {
				return nil, e, bad("header %q may not be set on provider %s; the catalogue's headers_allowed lists those that may", clip(k), prov.Name)
			}
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, e, bad("header %s has a value that is not valid in HTTP", ck)
			}
			c.headers.Set(ck, v)
		}
	}
	if err := c.decodeBody(p); err != nil {
		return nil, e, err
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
	c.canon = Canonical{Scheme: prov.scheme, Host: prov.host, Port: prov.port, Method: c.method, Path: c.path,
		Query: c.query, RawQuery: c.rawQuery}
	if tmpl != "" {
		c.canon.Operation = prov.basePath + tmpl
	}
	host := c.canon.Authority()
	e = policy.Effect{
		Sink: policy.SinkProvider, Action: ActionCall, Origin: req.Origin, Tool: req.Tool,
		Provider: prov.Name, Method: c.method, Host: host, Path: c.path,
		Target: host + c.path, Atom: p.Atom, Ambiguous: c.ambiguous,
		PathFold: prov.PathCase == PathCaseInsensitive,
	}
	if err := s.authority(&e, prov, req.Origin, p); err != nil {
		return nil, e, err
	}
	if pc, ok := broker.ProgramContractFrom(ctx); ok {
		e.FromProgram, e.ProgramContract = true, joinContract(prov, pc)
	}
	if c.body != nil {
		e.Values = values(c.body, c.contentType, c.query)
	}
	return c, e, nil
}

// decodeBody reads body or body_base64 and its content type, noting what
// servers would read in different ways.
func (c *call) decodeBody(p *Params) error {
	switch {
	case p.Body != nil && p.BodyBase64 != "":
		return bad("give body or body_base64, not both")
	case p.Body != nil:
		if string(p.Body) == "null" {
			return bad("body may not be null; leave it out to send no body")
		}
		c.body, c.contentType = []byte(p.Body), "application/json"
		if p.ContentType != "" {
			if !isJSONType(p.ContentType) {
				return bad("body is JSON, so content_type must be a JSON type; use body_base64 for other content")
			}
			c.contentType = p.ContentType
		}
	case p.BodyBase64 != "":
		b, err := base64.StdEncoding.DecodeString(p.BodyBase64)
		if err != nil {
			return bad("body_base64 is not standard base64")
		}
		c.body, c.contentType = b, p.ContentType
		if c.contentType == "" {
			c.contentType = "application/octet-stream"
		}
	case p.ContentType != "":
		return bad("content_type without a body")
	}
	if c.contentType == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(c.contentType)
	if err != nil || !httpguts.ValidHeaderFieldValue(c.contentType) {
		return bad("content_type %q is not a media type", clip(c.contentType))
	}
	form := mt == "application/x-www-form-urlencoded"
	if !isJSONType(c.contentType) && !form {
		return nil
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		c.setAmbiguous("the body's charset is not utf-8, so it is not read as the bytes decided on")
		return nil
	}
	if form {
		q, err := url.ParseQuery(string(c.body))
		if err != nil {
			c.setAmbiguous("the form body cannot be read one way (a ';' separator or a bad escape)")
		}
		for k := range q {
			if strings.EqualFold(k, "_method") {
				c.setAmbiguous("the form body names _method, which frameworks read as a method override")
			}
		}
		return nil
	}
	if p.Body == nil { // body came inside params, which paramsOnce has read
		if err := strictjson.Check(c.body); err != nil {
			c.setAmbiguous("the JSON body cannot be read one way: " + jsonProblem(err))
			return nil
		}
	}
	if jsonHasMethodOverride(c.body) {
		c.setAmbiguous("the JSON body names _method, which frameworks read as a method override")
	}
	return nil
}

// jsonProblem names what strictjson refused, without the document's keys
// (which could carry a value).
func jsonProblem(err error) string {
	for _, e := range []error{strictjson.ErrDuplicateKey, strictjson.ErrInvalidUTF8, strictjson.ErrSurrogate, strictjson.ErrTooDeep} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return strictjson.ErrSyntax.Error()
}

// jsonHasMethodOverride reports whether a JSON object body has a
// top-level "_method" key (any case).
func jsonHasMethodOverride(body []byte) bool {
	if !containsFold(body, "_method") {
		return false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return false
	}
	for k := range top {
		if strings.EqualFold(k, "_method") {
			return true
		}
	}
	return false
}

// containsFold reports whether b holds the ASCII word w in any case.
func containsFold(b []byte, w string) bool {
	for i := 0; i+len(w) <= len(b); i++ {
		if b[i] == w[0] && strings.EqualFold(string(b[i:i+len(w)]), w) {
			return true
		}
	}
	return false
}

// joinContract joins a program's contract (templates relative to the
// provider's base URL, as the program writes paths) to prov's base path,
// as the catalogue's contracts are; nil stays nil.
func joinContract(prov *Provider, pc *policy.Contract) *policy.Contract {
	if pc == nil {
		return nil
	}
	out := &policy.Contract{Operations: make([]policy.Operation, len(pc.Operations))}
	for i, op := range pc.Operations {
		t := op.Template
		if !strings.HasPrefix(t, "/") {
			t = "/" + t
		}
		out.Operations[i] = policy.Operation{Method: strings.ToUpper(op.Method), Template: prov.basePath + t}
	}
	return out
}

// authority sets Declared and Contract from the catalogue, and the origin
// decided on: the request's, or the integration's when that is less
// trusted.
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
	e.Origin = policy.LeastTrusted(origin, in.Origin)
	return nil
}

func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// Perform implements broker.Sink.
func (s *Sink) Perform(ctx context.Context, run *broker.Run, req *broker.EffectRequest, prop *broker.Proposal) (*broker.Performed, error) {
	c := prop.State.(*call)
	if c.ambiguous != "" {
		return nil, &CallError{Provider: c.prov.Name, Type: "ambiguous-request",
			Detail: "the request has no one canonical form (" + c.ambiguous + "); nothing was sent"}
	}
	p := c.prov
	var cred *Credential
	if p.Auth.Type != AuthNone {
		got, err := s.credential(ctx, run.For, p)
		if err != nil {
			return nil, err
		}
		cred = &got
	}
	if c.grounded && len(c.spends) > 0 {
		if err := s.spend(ctx, run, c); err != nil {
			return nil, err
		}
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
	if s.rules.Load() != nil && c.method == http.MethodGet && resp.status == http.StatusOK {
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
