package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// The attack payments (issue 13's held-out suite, written by its
// attacker): the built binary in strict mode with a catalogue, grounding
// rules and a policy a deployment would write, a loopback ERP read by
// several flavours of common servers at once (attack_erp_test.go), and two
// declared agents, one shipped and one model. Each attack is tried by each
// agent in a run of its own whose invoice and supplier were read first.
// What is asserted is what the ERP received: no flavour would ever pay the
// attacker's IBAN or more than an invoice's amount due (also over several
// payments), nor refund more than the scope limit, and every payment that
// reached the ERP is allowed in the journal and cites its records.

const attackProviders = `providers:
  - name: erp
    base_url: %[1]s/api
    auth: {type: bearer}
    idempotency_header: Idempotency-Key
    headers_allowed: [Accept]
    path_case: insensitive
  - name: erp2
    base_url: %[1]s/api
    auth: {type: bearer}
    headers_allowed: [Accept]
integrations:
  - name: erp.read
    provider: erp
    effect: read
    origin: shipped
    operations:
      - {method: GET, template: "/invoices/{id}"}
      - {method: GET, template: "/suppliers/{id}"}
  - name: erp.pay
    provider: erp
    effect: write
    origin: shipped
    operations:
      - {method: POST, template: /payments}
      - {method: POST, template: /transfers}
      - {method: POST, template: /form-payments}
      - {method: POST, template: /payments/batch}
      - {method: POST, template: /refunds}
  - name: erp.suppliers
    provider: erp
    effect: write
    origin: shipped
    operations:
      - {method: PUT, template: "/suppliers/{id}"}
      - {method: POST, template: /bank-accounts}
  - {name: erp2.read, provider: erp2, effect: read, origin: shipped, operations: [{method: GET, template: "/suppliers/{id}"}, {method: GET, template: "/invoices/{id}"}]}
  - {name: erp2.suppliers, provider: erp2, effect: write, origin: shipped, operations: [{method: PUT, template: "/suppliers/{id}"}]}
  - {name: erp2.pay, provider: erp2, effect: write, origin: shipped, operations: [{method: POST, template: /payments}]}
`

const attackGrounding = `grounding:
  - name: supplier-payment
    match: {provider: erp, method: POST, path: /api/payments}
    bind:
      - {name: invoice, read: {provider: erp, path: "/api/invoices/{id}"}, where: {id: request.json.invoice}}
      - {name: supplier, read: {provider: erp, path: "/api/suppliers/{id}"}, where: {id: invoice.supplier_id}}
    require:
      - {field: request.json.iban, equals: supplier.iban, as: iban}
      - {field: request.json.amount, at_most: invoice.amount_due, as: money}
      - {field: request.json.amount, at_least: 0.01, as: money}
      - {field: request.json.remittance_email, equals: supplier.email, as: email}
    other_fields: deny
  - name: transfer
    match: {provider: erp, method: POST, path: /api/transfers}
    bind:
      - {name: invoice, read: {provider: erp, path: "/api/invoices/{id}"}, where: {id: request.json.transfer.invoice}}
      - {name: supplier, read: {provider: erp, path: "/api/suppliers/{id}"}, where: {id: invoice.supplier_id}}
    require:
      - {field: request.json.transfer.iban, equals: supplier.iban, as: iban}
      - {field: request.json.transfer.amount, at_most: invoice.amount_due, as: money}
  - name: form-payment
    match: {provider: erp, method: POST, path: /api/form-payments}
    bind:
      - {name: invoice, read: {provider: erp, path: "/api/invoices/{id}"}, where: {id: request.form.invoice}}
      - {name: supplier, read: {provider: erp, path: "/api/suppliers/{id}"}, where: {id: invoice.supplier_id}}
    require:
      - {field: request.form.iban, equals: supplier.iban, as: iban}
      - {field: request.form.amount, at_most: invoice.amount_due, as: money}
  - name: batch-payment
    match: {provider: erp, method: POST, path: /api/payments/batch}
    bind:
      - {name: invoice, read: {provider: erp, path: "/api/invoices/{id}"}, where: {id: "request.json.payments[0].invoice"}}
      - {name: supplier, read: {provider: erp, path: "/api/suppliers/{id}"}, where: {id: invoice.supplier_id}}
    require:
      - {field: "request.json.payments[0].iban", equals: supplier.iban, as: iban}
      - {field: "request.json.payments[0].amount", at_most: invoice.amount_due, as: money}
`

const attackPolicy = `rules:
  - name: reviewed-client
    decision: allow
    match: {provider: erp, method: POST, code_origin: shipped}
effects:
  - name: no-quick-payments
    decision: deny
    match: {sink: provider, target: "**/api/payments/quick"}
scopes:
  require:
    - scope: payments.write
      match: {provider: [erp, erp2], method: POST, path: /api/payments}
      limits: {amount: "5000"}
    - scope: refunds.write
      match: {provider: erp, method: POST, path: /api/refunds}
      limits: {amount: "` + refundLimitStr + `"}
agents:
  - name: clerk
  - name: llm
`

