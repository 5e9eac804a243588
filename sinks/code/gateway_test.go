package code_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/code"
	"github.com/gatehouse/gatehouse/sinks/provider"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// testERP is a real local HTTP provider: one invoice and a payments endpoint. It records every request and
// counts the connections it accepted.
type testERP struct {
	srv *httptest.Server

	mu    sync.Mutex
	calls []string // "METHOD /path"
	conns int
}

const invoiceTotal = "1234.56"

func newTestERP(t testing.TB) *testERP {
	e := &testERP{}
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.calls = append(e.calls, r.Method+" "+r.URL.Path)
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/invoices/INV-7":
			_, _ = w.Write([]byte(`{"id":"INV-7","supplier_id":"S-1","amount_due":"` + invoiceTotal + `","currency":"EUR"}`))
		case r.Method == http.MethodPost && r.URL.Path == "/payments":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"status":"paid"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	e.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.mu.Lock()
			e.conns++
			e.mu.Unlock()
		}
	}
	e.srv.Start()
	t.Cleanup(e.srv.Close)
	return e
}

func (e *testERP) count(call string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.calls {
		if call == "" || c == call {
			n++
		}
	}
	return n
}

func (e *testERP) connections() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conns
}

func gatewayCatalogue(base string) string {
	return `providers:
  - name: erp
    base_url: ` + base + `
    auth: {type: none}
integrations:
  - {name: erp.read, provider: erp, effect: read, origin: shipped, operations: [{method: GET, template: "/invoices/{id}"}]}
  - {name: erp.pay, provider: erp, effect: write, origin: shipped, operations: [{method: POST, template: /payments}]}
`
}

type gatewayEnv struct {
	*sinktest.Env
	erp *testERP
}

// startGateway runs Gatehouse in mode with the code sink on sb, bound to the broker, and the provider sink
// calling erp.
func startGateway(t *testing.T, mode policy.Mode, sb *sandbox.Sandbox, erp *testERP) *gatewayEnv {
	t.Helper()
	g, _, _ := startGatewayWith(t, mode, sb, erp, gatewayCatalogue(erp.srv.URL), false)
	return g
}

// startGatewayWith is startGateway with a catalogue and, when reg is set, a registry of stored integrations.
func startGatewayWith(t *testing.T, mode policy.Mode, sb *sandbox.Sandbox, erp *testERP, catalogue string, reg bool) (*gatewayEnv, *code.Sink, *code.Registry) {
	t.Helper()
	var cs *code.Sink
	var registry *code.Registry
	env := sinktest.Start(t, mode, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
		cat, err := provider.ParseCatalogue("catalogue.yaml", []byte(catalogue))
		if err != nil {
			t.Fatal(err)
		}
		ps, err := provider.New(sinktest.Ctx(t), env.JS, provider.Config{Catalogue: cat})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ps.Close)
		reader := code.NewReader(sb, code.ReaderConfig{})
		if reg {
			registry, err = code.OpenRegistry(sinktest.Ctx(t), env.JS, code.RegistryConfig{Reader: reader})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = registry.Close() })
		}
		cs = code.New(sb, code.Config{Limits: sandbox.Limits{Wall: 10 * time.Second}, Reader: reader, Registry: registry})
		return []broker.Sink{cs, ps}
	})
	cs.Bind(env.Broker)
	return &gatewayEnv{Env: env, erp: erp}, cs, registry
}

// clientPy is the model code's whole client: a request per line out, a reply per line in.
const clientPy = `import os, json, sys
_w = os.fdopen(int(os.environ['GATEHOUSE_GATEWAY_OUT']), 'w', buffering=1)
_r = os.fdopen(int(os.environ['GATEHOUSE_GATEWAY_IN']), 'r')
def call(req):
    _w.write(json.dumps(req) + "\n")
    return json.loads(_r.readline())
def show(name, rep):
    d = rep.get("decision") or {}
    print(name, json.dumps({"outcome": d.get("outcome"), "refusal": d.get("refusal"), "enforced": d.get("enforced"),
        "error": (rep.get("error") or {}).get("code"), "status": (rep.get("result") or {}).get("status")}))
GET = {"provider": "erp", "method": "GET", "path": "/invoices/INV-7", "atom": "erp.read"}
PAY = {"provider": "erp", "method": "POST", "path": "/payments", "atom": "erp.pay", "body": {"invoice": "INV-7", "amount": "10.00"}}
`

