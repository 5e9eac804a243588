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
// Params are decoded strictly, and a key written twice anywhere in them is
// BAD_REQUEST (twice inside body: refused ambiguous-request, below).
// provider must be in the Catalogue; method is GET, HEAD, OPTIONS, POST,
// PUT, PATCH or DELETE in any case; path is relative to the provider's
// base URL; headers must be in the provider's headers_allowed, each once
// (two spellings of one header name, which HTTP reads as one, are a bad
// request). body is JSON sent byte for byte as given (content type application/json, or a
// JSON content_type); body_base64 is any other content, with content_type.
// operation_id is the idempotency key, for providers that have an
// idempotency_header; it defaults to the id of the approval the call runs
// under (see broker.ApprovalFrom: the same for every retry of that
// approved action), else to the effect id.
//
// # The canonical request
//
// Describe computes once, from the params and the catalogue, the one
// request it will send (Canonical): scheme, host, port, method, path and
// query. The Effect every rule matches (rules:, effects:, scopes and their
// limits, approvals, grounding, contracts) is built from it, the journal
// records it, and Perform sends exactly it: the URL is Canonical.URL(),
// nothing is rebuilt from the params. A request that servers could read
// as another resource, or another value, is refused before anything
// leaves (ambiguous-request, enforced in report and strict mode) rather
// than decided on one reading and sent for another.
//
//   - Scheme, host and port are the base URL's: the host in lower case
//     (an internationalised name as its A-label), the port explicit or the
//     scheme's. Effect.Host is host[:port], the port only when it is not
//     the scheme's default; Effect.Target is Host + Path.
//   - Method is upper-cased.
//   - Path. The agent's path is read as a URL path relative to the base
//     URL ("invoices/7" and "/invoices/7" are the same). Malformed paths
//     are BAD_REQUEST: empty, over 2048 bytes, not UTF-8, a control
//     character, "?" or "#". These are ambiguous-request: a backslash, a
//     ";" (a path parameter), an empty segment ("//"), a "." or ".."
//     segment, a "%" not starting an escape, an escape of "/", "\", ".",
//     ";", "%" or a control character, escapes that decode to invalid
//     UTF-8, an invisible format character (zero-width space, soft
//     hyphen, bidi controls), and a character Unicode normalisation would
//     change (fullwidth letters, ligatures, decomposed accents: not in
//     NFKC). Every other escape is decoded, and each segment is written
//     back one way: letters, digits, "-._~" and "$&+,:=@" as they are,
//     every other byte as %XX in upper case ("%7e" and "~" are "~",
//     "caf%c3%a9" and "café" are "caf%C3%A9").
//   - The path is then resolved against the provider's catalogued
//     operations (every integration's templates). A path that fits a
//     template (the same number of segments, a trailing "/" aside; literal
//     segments equal, ignoring case under Unicode case folding unless the
//     provider says path_case: sensitive; a "{name}" any segment) is sent
//     in the template's spelling: its literals, and a trailing "/" only if
//     the template has one; placeholder values are kept as given. The most
//     specific template wins (a literal before a placeholder, from the
//     left). A path no template fits is sent as decoded and re-encoded,
//     unless it would fit one with a segment cut at a ".", "?", "#", ":",
//     "+" or white space, or with white space trimmed around it (all
//     decoded): that is ambiguous-request, since Rails formats and
//     Spring's suffix patterns route "/payments.json" to /payments, IIS
//     trims trailing dots and spaces (.NET's Trim any Unicode space),
//     proxies that decode before they forward turn "%3F" into a query,
//     code that decodes a path as a form reads "+" as a space, and NTFS
//     reads "payments::$DATA" as payments.
//     On a path_case: sensitive provider a path that fits a template only
//     ignoring case is ambiguous-request. The catalogue may not hold two
//     templates one path could fit in two spellings. On a case-insensitive
//     provider Effect.PathFold is set, so path and target globs of
//     deployment rules, scopes and approvals also match a path no template
//     fits in whatever case it is sent.
//   - Effect.Path is the base URL's path followed by the resolved path.
//   - Query: the names and values given, every one valid UTF-8, names
//     printable; encoded as url.Values does (names sorted, values in the
//     order given, "+" for a space). A "_method" name is ambiguous-request
//     (frameworks read it as a method override), as is one in a form
//     body or at the top of a JSON body.
//   - Body. A JSON body (body, or body_base64 with a JSON content type)
//     must pass strictjson.Check: one JSON value, UTF-8, no unpaired
//     surrogate escape, no key twice in one object; a JSON or form content
//     type with a charset other than utf-8 is ambiguous-request, as is a
//     form body url.ParseQuery cannot read (a ";" separator). Keys equal
//     after case folding and NFC ("iban" and "IBAN") are read as one
//     field sent twice, by scope limits (Values) and by grounding, and so
//     are top-level names common servers read as one field or one inside
//     the other (grounding/paramnames): a body field and a query name
//     frameworks merge, "iban" and "iban[]", "payment" and
//     "payment[iban]" or "payment.iban", " iban" (PHP drops the space).
//
// Examples, for base_url https://ERP.example.com:443/api and the
// templates /payments and /invoices/{id} (path_case insensitive):
//
//	POST /payments           -> POST https://erp.example.com/api/payments
//	post payments/           -> POST https://erp.example.com/api/payments
//	POST /Payments           -> POST https://erp.example.com/api/payments
//	POST /pay%6Dents         -> POST https://erp.example.com/api/payments
//	GET  /INVOICES/INV-7/    -> GET  https://erp.example.com/api/invoices/INV-7
//	GET  /invoices/a b       -> GET  https://erp.example.com/api/invoices/a%20b
//	GET  /reports/Q1/        -> GET  https://erp.example.com/api/reports/Q1/  (no template: as given)
//	POST /payments.json      -> ambiguous-request (a format suffix)
//	POST /payments%20        -> ambiguous-request (a trailing space)
//	POST /payments;x         -> ambiguous-request (a ';')
//	POST /payments%2F        -> ambiguous-request (an encoded /)
//	POST //payments          -> ambiguous-request (an empty segment)
//	POST /x/../payments      -> ambiguous-request (a dot segment)
//	POST /ｐayments          -> ambiguous-request (a fullwidth letter)
//	POST /payments/x         -> sent as /api/payments/x, a path no operation
//	                            declares: outside-contract through erp.pay
//
// Headers that make servers or proxies act on another method, path, host
// or client (X-HTTP-Method-Override, X-Original-URL, X-Forwarded-Prefix,
// X-Forwarded-Uri, X-Real-IP, Destination, ...) are reserved like
// Authorization, and so is every Content-* header (Content-Encoding
// would have servers inflate a body other than the one decided on,
// Content-Range makes a PUT partial; the type is content_type's): a
// catalogue cannot allow them. Names are compared with "_" as "-", as
// CGI, Rack and PHP file X_HTTP_METHOD_OVERRIDE under the same name.
//
// # What is decided
//
// Describe builds the policy.Effect from the canonical request, never from
// the agent's account of it, with the body's Size and Digest. The
// authority:
//
//   - Origin is the origin Gatehouse established for the request
//     (EffectRequest.Origin: the asking identity's, or the code sink's for
//     a sandboxed program), never the catalogue's: naming an integration
//     does not lend the request the integration's origin. With an atom the
//     origin decided on is the less trusted of the two (unknown < model <
//     registry < direct < runtime < shipped), so a stored integration
//     called by shipped code is still held as registry code.
//   - Atom names an integration. For one in the catalogue, Declared is the
//     catalogue's effect and Contract its operations (templates joined to
//     the base path; nil when the catalogue gives none). An agent that
//     states declared must state the catalogue's, else BAD_REQUEST: it can
//     never widen it. An atom the catalogue does not know has no declared
//     effect and no contract, so it may only read.
//   - Contracts hold for every origin: a mutating call naming an
//     integration must be one of its declared operations, matched on the
//     canonical method and path (outside-contract; unverified-model-code
//     for registry or model code through an integration that declares
//     none). A mutating call naming none is mutation-without-atom.
//   - A sandboxed program's contract: when the code sink proposes a call
//     a program made through its gateway, it puts the program's own
//     contract (read from its code) on the context with
//     broker.ContextWithProgramContract. Describe joins its templates to
//     the base path of the provider the call names and sets
//     Effect.FromProgram and Effect.ProgramContract; a mutating call must
//     then be one of those operations too (a nil contract, code that could
//     not be read: unverified-model-code for registry or model code). Only
//     code in this process can set it; no param can.
//   - Values, for scope limits, are the top-level numbers and strings of a
//     JSON object body or of a form body, as written. A name sent twice
//     (or twice up to case and Unicode form, or in the body and in the
//     query, which frameworks merge, or in two spellings servers read as
//     one, see paramnames) gets a value that is not a number, so a limit
//     on it refuses.
//
// The policy then applies the origin table, the built-in refusals and the
// deployment rules; this package does not repeat them.
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
// anything else base64), at most max_response_bytes. A request that has
// no canonical form is never sent, whatever the mode (with mode off,
// Perform fails it "ambiguous-request").
//
// # What is recorded
//
// The outcome records the status code (detail status_code, attempts) or
// the error type (connect, reset, timeout, tls, canceled,
// no-credential, credential-store, response-too-large, record-store,
// record-spent, ambiguous-request), and the size and "sha256:<hex>" digest of the
// response body. Status is ok for 1xx to 3xx, failed for 4xx and 5xx
// (error "http-status"). Query strings, bodies, headers and credentials
// are never recorded; paths are, so they must not carry secrets.
//
// # Grounding
//
// With Config.Grounding, Describe runs the rule that applies to the
// canonical call (a rule written for another provider of the same server,
// Catalogue.SameServer, applies to the same method and whole path sent
// through this one: two catalogue entries for one ERP are two spellings
// of its operations) and puts its result on the Effect and its citations on
// the Proposal; see ground.go for the records kept (only plain GETs
// answered 200), the workflow they belong to, what a change the run sent
// does to them, how a record that bounds an amount is spent by the call
// it grounds, rereads and what selectors_from: [input] gets. Rules are
// loaded with LoadGrounding, which checks them against the catalogue
// (grounding.Rules.Resolve): serve, its reloads and gatehouse policy check
// all load them that way.
//
// The Sink is safe for concurrent use. Close closes idle connections.
package provider