// payEnv is the running serve, its ERP and its clients.
type payEnv struct {
	t      *testing.T
	erp    *attackERP
	dir    string
	data   string
	app    *client.Client
	agents map[string]*client.Client
	// attackOf maps each request the ERP received to the attack that sent it.
	mu       sync.Mutex
	attackOf map[int]string
	// sent counts the calls Gatehouse allowed and sent (answered, or
	// failed at the provider).
	sent atomic.Int64
	js   jetstream.JetStream
}

func startPayEnv(t *testing.T) *payEnv {
	t.Helper()
	e := &payEnv{t: t, erp: newAttackERP(), dir: t.TempDir(), agents: map[string]*client.Client{}, attackOf: map[int]string{}}
	srv := httptest.NewServer(e.erp)
	t.Cleanup(srv.Close)
	e.data = filepath.Join(e.dir, ".gatehouse")
	files := map[string]string{
		"providers.yaml":   fmt.Sprintf(attackProviders, srv.URL),
		"grounding.yaml":   attackGrounding,
		"policy.yaml":      attackPolicy,
		"credentials.yaml": "credentials:\n  - {tenant: acme, person: ada, provider: erp, token: tok-ada-example}\n  - {tenant: acme, person: ada, provider: erp2, token: tok-ada-example}\n",
	}
	for name, text := range files {
		must(t, os.WriteFile(filepath.Join(e.dir, name), []byte(text), 0o600))
	}
	if r := ghAt(t, e.dir, "policy", "check", "--policy", "policy.yaml", "--providers", "providers.yaml", "--grounding", "grounding.yaml"); r.code != 0 {
		t.Fatalf("policy check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, a := range [][]string{{"agents", "add", "clerk", "--origin", "shipped"}, {"agents", "add", "llm"}} {
		if r := ghAt(t, e.dir, a...); r.code != 0 {
			t.Fatalf("%v: %d %s%s", a, r.code, r.stdout, r.stderr)
		}
	}
	s := serve(t, e.data, "--mode", "strict", "--policy", filepath.Join(e.dir, "policy.yaml"),
		"--providers", filepath.Join(e.dir, "providers.yaml"), "--grounding", filepath.Join(e.dir, "grounding.yaml"),
		"--credentials", filepath.Join(e.dir, "credentials.yaml"))
	op, err := nats.Connect(s.ep.NATSURL, seedOpt(t, embedded.CredsPath(filepath.Join(e.data, "nats"), embedded.RoleBroker)))
	must(t, err)
	t.Cleanup(op.Close)
	e.js, err = jetstream.New(op)
	must(t, err)
	e.app, err = client.Dial(s.ep.NATSURL, client.App, s.ep.AppCreds)
	must(t, err)
	t.Cleanup(e.app.Close)
	for _, name := range []string{"clerk", "llm"} {
		c, err := client.DialAgent(s.ep.NATSURL, name, embedded.AgentCredsPath(filepath.Join(e.data, "nats"), name))
		must(t, err)
		t.Cleanup(c.Close)
		e.agents[name] = c
	}
	return e
}

func (e *payEnv) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	e.t.Cleanup(cancel)
	return ctx
}

// open opens work for ada at acme, bound to agent.
func (e *payEnv) open(t *testing.T, agent string) string {
	t.Helper()
	run, err := e.app.OpenWork(e.ctx(), broker.OpenWork{Tenant: "acme", Person: "ada", Agent: agent,
		Scopes: []string{"payments.write", "refunds.write"}})
	must(t, err)
	return run
}

// call proposes one provider call as agent in run; params is a map or raw
// JSON text.
func (e *payEnv) call(t *testing.T, agent, run string, params any) *broker.EffectReply {
	t.Helper()
	var raw json.RawMessage
	switch p := params.(type) {
	case string:
		raw = json.RawMessage(p)
	default:
		b, err := json.Marshal(p)
		must(t, err)
		raw = b
	}
	reply, err := e.agents[agent].Effect(e.ctx(), policy.SinkProvider, broker.EffectRequest{Run: run, Action: "call", Params: raw})
	if reply == nil {
		t.Fatalf("no reply: %v", err)
	}
	if reply.Decision != nil && reply.Decision.Outcome == journal.OutcomeAllowed && reply.Outcome != nil && (reply.Outcome.Status == "ok" || reply.Outcome.Error == "http-status") {
		e.sent.Add(1)
	}
	return reply
}

// read reads one record as agent (must be allowed).
func (e *payEnv) read(t *testing.T, agent, run, p string) {
	t.Helper()
	r := e.call(t, agent, run, map[string]any{"provider": "erp", "method": "GET", "path": p, "atom": "erp.read"})
	if r.Decision == nil || r.Decision.Outcome != journal.OutcomeAllowed || r.Outcome == nil || r.Outcome.Status != "ok" {
		t.Fatalf("reading %s: %+v %+v %v", p, r.Decision, r.Outcome, r.Error)
	}
}

// readBoth reads INV-7 and its supplier S-1.
func (e *payEnv) readBoth(t *testing.T, agent, run string) {
	e.read(t, agent, run, "/invoices/INV-7")
	e.read(t, agent, run, "/suppliers/S-1")
}

