package e2e

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
)

// payPy pays the invoice its input names, to the supplier's account on
// record, through the client module: every operation is in its code.
const payPy = `import gatehouse, json, sys
req = json.load(sys.stdin)
inv = gatehouse.get("erp", f"/invoices/{req['invoice']}", atom="erp.read").body
sup = gatehouse.get("erp", f"/suppliers/{inv['supplier_id']}", atom="erp.read").body
try:
    r = gatehouse.post("erp", "/payments", atom="erp.pay",
                       body={"invoice": inv["id"], "iban": sup["iban"], "amount": inv["amount_due"]})
    print("PAY", json.dumps({"outcome": r.decision["outcome"], "status": r.status}))
except gatehouse.Refused as e:
    print("PAY", json.dumps({"outcome": e.outcome, "refusal": e.refusal}))
`

// remindPy reminds the supplier of an invoice; its code sends
// POST /invoices/{invoice}/remind and nothing else.
const remindPy = `import gatehouse, json, sys
invoice = json.load(sys.stdin)["invoice"]
try:
    r = gatehouse.post("erp", f"/invoices/{invoice}/remind", atom="erp.remind")
    print("REMIND", json.dumps({"outcome": r.decision["outcome"], "status": r.status}))
except gatehouse.Refused as e:
    print("REMIND", json.dumps({"outcome": e.outcome, "refusal": e.refusal}))
`

// runtimeURLPy pays to an endpoint its input names: the URL is built at
// run time, so its contract cannot be verified.
const runtimeURLPy = `import gatehouse, json, sys
req = json.load(sys.stdin)
inv = gatehouse.get("erp", "/invoices/" + req["invoice"], atom="erp.read").body
sup = gatehouse.get("erp", "/suppliers/" + inv["supplier_id"], atom="erp.read").body
try:
    r = gatehouse.post("erp", req["endpoint"], atom="erp.pay",
                       body={"invoice": inv["id"], "iban": sup["iban"], "amount": inv["amount_due"]})
    print("PAY", json.dumps({"outcome": r.decision["outcome"], "status": r.status}))
except gatehouse.Refused as e:
    print("PAY", json.dumps({"outcome": e.outcome, "refusal": e.refusal}))
`

