package grounding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"

	"github.com/gatehouse/gatehouse/grounding/paramnames"
	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// Call is a provider call exactly as it is about to leave.
type Call struct {
	Provider, Method, Path string // Path without query
	Query                  url.Values
	Body                   []byte // the bytes that will be sent
	// ContentType is application/json or application/x-www-form-urlencoded
	// (parameters allowed; a charset must be utf-8). Any body grounding
	// cannot read (another type, invalid JSON or UTF-8, a body without a
	// type) is refused when a rule applies.
	ContentType string
}

// Citation names the journal event (run and effect id) whose outcome
// recorded a provider response, the response's digest ("sha256:<hex>" of
// Record.Body) and "provider:path".
type Citation struct {
	Run, Effect, Digest, Path string
}

// Record is a provider response the broker received and recorded.
type Record struct {
	Provider, Path string // the path read (template filled), without query
	Body           []byte // JSON as received
	ReadAt         time.Time
	Citation       Citation
}

// Records are the records one workflow's broker read, kept by the caller
// in a store shared by every broker process. Implementations must be safe
// for concurrent use.
type Records interface {
	// Lookup returns every record read at exactly that path, in any order.
	Lookup(ctx context.Context, workflow, provider, path string) ([]Record, error)
	// WrittenAt returns when this workflow first sent a mutating call to
	// that path; the zero time if it never did. (The first, not the last:
	// a record read between two writes still shows the first one.) With
	// path AnyPath it returns when the workflow first sent the provider a
	// mutating call no grounding rule grounded.
	WrittenAt(ctx context.Context, workflow, provider, path string) (time.Time, error)
	// SpentThrough returns the ReadAt of the newest record of that path
	// that bounded a call this workflow carried out (Result.Spends): every
	// record read at or before it is spent. The zero time if none was.
	// (Read times, not the time of the call, so brokers' clocks never
	// make a spent record look fresh.)
	SpentThrough(ctx context.Context, workflow, provider, path string) (time.Time, error)
}

// AnyPath is the path WrittenAt takes for "any path of the provider": the
// broker marks it when the workflow sends the provider a mutating call no
// rule grounded (none applied, or it had failures), since such a call can
// change what any of the provider's records say (a supplier's bank
// account changed through /bank-accounts, or at a path spelt another way
// than the one later read). A record read at or after that mark grounds
// nothing. Real paths start with "/", so it is never one.
//
// The broker marks it for the asking agent too, under the workflow
// AgentScope(agent), and Check asks both: an agent that changed a
// provider's data without grounding in one run cannot ground a payment
// on that data in another (segregation of duties: who maintains the
// supplier master does not pay from it). The mark lasts as long as the
// record store keeps it after the agent's last such change.
const AnyPath = "*"

// AgentScope is the workflow key under which an agent's ungrounded changes
// are marked ("agent:" and the identity, "_shared" for the shared one). Run
// ids never start with "agent:".
func AgentScope(agent string) string {
	if agent == "" {
		agent = "_shared"
	}
	return "agent:" + agent
}

// Spend is a record a grounded call relies on as the bound of an amount:
// the binding a money or number requirement compares against. Once the
// call is carried out the record is spent: the broker marks it
// (SpentThrough) and it grounds no later call of the workflow, which must
// read the record again (and see the payment's effect) to be grounded, so
// an invoice's amount due grounds one payment, not one per call. ReadAt is
// when the record relied on was read; a record read after it is fresh.
type Spend struct {
	Provider, Path string
	ReadAt         time.Time
}

// Reread fetches a record again through the broker (decided and recorded
// like any call), for fresh: reread.
type Reread func(ctx context.Context, provider, path string) (Record, error)

// Input is everything Check looks at.
type Input struct {
	Workflow string // records are per workflow (the root run id)
	// Agent is the agent identity asking ("" the shared one): its changes
	// no rule grounded, in any workflow, count like the workflow's own
	// (AgentScope).
	Agent string
	Call  Call
	// Caller is the caller's structured input, for selectors_from: [input];
	// nil: none given. Numbers should be json.Number (or Go integers); a
	// float64 is read only when it holds a whole number within ±2^53.
	Caller  map[string]any
	Now     time.Time
	Records Records
	Reread  Reread // nil: a rule with fresh: reread refuses
}