func outcomeOf(r *broker.EffectReply) string {
	switch {
	case r.Error != nil && r.Decision == nil:
		return string(r.Error.Code)
	case r.Decision == nil:
		return "no decision"
	case r.Decision.Outcome == journal.OutcomeAllowed:
		if r.Outcome != nil && r.Outcome.Status != "ok" {
			return "allowed, " + r.Outcome.Status + " " + r.Outcome.Error
		}
		return "allowed"
	}
	var names []string
	for _, rs := range r.Decision.Reasons {
		if rs.Enforced {
			names = append(names, string(rs.Refusal))
		}
	}
	return string(r.Decision.Outcome) + " " + strings.Join(names, ",")
}

// payAttack is one attempt; do runs it as agent in a fresh run whose
// invoice and supplier were read (unless noRead), returning the replies of
// the attack's own calls.
type payAttack struct {
	name   string
	noRead bool
	do     func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply
	// want, when set, is the outcome of the attack's last call.
	want string
}

func pay(params any) func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
	return func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
		return []*broker.EffectReply{e.call(t, agent, run, params)}
	}
}

func evilPay(mut func(p map[string]any)) map[string]any {
	p := attackPayment("POST", "/payments", payBody(attackerIBAN, invoiceDue, "ap@acme.example"))
	if mut != nil {
		mut(p)
	}
	return p
}

func goodPay(mut func(p map[string]any)) map[string]any {
	p := attackPayment("POST", "/payments", payBody(supplierIBAN, invoiceDue, "ap@acme.example"))
	if mut != nil {
		mut(p)
	}
	return p
}

func rawPay(path, body string) string {
	return fmt.Sprintf(`{"provider":"erp","method":"POST","path":%q,"atom":"erp.pay","body":%s}`, path, body)
}

func formCall(path, form string, mut func(p map[string]any)) map[string]any {
	p := map[string]any{"provider": "erp", "method": "POST", "path": path, "atom": "erp.pay",
		"content_type": "application/x-www-form-urlencoded", "body_base64": base64.StdEncoding.EncodeToString([]byte(form))}
	if mut != nil {
		mut(p)
	}
	return p
}

func gzipped(s string, comment string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Comment = comment
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return b.Bytes()
}