// runModelCode runs source as model code (origin model) in run and returns the reply and its program output.
func (g *gatewayEnv) runModelCode(t *testing.T, run, source string, args ...string) (*broker.EffectReply, code.Reply) {
	t.Helper()
	p, _ := json.Marshal(code.Params{Program: "python3", Source: source, Args: args})
	r, err := g.Agent.Effect(sinktest.Ctx(t), policy.SinkCode, broker.EffectRequest{Run: run, Action: "run", Origin: policy.OriginModel, Params: p})
	if err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("code run: %v %+v", err, r)
	}
	out := reply(t, r)
	t.Logf("%s: exit %d killed %q stdout %q stderr %q", out.Tier, out.ExitCode, out.Killed, clipText(out.Stdout), clipText(out.Stderr))
	return r, out
}

func clipText(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// shown decodes the line a program printed with show(name, reply).
func shown(t *testing.T, stdout, name string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(stdout, "\n") {
		if rest, ok := strings.CutPrefix(l, name+" "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(rest), &m); err != nil {
				t.Fatalf("%s: %q: %v", name, rest, err)
			}
			return m
		}
	}
	t.Fatalf("the program did not show %s:\n%s", name, stdout)
	return nil
}

// providerEvents returns the run's provider-sink events in order: each decision, attempt and outcome.
func providerEvents(t *testing.T, evs []journal.Event) (decisions []journal.Decision, types []journal.Type) {
	t.Helper()
	ids := map[string]bool{}
	for _, ev := range evs {
		if ev.Type == journal.TypeDecision {
			var d journal.Decision
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.Sink == policy.SinkProvider {
				ids[ev.Effect] = true
				decisions = append(decisions, d)
			}
		}
		if ids[ev.Effect] {
			types = append(types, ev.Type)
		}
	}
	return decisions, types
}

func codeOutcome(t *testing.T, evs []journal.Event) journal.Result {
	t.Helper()
	last := evs[len(evs)-1]
	var res journal.Result
	if err := json.Unmarshal(last.Data, &res); err != nil || last.Type != journal.TypeOutcome {
		t.Fatalf("last event %s: %v", last.Type, err)
	}
	return res
}

var (
	tiersOnce sync.Once
	tierSBs   = map[sandbox.Tier]*sandbox.Sandbox{}
	tierErrs  = map[sandbox.Tier]string{}
)

// eachConfinedTier runs f once per confining tier this machine supports; a tier that starts but is not
// confined fails.
func eachConfinedTier(t *testing.T, f func(t *testing.T, sb *sandbox.Sandbox)) {
	t.Helper()
	tiers := []sandbox.Tier{sandbox.TierBwrap, sandbox.TierNamespaces, sandbox.TierLandlock}
	tiersOnce.Do(func() {
		for _, tier := range tiers {
			sb, rep := sandbox.Detect(context.Background(), sandbox.Config{Tiers: []sandbox.Tier{tier}, Helper: []string{os.Args[0], sandbox.HelperArg}})
			tr := rep.Tier(tier)
			switch {
			case tr == nil:
				tierErrs[tier] = "not self-tested"
			case tr.Err != "":
				tierErrs[tier] = "cannot start: " + tr.Err
			case !tr.Confined:
				tierErrs[tier] = "FAIL: started but not confined"
			default:
				tierSBs[tier] = sb
			}
		}
	})
	for _, tier := range tiers {
		t.Run(string(tier), func(t *testing.T) {
			sb := tierSBs[tier]
			if sb == nil {
				if strings.HasPrefix(tierErrs[tier], "FAIL") {
					t.Fatalf("tier %s: %s", tier, tierErrs[tier])
				}
				t.Skipf("tier %s: %s", tier, tierErrs[tier])
			}
			f(t, sb)
		})
	}
}

