package provider_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/provider"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

func TestConformance(t *testing.T) {
	e := newERP(t)
	s := &setup{erp: e, clock: &clock{}, logs: &syncBuffer{}}
	sinktest.Conformance(t, sinktest.Case{
		Sink: policy.SinkProvider,
		Request: func(run string) broker.EffectRequest {
			p := get("/invoices/INV-7")
			p["headers"] = map[string]string{"X-Request-Id": run}
			return request(run, policy.OriginShipped, p)
		},
		Deny:   `{sink: provider}`,
		Secret: notesSecret, // in the invoice the ERP answers with
		Sinks: func(t testing.TB, env *sinktest.Env) []broker.Sink {
			return []broker.Sink{newSink(t, env, s, "")}
		},
		Happened: func(t testing.TB, _ *sinktest.Env, run string, reply *broker.EffectReply) bool {
			n := 0
			for _, c := range e.snapshot() {
				if c.RequestID == run && c.Path == "/invoices/INV-7" {
					n++
				}
			}
			if n > 0 {
				if r := decoded(t, reply); r.Status != 200 || !strings.Contains(string(r.Body), notesSecret) {
					t.Fatalf("the agent did not get the invoice: %+v", r)
				}
			}
			return n == 1
		},
	})
}

// TestOriginTable runs the origin table and the four built-in refusals
// end to end in strict mode: each refused call reaches nothing at the ERP.
func TestOriginTable(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{})
	run := s.open(t, "ada")
	body := `{"invoice":"INV-7","amount":"10.00"}`
	for _, tc := range []struct {
		name    string
		origin  policy.Origin
		params  map[string]any
		refusal policy.Refusal
	}{
		{"direct POST without atom", policy.OriginDirect,
			map[string]any{"provider": "erp", "method": "POST", "path": "/payments", "body": json.RawMessage(body)}, policy.RefuseMutationWithoutAtom},
		{"shipped read sending DELETE", policy.OriginShipped,
			map[string]any{"provider": "erp", "method": "DELETE", "path": "/invoices/INV-7", "atom": "erp.read"}, policy.RefuseBeyondDeclaredEffect},
		{"model code outside its contract", policy.OriginModel,
			map[string]any{"provider": "erp", "method": "POST", "path": "/refunds", "atom": "erp.model.pay", "body": json.RawMessage(body)}, policy.RefuseOutsideContract},
		{"model code without a contract mutating", policy.OriginModel,
			map[string]any{"provider": "erp", "method": "POST", "path": "/payments", "atom": "erp.model.free", "body": json.RawMessage(body)}, policy.RefuseUnverifiedModelCode},
		{"unknown atom mutating", policy.OriginShipped,
			map[string]any{"provider": "erp", "method": "POST", "path": "/payments", "atom": "erp.unknown", "body": json.RawMessage(body)}, policy.RefuseMutationWithoutAtom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.erp.count("", "")
			r := s.call(t, run, tc.origin, tc.params)
			mustRefuse(t, r, tc.refusal)
			if got := s.erp.count("", ""); got != before {
				t.Fatalf("a refused call reached the ERP (%d requests)", got-before)
			}
			d := s.decision(t, run, r.Effect)
			if d.Refusal != tc.refusal || d.Provider != "erp" || d.Host == "" || d.Method != tc.params["method"] || d.Path != tc.params["path"] {
				t.Fatalf("recorded %+v", d)
			}
		})
	}
	t.Run("model code within its contract", func(t *testing.T) {
		r := s.call(t, run, policy.OriginModel, map[string]any{"provider": "erp", "method": "POST", "path": "/payments", "atom": "erp.model.pay", "body": json.RawMessage(body)})
		mustAllow(t, r)
		if d := s.decision(t, run, r.Effect); !d.Verified || d.Origin != policy.OriginModel || d.Declared != policy.EffectWrite || d.Atom != "erp.model.pay" {
			t.Fatalf("recorded %+v", d)
		}
	})
	s.env.Verify(t)

	t.Run("an allow rule lifts mutation-without-atom, on record", func(t *testing.T) {
		s := start(t, policy.ModeStrict, opts{erp: s.erp, rules: `rules:
  - name: our-client
    decision: allow
    match: {provider: erp, code_origin: direct}
`})
		run := s.open(t, "ada")
		before := s.erp.payCount()
		r := s.call(t, run, policy.OriginDirect, map[string]any{"provider": "erp", "method": "POST", "path": "/payments", "body": json.RawMessage(body)})
		mustAllow(t, r)
		if r.Decision.AllowedBy != "our-client" || s.erp.payCount() != before+1 {
			t.Fatalf("decision %+v, payments %d", r.Decision, s.erp.payCount()-before)
		}
		if d := s.decision(t, run, r.Effect); d.Allowed != "our-client" || d.Origin != policy.OriginDirect {
			t.Fatalf("recorded %+v", d)
		}
	})
}