func multipartBody(fields [][2]string) (string, []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range fields {
		_ = mw.WriteField(f[0], f[1])
	}
	_ = mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

const goodForm = "invoice=INV-7&iban=" + supplierIBAN + "&amount=" + invoiceDue

func goodTransfer() map[string]any {
	return map[string]any{"transfer": map[string]any{"invoice": "INV-7", "iban": supplierIBAN, "amount": invoiceDue}}
}

func paymentAttacks() []payAttack {
	var out []payAttack
	add := func(name string, params any) { out = append(out, payAttack{name: name, do: pay(params)}) }
	// Path spellings of POST /payments with the attacker's IBAN.
	for _, p := range []string{
		"/payments/", "/Payments", "payments", "/pay%6Dents", "/%70%61%79%6d%65%6e%74%73", "/PAYMENTS",
		"/payments.json", "/payments.", "/payments%20", "/payments%2e", "/payments%2Ejson", "/payments.%6Ason",
		"/payments%3Fx", "/payments%23", "/payments?x=1", "/payments#x",
		"/%2e%2e/api/payments", "/x/%2e%2e/payments", "/x/.%2e/payments", "/x/%c0%ae%c0%ae/payments", "/x/%u002e%u002e/payments",
		"/x%c0%afpayments", "/x%e0%80%afpayments", "/x%ef%bc%8fpayments", "/x%2fpayments", "/x%5cpayments",
		"//payments", "/./payments", "/payments//", "/payments/.", "/payments/x/..", "\\payments", "/x\\..\\payments",
		"/p\u0430yments", "/paymentſ", "/payment\u0455", "/\uff50ayments", "/pay\u00adments", "/payments\u200b", "/pay\u0307ments", "/payments\u3000",
		"/payments%00", "/payments%0a", "/payments%09", "/payments%ff", "/payments%252e", "/api/payments", "/../payments",
		"/payments;", "/payments;x", "/payments;.json", "/payments+", "/%20/payments", "/payments%3F/x", "/payments%E2%80%A8", "/...%20/payments",
	} {
		add("path "+p, evilPay(func(m map[string]any) { m["path"] = p }))
		add("path without atom "+p, evilPay(func(m map[string]any) { m["path"] = p; delete(m, "atom") }))
	}
	for _, m := range []string{"PUT", "PATCH", "post", "Post", "GET", "DELETE", "POST ", "OPTIONS"} {
		add("method "+m, evilPay(func(p map[string]any) { p["method"] = m }))
	}
	for _, h := range []string{"X-HTTP-Method-Override", "X_HTTP_METHOD_OVERRIDE", "X-Original-URL", "X-Rewrite-URL", "Content-Type", "Content-Encoding",
		"Transfer-Encoding", "Host", "X-Forwarded-Prefix", "X-HTTP-Method", "accept"} {
		add("header "+h, evilPay(func(p map[string]any) { p["headers"] = map[string]string{h: "PUT"} }))
	}
	add("two Accept headers", evilPay(func(p map[string]any) { p["headers"] = map[string]string{"Accept": "a/b", "accept": "c/d"} }))
	// Bodies of /payments (other_fields: deny).
	good := `"invoice":"INV-7","amount":"1200.00","remittance_email":"ap@acme.example"`
	for name, body := range map[string]string{
		"IBAN only in capitals":         `{` + good + `,"IBAN":"` + attackerIBAN + `"}`,
		"iban and IBAN":                 `{` + good + `,"iban":"` + supplierIBAN + `","IBAN":"` + attackerIBAN + `"}`,
		"iban and dotless ıban":         `{` + good + `,"iban":"` + supplierIBAN + `","ıban":"` + attackerIBAN + `"}`,
		"iban and escaped iban":         `{` + good + `,"iban":"` + supplierIBAN + `","\u0069ban":"` + attackerIBAN + `"}`,
		"iban and iban NUL":             `{` + good + `,"iban":"` + supplierIBAN + `","iban\u0000":"` + attackerIBAN + `"}`,
		"iban and fullwidth iban":       `{` + good + `,"iban":"` + supplierIBAN + `","ｉban":"` + attackerIBAN + `"}`,
		"iban and iban with a space":    `{` + good + `,"iban":"` + supplierIBAN + `","iban ":"` + attackerIBAN + `"}`,
		"array body":                    `[{` + good + `,"iban":"` + attackerIBAN + `"}]`,
		"amount 1200.001":               `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":"1200.001","remittance_email":"ap@acme.example"}`,
		"amount 1200.00000000000000001": `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":1200.00000000000000001,"remittance_email":"ap@acme.example"}`,
		"amount 1.2e3":                  `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":1.2e3,"remittance_email":"ap@acme.example"}`,
		"amount 1.3e3 string":           `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":"1.3e3","remittance_email":"ap@acme.example"}`,
		"amount +1300":                  `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":"+1300","remittance_email":"ap@acme.example"}`,
		"amount 01300":                  `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":"01300","remittance_email":"ap@acme.example"}`,
		"amount 0x514":                  `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":"0x514","remittance_email":"ap@acme.example"}`,
		"amount 1,300.00":               `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":"1,300.00","remittance_email":"ap@acme.example"}`,
		"amount NaN":                    `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":"NaN","remittance_email":"ap@acme.example"}`,
		"amount Infinity":               `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":"Infinity","remittance_email":"ap@acme.example"}`,
		"amount -0":                     `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":-0,"remittance_email":"ap@acme.example"}`,
		"amount with a space":           `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":" 1300","remittance_email":"ap@acme.example"}`,
		"amount arabic digits":          `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":"١٣٠٠","remittance_email":"ap@acme.example"}`,
		"amount in an array":            `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":["1200.00","1300"],"remittance_email":"ap@acme.example"}`,
		"amount as an object":           `{"invoice":"INV-7","iban":"` + supplierIBAN + `","amount":{"value":"1300"},"remittance_email":"ap@acme.example"}`,
		"currency JPY":                  `{` + good + `,"iban":"` + supplierIBAN + `","currency":"JPY"}`,
		"iban lower case with spaces":   `{` + good + `,"iban":"nl91 abna 0417 1643 00"}`,
		"attacker iban lower case":      `{` + good + `,"iban":"gb82 west 1234 5698 7654 32"}`,
		"iban with a zero-width space":  `{` + good + `,"iban":"NL91ABNA0417\u200b164300"}`,
		"iban with a Cyrillic A":        `{` + good + `,"iban":"NL91\u0410BNA0417164300"}`,
		"iban fullwidth":                `{` + good + `,"iban":"ＮＬ91ABNA0417164300"}`,
		"iban as an array":              `{` + good + `,"iban":["` + supplierIBAN + `","` + attackerIBAN + `"]}`,
		"invoice INV-8 with S-1's IBAN": `{"invoice":"INV-8","iban":"` + supplierIBAN + `","amount":"50.00","remittance_email":"ap@acme.example"}`,
		"invoice as a number":           `{"invoice":7,"iban":"` + supplierIBAN + `","amount":"1200.00","remittance_email":"ap@acme.example"}`,
		"invoice lower case":            `{"invoice":"inv-7","iban":"` + attackerIBAN + `","amount":"1200.00","remittance_email":"ap@acme.example"}`,
		"invoice as an array":           `{"invoice":["INV-7"],"iban":"` + supplierIBAN + `","amount":"1200.00","remittance_email":"ap@acme.example"}`,
		"_method in the body":           `{` + good + `,"iban":"` + supplierIBAN + `","_METHOD":"PUT"}`,
	} {
		add("body "+name, rawPay("/payments", body))
	}
	add("iban in the query", goodPay(func(p map[string]any) { p["query"] = map[string][]string{"iban": {attackerIBAN}} }))
	add("IBAN in the query", goodPay(func(p map[string]any) { p["query"] = map[string][]string{"IBAN": {attackerIBAN}} }))
	add("iban[] in the query", goodPay(func(p map[string]any) { p["query"] = map[string][]string{"iban[]": {attackerIBAN}} }))
	add("_method in the query", goodPay(func(p map[string]any) { p["query"] = map[string][]string{"_METHOD": {"PUT"}} }))
	add("charset latin1", goodPay(func(p map[string]any) { p["content_type"] = "application/json; charset=iso-8859-1" }))
	add("content type +json", goodPay(func(p map[string]any) { p["content_type"] = "application/vnd.erp+json" }))
	add("text/x-json body", map[string]any{"provider": "erp", "method": "POST", "path": "/payments", "atom": "erp.pay", "content_type": "text/x-json",
		"body_base64": base64.StdEncoding.EncodeToString([]byte(`{"invoice":"INV-7","iban":"` + attackerIBAN + `","amount":"1200.00","remittance_email":"ap@acme.example"}`))})
	add("form body on the JSON endpoint", formCall("/payments", "invoice=INV-7&iban="+attackerIBAN+"&amount=1200.00&remittance_email=ap%40acme.example", nil))
	add("operation_id of another effect", goodPay(func(p map[string]any) { p["operation_id"] = "e_01abcdefghijklmnopqrstuvwx" }))

	// Nested transfers (other_fields: allow).
	tr := func(name string, body any, mut func(p map[string]any)) {
		p := map[string]any{"provider": "erp", "method": "POST", "path": "/transfers", "atom": "erp.pay", "body": body}
		if mut != nil {
			mut(p)
		}
		add("transfer "+name, p)
	}
	tr("transfer[iban] in the query", goodTransfer(), func(p map[string]any) {
		p["query"] = map[string][]string{"transfer[iban]": {attackerIBAN}, "transfer[amount]": {invoiceDue}, "transfer[invoice]": {"INV-7"}}
	})
	tr("transfer.iban in the query", goodTransfer(), func(p map[string]any) { p["query"] = map[string][]string{"transfer.iban": {attackerIBAN}} })
	tr("Transfer and transfer", json.RawMessage(`{"transfer":{"invoice":"INV-7","iban":"`+supplierIBAN+`","amount":"1200.00"},"Transfer":{"invoice":"INV-7","iban":"`+attackerIBAN+`","amount":"1200.00"}}`), nil)
	tr("iban and IBAN inside", json.RawMessage(`{"transfer":{"invoice":"INV-7","iban":"`+supplierIBAN+`","IBAN":"`+attackerIBAN+`","amount":"1200.00"}}`), nil)
	tr("a list of transfers", json.RawMessage(`{"transfer":[{"invoice":"INV-7","iban":"`+attackerIBAN+`","amount":"1200.00"}]}`), nil)

	// Form payments (other_fields: allow).
	add("form good and attacker iban twice", formCall("/form-payments", goodForm+"&iban="+attackerIBAN, nil))
	add("form IBAN", formCall("/form-payments", goodForm+"&IBAN="+attackerIBAN, nil))
	add("form leading space", formCall("/form-payments", goodForm+"&+iban="+attackerIBAN, nil))
	add("form leading %20", formCall("/form-payments", goodForm+"&%20iban="+attackerIBAN, nil))
	add("form iban[]", formCall("/form-payments", goodForm+"&iban[]="+attackerIBAN, nil))
	add("form iban.", formCall("/form-payments", goodForm+"&iban.="+attackerIBAN, nil))
	add("form iban NUL", formCall("/form-payments", goodForm+"&iban%00x="+attackerIBAN, nil))
	add("form ; separator", formCall("/form-payments", goodForm+";iban="+attackerIBAN, nil))
	add("form _method", formCall("/form-payments", goodForm+"&_method=PUT", nil))
	add("form iban[] in the query", formCall("/form-payments", goodForm, func(p map[string]any) { p["query"] = map[string][]string{"iban[]": {attackerIBAN}} }))
	add("form IBAN in the query", formCall("/form-payments", goodForm, func(p map[string]any) { p["query"] = map[string][]string{"IBAN": {attackerIBAN}} }))
	add("form amount 1300 leading space", formCall("/form-payments", goodForm+"&%20amount=1300", nil))
	ct, mp := multipartBody([][2]string{{"invoice", "INV-7"}, {"iban", attackerIBAN}, {"amount", invoiceDue}})
	add("multipart form", map[string]any{"provider": "erp", "method": "POST", "path": "/form-payments", "atom": "erp.pay", "content_type": ct, "body_base64": base64.StdEncoding.EncodeToString(mp)})
	add("form charset utf-16", formCall("/form-payments", goodForm, func(p map[string]any) { p["content_type"] = "application/x-www-form-urlencoded; charset=utf-16" }))
	// A gzip body whose header comment is the grounded form and whose data is the attacker's.
	add("gzip form with Content-Encoding", formCall("/form-payments", string(gzipped("invoice=INV-7&iban="+attackerIBAN+"&amount=1200.00", "&"+goodForm+"&x=")),
		func(p map[string]any) { p["headers"] = map[string]string{"Content-Encoding": "gzip"} }))

	// Batches (other_fields: allow): the rule checks the first element.
	add("batch of the grounded payment and the attacker's", rawPay("/payments/batch",
		`{"payments":[{"invoice":"INV-7","iban":"`+supplierIBAN+`","amount":"1200.00"},{"invoice":"INV-7","iban":"`+attackerIBAN+`","amount":"1200.00"}]}`))
	add("batch paying the invoice twice", rawPay("/payments/batch",
		`{"payments":[{"invoice":"INV-7","iban":"`+supplierIBAN+`","amount":"1200.00"},{"invoice":"INV-7","iban":"`+supplierIBAN+`","amount":"1200.00"}]}`))

	// Refunds: a scope limit of 100 and no grounding.
	ref := func(name string, p any) { add("refund "+name, p) }
	refJSON := func(body string) string {
		return fmt.Sprintf(`{"provider":"erp","method":"POST","path":"/refunds","atom":"erp.pay","body":%s}`, body)
	}
	ref("over the limit", refJSON(`{"amount":"99999"}`))
	ref("Amount and amount", refJSON(`{"amount":"50","Amount":"99999"}`))
	ref("amount 1e5", refJSON(`{"amount":1e5}`))
	ref("amount[] in the query", map[string]any{"provider": "erp", "method": "POST", "path": "/refunds", "atom": "erp.pay", "body": map[string]any{"amount": "50"}, "query": map[string][]string{"amount[]": {"99999"}}})
	ref("amount in the query", map[string]any{"provider": "erp", "method": "POST", "path": "/refunds", "atom": "erp.pay", "body": map[string]any{"amount": "50"}, "query": map[string][]string{"Amount": {"99999"}}})
	ref("form leading space", formCall("/refunds", "amount=50&%20amount=99999", nil))
	ref("form amount[]", formCall("/refunds", "amount=50&amount[]=99999", nil))
	ref("form amount.", formCall("/refunds", "amount=50&amount.=99999", nil))
	ctr, mpr := multipartBody([][2]string{{"amount", "99999"}})
	ref("multipart", map[string]any{"provider": "erp", "method": "POST", "path": "/refunds", "atom": "erp.pay", "content_type": ctr, "body_base64": base64.StdEncoding.EncodeToString(mpr)})
	ref("text/x-json", map[string]any{"provider": "erp", "method": "POST", "path": "/refunds", "atom": "erp.pay", "content_type": "text/x-json",
		"body_base64": base64.StdEncoding.EncodeToString([]byte(`{"amount":"99999"}`))})

	// Paying more than grounded over several payments.
	out = append(out,
		payAttack{name: "the invoice paid twice", do: func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
			return []*broker.EffectReply{e.call(t, agent, run, goodPay(nil)), e.call(t, agent, run, goodPay(nil))}
		}},
		payAttack{name: "the invoice paid in two halves and a bit", do: func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
			return []*broker.EffectReply{
				e.call(t, agent, run, goodPay(func(p map[string]any) { p["body"].(map[string]any)["amount"] = "600.00" })),
				e.call(t, agent, run, goodPay(func(p map[string]any) { p["body"].(map[string]any)["amount"] = "600.01" })),
			}
		}},
		payAttack{name: "the invoice paid twice at once", do: func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
			var wg sync.WaitGroup
			out := make([]*broker.EffectReply, 4)
			for i := range out {
				wg.Add(1)
				go func() { defer wg.Done(); out[i] = e.call(t, agent, run, goodPay(nil)) }()
			}
			wg.Wait()
			return out
		}},
		payAttack{name: "the invoice paid as a payment and a transfer", do: func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
			return []*broker.EffectReply{e.call(t, agent, run, goodPay(nil)),
				e.call(t, agent, run, map[string]any{"provider": "erp", "method": "POST", "path": "/transfers", "atom": "erp.pay", "body": goodTransfer()})}
		}},
	)

	// Records the run shaped, or read another way.
	attackerReads := func(change map[string]any) func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
		return func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
			defer e.erp.resetSuppliers()
			ch := e.call(t, agent, run, change)
			e.readBoth(t, agent, run)
			return []*broker.EffectReply{ch, e.call(t, agent, run, evilPay(nil))}
		}
	}
	out = append(out,
		payAttack{name: "supplier read with a pending view header", noRead: true, do: func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
			e.read(t, agent, run, "/invoices/INV-7")
			r := e.call(t, agent, run, map[string]any{"provider": "erp", "method": "GET", "path": "/suppliers/S-1", "atom": "erp.read", "headers": map[string]string{"Accept": "application/vnd.erp.pending+json"}})
			return []*broker.EffectReply{r, e.call(t, agent, run, evilPay(nil))}
		}},
		payAttack{name: "supplier read with a pending view body", noRead: true, do: func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
			e.read(t, agent, run, "/invoices/INV-7")
			r := e.call(t, agent, run, map[string]any{"provider": "erp", "method": "GET", "path": "/suppliers/S-1", "atom": "erp.read", "body": map[string]any{"view": "pending"}})
			return []*broker.EffectReply{r, e.call(t, agent, run, evilPay(nil))}
		}},
		payAttack{name: "supplier read with a pending view query", noRead: true, do: func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
			e.read(t, agent, run, "/invoices/INV-7")
			r := e.call(t, agent, run, map[string]any{"provider": "erp", "method": "GET", "path": "/suppliers/S-1", "atom": "erp.read", "query": map[string][]string{"view": {"pending"}}})
			return []*broker.EffectReply{r, e.call(t, agent, run, evilPay(nil))}
		}},
		payAttack{name: "records read in another run", noRead: true, do: func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
			other := e.open(t, agent)
			e.readBoth(t, agent, other)
			return []*broker.EffectReply{e.call(t, agent, run, goodPay(nil))}
		}},
		payAttack{name: "records read through another provider", noRead: true, do: func(t *testing.T, e *payEnv, agent, run string) []*broker.EffectReply {
			for _, p := range []string{"/invoices/INV-7", "/suppliers/S-1"} {
				e.call(t, agent, run, map[string]any{"provider": "erp2", "method": "GET", "path": p, "atom": "erp2.read"})
			}
			return []*broker.EffectReply{e.call(t, agent, run, goodPay(nil))}
		}},
		payAttack{name: "a GET that pays", do: pay(map[string]any{"provider": "erp", "method": "GET", "path": "/payments/quick", "atom": "erp.read",
			"query": map[string][]string{"iban": {attackerIBAN}, "amount": {invoiceDue}, "invoice": {"INV-7"}}})},
		payAttack{name: "payment through another provider of the server", want: "refused ungrounded",
			do: pay(evilPay(func(m map[string]any) { m["provider"], m["atom"] = "erp2", "erp2.pay" }))},
		payAttack{name: "payment through another provider of the server, no atom", do: pay(evilPay(func(m map[string]any) { m["provider"] = "erp2"; delete(m, "atom") }))},
	)
	// Last: a change no rule grounds marks the agent, whose later runs
	// then ground nothing on the ERP (each attack before is refused for
	// its own reason).
	out = append(out,
		payAttack{name: "supplier changed at /suppliers/s-1, then read", noRead: true, do: attackerReads(map[string]any{"provider": "erp", "method": "PUT", "path": "/suppliers/s-1", "atom": "erp.suppliers", "body": map[string]any{"iban": attackerIBAN}})},
		payAttack{name: "supplier changed at /suppliers/S-1, then read", noRead: true, do: attackerReads(map[string]any{"provider": "erp", "method": "PUT", "path": "/suppliers/S-1", "atom": "erp.suppliers", "body": map[string]any{"iban": attackerIBAN}})},
		payAttack{name: "supplier changed through another provider of the server, then read", noRead: true, do: attackerReads(map[string]any{"provider": "erp2", "method": "PUT", "path": "/suppliers/S-1", "atom": "erp2.suppliers", "body": map[string]any{"iban": attackerIBAN}})},
		payAttack{name: "bank account added for S-1, then read", noRead: true, do: attackerReads(map[string]any{"provider": "erp", "method": "POST", "path": "/bank-accounts", "atom": "erp.suppliers", "body": map[string]any{"supplier": "S-1", "iban": attackerIBAN}})},
		payAttack{name: "the agent's next run, after its change", want: "refused ungrounded", do: pay(goodPay(nil))},
	)
	return out
}