// TestModelCodePaysThroughTheGateway runs `gatehouse serve --mode strict`
// with an ERP, a person's credential and the supplier-payment grounding
// rule, and has model-written code pay an invoice through the gateway:
// allowed and recorded verified when its code contains the payment; a
// reminder whose planted invoice id sends an operation its code does not
// contain is outside-contract; the same payment to a URL built at run time
// is unverified-model-code. Nothing refused reaches the ERP; each code
// decision records its contract; verify passes; `gatehouse contract read`
// says the same of each program.
func TestModelCodePaysThroughTheGateway(t *testing.T) {
	e := &erp{}
	srv := httptest.NewServer(e)
	defer srv.Close()
	data := t.TempDir()
	flags := erpFiles(t, data, srv.URL, "tok-ada-s3cr3t")
	// The reminder integration, beside the catalogue's read and pay.
	cat := filepath.Join(data, "providers.yaml")
	b, _ := os.ReadFile(cat)
	b = append(b, []byte(`  - {name: erp.remind, provider: erp, effect: write, origin: shipped, operations: [{method: POST, template: "/invoices/{id}/remind"}]}
`)...)
	if err := os.WriteFile(cat, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s := serve(t, data, append([]string{"--mode", "strict"}, flags...)...)
	runCode := func(src, stdin string) (string, string) {
		t.Helper()
		run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
		params, _ := json.Marshal(map[string]string{"program": "python3", "source": src, "stdin": stdin})
		r := gh(t, "effect", "code", "--data-dir", data, "--run", run, "--action", "run", "--origin", "model", "--params", string(params), "--json")
		var reply broker.EffectReply
		if err := json.Unmarshal([]byte(r.stdout), &reply); err != nil || r.code != 0 {
			t.Fatalf("code effect: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		var out struct{ Stdout, Stderr string }
		_ = json.Unmarshal(reply.Result, &out)
		return run, out.Stdout + out.Stderr
	}
	shownLine := func(out, name string) map[string]any {
		t.Helper()
		for _, l := range strings.Split(out, "\n") {
			if rest, ok := strings.CutPrefix(l, name+" "); ok {
				var m map[string]any
				_ = json.Unmarshal([]byte(rest), &m)
				return m
			}
		}
		t.Fatalf("no %s in %q", name, out)
		return nil
	}

	payRun, out := runCode(payPy, `{"invoice": "INV-7"}`)
	if m := shownLine(out, "PAY"); m["outcome"] != "allowed" || m["status"] != 201.0 {
		t.Fatalf("verified payment: %v\n%s", m, out)
	}
	if got := e.paid(); len(got) != 1 || got[0] != "GB82WEST12345698765432 1200.00 Bearer tok-ada-s3cr3t" {
		t.Fatalf("the ERP was paid %q", got)
	}
	remindRun, out := runCode(remindPy, `{"invoice": "INV-7/void"}`)
	if m := shownLine(out, "REMIND"); m["outcome"] != "refused" || m["refusal"] != "outside-contract" {
		t.Fatalf("a planted id: %v\n%s", m, out)
	}
	urlRun, out := runCode(runtimeURLPy, `{"invoice": "INV-7", "endpoint": "/payments"}`)
	if m := shownLine(out, "PAY"); m["outcome"] != "refused" || m["refusal"] != "unverified-model-code" {
		t.Fatalf("URL built at run time: %v\n%s", m, out)
	}
	if got := e.paid(); len(got) != 1 {
		t.Fatalf("a refused payment reached the ERP: %q", got)
	}
	s.stop(t)

	decisions := func(run string) (code journal.Decision, provider []journal.Decision) {
		t.Helper()
		for _, line := range strings.Split(strings.TrimSpace(readRun(t, data, run)), "\n") {
			var ev journal.Event
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type != journal.TypeDecision {
				continue
			}
			var d journal.Decision
			_ = json.Unmarshal(ev.Data, &d)
			if d.Sink == "code" {
				code = d
			} else {
				provider = append(provider, d)
			}
		}
		return code, provider
	}
	cd, pds := decisions(payRun)
	if cd.Contract == nil || !cd.Contract.Verified || len(cd.Contract.Operations) != 3 || len(pds) != 3 ||
		!pds[2].Verified || pds[2].Outcome != journal.OutcomeAllowed || pds[2].Path != "/payments" || len(pds[2].Citations) != 2 {
		t.Fatalf("payment run: code %+v, provider %+v", cd.Contract, pds)
	}
	cd, pds = decisions(remindRun)
	if cd.Contract == nil || !cd.Contract.Verified || len(pds) != 1 || pds[0].Refusal != "outside-contract" || !pds[0].Enforced || pds[0].Verified {
		t.Fatalf("reminder run: code %+v, provider %+v", cd.Contract, pds)
	}
	cd, pds = decisions(urlRun)
	if cd.Contract == nil || cd.Contract.Verified || len(cd.Contract.Unverified) == 0 || cd.Contract.Unverified[0].Reason != "url-at-run-time" ||
		len(pds) != 3 || pds[2].Refusal != "unverified-model-code" || !pds[2].Enforced {
		t.Fatalf("runtime URL run: code %+v, provider %+v", cd.Contract, pds)
	}
	if v := gh(t, "verify", "--json", filepath.Join(data, "journal")); v.code != 0 {
		t.Fatalf("verify: %s", v.stdout)
	}

	for src, want := range map[string]int{payPy: 0, remindPy: 0, runtimeURLPy: 1} {
		f := filepath.Join(data, "prog.py")
		if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		r := gh(t, "contract", "read", f)
		if r.code != want {
			t.Errorf("contract read: exit %d, want %d:\n%s%s", r.code, want, r.stdout, r.stderr)
		}
		if want == 1 && !strings.Contains(r.stdout, "url-at-run-time") {
			t.Errorf("contract read does not say why:\n%s", r.stdout)
		}
	}
}