// Result is what Check found. Its zero value means no rule applied.
type Result struct {
	Rule    string
	Applied bool // a rule matched this call
	// Failures holds every requirement that failed, each a sentence for a
	// person without a value in it; empty: grounded.
	Failures []string
	// Citations are the records the rule's bindings selected and could
	// rely on, in binding order (also when a requirement failed).
	Citations []Citation
	// Checks holds one entry per require of the rule, in order.
	Checks []Checked
	// Spends are the records a money or number requirement compared
	// against, in binding order: carrying the call out spends them.
	Spends []Spend
}

// Checked is one requirement's outcome, for the journal and for an
// approval's list of what was checked.
type Checked struct {
	Requirement string // e.g. "request.json.iban equals supplier.iban (iban)"
	Grounded    bool
	// Sent is "sha256:<hex>" of the value sent, in the comparison's
	// normal form (an IBAN without spaces, a decimal without trailing
	// zeros, ...); "" when it could not be read. Never the value itself.
	Sent string
}

// UnreadableRule is Result.Rule when the rules file could not be read.
const UnreadableRule = "unreadable"

// Check finds the first rule whose match fits the call and checks every
// binding and requirement of it, reporting every failure rather than the
// first. A nil *Rules applies to nothing; Rules from Unreadable apply to
// every call and fail. An error from Records or Reread is a failure, never
// a panic. Check keeps nothing; ctx is passed to Records and Reread.
func (r *Rules) Check(ctx context.Context, in Input) Result {
	if r == nil {
		return Result{}
	}
	if r.problem != "" {
		return Result{Rule: UnreadableRule, Applied: true, Failures: []string{
			fmt.Sprintf("the grounding rules in %s cannot be read (%s), so every provider call is refused until they are fixed", r.name, r.problem),
		}}
	}
	for _, ru := range r.rules {
		if params, ok := ru.match.fits(in.Call); ok {
			held := in
			c := checker{ctx: ctx, in: &held, ru: ru, params: params}
			return c.run()
		}
	}
	return Result{}
}

// Applies reports whether Check would apply a rule to call: some rule's
// match fits it (Rules from Unreadable apply to every call; nil rules to
// none).
func (r *Rules) Applies(call Call) bool {
	if r == nil {
		return false
	}
	if r.problem != "" {
		return true
	}
	for _, ru := range r.rules {
		if _, ok := ru.match.fits(call); ok {
			return true
		}
	}
	return false
}

// Keeps reports whether a response from provider at path could ground
// some rule: path fits the read template of some binding. The broker keeps
// only those responses, and records writes (mutating calls) to those paths
// for WrittenAt. Rules from Unreadable, and nil rules, keep nothing.
func (r *Rules) Keeps(provider, path string) bool {
	if r == nil {
		return false
	}
	for _, t := range r.reads[provider] {
		if t.fits(path) {
			return true
		}
	}
	return false
}

// ReadsFrom reports whether some rule binds a record of provider: the
// broker then marks the workflow's ungrounded mutating calls to it
// (WrittenAt with AnyPath).
func (r *Rules) ReadsFrom(provider string) bool {
	return r != nil && len(r.reads[provider]) > 0
}

func (t template) fits(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	p = p[1:]
	for i, sg := range t.segs {
		seg, rest, more := strings.Cut(p, "/")
		if more != (i < len(t.segs)-1) {
			return false
		}
		if sg.param == "" && seg != sg.lit || sg.param != "" && seg == "" {
			return false
		}
		p = rest
	}
	return true
}

// fits reports whether the call is one the matcher matches and returns
// the placeholders of the first path that fits.
func (m matcher) fits(call Call) (map[string]string, bool) {
	if !contains(m.providers, call.Provider) {
		return nil, false
	}
	if m.methods != nil && !contains(m.methods, strings.ToUpper(call.Method)) {
		return nil, false
	}
	if len(m.paths) == 0 {
		return nil, true
	}
	if !strings.HasPrefix(call.Path, "/") {
		return nil, false
	}
	segs := strings.Split(call.Path[1:], "/")
	for _, p := range m.paths {
		params := map[string]string{}
		if matchSegs(p.segs, segs, params) {
			return params, true
		}
	}
	return nil, false
}