func TestAgentCannotWidenAuthority(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{})
	run := s.open(t, "ada")
	for name, tc := range map[string]struct {
		origin policy.Origin
		params map[string]any
	}{
		"declared wider":           {policy.OriginShipped, map[string]any{"provider": "erp", "method": "DELETE", "path": "/invoices/INV-7", "atom": "erp.read", "declared": "destructive"}},
		"declared for atomless":    {policy.OriginDirect, map[string]any{"provider": "erp", "method": "POST", "path": "/payments", "declared": "write"}},
		"declared for unknown":     {policy.OriginShipped, map[string]any{"provider": "erp", "method": "POST", "path": "/payments", "atom": "x", "declared": "write"}},
		"atom of another provider": {policy.OriginShipped, map[string]any{"provider": "erp-plain", "method": "GET", "path": "/x", "atom": "erp.read"}},
		"path with a control":      {policy.OriginShipped, map[string]any{"provider": "erp", "method": "GET", "path": "/invoices/\u0000", "atom": "erp.read"}},
		"header not allowed":       {policy.OriginShipped, map[string]any{"provider": "erp", "method": "GET", "path": "/invoices/INV-7", "atom": "erp.read", "headers": map[string]string{"Authorization": "Bearer mine"}}},
		"header in two spellings":  {policy.OriginShipped, map[string]any{"provider": "erp", "method": "GET", "path": "/invoices/INV-7", "atom": "erp.read", "headers": map[string]string{"X-Request-Id": "a", "x-request-id": "b"}}},
		"query in path":            {policy.OriginShipped, map[string]any{"provider": "erp", "method": "GET", "path": "/invoices/INV-7?x=1", "atom": "erp.read"}},
		"unknown provider":         {policy.OriginShipped, map[string]any{"provider": "bank", "method": "GET", "path": "/"}},
		"unknown field":            {policy.OriginShipped, map[string]any{"provider": "erp", "method": "GET", "path": "/", "person": "bob"}},
		"TRACE":                    {policy.OriginShipped, map[string]any{"provider": "erp", "method": "TRACE", "path": "/"}},
	} {
		t.Run(name, func(t *testing.T) {
			before := s.erp.count("", "")
			r := s.call(t, run, tc.origin, tc.params)
			if r.Error == nil || r.Error.Code != broker.CodeBadRequest || r.Decision != nil {
				t.Fatalf("want BAD_REQUEST, got %+v %+v", r.Error, r.Decision)
			}
			if s.erp.count("", "") != before {
				t.Fatal("reached the ERP")
			}
		})
	}
	// Naming a shipped integration does not lend its origin: model code
	// (or an agent) is recorded as model, and held to the integration's
	// contract like any origin.
	r := s.call(t, run, policy.OriginModel, pay(`{"amount":"1"}`))
	mustAllow(t, r)
	if d := s.decision(t, run, r.Effect); d.Origin != policy.OriginModel || !d.Verified {
		t.Fatalf("recorded %+v", d)
	}
	r = s.call(t, run, policy.OriginShipped, map[string]any{"provider": "erp", "method": "POST", "path": "/refunds", "atom": "erp.model.pay", "body": json.RawMessage(`{"amount":"1"}`)})
	mustRefuse(t, r, policy.RefuseOutsideContract)
	if d := s.decision(t, run, r.Effect); d.Origin != policy.OriginModel {
		t.Fatalf("shipped code calling a model integration recorded as %s", d.Origin)
	}
}