// TestGatewayReadIsDecidedAndRecorded: model code reads an invoice through the gateway. The call is allowed,
// journaled inside the code run as a provider call of origin model, reaches the ERP once, and the program
// gets the invoice back.
func TestGatewayReadIsDecidedAndRecorded(t *testing.T) {
	erp := newTestERP(t)
	eachConfinedTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		g := startGateway(t, policy.ModeStrict, sb, erp)
		run := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
		before := erp.count("GET /invoices/INV-7")
		_, out := g.runModelCode(t, run, clientPy+`
rep = call(GET)
show("GET", rep)
print("TOTAL", rep["result"]["body"]["amount_due"])
`)
		if out.ExitCode != 0 || !out.Confined || out.Tier != sb.Tier() {
			t.Fatalf("program: %+v", out)
		}
		if !strings.Contains(out.Stdout, "TOTAL "+invoiceTotal+"\n") {
			t.Fatalf("the program did not get the invoice total:\n%s", out.Stdout)
		}
		if m := shown(t, out.Stdout, "GET"); m["outcome"] != "allowed" || m["status"] != 200.0 {
			t.Fatalf("GET reply %v", m)
		}
		if n := erp.count("GET /invoices/INV-7") - before; n != 1 {
			t.Fatalf("the ERP got %d GETs, want 1", n)
		}
		evs := g.Events(t, run)
		want := []journal.Type{journal.TypeRunOpen, journal.TypeDecision, journal.TypeAttempt, // the code run
			journal.TypeDecision, journal.TypeAttempt, journal.TypeOutcome, // the provider call, inside it
			journal.TypeOutcome} // the code run's outcome
		if got := sinktest.Types(evs); !slices.Equal(got, want) {
			t.Fatalf("journal %v, want %v", got, want)
		}
		var codeDec journal.Decision
		_ = json.Unmarshal(evs[1].Data, &codeDec)
		if codeDec.Sink != policy.SinkCode || codeDec.Origin != policy.OriginModel || !codeDec.Confined {
			t.Fatalf("code decision %+v", codeDec)
		}
		decs, _ := providerEvents(t, evs)
		d := decs[0]
		if d.Origin != policy.OriginModel || d.Provider != "erp" || d.Method != "GET" || d.Path != "/invoices/INV-7" ||
			d.Atom != "erp.read" || d.Outcome != journal.OutcomeAllowed || d.ActingFor.Person != "ada" {
			t.Fatalf("provider decision %+v", d)
		}
		var res journal.Result
		_ = json.Unmarshal(evs[5].Data, &res)
		if res.Status != "ok" || res.Detail["status_code"] != "200" {
			t.Fatalf("provider outcome %+v", res)
		}
		if co := codeOutcome(t, evs); co.Detail["gateway_calls"] != "1" || co.Detail["gateway_refused"] != "0" || co.Status != "ok" {
			t.Fatalf("code outcome %+v", co)
		}
		g.Verify(t)
	})
}

// TestGatewayMutationWithoutContract: model code paying through the gateway has no readable contract (its
// integration is shipped code; the model's copy is not what was read), so strict mode refuses it
// unverified-model-code and nothing reaches the ERP; report mode lets it through, recorded as strict would
// refuse.
func TestGatewayMutationWithoutContract(t *testing.T) {
	erp := newTestERP(t)
	src := clientPy + "show('PAY', call(PAY))\n"
	eachConfinedTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		t.Run("strict", func(t *testing.T) {
			g := startGateway(t, policy.ModeStrict, sb, erp)
			run := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
			before := erp.count("POST /payments")
			_, out := g.runModelCode(t, run, src)
			m := shown(t, out.Stdout, "PAY")
			if m["outcome"] != "refused" || m["refusal"] != string(policy.RefuseUnverifiedModelCode) || m["enforced"] != true || m["status"] != nil {
				t.Fatalf("PAY reply %v", m)
			}
			if n := erp.count("POST /payments") - before; n != 0 {
				t.Fatalf("a refused payment reached the ERP %d times", n)
			}
			evs := g.Events(t, run)
			decs, types := providerEvents(t, evs)
			if len(decs) != 1 || !slices.Equal(types, []journal.Type{journal.TypeDecision}) ||
				decs[0].Refusal != policy.RefuseUnverifiedModelCode || !decs[0].Enforced || decs[0].Origin != policy.OriginModel {
				t.Fatalf("provider events %v, decisions %+v", types, decs)
			}
			if co := codeOutcome(t, evs); co.Detail["gateway_calls"] != "1" {
				t.Fatalf("code outcome %+v", co)
			}
			g.Verify(t)
		})
		t.Run("report", func(t *testing.T) {
			g := startGateway(t, policy.ModeReport, sb, erp)
			run := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
			before := erp.count("POST /payments")
			_, out := g.runModelCode(t, run, src)
			m := shown(t, out.Stdout, "PAY")
			if m["outcome"] != "allowed" || m["refusal"] != string(policy.RefuseUnverifiedModelCode) || m["enforced"] != false || m["status"] != 201.0 {
				t.Fatalf("PAY reply %v", m)
			}
			if n := erp.count("POST /payments") - before; n != 1 {
				t.Fatalf("the payment reached the ERP %d times, want 1", n)
			}
			decs, types := providerEvents(t, g.Events(t, run))
			if len(decs) != 1 || !slices.Equal(types, []journal.Type{journal.TypeDecision, journal.TypeAttempt, journal.TypeOutcome}) ||
				decs[0].Refusal != policy.RefuseUnverifiedModelCode || decs[0].Enforced || decs[0].Outcome != journal.OutcomeAllowed {
				t.Fatalf("provider events %v, decisions %+v", types, decs)
			}
			g.Verify(t)
		})
	})
}

