package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/provider"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

const (
	adaToken = "tok-ada-SECRET-1111"
	bobToken = "tok-bob-SECRET-2222"
)

func catalogue(base string) string {
	return `providers:
  - name: erp
    base_url: ` + base + `
    auth: {type: bearer}
    idempotency_header: Idempotency-Key
    headers_allowed: [Accept, X-Request-Id]
  - name: erp-plain
    base_url: ` + base + `
    auth: {type: bearer}
    headers_allowed: [X-Request-Id]
  - name: erp-cs
    base_url: ` + base + `
    auth: {type: bearer}
    path_case: sensitive
integrations:
  - name: erp.read
    provider: erp
    effect: read
    origin: shipped
    operations:
      - {method: GET, template: "/invoices/{id}"}
      - {method: GET, template: "/suppliers/{id}"}
  - {name: erp.pay, provider: erp, effect: write, origin: shipped, operations: [{method: POST, template: /payments}]}
  - {name: erp-plain.pay, provider: erp-plain, effect: write, origin: shipped, operations: [{method: POST, template: /payments}]}
  - {name: erp-plain.notes, provider: erp-plain, effect: write, origin: shipped, operations: [{method: POST, template: /notes}]}
  - {name: erp-cs.pay, provider: erp-cs, effect: write, origin: shipped, operations: [{method: POST, template: /Payments}]}
  - {name: erp.suppliers.update, provider: erp, effect: write, origin: shipped, operations: [{method: PATCH, template: "/suppliers/{id}"}]}
  - {name: erp.model.pay, provider: erp, effect: write, origin: model, operations: [{method: POST, template: /payments}]}
  - {name: erp.model.free, provider: erp, effect: write, origin: model}
`
}

const credentialsYAML = `credentials:
  - {tenant: acme, person: ada, provider: erp, token: ` + adaToken + `}
  - {tenant: acme, person: bob, provider: erp, token: ` + bobToken + `}
  - {tenant: acme, person: ada, provider: erp-plain, token: ` + adaToken + `}
  - {tenant: acme, person: ada, provider: erp-cs, token: ` + adaToken + `}
`

const groundingYAML = `grounding:
  - name: supplier-payment
    match: {provider: erp, method: POST, path: /payments}
    max_age_seconds: 300
    bind:
      - name: invoice
        read: {provider: erp, path: "/invoices/{id}"}
        where: {id: request.json.invoice}
      - name: supplier
        read: {provider: erp, path: "/suppliers/{id}"}
        where: {id: invoice.supplier_id}
    require:
      - {field: request.json.iban, equals: supplier.iban, as: iban}
      - {field: request.json.amount, at_most: invoice.amount_due, as: money}
      - {field: request.json.payee, equals: supplier.name, as: text}
      - {field: request.json.currency, equals: invoice.currency, as: exact}
    other_fields: deny
`

// clock is the sink's clock: real time moved by an offset the test sets.
type clock struct{ off atomic.Int64 }

func (c *clock) Now() time.Time            { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) Advance(d time.Duration)   { c.off.Add(int64(d)) }
func (c *clock) since(t time.Time) float64 { return c.Now().Sub(t).Seconds() }

// syncBuffer is a log sink tests search.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type setup struct {
	erp   *erp
	env   *sinktest.Env
	sink  *provider.Sink
	clock *clock
	logs  *syncBuffer
	creds string // the credentials file
}

type opts struct {
	rules     string // policy rules file
	grounding string // grounding rules file
	erp       *erp   // share one ERP
}

func start(t testing.TB, mode policy.Mode, o opts) *setup {
	t.Helper()
	s := &setup{erp: o.erp, clock: &clock{}, logs: &syncBuffer{}}
	if s.erp == nil {
		s.erp = newERP(t)
	}
	s.env = sinktest.Start(t, mode, o.rules, func(t testing.TB, env *sinktest.Env) []broker.Sink {
		s.sink = newSink(t, env, s, o.grounding)
		return []broker.Sink{s.sink}
	})
	s.sink.RouteRereads(s.env.Broker)
	return s
}