func TestScopes(t *testing.T) {
	rules := `scopes:
  require:
    - scope: payments.write
      match: {provider: erp, method: POST}
      limits: {amount: "1000"}
`
	e := newERP(t)
	for _, tc := range []struct {
		mode    policy.Mode
		scopes  []string
		body    string
		refusal policy.Refusal
	}{
		{policy.ModeStrict, nil, `{"amount":"10"}`, policy.RefuseScopeMissing},
		{policy.ModeReport, nil, `{"amount":"10"}`, policy.RefuseScopeMissing},
		{policy.ModeReport, []string{"payments.write"}, `{"amount":1500}`, policy.RefuseOverScopeLimit},
		{policy.ModeReport, []string{"payments.write"}, `{"amount":"1500.00"}`, policy.RefuseOverScopeLimit},
		{policy.ModeReport, []string{"payments.write"}, `{"amount":"10","amount":"1500"}`, policy.RefuseOverScopeLimit},
		{policy.ModeReport, []string{"payments.write"}, `{"note":"no amount"}`, policy.RefuseOverScopeLimit},
		{policy.ModeStrict, []string{"payments.write"}, `{"amount":"999.99"}`, ""},
	} {
		t.Run(fmt.Sprintf("%s %v %s", tc.mode, tc.scopes, tc.body), func(t *testing.T) {
			s := start(t, tc.mode, opts{erp: e, rules: rules})
			run := s.open(t, "ada", tc.scopes...)
			before := e.payCount()
			r := s.call(t, run, policy.OriginShipped, pay(tc.body))
			if tc.refusal == "" {
				mustAllow(t, r)
				if d := s.decision(t, run, r.Effect); !slices.Equal(d.ScopesChecked, []string{"payments.write"}) {
					t.Fatalf("scopes checked %v", d.ScopesChecked)
				}
				return
			}
			mustRefuse(t, r, tc.refusal)
			if e.payCount() != before {
				t.Fatal("a payment beyond the person's scopes reached the ERP")
			}
		})
	}
}