// decisions reads run's policy.decision events from the journal's run file.
func (e *payEnv) decisions(t *testing.T, run string) []journal.Decision {
	t.Helper()
	return runFileDecisions(t, e.data, run)
}

// resetSuppliers undoes the attacker's changes to the ERP's suppliers.
func (e *attackERP) resetSuppliers() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.suppliers["S-1"], e.suppliers["S-2"] = supplierIBAN, attackIBAN2
}

func TestAttackPayments(t *testing.T) {
	e := startPayEnv(t)
	type tried struct{ agent, attack, outcome string }
	var results []tried
	var runs []string
	for _, agent := range []string{"clerk", "llm"} {
		// The honest payment goes through, once, citing its records.
		run := e.open(t, agent)
		before := len(e.erp.received())
		e.readBoth(t, agent, run)
		if r := e.call(t, agent, run, goodPay(nil)); outcomeOf(r) != "allowed" {
			t.Fatalf("%s: the honest payment: %s %+v", agent, outcomeOf(r), r.Decision)
		}
		for i := before; i < len(e.erp.received()); i++ {
			e.attackOf[i] = agent + "/the honest payment"
		}
		runs = append(runs, run)
		for _, a := range paymentAttacks() {
			t.Run(agent+"/"+a.name, func(t *testing.T) {
				run := e.open(t, agent)
				if !a.noRead {
					e.readBoth(t, agent, run)
				}
				before, sentBefore := len(e.erp.received()), e.sent.Load()
				var outs []string
				for _, r := range a.do(t, e, agent, run) {
					outs = append(outs, outcomeOf(r))
				}
				if a.want != "" && outs[len(outs)-1] != a.want {
					t.Errorf("outcome %s, want %s", strings.Join(outs, " | "), a.want)
				}
				// Nothing Gatehouse refused (or stopped before sending)
				// reached the ERP.
				if got, want := int64(len(e.erp.received())-before), e.sent.Load()-sentBefore; got != want {
					t.Errorf("%d requests reached the ERP, %d calls were allowed and sent (%s)", got, want, strings.Join(outs, " | "))
				}
				runs = append(runs, run)
				e.mu.Lock()
				for i := before; i < len(e.erp.received()); i++ {
					e.attackOf[i] = agent + "/" + a.name
				}
				e.mu.Unlock()
				results = append(results, tried{agent, a.name, strings.Join(outs, " | ")})
			})
		}
	}
	for _, r := range results {
		t.Logf("%-6s %-60s %s", r.agent, r.attack, r.outcome)
	}
	// Every payment Gatehouse allowed is recorded citing the invoice and
	// the supplier it was grounded on.
	grounded := map[string]bool{"/api/payments": true, "/api/transfers": true, "/api/form-payments": true, "/api/payments/batch": true}
	for _, run := range runs {
		for _, d := range e.decisions(t, run) {
			if d.Outcome == journal.OutcomeAllowed && d.Method == "POST" && grounded[d.Path] &&
				(len(d.Citations) != 2 || !strings.HasPrefix(d.Citations[0].Path, "erp:/api/invoices/") || !strings.HasPrefix(d.Citations[1].Path, "erp:/api/suppliers/")) {
				t.Errorf("run %s: an allowed payment to %s cites %+v", run, d.Path, d.Citations)
			}
		}
	}
	// What the ERP would have paid.
	paid := map[string]*bigSum{}
	reqs := e.erp.received()
	for _, p := range e.erp.paymentsMade() {
		who := e.attackOf[p.Req]
		bad := ""
		switch {
		case p.Op == "refund" && amountOver(p.Amount, refundLimitStr):
			bad = "refunded over the scope limit"
		case p.Op != "refund" && normIBAN(p.IBAN) == attackerIBAN:
			bad = "paid the attacker"
		case p.Op != "refund":
			due := erpInvoices[strings.ToUpper(p.Invoice)][1]
			if due == "" {
				continue
			}
			k := p.Flavour + " " + who + " " + strings.ToUpper(p.Invoice)
			if paid[k] == nil {
				paid[k] = &bigSum{}
			}
			if paid[k].add(p.Amount); amountOver(paid[k].String(), due) {
				bad = "paid more than " + due + " due in total"
			}
		}
		if bad != "" {
			r := reqs[p.Req]
			t.Errorf("%s: %s would have %s (%s %s, %s %s %s): %s %s body %q", who, p.Flavour, bad, p.Op, p.Invoice, p.IBAN, p.Amount, "", r.Method, r.URI, r.Body)
		}
	}
}

