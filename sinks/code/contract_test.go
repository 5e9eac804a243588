package code_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/code"
	"github.com/gatehouse/gatehouse/sinks/code/contract"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// TestClientModuleIsWhatTheReaderModels holds gatehouse.py to the reader's
// model of it: the same functions (each fixing the same method), call's
// keywords, and no import beyond those the reader checks for shadowing.
func TestClientModuleIsWhatTheReaderModels(t *testing.T) {
	cmd := exec.Command("python3", "-I", "-S", "-c", `
import ast, json, sys
tree = ast.parse(sys.stdin.read())
funcs, imports = {}, set()
for n in ast.walk(tree):
    if isinstance(n, ast.Import):
        imports.update(a.name.split(".")[0] for a in n.names)
    elif isinstance(n, ast.ImportFrom):
        imports.add(n.module.split(".")[0])
for n in tree.body:
    if isinstance(n, ast.FunctionDef) and not n.name.startswith("_"):
        method = ""
        for c in ast.walk(n):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "call":
                method = c.args[1].value
        funcs[n.name] = {"method": method, "kwonly": [a.arg for a in n.args.kwonlyargs],
                         "args": [a.arg for a in n.args.args], "kwarg": bool(n.args.kwarg)}
print(json.dumps({"funcs": funcs, "imports": sorted(imports)}))
`)
	cmd.Stdin = bytes.NewReader(code.Client)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Funcs map[string]struct {
			Method string
			Kwonly []string
			Args   []string
			Kwarg  bool
		}
		Imports []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	funcs, keywords, imports := contract.Client()
	if len(got.Funcs) != len(funcs) {
		t.Fatalf("the client has functions %v, the reader models %v", got.Funcs, funcs)
	}
	for name, method := range funcs {
		f, ok := got.Funcs[name]
		if !ok || f.Method != method {
			t.Errorf("%s: the client's %+v, the reader's method %q", name, f, method)
		}
		if name == "call" {
			sort.Strings(keywords)
			kw := slices.Sorted(slices.Values(f.Kwonly))
			if !slices.Equal(kw, keywords) || !slices.Equal(f.Args, []string{"provider", "method", "path", "body"}) || f.Kwarg {
				t.Errorf("call takes %v and %v, the reader models %v", f.Args, kw, keywords)
			}
		} else if !slices.Equal(f.Args, []string{"provider", "path", "body"}) || !f.Kwarg {
			t.Errorf("%s takes %v (kwarg %v)", name, f.Args, f.Kwarg)
		}
	}
	for _, m := range got.Imports {
		if !slices.Contains(imports, m) {
			t.Errorf("the client imports %s, which the reader does not check for shadowing", m)
		}
	}
}

// TestReaderInTheSandbox reads corpus programs with the parser confined
// in the sandbox and gets the golden contracts the contract package's
// corpus holds (read there with the host's python3).
func TestReaderInTheSandbox(t *testing.T) {
	r := code.NewReader(detected(t), code.ReaderConfig{})
	progs, _ := filepath.Glob("contract/testdata/corpus/*.py")
	if len(progs) < 60 {
		t.Fatalf("corpus: %d programs", len(progs))
	}
	for _, p := range []string{"v13_dispatch_table", "v22_class_client", "u16_raw_fd", "u31_syntax_error"} {
		src, err := os.ReadFile("contract/testdata/corpus/" + p + ".py")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := os.ReadFile("contract/testdata/corpus/" + p + ".json")
		c := r.Read(sinktest.Ctx(t), "/usr/bin/python3", src, contract.Options{})
		got, _ := json.MarshalIndent(c, "", "  ")
		if string(got)+"\n" != string(want) {
			t.Errorf("%s read in the sandbox:\n%s\nwant:\n%s", p, got, want)
		}
		if again := r.Read(sinktest.Ctx(t), "/usr/bin/python3", src, contract.Options{}); again != c {
			t.Errorf("%s: read again, not from the cache", p)
		}
	}
	// A parser that cannot run gives an unverified contract.
	c := r.Read(sinktest.Ctx(t), "/nonexistent/python3", []byte("print(1)"), contract.Options{})
	if c.Verified || c.Problems[0].Reason != contract.ReasonReaderFailed {
		t.Fatalf("no parser: %+v", c)
	}
}

// contractCatalogue adds the integrations the contract tests' programs name.
func contractCatalogue(base string) string {
	return gatewayCatalogue(base) + `  - {name: erp.approve, provider: erp, effect: write, origin: shipped, operations: [{method: POST, template: "/invoices/{id}/approve"}]}
`
}