// TestGatewayProgramCannotChooseItsOrigin: a request naming origin shipped (or anything but the code's own
// origin) is answered with an error and nothing is decided; naming its own origin is accepted; params the
// provider sink does not know (run, person) are refused there, before a decision.
func TestGatewayProgramCannotChooseItsOrigin(t *testing.T) {
	erp := newTestERP(t)
	eachConfinedTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		g := startGateway(t, policy.ModeStrict, sb, erp)
		run := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
		other := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "bob"})
		before := erp.count("")
		_, out := g.runModelCode(t, run, clientPy+`
show("SHIPPED", call(dict(PAY, origin="shipped")))
show("SHIPPED-CASE", call(dict(PAY, Origin="shipped")))
show("RUNTIME-GET", call(dict(GET, origin="runtime")))
show("OTHER-RUN", call(dict(GET, run=sys.argv[1])))
show("PERSON", call(dict(GET, person="bob")))
show("NOT-OBJECT", call(["GET"]))
show("OWN", call(dict(GET, origin="model")))
`, other)
		for _, name := range []string{"SHIPPED", "SHIPPED-CASE", "RUNTIME-GET", "OTHER-RUN", "PERSON", "NOT-OBJECT"} {
			if m := shown(t, out.Stdout, name); m["error"] != string(broker.CodeBadRequest) || m["outcome"] != nil {
				t.Errorf("%s: %v, want BAD_REQUEST and no decision", name, m)
			}
		}
		if m := shown(t, out.Stdout, "OWN"); m["outcome"] != "allowed" || m["status"] != 200.0 {
			t.Errorf("OWN: %v", m)
		}
		if n := erp.count("") - before; n != 1 {
			t.Fatalf("the ERP got %d requests, want only the one with the program's own origin", n)
		}
		evs := g.Events(t, run)
		decs, _ := providerEvents(t, evs)
		if len(decs) != 1 || decs[0].Origin != policy.OriginModel {
			t.Fatalf("provider decisions %+v, want only OWN's", decs)
		}
		if co := codeOutcome(t, evs); co.Detail["gateway_calls"] != "3" || co.Detail["gateway_refused"] != "4" {
			t.Fatalf("code outcome %+v", co)
		}
		if got := sinktest.Types(g.Events(t, other)); !slices.Equal(got, []journal.Type{journal.TypeRunOpen}) {
			t.Fatalf("the other run's journal: %v", got)
		}
		g.Verify(t)
	})
}