// TestCredentials: each person's call carries their own credential; a
// person without one fails no-credential and reaches nothing; no
// credential, query or body reaches the journal, a reply or a log.
func TestCredentials(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{})
	// A second broker on the same NATS and journal, with a logger the test
	// reads, so the broker's own logs are searched too.
	logs := &syncBuffer{}
	b := loggedBroker(t, s, logs)

	const querySecret, bodySecret = "QUERY-SECRET-55", "BODY-SECRET-66"
	var replies []string
	do := func(person string, p map[string]any, viaLogged bool) *broker.EffectReply {
		run := s.open(t, person)
		var r *broker.EffectReply
		if viaLogged {
			raw, _ := json.Marshal(request(run, policy.OriginShipped, p))
			r = b.Propose(ctxT(t), broker.Internal(policy.OriginShipped), policy.SinkProvider, raw)
		} else {
			r = s.call(t, run, policy.OriginShipped, p)
		}
		out, _ := json.Marshal(r)
		replies = append(replies, string(out))
		return r
	}
	// The cache is warm for ada before bob calls, and the other way round.
	for i := range 3 {
		for _, person := range []string{"ada", "bob"} {
			p := get("/invoices/INV-7")
			p["query"] = map[string][]string{"q": {querySecret}}
			p["headers"] = map[string]string{"X-Request-Id": person + fmt.Sprint(i)}
			mustAllow(t, do(person, p, i == 1))
		}
	}
	want := map[string]string{"ada": "Bearer " + adaToken, "bob": "Bearer " + bobToken}
	n := 0
	for _, c := range s.erp.snapshot() {
		if c.RequestID == "" {
			continue
		}
		person := c.RequestID[:3]
		if c.Auth != want[person] {
			t.Fatalf("%s's call carried %q", person, c.Auth)
		}
		n++
	}
	if n != 6 {
		t.Fatalf("%d calls reached the ERP, want 6", n)
	}

	before := s.erp.count("", "")
	r := do("carol", pay(`{"amount":"5","memo":"`+bodySecret+`"}`), true)
	if r.Outcome == nil || r.Outcome.Status != "failed" || r.Outcome.Error != "no-credential" || r.Error == nil ||
		!strings.Contains(r.Error.Message, "carol") || !strings.Contains(r.Error.Message, "credentials file") {
		t.Fatalf("carol: outcome %+v error %+v", r.Outcome, r.Error)
	}
	if s.erp.count("", "") != before {
		t.Fatal("a call without a credential reached the ERP")
	}
	// A payment with a query and a body: neither is recorded or logged.
	r = do("ada", map[string]any{"provider": "erp", "method": "POST", "path": "/payments", "atom": "erp.pay",
		"query": map[string][]string{"k": {querySecret}}, "body": json.RawMessage(`{"memo":"` + bodySecret + `"}`)}, true)
	mustAllow(t, r)

	s.env.Verify(t)
	all := strings.Join(replies, "\n") + logs.String() + s.logs.String()
	for _, secret := range []string{adaToken, bobToken, querySecret, bodySecret} {
		if journalHolds(t, s.env.JournalDir, secret) {
			t.Fatalf("the journal holds %q", secret)
		}
		if strings.Contains(all, secret) {
			t.Fatalf("a reply or log holds %q", secret)
		}
	}
	if !strings.Contains(logs.String(), "effect failed") {
		t.Fatalf("the broker's log was not captured: %s", logs.String())
	}
	if strings.Contains(all, "erp-session-cookie") {
		t.Fatal("Set-Cookie reached the agent")
	}
}

// loggedBroker is a broker on s's NATS and journal that logs to w; calls
// go to it by Propose.
func loggedBroker(t testing.TB, s *setup, w *syncBuffer) *broker.Broker {
	t.Helper()
	runs, err := broker.OpenKVRuns(ctxT(t), s.env.JS, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Config{Mode: s.env.Broker.Mode(), Logger: slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		runs, broker.NewRecorder(s.env.JS, 5*time.Second), s.env.Broker.Policy(), s.sink)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCredentialFile(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/creds.yaml"
	if err := writeFile(p, credentialsYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := provider.LoadCredentials(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable credentials file was accepted: %v", err)
	}
	bad := "credentials:\n  - {tenant: acme, person: ada, provider: erp, token: " + adaToken + ", tokn: x}\n"
	if _, err := provider.ParseCredentials("c.yaml", []byte(bad)); err == nil || strings.Contains(err.Error(), adaToken) {
		t.Fatalf("error %v", err)
	}
	dup := credentialsYAML + "  - {tenant: acme, person: ada, provider: erp, token: other-SECRET}\n"
	if _, err := provider.ParseCredentials("c.yaml", []byte(dup)); err == nil || strings.Contains(err.Error(), "other-SECRET") {
		t.Fatalf("error %v", err)
	}
	c := provider.Credential{Token: provider.NewSecret(adaToken), Username: "ada", Password: provider.NewSecret(bobToken)}
	var buf syncBuffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "cred", c, "token", c.Token)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "cred", c, "token", c.Token)
	js, _ := json.Marshal(c)
	out := fmt.Sprintf("%v %+v %#v %s %q %x", c, c, c, c.Token, c.Token, c.Token) + buf.String() + string(js) + c.Token.String()
	if x := hasAny(out, adaToken, bobToken); x != "" {
		t.Fatalf("%q printed: %s", x, out)
	}
}

func TestKeepAliveReusesOneConnection(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{})
	run := s.open(t, "ada")
	before := s.erp.newConns()
	for range 20 {
		mustAllow(t, s.call(t, run, policy.OriginShipped, get("/invoices/INV-7")))
	}
	if got := s.erp.newConns() - before; got != 1 {
		t.Fatalf("20 sequential calls opened %d connections, want 1", got)
	}
}