func startContractGateway(t *testing.T, mode policy.Mode, sb *sandbox.Sandbox, erp *testERP, reg bool) (*gatewayEnv, *code.Sink, *code.Registry) {
	t.Helper()
	return startGatewayWith(t, mode, sb, erp, contractCatalogue(erp.srv.URL), reg)
}

// codeDecision is the run's first code-sink decision.
func codeDecision(t *testing.T, evs []journal.Event) journal.Decision {
	t.Helper()
	for _, ev := range evs {
		if ev.Type != journal.TypeDecision {
			continue
		}
		var d journal.Decision
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Sink == policy.SinkCode {
			return d
		}
	}
	t.Fatal("no code decision")
	return journal.Decision{}
}

// showPy prints each call's decision the way the client module reports it.
const showPy = `import gatehouse, json, sys
def show(name, f, *a, **k):
    try:
        r = f(*a, **k)
        print(name, json.dumps({"outcome": r.decision.get("outcome"), "refusal": r.decision.get("refusal"), "status": r.status}))
    except gatehouse.Refused as e:
        print(name, json.dumps({"outcome": e.outcome, "refusal": e.refusal, "enforced": True}))
    except gatehouse.Error as e:
        print(name, json.dumps({"error": e.code}))
`

// TestGatewayHoldsModelCodeToItsContract: model code calling through the
// client module, in strict mode. Its contract is read before it runs and
// recorded with the code decision. A payment its code contains is allowed
// and recorded verified; an approval whose invoice id carries a "/" sends
// a path its code does not contain (outside-contract, nothing reaches the
// ERP); the same program with the path built at run time is unverified
// and every mutating call is unverified-model-code; a read is allowed in
// both.
func TestGatewayHoldsModelCodeToItsContract(t *testing.T) {
	erp := newTestERP(t)
	sb := detected(t)
	if !sb.Confined() {
		t.Skip("strict mode refuses model code without a confined sandbox")
	}
	g, _, _ := startContractGateway(t, policy.ModeStrict, sb, erp, false)
	run := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})

	verified := showPy + `
inv = sys.argv[1]
show("GET", gatehouse.get, "erp", f"/invoices/{inv}", atom="erp.read")
show("PAY", gatehouse.post, "erp", "/payments", atom="erp.pay", body={"invoice": inv, "amount": "10.00"})
show("APPROVE", gatehouse.post, "erp", f"/invoices/{sys.argv[2]}/approve", atom="erp.approve")
`
	before := erp.count("")
	_, out := g.runModelCode(t, run, verified, "INV-7", "INV-7/void")
	if m := shown(t, out.Stdout, "GET"); m["outcome"] != "allowed" || m["status"] != 200.0 {
		t.Errorf("GET: %v", m)
	}
	if m := shown(t, out.Stdout, "PAY"); m["outcome"] != "allowed" || m["status"] != 201.0 {
		t.Errorf("PAY: %v", m)
	}
	if m := shown(t, out.Stdout, "APPROVE"); m["outcome"] != "refused" || m["refusal"] != string(policy.RefuseOutsideContract) {
		t.Errorf("APPROVE with a planted id: %v", m)
	}
	if n := erp.count("") - before; n != 2 || erp.count("POST /payments") != 1 {
		t.Fatalf("the ERP got %d requests (%d payments), want the read and the payment", n, erp.count("POST /payments"))
	}
	evs := g.Events(t, run)
	cd := codeDecision(t, evs)
	want := []journal.ContractOperation{
		{Provider: "erp", Method: "POST", Template: "/invoices/{argv}/approve"},
		{Provider: "erp", Method: "GET", Template: "/invoices/{inv}"},
		{Provider: "erp", Method: "POST", Template: "/payments"},
	}
	if cd.Contract == nil || !cd.Contract.Verified || !reflect.DeepEqual(cd.Contract.Operations, want) || cd.Contract.Reader != contract.ReaderVersion {
		t.Fatalf("the code decision's contract: %+v", cd.Contract)
	}
	decs, _ := providerEvents(t, evs)
	if len(decs) != 3 || !decs[0].Verified || !decs[1].Verified || decs[2].Verified ||
		decs[1].Outcome != journal.OutcomeAllowed || decs[2].Refusal != policy.RefuseOutsideContract || !decs[2].Enforced {
		t.Fatalf("provider decisions %+v", decs)
	}

	unverified := showPy + `
path = sys.argv[1]
show("GET", gatehouse.get, "erp", "/invoices/INV-7", atom="erp.read")
show("PAY", gatehouse.post, "erp", path, atom="erp.pay", body={"invoice": "INV-7", "amount": "10.00"})
`
	run2 := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	before = erp.count("")
	_, out = g.runModelCode(t, run2, unverified, "/payments")
	if m := shown(t, out.Stdout, "GET"); m["outcome"] != "allowed" {
		t.Errorf("GET from unverified code: %v", m)
	}
	if m := shown(t, out.Stdout, "PAY"); m["outcome"] != "refused" || m["refusal"] != string(policy.RefuseUnverifiedModelCode) {
		t.Errorf("PAY to a path built at run time: %v", m)
	}
	if n := erp.count("") - before; n != 1 {
		t.Fatalf("the ERP got %d requests from unverified code, want only the read", n)
	}
	evs = g.Events(t, run2)
	cd = codeDecision(t, evs)
	if cd.Contract == nil || cd.Contract.Verified || len(cd.Contract.Unverified) != 1 ||
		cd.Contract.Unverified[0].Reason != string(contract.ReasonURLAtRunTime) || cd.Contract.Unverified[0].Line != 4 {
		t.Fatalf("unverified contract recorded: %+v", cd.Contract)
	}
	g.Verify(t)
}