// TestGatewayProgramHasNoNetworkAndNoStrayFDs: with the gateway, model code still cannot connect to the
// ERP itself, and holds exactly stdin, stdout, stderr and the gateway's two pipes.
func TestGatewayProgramHasNoNetworkAndNoStrayFDs(t *testing.T) {
	erp := newTestERP(t)
	eachConfinedTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		g := startGateway(t, policy.ModeStrict, sb, erp)
		run := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
		before, conns := erp.count(""), erp.connections()
		host, port, _ := net.SplitHostPort(erp.srv.Listener.Addr().String())
		_, out := g.runModelCode(t, run, clientPy+`
import socket
fds = {}
for name in os.listdir('/proc/self/fd'):
    try:
        fds[name] = os.readlink('/proc/self/fd/' + name)
    except OSError:
        pass  # the listing's own descriptor, closed by now
print("FDS", json.dumps(fds))
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
    s.sendall(b"GET /invoices/INV-7 HTTP/1.0\r\n\r\n")
    print("DIRECT connected", s.recv(100))
except Exception as e:
    print("DIRECT blocked", type(e).__name__, e)
show("GET", call(GET))
`, host, port)
		if !strings.Contains(out.Stdout, "DIRECT blocked") {
			t.Fatalf("model code reached the ERP directly:\n%s", out.Stdout)
		}
		if m := shown(t, out.Stdout, "GET"); m["outcome"] != "allowed" {
			t.Fatalf("GET through the gateway: %v", m)
		}
		var fds map[string]string
		for _, l := range strings.Split(out.Stdout, "\n") {
			if rest, ok := strings.CutPrefix(l, "FDS "); ok {
				_ = json.Unmarshal([]byte(rest), &fds)
			}
		}
		names := slices.Sorted(func(yield func(string) bool) {
			for k := range fds {
				if !yield(k) {
					return
				}
			}
		})
		if !slices.Equal(names, []string{"0", "1", "2", "3", "4"}) || !strings.HasPrefix(fds["3"], "pipe:") || !strings.HasPrefix(fds["4"], "pipe:") {
			t.Fatalf("descriptors in the sandbox: %v", fds)
		}
		// Only the broker's own call reached the ERP: one request, over the provider sink's connection.
		if n := erp.count("") - before; n != 1 {
			t.Fatalf("the ERP got %d requests, want 1 (through the gateway)", n)
		}
		if c := erp.connections() - conns; c > 1 {
			t.Fatalf("the ERP accepted %d new connections, at most the provider sink's one expected", c)
		}
		g.Verify(t)
	})
}

// TestGatewayMisbehavingPrograms: garbage, an oversized line, a program that closes fd 3 early or never
// reads fd 4: each run ends by its own exit or the wall limit, the broker keeps serving, and the journal
// verifies.
func TestGatewayMisbehavingPrograms(t *testing.T) {
	erp := newTestERP(t)
	eachConfinedTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		g := startGateway(t, policy.ModeStrict, sb, erp)
		run := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
		for _, tc := range []struct {
			name, src string
			check     func(t *testing.T, out code.Reply)
		}{
			{"garbage and an oversized line", clientPy + `
_w.write("garbage{\n")
show("GARBAGE", json.loads(_r.readline()))
_w.write('{"provider":"erp","pad":"' + "y" * (2 << 20) + '"}\n')
show("BIG", json.loads(_r.readline()))
show("GET", call(GET))
`, func(t *testing.T, out code.Reply) {
				for _, name := range []string{"GARBAGE", "BIG"} {
					if m := shown(t, out.Stdout, name); m["error"] != sandbox.GatewayFault {
						t.Errorf("%s: %v", name, m)
					}
				}
				if m := shown(t, out.Stdout, "GET"); m["outcome"] != "allowed" {
					t.Errorf("GET after garbage: %v", m)
				}
			}},
			{"closes fd 3 early", clientPy + "_w.close()\nimport time\ntime.sleep(0.2)\nprint('bye')\n", func(t *testing.T, out code.Reply) {
				if out.ExitCode != 0 || out.Stdout != "bye\n" {
					t.Errorf("%+v", out)
				}
			}},
			{"never reads fd 4", clientPy + `
line = (json.dumps(GET) + "\n").encode()
try:
    for i in range(5000):
        os.write(3, line)
except BrokenPipeError:
    pass
`, func(t *testing.T, out code.Reply) {
				if out.Killed != "" && out.Killed != sandbox.KilledWall {
					t.Errorf("killed %q", out.Killed)
				}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p, _ := json.Marshal(code.Params{Program: "python3", Source: tc.src, TimeoutMS: 3000})
				start := time.Now()
				r, err := g.Agent.Effect(sinktest.Ctx(t), policy.SinkCode, broker.EffectRequest{Run: run, Action: "run", Origin: policy.OriginModel, Params: p})
				if err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d > 15*time.Second {
					t.Fatalf("the run took %v under a 3 s wall limit", d)
				}
				out := reply(t, r)
				t.Logf("exit %d killed %q stdout %q stderr %q", out.ExitCode, out.Killed, clipText(out.Stdout), clipText(out.Stderr))
				tc.check(t, out)
			})
		}
		// The broker still serves model code through the gateway.
		_, out := g.runModelCode(t, run, clientPy+"show('GET', call(GET))\n")
		if m := shown(t, out.Stdout, "GET"); m["outcome"] != "allowed" {
			t.Fatalf("after the misbehaving programs: %v", m)
		}
		g.Verify(t)
	})
}