// TestIdempotentRetry: the ERP carries out the payment and answers 503;
// the retry carries the same key, so there is exactly one payment.
func TestIdempotentRetry(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{})
	run := s.open(t, "ada")
	s.erp.mu.Lock()
	s.erp.fail503 = 1
	s.erp.mu.Unlock()
	p := pay(`{"invoice":"INV-7","amount":"12.00"}`)
	p["operation_id"] = "pay-INV-7-1"
	r := s.call(t, run, policy.OriginShipped, p)
	mustAllow(t, r)
	out := decoded(t, r)
	if out.Status != 201 || out.Attempts != 2 || out.IdempotencyKey != "pay-INV-7-1" || s.erp.payCount() != 1 {
		t.Fatalf("reply %+v, payments %d", out, s.erp.payCount())
	}
	var keys []string
	for _, c := range s.erp.snapshot() {
		if c.Path == "/payments" {
			keys = append(keys, c.Key)
		}
	}
	if !slices.Equal(keys, []string{"pay-INV-7-1", "pay-INV-7-1"}) {
		t.Fatalf("attempts carried keys %q", keys)
	}
	if r.Outcome.Detail["status_code"] != "201" || r.Outcome.Detail["attempts"] != "2" {
		t.Fatalf("outcome %+v", r.Outcome)
	}

	// Without operation_id the key is the effect id.
	s.erp.mu.Lock()
	s.erp.fail503 = 1
	s.erp.mu.Unlock()
	r = s.call(t, run, policy.OriginShipped, pay(`{"invoice":"INV-7","amount":"13.00"}`))
	mustAllow(t, r)
	if out := decoded(t, r); out.IdempotencyKey != r.Effect || out.Attempts != 2 || s.erp.payCount() != 2 {
		t.Fatalf("reply %+v effect %s payments %d", out, r.Effect, s.erp.payCount())
	}

	// A provider without an idempotency header is never retried.
	s.erp.mu.Lock()
	s.erp.fail503 = 1
	s.erp.mu.Unlock()
	r = s.call(t, run, policy.OriginShipped, map[string]any{"provider": "erp-plain", "method": "POST", "path": "/payments", "atom": "erp-plain.pay", "body": json.RawMessage(`{"amount":"1"}`)})
	if out := decoded(t, r); out.Status != 503 || out.Attempts != 1 || r.Outcome.Status != "failed" || r.Outcome.Error != "http-status" {
		t.Fatalf("reply %+v outcome %+v", out, r.Outcome)
	}
	s.env.Verify(t)
}

func TestConnectionRefused(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{})
	run := s.open(t, "ada")
	s.erp.srv.Close()
	t0 := time.Now()
	r := s.call(t, run, policy.OriginShipped, get("/invoices/INV-7"))
	if r.Outcome == nil || r.Outcome.Error != "connect" || r.Error == nil || strings.Contains(r.Error.Message, "http://") {
		t.Fatalf("outcome %+v error %+v", r.Outcome, r.Error)
	}
	if time.Since(t0) > 5*time.Second {
		t.Fatal("retries took too long")
	}
	_ = journal.OutcomeAllowed
}