// TestGatewayShippedCodeKeepsTheCatalogue: shipped code is not held to the
// contract read from it, only to the catalogue's: a shipped program whose
// path is built at run time still pays.
func TestGatewayShippedCodeKeepsTheCatalogue(t *testing.T) {
	erp := newTestERP(t)
	g, _, _ := startContractGateway(t, policy.ModeStrict, detected(t), erp, false)
	run := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	p, _ := json.Marshal(code.Params{Program: "python3", Source: showPy + `show("PAY", gatehouse.post, "erp", sys.argv[1], atom="erp.pay")`, Args: []string{"/payments"}})
	r, err := g.Effect(t, policy.SinkCode, broker.EffectRequest{Run: run, Action: "run", Origin: policy.OriginShipped, Params: p})
	if err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("%v %+v", err, r)
	}
	if m := shown(t, reply(t, r).Stdout, "PAY"); m["outcome"] != "allowed" || m["status"] != 201.0 {
		t.Fatalf("shipped PAY: %v", m)
	}
	if cd := codeDecision(t, g.Events(t, run)); cd.Contract == nil || cd.Contract.Verified {
		t.Fatalf("the shipped program's contract is still read and recorded: %+v", cd.Contract)
	}
}

// TestRegistryReadsContractsWhenStoredAndWhenChanged stores an
// integration through the sink, runs it as registry code (its contract
// verified, its payment allowed), then changes its entry in the bucket the
// way another broker or an operator would: every broker's watch re-reads
// the contract, the entry says so, and the next run is held to the new
// code's contract.
func TestRegistryReadsContractsWhenStoredAndWhenChanged(t *testing.T) {
	erp := newTestERP(t)
	sb := detected(t)
	if !sb.Confined() {
		t.Skip("strict mode refuses registry code without a confined sandbox")
	}
	g, _, reg := startContractGateway(t, policy.ModeStrict, sb, erp, true)
	ctx := sinktest.Ctx(t)
	run := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	src := showPy + `show("PAY", gatehouse.post, "erp", "/payments", atom="erp.pay", body={"amount": "1.00"})`
	params, _ := json.Marshal(code.RegisterParams{Name: "erp-pay", Program: "python3", Source: src, Effect: policy.EffectWrite})
	r, err := g.Agent.Effect(ctx, policy.SinkCode, broker.EffectRequest{Run: run, Action: "register", Params: params})
	if err != nil || r.Decision.Outcome != journal.OutcomeAllowed || r.Error != nil {
		t.Fatalf("register: %v %+v", err, r)
	}
	var rr code.RegisterReply
	if err := json.Unmarshal(r.Result, &rr); err != nil || !rr.Contract.Verified {
		t.Fatalf("register reply %s", r.Result)
	}
	kv, err := g.JS.KeyValue(ctx, subject.IntegrationsBucket)
	if err != nil {
		t.Fatal(err)
	}
	entry := func() code.Integration {
		t.Helper()
		e, err := kv.Get(ctx, "erp-pay")
		if err != nil {
			t.Fatal(err)
		}
		var in code.Integration
		if err := json.Unmarshal(e.Value(), &in); err != nil {
			t.Fatal(err)
		}
		return in
	}
	in := entry()
	if in.Effect != policy.EffectWrite || in.ContractOf != in.Digest || !in.Contract.Verified ||
		len(in.Contract.Operations) != 1 || in.Contract.Operations[0].Template != "/payments" || in.StoredBy.Person != "ada" {
		t.Fatalf("stored entry %+v", in)
	}
	obj, _ := g.JS.ObjectStore(ctx, subject.IntegrationCodeBucket)
	if b, err := obj.GetBytes(ctx, "src-"+strings.TrimPrefix(in.Digest, "sha256:")); err != nil || string(b) != src {
		t.Fatalf("stored source: %v", err)
	}
	if rd := codeDecision(t, g.Events(t, run)); rd.Action != "register" || rd.Contract == nil || !rd.Contract.Verified {
		t.Fatalf("register decision %+v", rd)
	}

	runIt := func(run string) map[string]any {
		t.Helper()
		p, _ := json.Marshal(code.Params{Integration: "erp-pay"})
		r, err := g.Agent.Effect(ctx, policy.SinkCode, broker.EffectRequest{Run: run, Action: "run", Params: p})
		if err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Fatalf("run the integration: %v %+v", err, r)
		}
		return shown(t, reply(t, r).Stdout, "PAY")
	}
	run1 := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	if m := runIt(run1); m["outcome"] != "allowed" || m["status"] != 201.0 {
		t.Fatalf("stored integration's payment: %v", m)
	}
	cd := codeDecision(t, g.Events(t, run1))
	// The agent that stored it is a model agent: its stored code runs as
	// model code, never with more trust than its registrar had.
	if in.StoredBy.Origin != policy.OriginModel || cd.Origin != policy.OriginModel || cd.Atom != "erp-pay" || cd.Declared != policy.EffectWrite || !cd.Contract.Verified {
		t.Fatalf("a run of a stored integration is held to its own declaration, as its registrar's origin: %+v (stored by %+v)", cd, in.StoredBy)
	}

	// Someone changes the stored code behind the sink's back: the path is
	// now built at run time.
	changed := showPy + `show("PAY", gatehouse.post, "erp", sys.argv[0] and "/pay" + "ments" + "".join(sys.argv[1:]), atom="erp.pay")`
	sum := putSource(t, obj, changed)
	in.Digest, in.Size = sum, int64(len(changed))
	b, _ := json.Marshal(in) // still carries the old contract, read from the old source
	if _, err := kv.Put(ctx, "erp-pay", b); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		now := entry()
		if now.ContractOf == sum {
			if now.Contract.Verified || now.Contract.Unverified[0].Reason != string(contract.ReasonURLAtRunTime) {
				t.Fatalf("re-read contract %+v", now.Contract)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the changed entry's contract was not re-read: %+v (%d re-reads)", now, reg.Rereads())
		}
		time.Sleep(50 * time.Millisecond)
	}
	run2 := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	before := erp.count("POST /payments")
	if m := runIt(run2); m["outcome"] != "refused" || m["refusal"] != string(policy.RefuseUnverifiedModelCode) {
		t.Fatalf("changed integration's payment: %v", m)
	}
	if erp.count("POST /payments") != before {
		t.Fatal("the changed integration paid")
	}

	// A source changed in the object store under its digest's name no
	// longer matches the entry: nothing runs.
	if _, err := obj.PutBytes(ctx, "src-"+strings.TrimPrefix(sum, "sha256:"), []byte("print('tampered')")); err != nil {
		t.Fatal(err)
	}
	run3 := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	p, _ := json.Marshal(code.Params{Integration: "erp-pay"})
	_, err = g.Agent.Effect(ctx, policy.SinkCode, broker.EffectRequest{Run: run3, Action: "run", Params: p})
	var eb *broker.ErrorBody
	if !errors.As(err, &eb) || eb.Code != broker.CodeUnavailable || !strings.Contains(eb.Message, "does not match its digest") {
		t.Fatalf("a tampered source: %v", err)
	}
	if got := sinktest.Types(g.Events(t, run3)); !slices.Equal(got, []journal.Type{journal.TypeRunOpen}) {
		t.Fatalf("a tampered source was decided: %v", got)
	}
	g.Verify(t)
}