// TestGatewayErrorRepliesAreEffectReplies: the sandbox's own error replies decode as a broker.EffectReply
// with BAD_REQUEST, like the code sink's and the broker's, so a program reads every reply one way.
func TestGatewayErrorRepliesAreEffectReplies(t *testing.T) {
	res, err := detected(t).Run(context.Background(), sandbox.Spec{
		Argv:    []string{"/usr/bin/python3", "-c", "import os\nos.write(3, b'garbage{\\n')\nprint(os.fdopen(4).readline(), end='')"},
		Gateway: func(context.Context, []byte) []byte { t.Error("garbage reached the Gateway func"); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	var r broker.EffectReply
	if err := json.Unmarshal(res.Stdout, &r); err != nil || r.Error == nil || r.Error.Code != broker.CodeBadRequest || r.Decision != nil {
		t.Fatalf("reply %q (%v): %+v", res.Stdout, err, r)
	}
	if sandbox.GatewayFault != string(broker.CodeBadRequest) {
		t.Fatalf("sandbox.GatewayFault %q is not broker.CodeBadRequest", sandbox.GatewayFault)
	}
}

// TestNoGatewayWithoutBind: a sink never bound gives programs no descriptor beyond stdio.
func TestNoGatewayWithoutBind(t *testing.T) {
	sb := detected(t)
	env := sinktest.Start(t, policy.ModeStrict, "", sinks(func(testing.TB) *sandbox.Sandbox { return sb }))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	r, err := env.Effect(t, policy.SinkCode, request(run, policy.OriginShipped,
		"import os\nprint(sorted(os.listdir('/proc/self/fd')), os.environ.get('GATEHOUSE_GATEWAY_OUT'))"))
	if err != nil {
		t.Fatal(err)
	}
	if out := reply(t, r); !strings.HasPrefix(out.Stdout, "['0', '1', '2', '3'] None") {
		t.Fatalf("unbound sink: %q (want stdio and the listing's own descriptor)", out.Stdout)
	}
	evs := env.Events(t, run)
	if _, ok := codeOutcome(t, evs).Detail["gateway_calls"]; ok {
		t.Fatal("an unbound sink recorded gateway_calls")
	}
}

// FuzzGatewayParams: a request the gateway passes on is a JSON object naming no origin in any case, and one
// naming an origin other than the code's is refused as a bad request.
func FuzzGatewayParams(f *testing.F) {
	for _, s := range []string{`{"provider":"erp","method":"GET","path":"/x"}`, `{"origin":"model","path":"/x"}`,
		`{"origin":"shipped"}`, `{"ORIGIN":"shipped"}`, `{"origin":"model","Origin":"shipped"}`, `{"origin":"shipped","origin":"model"}`,
		`[]`, `null`, `"x"`, `{"origin":1}`, `{"body":{"origin":"shipped"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if !json.Valid(line) {
			return // the sandbox answers these itself
		}
		params, err := code.GatewayParams(policy.OriginModel, line)
		if err != nil {
			if !errors.Is(err, broker.ErrBadRequest) {
				t.Fatalf("%q: %v does not wrap ErrBadRequest", line, err)
			}
			return
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(params, &obj); err != nil || obj == nil {
			t.Fatalf("%q passed on as %q, not an object", line, params)
		}
		for k := range obj {
			if strings.EqualFold(k, "origin") {
				t.Fatalf("%q passed on with %q", line, k)
			}
		}
	})
}
