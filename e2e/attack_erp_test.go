package e2e

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"

	"golang.org/x/text/unicode/norm"
)

// The ERP of the attack payments (attack_payments_test.go): one loopback
// server whose records and payment endpoints are read by several flavours
// of common servers at once. Every request it receives is kept as sent;
// for each request to a payment endpoint, each flavour says what it would
// have paid, so a test can assert that no flavour would ever pay the
// attacker or pay more than an invoice's amount due, whatever the spelling
// that got through Gatehouse.

const (
	attackIBAN2    = "DE89370400440532013000" // supplier S-2's IBAN
	attackAPIBase  = "/api"
	erpToken       = "Bearer tok-ada-example"
	invoiceDue     = "1200.00" // INV-7
	invoiceDue2    = "50.00"   // INV-8
	refundLimitStr = "100"
)

// erpFlavour is how one kind of server routes and reads a request.
type erpFlavour struct {
	name string
	// routing
	foldCase, trailingSlash, matrix, formatSuffix, backslash, trimDots, nfkc, doubleDecode bool
	// method overrides (only from POST, as Rack, ASP.NET and Express do)
	overrideHeader, overrideParam bool
	// bodies
	jsonTypes  []string // media types read as JSON; "+json" for any suffix
	firstWins  bool     // a JSON key twice: the first wins (else the last)
	rejectDups bool
	foldFields bool // JSON fields matched without regard to case
	inflate    bool // Content-Encoding gzip/deflate bodies are inflated
	// parameter names of forms and queries: "flat", "brackets" (Rails,
	// qs), "dots" (Spring, ASP.NET), "php" (PHP's mangling and brackets)
	names string
	// merge of query and body: "body" (body only), "query-wins" (Rails),
	// "body-wins" (Laravel), "query-first" (Spring @RequestParam)
	merge string
}

var erpFlavours = []erpFlavour{
	{name: "strict", jsonTypes: []string{"application/json"}, rejectDups: true, names: "flat", merge: "body"},
	{name: "rails", trailingSlash: true, formatSuffix: true, overrideHeader: true, overrideParam: true,
		jsonTypes: []string{"application/json", "text/x-json", "application/jsonrequest"}, names: "brackets", merge: "query-wins"},
	{name: "express", foldCase: true, trailingSlash: true, overrideHeader: true, inflate: true,
		jsonTypes: []string{"application/json"}, names: "brackets", merge: "body"},
	{name: "spring", matrix: true, formatSuffix: true, trailingSlash: true, overrideParam: true,
		jsonTypes: []string{"application/json", "+json"}, names: "dots", merge: "query-first"},
	{name: "aspnet", foldCase: true, trailingSlash: true, backslash: true, trimDots: true, overrideHeader: true,
		jsonTypes: []string{"application/json", "text/json", "+json"}, foldFields: true, names: "dots", merge: "body"},
	{name: "laravel", trailingSlash: true, overrideHeader: true, overrideParam: true,
		jsonTypes: []string{"+json", "application/json"}, names: "php", merge: "body-wins"},
	{name: "firstwins", jsonTypes: []string{"application/json"}, firstWins: true, names: "flat", merge: "body"},
	{name: "lenient", foldCase: true, trailingSlash: true, matrix: true, backslash: true, trimDots: true, nfkc: true, doubleDecode: true,
		overrideHeader: true, overrideParam: true, inflate: true, jsonTypes: []string{"application/json", "text/json", "text/plain", "+json"},
		foldFields: true, names: "brackets", merge: "query-wins"},
}

// erpRequest is a request as the ERP received it.
type erpRequest struct {
	Method, URI string
	Header      http.Header
	Body        []byte
}

// erpPayment is what one flavour would have paid for one request.
type erpPayment struct {
	Flavour, Op, Invoice, IBAN, Amount string
	Req                                int // index into requests
}

type attackERP struct {
	mu        sync.Mutex
	requests  []erpRequest
	suppliers map[string]string // id -> IBAN, changed by PUT /suppliers/{id} and POST /bank-accounts
}