func putSource(t *testing.T, obj jetstream.ObjectStore, src string) string {
	t.Helper()
	h := sha256.Sum256([]byte(src))
	sum := hex.EncodeToString(h[:])
	if _, err := obj.PutBytes(context.Background(), "src-"+sum, []byte(src)); err != nil {
		t.Fatal(err)
	}
	return "sha256:" + sum
}

// TestRegisterRefusesCodeBeyondItsDeclaredEffect: an integration declaring
// read whose verified contract deletes is not stored.
func TestRegisterRefusesCodeBeyondItsDeclaredEffect(t *testing.T) {
	erp := newTestERP(t)
	g, _, _ := startContractGateway(t, policy.ModeStrict, detected(t), erp, true)
	run := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	params, _ := json.Marshal(code.RegisterParams{Name: "cleanup", Program: "python3", Effect: policy.EffectRead,
		Source: "import gatehouse\ngatehouse.delete('erp', '/invoices/INV-7')\n"})
	_, err := g.Agent.Effect(sinktest.Ctx(t), policy.SinkCode, broker.EffectRequest{Run: run, Action: "register", Params: params})
	var eb *broker.ErrorBody
	if !errors.As(err, &eb) || eb.Code != broker.CodeBadRequest || !strings.Contains(eb.Message, "beyond the read effect") {
		t.Fatalf("register beyond its effect: %v", err)
	}
	if got := sinktest.Types(g.Events(t, run)); !slices.Equal(got, []journal.Type{journal.TypeRunOpen}) {
		t.Fatalf("a bad request is decided nothing: %v", got)
	}
	kv, _ := g.JS.KeyValue(sinktest.Ctx(t), subject.IntegrationsBucket)
	if _, err := kv.Get(sinktest.Ctx(t), "cleanup"); err == nil {
		t.Fatal("stored anyway")
	}
}