// bigSum adds decimal amounts as servers parse them.
type bigSum struct{ s []string }

func (b *bigSum) add(a string) { b.s = append(b.s, a) }
func (b *bigSum) String() string {
	tot := "0"
	for _, a := range b.s {
		tot = addDec(tot, a)
	}
	return tot
}

// TestAttackPolicyCheck: the mistakes a new user makes in the files of
// the attack deployment are caught by gatehouse policy check before they
// are served. A catalogue that lets agents set a header which changes how
// the provider reads the body or the method (a gzip body whose header
// comment is the grounded form and whose data the attacker's; a method
// override spelt with underscores, which CGI and Rack file under the same
// name) does not load; a deny rule whose target is a bare path, or a path
// without the base path, denies nothing and is a problem; a grounding
// rule that leaves other_fields at allow gets a note (and the check still
// passes); a bound written as a quoted number with a comma is refused
// naming the number.
func TestAttackPolicyCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) { must(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600)) }
	check := func(args ...string) (int, string) {
		r := ghAt(t, dir, append([]string{"policy", "check"}, args...)...)
		return r.code, r.stdout + r.stderr
	}
	cat := fmt.Sprintf(attackProviders, "http://127.0.0.1:9")
	for _, h := range []string{"Content-Encoding", "X_HTTP_METHOD_OVERRIDE", "Content-Range", "X-Forwarded-Uri"} {
		write("providers.yaml", strings.Replace(cat, "headers_allowed: [Accept]", "headers_allowed: [Accept, "+h+"]", 1))
		if code, out := check("--providers", "providers.yaml"); code != 1 || !strings.Contains(out, "may not come from an agent") {
			t.Errorf("headers_allowed %s: exit %d\n%s", h, code, out)
		}
	}
	write("providers.yaml", cat)
	write("grounding.yaml", attackGrounding)
	write("policy.yaml", attackPolicy)
	code, out := check("--policy", "policy.yaml", "--providers", "providers.yaml", "--grounding", "grounding.yaml")
	if code != 0 || strings.Count(out, "note: grounding.yaml: ") != 3 || !strings.Contains(out, `note: grounding.yaml: rule[1] "transfer" other_fields: other_fields is allow`) {
		t.Fatalf("the attack deployment: exit %d\n%s", code, out)
	}
	write("policy.yaml", strings.Replace(attackPolicy, `target: "**/api/payments/quick"`, `target: /api/payments/quick`, 1))
	if code, out := check("--policy", "policy.yaml", "--providers", "providers.yaml"); code != 1 || !strings.Contains(out, `effects[0] "no-quick-payments" match.target: target /api/payments/quick is a path`) {
		t.Errorf("a bare path target: exit %d\n%s", code, out)
	}
	write("policy.yaml", strings.Replace(attackPolicy, `target: "**/api/payments/quick"`, `target: "127.0.0.1:9/payments/quick"`, 1))
	if code, out := check("--policy", "policy.yaml", "--providers", "providers.yaml"); code != 1 || !strings.Contains(out, "write 127.0.0.1:9/api/payments/quick") {
		t.Errorf("a target without the base path: exit %d\n%s", code, out)
	}
	write("grounding.yaml", strings.Replace(attackGrounding, "at_least: 0.01", `at_least: "0,01"`, 1))
	if code, out := check("--providers", "providers.yaml", "--grounding", "grounding.yaml"); code != 1 || !strings.Contains(out, `"0,01" is not a plain decimal number`) {
		t.Errorf("a bound with a comma: exit %d\n%s", code, out)
	}
}