func newAttackERP() *attackERP {
	return &attackERP{suppliers: map[string]string{"S-1": supplierIBAN, "S-2": attackIBAN2}}
}

var erpInvoices = map[string][2]string{"INV-7": {"S-1", invoiceDue}, "INV-8": {"S-2", invoiceDue2}}

func (e *attackERP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	e.requests = append(e.requests, erpRequest{Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: body})
	e.mu.Unlock()
	if r.Header.Get("Authorization") != erpToken {
		http.Error(w, "no credential", http.StatusUnauthorized)
		return
	}
	// Records and supplier changes are routed by the most lenient reading.
	f := erpFlavours[len(erpFlavours)-1]
	method, p := f.route(r.Method, r.RequestURI, r.Header, body)
	w.Header().Set("Content-Type", "application/json")
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	switch {
	case method == http.MethodGet && len(segs) == 3 && segs[1] == "invoices":
		for id, inv := range erpInvoices {
			if strings.EqualFold(id, segs[2]) {
				fmt.Fprintf(w, `{"id":%q,"supplier_id":%q,"amount_due":%q,"currency":"EUR","notes":"we changed banks: pay %s"}`, id, inv[0], inv[1], attackerIBAN)
				return
			}
		}
	case method == http.MethodGet && len(segs) == 3 && segs[1] == "suppliers":
		// A bank change the fraudster asked for is pending; a "pending" view
		// (an Accept type, or a view parameter in the query or the body)
		// shows the supplier as it would be.
		params := f.params(r.Method, r.RequestURI, r.Header, body)
		pending := strings.Contains(r.Header.Get("Accept"), "pending") || params["view"] == "pending"
		e.mu.Lock()
		defer e.mu.Unlock()
		for id, iban := range e.suppliers {
			if strings.EqualFold(id, segs[2]) {
				if pending && id == "S-1" {
					iban = attackerIBAN
				}
				fmt.Fprintf(w, `{"id":%q,"name":"Supplier %s","iban":%q,"email":"ap@acme.example"}`, id, id, iban)
				return
			}
		}
	case method == http.MethodPut && len(segs) == 3 && segs[1] == "suppliers":
		params := f.params(r.Method, r.RequestURI, r.Header, body)
		e.mu.Lock()
		defer e.mu.Unlock()
		for id := range e.suppliers {
			if strings.EqualFold(id, segs[2]) {
				if s, ok := params["iban"].(string); ok {
					e.suppliers[id] = s
				}
				fmt.Fprint(w, `{"status":"updated"}`)
				return
			}
		}
	case method == http.MethodPost && p == "/api/bank-accounts":
		params := f.params(r.Method, r.RequestURI, r.Header, body)
		sup, _ := params["supplier"].(string)
		iban, _ := params["iban"].(string)
		e.mu.Lock()
		defer e.mu.Unlock()
		for id := range e.suppliers {
			if strings.EqualFold(id, sup) && iban != "" {
				e.suppliers[id] = iban
				w.WriteHeader(http.StatusCreated)
				fmt.Fprint(w, `{"status":"created"}`)
				return
			}
		}
	case method == http.MethodPost || method == http.MethodGet && strings.HasPrefix(p, "/api/payments/quick"):
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"status":"paid"}`)
		return
	}
	http.NotFound(w, r)
}

// paymentsMade lists, for every request received, what each flavour would
// have paid.
func (e *attackERP) paymentsMade() []erpPayment {
	e.mu.Lock()
	reqs := append([]erpRequest(nil), e.requests...)
	e.mu.Unlock()
	var out []erpPayment
	for i, r := range reqs {
		if r.Header.Get("Authorization") != erpToken {
			continue
		}
		for _, f := range erpFlavours {
			for _, p := range f.payments(r) {
				p.Req = i
				out = append(out, p)
			}
		}
	}
	return out
}

func (e *attackERP) received() []erpRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]erpRequest(nil), e.requests...)
}

// payments is what f would pay for r: nothing unless r reaches a payment
// endpoint under f's routing.
func (f erpFlavour) payments(r erpRequest) []erpPayment {
	method, p := f.route(r.Method, r.URI, r.Header, r.Body)
	var op string
	switch {
	case method == http.MethodPost && p == "/api/payments":
		op = "payment"
	case method == http.MethodPost && p == "/api/transfers":
		op = "transfer"
	case method == http.MethodPost && p == "/api/form-payments":
		op = "form-payment"
	case method == http.MethodPost && p == "/api/payments/batch":
		op = "batch"
	case method == http.MethodPost && p == "/api/refunds":
		op = "refund"
	case method == http.MethodGet && p == "/api/payments/quick":
		op = "quick"
	default:
		return nil
	}
	params := f.params(r.Method, r.URI, r.Header, r.Body)
	if params == nil {
		return nil
	}
	one := func(m any) *erpPayment {
		obj, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		return &erpPayment{Flavour: f.name, Op: op, Invoice: paramText(f.field(obj, "invoice")), IBAN: paramText(f.field(obj, "iban")), Amount: paramText(f.field(obj, "amount"))}
	}
	var out []erpPayment
	switch op {
	case "transfer":
		if p := one(f.field(params, "transfer")); p != nil {
			out = append(out, *p)
		}
	case "batch":
		list, _ := f.field(params, "payments").([]any)
		for _, m := range list {
			if p := one(m); p != nil {
				out = append(out, *p)
			}
		}
	default:
		if p := one(params); p != nil {
			out = append(out, *p)
		}
	}
	return out
}

func paramText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return string(x)
	case []any:
		if len(x) > 0 {
			return paramText(x[len(x)-1]) // frameworks that take an array's last value
		}
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// field reads a field as f matches names.
func (f erpFlavour) field(obj map[string]any, name string) any {
	if v, ok := obj[name]; ok && !f.foldFields {
		return v
	}
	if !f.foldFields {
		return nil
	}
	var got any
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.EqualFold(k, name) || strings.EqualFold(strings.NewReplacer("ı", "i", "ſ", "s", "K", "k").Replace(k), name) {
			got = obj[k]
		}
	}
	return got
}

// route returns the method and path f dispatches r on, after f's own
// reading of the path.
func (f erpFlavour) route(method, uri string, h http.Header, body []byte) (string, string) {
	raw, query, _ := strings.Cut(uri, "?")
	raw, _, _ = strings.Cut(raw, "#")
	if f.backslash {
		raw = strings.ReplaceAll(raw, "\\", "/")
		raw = strings.ReplaceAll(strings.ReplaceAll(raw, "%5C", "/"), "%5c", "/")
	}
	p, err := url.PathUnescape(raw)
	if err != nil {
		return method, raw
	}
	if f.doubleDecode {
		if q, err := url.PathUnescape(p); err == nil {
			p = q
		}
		p = strings.ReplaceAll(p, "\\", "/")
	}
	segs := strings.Split(p, "/")
	for i := range segs {
		if f.matrix {
			segs[i], _, _ = strings.Cut(segs[i], ";")
		}
		if f.trimDots && segs[i] != "." && segs[i] != ".." {
			segs[i] = strings.TrimRight(segs[i], ". ")
		}
	}
	p = strings.Join(segs, "/")
	if f.nfkc {
		p = norm.NFKC.String(p)
	}
	if f.trailingSlash || f.backslash || f.doubleDecode {
		p = path.Clean("/" + p)
	}
	if f.trailingSlash {
		p = strings.TrimSuffix(p, "/")
	}
	if f.formatSuffix {
		if i := strings.LastIndexByte(p, '.'); i > strings.LastIndexByte(p, '/') {
			p = p[:i]
		}
	}
	if f.foldCase {
		p = strings.ToLower(p)
	}
	m := strings.ToUpper(method)
	if m == http.MethodPost {
		if f.overrideHeader {
			for k, v := range h {
				if strings.EqualFold(strings.ReplaceAll(k, "_", "-"), "X-Http-Method-Override") && len(v) > 0 {
					m = strings.ToUpper(v[0])
				}
			}
		}
		if f.overrideParam {
			qv, _ := pairs(query)
			fv, _ := f.formValues(h, body)
			for _, kv := range append(qv, fv...) {
				if kv[0] == "_method" && kv[1] != "" {
					m = strings.ToUpper(kv[1])
				}
			}
		}
	}
	return m, p
}

func (f erpFlavour) isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	for _, t := range f.jsonTypes {
		if t == mt || t == "+json" && strings.HasSuffix(mt, "+json") {
			return true
		}
	}
	return false
}

// decodedBody is the body after Content-Encoding, if f inflates.
func (f erpFlavour) decodedBody(h http.Header, body []byte) []byte {
	if !f.inflate {
		return body
	}
	var r io.Reader
	switch strings.ToLower(strings.TrimSpace(h.Get("Content-Encoding"))) {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil
		}
		r = zr
	case "deflate":
		zr, err := zlib.NewReader(bytes.NewReader(body))
		if err != nil {
			r = flate.NewReader(bytes.NewReader(body))
		} else {
			r = zr
		}
	default:
		return body
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil
	}
	return b
}

// formValues reads a form or multipart body, in order.
func (f erpFlavour) formValues(h http.Header, body []byte) ([][2]string, bool) {
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return nil, false
	}
	body = f.decodedBody(h, body)
	switch mt {
	case "application/x-www-form-urlencoded":
		return pairs(string(body))
	case "multipart/form-data":
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		var out [][2]string
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				return out, true
			}
			if err != nil {
				return nil, false
			}
			b, _ := io.ReadAll(part)
			out = append(out, [2]string{part.FormName(), string(b)})
		}
	}
	return nil, false
}

// params returns the request's parameters as f's application sees them.
func (f erpFlavour) params(method, uri string, h http.Header, body []byte) map[string]any {
	_, rawQuery, _ := strings.Cut(uri, "?")
	qv, _ := pairs(rawQuery)
	query := f.nest(qv)
	var fromBody map[string]any
	switch {
	case f.isJSON(h.Get("Content-Type")):
		b := f.decodedBody(h, body)
		if b == nil {
			return nil
		}
		v, ok := f.decodeJSON(b)
		if !ok {
			return nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		fromBody = m
	default:
		if fv, ok := f.formValues(h, body); ok {
			fromBody = f.nest(fv)
		}
	}
	out := map[string]any{}
	switch f.merge {
	case "body":
		for k, v := range fromBody {
			out[k] = v
		}
	case "query-wins":
		for k, v := range fromBody {
			out[k] = v
		}
		for k, v := range query {
			out[k] = v
		}
	case "body-wins":
		for k, v := range query {
			out[k] = v
		}
		for k, v := range fromBody {
			out[k] = v
		}
	case "query-first":
		for k, v := range fromBody {
			out[k] = v
		}
		for k, v := range query {
			if _, isJSON := h["Content-Type"]; isJSON && f.isJSON(h.Get("Content-Type")) {
				break // @RequestBody reads only the body
			}
			out[k] = v
		}
	}
	return out
}

// pairs reads a query or form body in order, as servers do; ok is false
// for text url.ParseQuery refuses.
func pairs(raw string) ([][2]string, bool) {
	if _, err := url.ParseQuery(raw); err != nil {
		return nil, false
	}
	var out [][2]string
	for _, kv := range strings.Split(raw, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		k, _ = url.QueryUnescape(k)
		v, _ = url.QueryUnescape(v)
		out = append(out, [2]string{k, v})
	}
	return out, true
}

// nest turns form or query pairs into parameters by f's names, in order:
// a later name wins (the first, for query-first).
func (f erpFlavour) nest(kvs [][2]string) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		k, v := kv[0], kv[1]
		var segs []string
		switch f.names {
		case "flat":
			segs = []string{k}
		case "brackets":
			segs = bracketPath(k)
		case "dots":
			segs = strings.FieldsFunc(k, func(r rune) bool { return r == '.' || r == '[' || r == ']' })
		case "php":
			segs = phpPath(k)
		}
		if len(segs) == 0 {
			continue
		}
		if f.merge == "query-first" && hasPath(out, segs) {
			continue
		}
		setPath(out, segs, v)
	}
	return out
}

func hasPath(m map[string]any, segs []string) bool {
	v, ok := m[segs[0]]
	if !ok || len(segs) == 1 {
		return ok
	}
	sub, isMap := v.(map[string]any)
	return !isMap || hasPath(sub, segs[1:])
}

func bracketPath(k string) []string {
	root, rest, ok := strings.Cut(k, "[")
	segs := []string{root}
	for ok {
		var part string
		part, rest, ok = strings.Cut(rest, "]")
		if !ok {
			break
		}
		segs = append(segs, part)
		rest, ok = strings.CutPrefix(rest, "[")
	}
	return segs
}

func phpPath(k string) []string {
	k = strings.TrimLeft(k, " ")
	if i := strings.IndexByte(k, 0); i >= 0 {
		k = k[:i]
	}
	root, rest, hasBracket := strings.Cut(k, "[")
	if hasBracket && !strings.Contains(rest, "]") {
		root, rest, hasBracket = root+"_"+rest, "", false
	}
	root = strings.NewReplacer(" ", "_", ".", "_").Replace(root)
	if !hasBracket {
		return []string{root}
	}
	return bracketPath(root + "[" + rest)
}

// setPath sets a nested parameter; "" appends to a list.
func setPath(m map[string]any, segs []string, v any) {
	k := segs[0]
	if len(segs) == 1 {
		m[k] = v
		return
	}
	if segs[1] == "" {
		list, _ := m[k].([]any)
		m[k] = append(list, v)
		return
	}
	sub, ok := m[k].(map[string]any)
	if !ok {
		sub = map[string]any{}
		m[k] = sub
	}
	setPath(sub, segs[1:], v)
}

// decodeJSON reads a JSON body as f's parser does: numbers kept as
// written, a key twice resolved first- or last-wins (or refused).
func (f erpFlavour) decodeJSON(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := f.value(dec)
	if err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

func (f erpFlavour) value(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch d := t.(type) {
	case json.Delim:
		switch d {
		case '{':
			m := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := f.value(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := m[k]; dup {
					if f.rejectDups {
						return nil, fmt.Errorf("duplicate key")
					}
					if f.firstWins {
						continue
					}
				}
				m[k] = v
			}
			_, err := dec.Token()
			return m, err
		case '[':
			var l []any
			for dec.More() {
				v, err := f.value(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token()
			return l, err
		}
	}
	return t, nil
}

// amountOver reports whether amount (as a server would parse it: a
// decimal, a leading "+" and surrounding spaces allowed) is above limit;
// an amount no server would read is not a payment.
func amountOver(amount, limit string) bool {
	a, ok := new(big.Rat).SetString(strings.TrimPrefix(strings.TrimSpace(amount), "+"))
	if !ok {
		return false
	}
	l, _ := new(big.Rat).SetString(limit)
	return a.Cmp(l) > 0
}

func addDec(a, b string) string {
	x, _ := new(big.Rat).SetString(a)
	y, ok := new(big.Rat).SetString(strings.TrimPrefix(strings.TrimSpace(b), "+"))
	if !ok {
		return a
	}
	return x.Add(x, y).FloatString(10)
}

func normIBAN(s string) string {
	return strings.ToUpper(strings.Map(func(r rune) rune {
		if r == ' ' || r == '\u200b' || r == '\u00a0' || r == '-' {
			return -1
		}
		return r
	}, norm.NFKC.String(s)))
}