func newSink(t testing.TB, env *sinktest.Env, s *setup, ground string) *provider.Sink {
	t.Helper()
	cat, err := provider.ParseCatalogue("catalogue.yaml", []byte(catalogue(s.erp.srv.URL)))
	if err != nil {
		t.Fatal(err)
	}
	s.creds = filepath.Join(env.Dir, "credentials.yaml")
	if err := os.WriteFile(s.creds, []byte(credentialsYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	creds, err := provider.LoadCredentials(s.creds)
	if err != nil {
		t.Fatal(err)
	}
	cfg := provider.Config{Catalogue: cat, Credentials: creds, Now: s.clock.Now,
		Logger: slog.New(slog.NewJSONHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if ground != "" {
		if cfg.Grounding, err = grounding.Parse("grounding.yaml", []byte(ground)); err != nil {
			t.Fatal(err)
		}
	}
	sink, err := provider.New(sinktest.Ctx(t), env.JS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Close)
	return sink
}

// request builds an agent's call.
func request(run string, origin policy.Origin, p map[string]any) broker.EffectRequest {
	raw, _ := json.Marshal(p)
	return broker.EffectRequest{Run: run, Action: provider.ActionCall, Origin: origin, Params: raw}
}

// call proposes a provider call in run with origin: an agent's (model, or
// none named) over NATS with the shared agent credential; any other origin
// is one Gatehouse establishes only for a deployment-declared identity or
// a sink, so it is proposed in process with that origin
// (sinktest.Env.ProposeAs).
func (s *setup) call(t testing.TB, run string, origin policy.Origin, p map[string]any) *broker.EffectReply {
	t.Helper()
	if origin != "" && origin != policy.OriginModel {
		return s.env.ProposeAs(origin, policy.SinkProvider, request(run, "", p))
	}
	r, err := s.env.Agent.Effect(sinktest.Ctx(t), policy.SinkProvider, request(run, origin, p))
	if r == nil {
		t.Fatalf("effect: %v", err)
	}
	return r
}

func (s *setup) open(t testing.TB, person string, scopes ...string) string {
	return s.env.Open(t, broker.OpenWork{Tenant: "acme", Person: person, Scopes: scopes})
}

func get(p string) map[string]any {
	return map[string]any{"provider": "erp", "method": "GET", "path": p, "atom": "erp.read"}
}

func pay(body string) map[string]any {
	return map[string]any{"provider": "erp", "method": "POST", "path": "/payments", "atom": "erp.pay", "body": json.RawMessage(body)}
}

func decoded(t testing.TB, r *broker.EffectReply) provider.Reply {
	t.Helper()
	var out provider.Reply
	if err := json.Unmarshal(r.Result, &out); err != nil {
		t.Fatalf("reply %s: %v (error %v)", r.Result, err, r.Error)
	}
	return out
}

func mustAllow(t testing.TB, r *broker.EffectReply) {
	t.Helper()
	if r.Error != nil || r.Decision == nil || r.Decision.Outcome != journal.OutcomeAllowed || r.Outcome == nil || r.Outcome.Status != "ok" {
		t.Fatalf("want allowed and ok, got decision %+v outcome %+v error %v", r.Decision, r.Outcome, r.Error)
	}
}

func mustRefuse(t testing.TB, r *broker.EffectReply, refusal policy.Refusal) {
	t.Helper()
	if r.Decision == nil || r.Decision.Outcome != journal.OutcomeRefused || r.Decision.Refusal != refusal || !r.Decision.Enforced {
		t.Fatalf("want refused %s, got %+v (error %v)", refusal, r.Decision, r.Error)
	}
	if r.Outcome != nil {
		t.Fatalf("a refused call has an outcome: %+v", r.Outcome)
	}
}

// decision returns the recorded policy.decision of effect in run.
func (s *setup) decision(t testing.TB, run, effect string) journal.Decision {
	t.Helper()
	for _, ev := range s.env.Events(t, run) {
		if ev.Type == journal.TypeDecision && ev.Effect == effect {
			var d journal.Decision
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("no decision for %s in %s", effect, run)
	return journal.Decision{}
}

// journalHolds reports whether any journal file holds s.
func journalHolds(t testing.TB, dir, s string) bool {
	t.Helper()
	found := false
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte(s)) {
			found = true
		}
		return nil
	})
	return found
}

func ctxT(t testing.TB) context.Context { return sinktest.Ctx(t) }

func hasAny(s string, subs ...string) string {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return x
		}
	}
	return ""
}

func writeFile(p, data string, mode os.FileMode) error { return os.WriteFile(p, []byte(data), mode) }