func matchSegs(pat, segs []string, params map[string]string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if matchSegs(pat[1:], segs[i:], params) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if name, ok := placeholder(pat[0]); ok {
			if segs[0] == "" {
				return false
			}
			params[name] = segs[0]
		} else if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// checker holds one Check's state.
type checker struct {
	ctx    context.Context
	in     *Input
	ru     *rule
	params map[string]string
	res    Result

	bodyKind int // 0 none, 1 JSON, 2 form, -1 unreadable
	json     jsonDoc
	form     url.Values
	bound    []boundRecord
	// anywhere holds, per provider, the answer of WrittenAt with AnyPath.
	anywhere map[string]mark
	// twice holds the fields sent twice, by the case-folded form of their
	// field path ("request.json.iban", "request.form.iban"): a JSON key or
	// a form or query name written twice, or written in two ways equal
	// after case folding and NFC, or a form or query name with two values.
	twice map[string]bool
}

type boundRecord struct {
	ok  bool
	doc any
}

const (
	bodyNone       = 0
	bodyJSON       = 1
	bodyForm       = 2
	bodyUnreadable = -1
)

func (c *checker) fail(format string, args ...any) {
	c.res.Failures = append(c.res.Failures, fmt.Sprintf(format, args...))
}

func (c *checker) run() Result {
	c.res = Result{Rule: c.ru.name, Applied: true}
	c.readRequest()
	c.bound = make([]boundRecord, len(c.ru.binds))
	for i := range c.ru.binds {
		c.bind(i)
	}
	for i := range c.ru.reqs {
		c.require(&c.ru.reqs[i])
	}
	if c.ru.denyOthers {
		c.others()
	} else {
		c.unnamedElements()
	}
	return c.res
}

// unnamedElements fails every list the rule indexes that holds an element
// the rule names no path into (under other_fields: deny, others reports
// each such element itself): a batch whose first payment is grounded
// does not carry a second one unchecked.
func (c *checker) unnamedElements() {
	if c.bodyKind != bodyJSON {
		return
	}
	for _, l := range c.ru.lists {
		vs, st := walk(c.json.root, l.segs, false)
		if st != found || len(vs) != 1 {
			continue
		}
		list, ok := vs[0].([]any)
		if !ok {
			continue
		}
		for i := range list {
			if !l.named[i] {
				c.fail("%s holds %d elements and the rule names only some of them by index, so the others would go unchecked (name every element the call may send, or write other_fields: deny)", l.text, len(list))
				break
			}
		}
	}
}

// readRequest decodes the body by its content type and reports fields
// sent twice.
func (c *checker) readRequest() {
	call := &c.in.Call
	if call.ContentType == "" && len(call.Body) == 0 {
		c.bodyKind = bodyNone
	} else {
		mt, params, err := mime.ParseMediaType(call.ContentType)
		cs, hasCS := params["charset"]
		switch {
		case err != nil || hasCS && !strings.EqualFold(cs, "utf-8"):
			c.bodyKind = bodyUnreadable
			c.fail("the request body cannot be read: its content type is not application/json or application/x-www-form-urlencoded in UTF-8")
		case mt == "application/json":
			if !utf8.Valid(call.Body) {
				c.bodyKind = bodyUnreadable
				c.fail("the request body cannot be read: it is not valid UTF-8")
				break
			}
			doc, err := decodeJSON(call.Body, "request.json")
			if err != nil {
				c.bodyKind = bodyUnreadable
				c.fail("the request body cannot be read: it is not one valid JSON value")
				break
			}
			c.bodyKind, c.json = bodyJSON, doc
			for _, d := range doc.dups {
				c.sentTwice(d.raw)
				if d.folded {
					c.fail("%s is sent twice, as keys that differ only in case or Unicode form", d.shown)
				} else {
					c.fail("%s is sent twice", d.shown)
				}
			}
		case mt == "application/x-www-form-urlencoded":
			form, err := url.ParseQuery(string(call.Body))
			if err != nil {
				c.bodyKind = bodyUnreadable
				c.fail("the request body cannot be read: it is not a valid form")
				break
			}
			c.bodyKind, c.form = bodyForm, form
			c.valuesTwice("request.form.", form)
		default:
			c.bodyKind = bodyUnreadable
			c.fail("the request body cannot be read: its content type is not application/json or application/x-www-form-urlencoded")
		}
	}
	c.valuesTwice("request.query.", call.Query)
	c.namesClash()
}

// namesClash fails every pair of top-level names (query names, form names,
// the JSON body's keys) that common servers read as one field or one
// inside the other (paramnames.Clashes): names equal after case folding
// and NFC ("iban" and "IBAN"), a query name and a body field of one
// reading (frameworks that merge query and body parameters, Rails,
// Laravel, PHP's $_REQUEST, read them as one, and which copy wins
// differs), and names that nest or mangle into one ("iban" and "iban[]",
// "payment" and "payment[iban]", "payment.iban", " iban", "remittance.email"
// for remittance_email).
func (c *checker) namesClash() {
	if len(c.in.Call.Query) == 0 && c.bodyKind != bodyForm {
		return // only JSON keys, which are literal (strictjson checked them)
	}
	type src struct{ prefix, key string }
	var names []paramnames.Name
	var from []src
	for _, k := range sortedKeys(c.in.Call.Query) {
		names, from = append(names, paramnames.Name{Key: k}), append(from, src{"request.query.", k})
	}
	switch c.bodyKind {
	case bodyJSON:
		if m, ok := c.json.root.(map[string]any); ok {
			for _, k := range sortedKeys(m) {
				names, from = append(names, paramnames.Name{Key: k, Literal: true}), append(from, src{"request.json.", k})
			}
		}
	case bodyForm:
		for _, k := range sortedKeys(c.form) {
			names, from = append(names, paramnames.Name{Key: k}), append(from, src{"request.form.", k})
		}
	}
	for _, cl := range paramnames.Clashes(names) {
		a, b := from[cl.A], from[cl.B]
		c.sentTwice(a.prefix + a.key)
		c.sentTwice(b.prefix + b.key)
		switch {
		case a.prefix != b.prefix: // a is the query's (queries come first)
			c.fail("%s%s is sent twice, in the body and in the query (%s%s), which servers that merge parameters read as one field", b.prefix, displayKey(b.key), a.prefix, displayKey(a.key))
		case strictjson.FoldKey(a.key) == strictjson.FoldKey(b.key):
			c.fail("%s%s is sent twice, as names that differ only in case or Unicode form (%s)", b.prefix, displayKey(b.key), displayKey(a.key))
		default:
			c.fail("%s%s is sent twice, as names servers read as one field (%s: brackets and dots nest names, PHP drops leading spaces and reads . as _)", b.prefix, displayKey(b.key), displayKey(a.key))
		}
	}
}

func (c *checker) sentTwice(field string) {
	if c.twice == nil {
		c.twice = map[string]bool{}
	}
	c.twice[strictjson.FoldKey(field)] = true
}

// valuesTwice fails every form or query name sent with more than one
// value.
func (c *checker) valuesTwice(prefix string, vals url.Values) {
	for _, k := range sortedKeys(vals) {
		if len(vals[k]) > 1 {
			c.sentTwice(prefix + k)
			c.fail("%s%s is sent twice", prefix, displayKey(k))
		}
	}
}

// isTwice reports whether the field at fp, or a field inside it or around
// it, was sent twice.
func (c *checker) isTwice(fp fieldPath) bool {
	if c.twice == nil {
		return false
	}
	p := strictjson.FoldKey(fp.text)
	for t := range c.twice {
		if overlaps(t, p) {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// displayKey shows a key that comes from a request or record in a
// failure: plain short names as written, anything else (which could carry
// a value) by its length only.
func displayKey(k string) string {
	if len(k) <= 40 && isName(k) && !looksLikeValue(k) {
		return k
	}
	return fmt.Sprintf("<a key of %d bytes>", len(k))
}

// looksLikeValue reports keys with many digits, which may be an account
// number or an IBAN used as a key.
func looksLikeValue(k string) bool {
	n := 0
	for i := 0; i < len(k); i++ {
		if isDigit(k[i]) {
			n++
		}
	}
	return n >= 6
}

// status says why a value could not be had.
type status uint8

const (
	found    status = iota
	missing         // not there, or null
	twice           // sent twice
	unbound         // its binding did not select a record
	noBody          // the body could not be read
	unusable        // an input value of a type JSON has no form for
)

// value resolves a path that has no [*].
func (c *checker) value(fp fieldPath) (any, status) {
	vs, st := c.values(fp)
	if st != found {
		return nil, st
	}
	if len(vs) != 1 {
		return nil, missing
	}
	return vs[0], found
}

// values resolves a path; [*] segments collect every element.
func (c *checker) values(fp fieldPath) ([]any, status) {
	switch fp.root {
	case rootJSON:
		switch c.bodyKind {
		case bodyUnreadable:
			return nil, noBody
		case bodyJSON:
		default:
			return nil, missing
		}
		if c.isTwice(fp) {
			return nil, twice
		}
		return walk(c.json.root, fp.segs, false)
	case rootForm:
		switch c.bodyKind {
		case bodyUnreadable:
			return nil, noBody
		case bodyForm:
		default:
			return nil, missing
		}
		if c.isTwice(fp) {
			return nil, twice
		}
		return oneOf(c.form[fp.segs[0].key])
	case rootQuery:
		if c.isTwice(fp) {
			return nil, twice
		}
		return oneOf(c.in.Call.Query[fp.segs[0].key])
	case rootPath:
		v, ok := c.params[fp.segs[0].key]
		if !ok {
			return nil, missing
		}
		return []any{v}, found
	case rootInput:
		if c.in.Caller == nil {
			return nil, missing
		}
		return walk(map[string]any(c.in.Caller), fp.segs, true)
	case rootBinding:
		if fp.bind < 0 || !c.bound[fp.bind].ok {
			return nil, unbound
		}
		return walk(c.bound[fp.bind].doc, fp.segs, false)
	}
	return nil, missing
}

func oneOf(vals []string) ([]any, status) {
	switch len(vals) {
	case 0:
		return nil, missing
	case 1:
		return []any{vals[0]}, found
	}
	return nil, twice
}

// overlaps reports whether one path is the other or inside it.
func overlaps(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return b == a || strings.HasPrefix(b, a) && (b[len(a)] == '.' || b[len(a)] == '[')
}

// walk follows segs from v. A null, or a key or index that is not there,
// is missing. input values are normalised as they are met.
func walk(v any, segs []pseg, input bool) ([]any, status) {
	if input {
		var ok bool
		if v, ok = inputValue(v); !ok {
			return nil, unusable
		}
	}
	if v == nil {
		return nil, missing
	}
	if len(segs) == 0 {
		return []any{v}, found
	}
	sg := segs[0]
	switch sg.index {
	case segKey:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, missing
		}
		next, ok := m[sg.key]
		if !ok {
			return nil, missing
		}
		return walk(next, segs[1:], input)
	case segStar:
		list, ok := v.([]any)
		if !ok {
			return nil, missing
		}
		out := make([]any, 0, len(list))
		for _, e := range list {
			vs, st := walk(e, segs[1:], input)
			if st == found {
				out = append(out, vs...)
			} else if st != missing {
				return nil, st
			}
		}
		return out, found
	default:
		list, ok := v.([]any)
		if !ok || sg.index >= len(list) {
			return nil, missing
		}
		return walk(list[sg.index], segs[1:], input)
	}
}

// bind selects the record for binding i, or reports why it cannot.
func (c *checker) bind(i int) {
	b := &c.ru.binds[i]
	var sb strings.Builder
	sb.Grow(len(b.read.text) + 16)
	w := 0
	for _, sg := range b.read.segs {
		sb.WriteByte('/')
		if sg.param == "" {
			sb.WriteString(sg.lit)
			continue
		}
		sel := b.where[w]
		w++
		v, st := c.value(sel.from)
		if st != found {
			c.fail("binding %s cannot select its record: %s", b.name, c.why(sel.from, st))
			return
		}
		seg, ok := segmentText(v)
		if !ok {
			c.fail("binding %s cannot select its record: %s is not a plain id (a string or number usable as one path segment)", b.name, sel.from.text)
			return
		}
		sb.WriteString(seg)
	}
	filled := sb.String()
	what := b.provider + ":" + b.read.text
	var recs []Record
	if c.ru.reread {
		if c.in.Reread == nil {
			c.fail("binding %s: the rule reads records again before acting (fresh: reread), but this broker cannot reread", b.name)
			return
		}
		rec, err := c.in.Reread(c.ctx, b.provider, filled)
		if err != nil {
			c.fail("binding %s: reading %s again failed: %v", b.name, what, err)
			return
		}
		recs = []Record{rec}
	} else {
		if c.in.Records == nil {
			c.fail("binding %s: no record store is available, so no record can be found", b.name)
			return
		}
		got, err := c.in.Records.Lookup(c.ctx, c.in.Workflow, b.provider, filled)
		if err != nil {
			c.fail("binding %s: the record store could not be read: %v", b.name, err)
			return
		}
		recs = got
	}
	// Keep only records of exactly this path; index the distinct responses.
	var (
		chosen   *Record
		digest   string
		distinct int
		ok       = true
	)
	for j := range recs {
		rec := &recs[j]
		if rec.Provider != b.provider || rec.Path != filled {
			continue
		}
		d := bodyDigest(rec.Body)
		if rec.Citation.Digest != "" && rec.Citation.Digest != d {
			c.fail("binding %s: a record of %s does not match the digest its citation gives", b.name, what)
			ok = false
			continue
		}
		switch {
		case chosen == nil:
			chosen, digest, distinct = rec, d, 1
		case d != digest:
			distinct++
		case rec.ReadAt.After(chosen.ReadAt):
			chosen = rec
		}
	}
	if chosen == nil {
		if ok {
			if c.ru.reread {
				c.fail("binding %s: reading %s again returned a different path", b.name, what)
			} else {
				c.fail("binding %s: no record of %s was read in this workflow", b.name, what)
			}
		}
		return
	}
	if distinct > 1 {
		c.fail("binding %s: %d different records answer %s, so which one grounds the call is ambiguous", b.name, distinct, what)
		ok = false
	}
	if c.in.Records == nil {
		c.fail("binding %s: no record store is available to tell whether this workflow wrote to %s", b.name, what)
		ok = false
	} else if written, err := c.in.Records.WrittenAt(c.ctx, c.in.Workflow, b.provider, filled); err != nil {
		c.fail("binding %s: the record store could not say whether this workflow wrote to %s: %v", b.name, what, err)
		ok = false
	} else if !written.IsZero() {
		for j := range recs {
			if recs[j].Provider == b.provider && recs[j].Path == filled && !recs[j].ReadAt.Before(written) {
				c.fail("binding %s: the record of %s was read after this workflow wrote to it, so it may show the run's own change", b.name, what)
				ok = false
				break
			}
		}
	}
	if c.in.Records != nil {
		if written, err := c.writtenAnywhere(b.provider); err != nil {
			c.fail("binding %s: the record store could not say whether this workflow changed provider %s: %v", b.name, b.provider, err)
			ok = false
		} else if !written.IsZero() && !chosen.ReadAt.Before(written) {
			c.fail("binding %s: the record of %s was read after this workflow or its agent sent %s a change no grounding rule checked, so it may show that change", b.name, what, b.provider)
			ok = false
		}
		if b.spends {
			if spent, err := c.in.Records.SpentThrough(c.ctx, c.in.Workflow, b.provider, filled); err != nil {
				c.fail("binding %s: the record store could not say whether the record of %s already bounded a call: %v", b.name, what, err)
				ok = false
			} else if !spent.IsZero() && !chosen.ReadAt.After(spent) {
				c.fail("binding %s: the record of %s already bounded an amount this workflow sent, so it grounds no other; read it again, after that call, to ground another", b.name, what)
				ok = false
			}
		}
	}
	if c.ru.maxAge > 0 {
		switch {
		case c.in.Now.IsZero() || chosen.ReadAt.IsZero():
			c.fail("binding %s: the age of the record of %s cannot be told (no time given), and the rule bounds it (max_age_seconds %d)", b.name, what, int64(c.ru.maxAge/time.Second))
			ok = false
		case c.in.Now.Sub(chosen.ReadAt) > c.ru.maxAge:
			c.fail("binding %s: the record of %s is older than the rule allows (max_age_seconds %d)", b.name, what, int64(c.ru.maxAge/time.Second))
			ok = false
		}
	}
	if !utf8.Valid(chosen.Body) {
		c.fail("binding %s: the record of %s is not valid UTF-8", b.name, what)
		return
	}
	doc, err := decodeJSON(chosen.Body, b.name)
	if err != nil {
		c.fail("binding %s: the record of %s is not one valid JSON value", b.name, what)
		return
	}
	if len(doc.dups) > 0 {
		c.fail("binding %s: the record of %s has a key twice (%s), so it is ambiguous", b.name, what, doc.dups[0].shown)
		return
	}
	if !ok {
		return
	}
	c.bound[i] = boundRecord{ok: true, doc: doc.root}
	if b.spends {
		c.res.Spends = append(c.res.Spends, Spend{Provider: b.provider, Path: filled, ReadAt: chosen.ReadAt})
	}
	cite := chosen.Citation
	cite.Digest = digest
	if cite.Path == "" {
		cite.Path = b.provider + ":" + filled
	}
	c.res.Citations = append(c.res.Citations, cite)
}

// writtenAnywhere is the first of WrittenAt with AnyPath for the workflow
// and for the agent's scope, asked once per provider in a check.
func (c *checker) writtenAnywhere(provider string) (time.Time, error) {
	if m, ok := c.anywhere[provider]; ok {
		return m.at, m.err
	}
	at, err := c.in.Records.WrittenAt(c.ctx, c.in.Workflow, provider, AnyPath)
	if err == nil {
		var byAgent time.Time
		byAgent, err = c.in.Records.WrittenAt(c.ctx, AgentScope(c.in.Agent), provider, AnyPath)
		if !byAgent.IsZero() && (at.IsZero() || byAgent.Before(at)) {
			at = byAgent
		}
	}
	if c.anywhere == nil {
		c.anywhere = map[string]mark{}
	}
	c.anywhere[provider] = mark{at, err}
	return at, err
}

type mark struct {
	at  time.Time
	err error
}

// segmentText returns a selector value as a path segment: a string or a
// JSON number whose text needs no escaping in a URL path and is not "."
// or "..". Anything else is refused rather than escaped, so the path
// looked up is the path that was read, however the store writes it.
func segmentText(v any) (string, bool) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = string(x)
	default:
		return "", false
	}
	if s == "" || s == "." || s == ".." || len(s) > 256 || url.PathEscape(s) != s || strings.ContainsAny(s, "/;,=") {
		return "", false
	}
	return s, true
}

func bodyDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// why says, without the value, why the value at fp could not be had.
func (c *checker) why(fp fieldPath, st status) string {
	switch st {
	case twice:
		return fp.text + " is sent twice"
	case unbound:
		return fmt.Sprintf("%s cannot be read because binding %s did not select a record", fp.text, fp.bindName)
	case noBody:
		return fp.text + " cannot be read because the request body cannot"
	case unusable:
		return fp.text + " is not a value JSON can hold (a float with a fraction, or another Go type)"
	}
	switch fp.root {
	case rootJSON, rootForm, rootQuery, rootPath:
		return fp.text + " is missing from the request"
	case rootInput:
		return fp.text + " is missing from the caller's input"
	}
	return fmt.Sprintf("%s is missing from the %s record", fp.text, fp.bindName)
}

func (c *checker) require(q *requirement) {
	chk := Checked{Requirement: q.text}
	defer func() { c.res.Checks = append(c.res.Checks, chk) }()
	sent, st := c.value(q.field)
	var against []any
	var ast status
	switch {
	case q.list != nil:
		against, ast = q.list, found
	case q.rel == relOneOf:
		against, ast = c.values(q.against)
	default:
		var v any
		if v, ast = c.value(q.against); ast == found {
			against = []any{v}
		}
	}
	var problems []string
	if st != found {
		problems = append(problems, c.why(q.field, st))
	} else if n, err := normalForm(q.kind, sent); err != nil {
		problems = append(problems, fmt.Sprintf("%s is not a valid %s", q.field.text, q.kind))
	} else {
		chk.Sent = n
	}
	if ast != found {
		problems = append(problems, c.why(q.against, ast))
	}
	if len(problems) > 0 {
		c.fail("%s cannot be checked: %s", q.text, strings.Join(problems, "; "))
		return
	}
	bound := q.against.text
	if q.list != nil && q.rel != relOneOf {
		bound = "the rule's bound"
	}
	signOK := c.signed(q, sent)
	switch q.rel {
	case relEquals, relAtMost, relAtLeast:
		var ok bool
		var err error
		switch q.rel {
		case relEquals:
			ok, err = Compare(q.kind, sent, against[0])
		case relAtMost:
			ok, err = AtMost(q.kind, sent, against[0])
		default:
			ok, err = AtLeast(q.kind, sent, against[0])
		}
		switch {
		case err != nil:
			c.fail("%s cannot be checked: %s is not a valid %s", q.text, bound, q.kind)
		case !ok && q.rel == relEquals:
			c.fail("%s does not equal %s (%s)", q.field.text, bound, q.kind)
		case !ok && q.rel == relAtMost:
			c.fail("%s is above %s (%s)", q.field.text, bound, q.kind)
		case !ok:
			c.fail("%s is below %s (%s)", q.field.text, bound, q.kind)
		default:
			chk.Grounded = signOK
		}
	case relOneOf:
		for _, a := range against {
			if ok, err := Compare(q.kind, sent, a); err == nil && ok {
				chk.Grounded = signOK
				return
			}
		}
		if q.list != nil {
			c.fail("%s is not one of the values the rule lists (%s)", q.field.text, q.kind)
		} else {
			c.fail("%s is not one of %s (%s)", q.field.text, q.against.text, q.kind)
		}
	}
}

// signed checks the sign of a money or number value the rule bounds,
// failing the call when it is refused; it reports whether it passed.
func (c *checker) signed(q *requirement, sent any) bool {
	if q.sign == signAny {
		return true
	}
	d, err := decimalOf(q.kind, sent)
	if err != nil {
		return false // normalForm has failed the call already
	}
	minus := strings.HasPrefix(decimalText(sent), "-")
	switch {
	case q.sign == signPositive && (minus || d.Sign() <= 0):
		c.fail("%s is not above zero, and the rule takes only positive values (sign: positive)", q.field.text)
		return false
	case q.sign == signNonNegative && (minus || d.Sign() < 0):
		c.fail("%s is negative or written with a minus sign, which a requirement bounding it from above refuses (sign: non-negative; write sign: any to take negative values)", q.field.text)
		return false
	}
	return true
}

// normalForm returns the digest of v in kind's normal form.
func normalForm(kind string, v any) (string, error) {
	var text string
	switch kind {
	case KindMoney, KindNumber:
		d, err := decimalOf(kind, v)
		if err != nil {
			return "", err
		}
		var r apd.Decimal
		r.Reduce(d)
		text = r.Text('f')
	case KindExact:
		if err := exactReadable(v); err != nil {
			return "", err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		text = string(b)
	default:
		s, err := canonical(kind, v)
		if err != nil {
			return "", err
		}
		text = s
	}
	return bodyDigest([]byte(kind + ":" + text)), nil
}

// others refuses every request field no require or where names.
func (c *checker) others() {
	named := c.ru.named
	if c.bodyKind == bodyJSON {
		for _, l := range jsonLeaves(c.json.root, leaf{raw: "request.json", shown: "request.json"}, nil) {
			if !covered(named, l) {
				c.fail("%s is sent but no requirement names it (other_fields: deny)", l.shown)
			}
		}
	}
	if c.bodyKind == bodyForm {
		for _, k := range sortedKeys(c.form) {
			if !named["request.form."+k] {
				c.fail("request.form.%s is sent but no requirement names it (other_fields: deny)", displayKey(k))
			}
		}
	}
	for _, k := range sortedKeys(c.in.Call.Query) {
		if !named["request.query."+k] {
			c.fail("request.query.%s is sent but no requirement names it (other_fields: deny)", displayKey(k))
		}
	}
	for _, k := range sortedKeys(c.params) {
		if !named["request.path."+k] {
			c.fail("request.path.%s is sent but no requirement names it (other_fields: deny)", k)
		}
	}
}

type leaf struct {
	raw, shown string
	odd        bool // a key on the way holds a character no path can name
}

// jsonLeaves lists the paths of every scalar, empty object and empty list.
func jsonLeaves(v any, at leaf, out []leaf) []leaf {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			return append(out, at)
		}
		for _, k := range sortedKeys(x) {
			next := leaf{
				raw:   at.raw + "." + k,
				shown: at.shown + "." + displayKey(k),
				odd:   at.odd || k == "" || strings.ContainsAny(k, ".[] \t\r\n"),
			}
			out = jsonLeaves(x[k], next, out)
		}
		return out
	case []any:
		if len(x) == 0 {
			return append(out, at)
		}
		for i, e := range x {
			idx := "[" + strconv.Itoa(i) + "]"
			out = jsonLeaves(e, leaf{at.raw + idx, at.shown + idx, at.odd}, out)
		}
		return out
	}
	return append(out, at)
}

// covered reports whether the leaf or a path it lies inside is named. A
// leaf under a key no path can name is never covered.
func covered(named map[string]bool, l leaf) bool {
	if l.odd {
		return false
	}
	p := l.raw
	for {
		if named[p] {
			return true
		}
		i := strings.LastIndexAny(p, ".[")
		if i < len("request.json") {
			return false
		}
		p = p[:i]
	}
}