// TestDescribeRefusesAFileShadowingTheClient: the agent cannot replace the
// client module.
func TestDescribeRefusesAFileShadowingTheClient(t *testing.T) {
	s := code.New(unconfined(t), code.Config{})
	run := &broker.Run{ID: broker.NewRunID(time.Now())}
	for _, name := range []string{"gatehouse.py", "gatehouse/__init__.py", "gatehouse.cpython-311-x86_64-linux-gnu.so"} {
		params, _ := json.Marshal(code.Params{Program: "python3", Source: "import gatehouse", Files: map[string][]byte{name: []byte("x")}})
		if _, err := s.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: "run", Params: params}); err == nil || !strings.Contains(err.Error(), "client module") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestChangedIntegrationBeyondItsEffectDoesNotRun: a stored integration
// declaring read whose source is changed, behind the sink's back, to one
// that deletes is not run: its contract is read from the changed source
// and goes beyond the effect it declares.
func TestChangedIntegrationBeyondItsEffectDoesNotRun(t *testing.T) {
	erp := newTestERP(t)
	g, _, _ := startContractGateway(t, policy.ModeStrict, detected(t), erp, true)
	ctx := sinktest.Ctx(t)
	run := g.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	params, _ := json.Marshal(code.RegisterParams{Name: "erp-look", Program: "python3", Effect: policy.EffectRead,
		Source: "import gatehouse\ngatehouse.get('erp', '/invoices/INV-7', atom='erp.read')\n"})
	if r, err := g.Agent.Effect(ctx, policy.SinkCode, broker.EffectRequest{Run: run, Action: "register", Params: params}); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("register: %v %+v", err, r)
	}
	kv, _ := g.JS.KeyValue(ctx, subject.IntegrationsBucket)
	obj, _ := g.JS.ObjectStore(ctx, subject.IntegrationCodeBucket)
	e, err := kv.Get(ctx, "erp-look")
	if err != nil {
		t.Fatal(err)
	}
	var in code.Integration
	_ = json.Unmarshal(e.Value(), &in)
	deleting := "import gatehouse\ngatehouse.delete('erp', '/invoices/INV-7')\n"
	in.Digest, in.Size = putSource(t, obj, deleting), int64(len(deleting))
	b, _ := json.Marshal(in)
	if _, err := kv.Put(ctx, "erp-look", b); err != nil {
		t.Fatal(err)
	}
	p, _ := json.Marshal(code.Params{Integration: "erp-look"})
	_, err = g.Agent.Effect(ctx, policy.SinkCode, broker.EffectRequest{Run: run, Action: "run", Params: p})
	var eb *broker.ErrorBody
	if !errors.As(err, &eb) || eb.Code != broker.CodeBadRequest || !strings.Contains(eb.Message, "beyond the read effect") {
		t.Fatalf("a changed integration beyond its effect: %v", err)
	}
	if n := erp.count(""); n != 0 {
		t.Fatalf("the ERP got %d requests", n)
	}
}
