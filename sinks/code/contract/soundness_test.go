package contract_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/sinks/code/contract"
)

// TestVerifiedProgramsStayInTheirContract runs every corpus program whose
// contract is verified, against a stand-in client that records each call
// (testdata/stub), with a few inputs, and checks every call it made is one
// of its contract's operations: the contract holds for what the programs
// really do, not only for what the reader thinks they do.
func TestVerifiedProgramsStayInTheirContract(t *testing.T) {
	progs, srcs := corpus(t)
	stub, _ := filepath.Abs("testdata/stub")
	inputs := []struct {
		argv  []string
		stdin string
	}{
		{[]string{"INV-7", "L-2", "S-9", "x"}, `{"contact": "c1", "note": "n", "ids": ["i1", "i2"], "supplier": {"id": "s1"}, "amount": "1", "invoice": "INV-7"}`},
		{[]string{"pay", "INV-8"}, `{"ids": [], "supplier": {"id": "s2"}, "contact": "c2", "note": "", "amount": "2", "invoice": "INV-8"}`},
	}
	type job struct {
		Src   string   `json:"src"`
		Dir   string   `json:"dir"`
		Argv  []string `json:"argv"`
		Stdin string   `json:"stdin"`
		Entry string   `json:"entry"`
		name  string
		c     *contract.Contract
	}
	var jobs []job
	for i, p := range progs {
		c := read(t, srcs[i], corpusOptions(srcs[i]))
		if !c.Verified {
			continue
		}
		for _, in := range inputs {
			dir := t.TempDir()
			for f, text := range map[string]string{"invoices.csv": "id\nA-1\n", "settings.json": "{}"} {
				_ = os.WriteFile(filepath.Join(dir, f), []byte(text), 0o600)
			}
			_ = os.Mkdir(filepath.Join(dir, "out"), 0o700)
			jobs = append(jobs, job{Src: srcs[i], Dir: dir, Argv: in.argv, Stdin: in.stdin, Entry: corpusOptions(srcs[i]).Entry, name: filepath.Base(p), c: c})
		}
	}
	in, _ := json.Marshal(jobs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-I", "-B", "-c", stubDriver, stub)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("stub driver: %v\n%s", err, errb.String())
	}
	var results [][]sentCall
	if err := json.Unmarshal(out.Bytes(), &results); err != nil || len(results) != len(jobs) {
		t.Fatalf("stub driver output: %v (%d results for %d jobs)", err, len(results), len(jobs))
	}
	total := 0
	for i, calls := range results {
		for _, call := range calls {
			total++
			if !inContract(jobs[i].c, call) {
				t.Errorf("%s sent %s %s %s, which is not in its verified contract %v", jobs[i].name, call.Method, call.Provider, call.Path, jobs[i].c.Operations)
			}
		}
	}
	if len(jobs) < 120 || total < 200 {
		t.Fatalf("%d runs made %d calls: the check checked too little", len(jobs), total)
	}
	t.Logf("%d runs of %d verified programs made %d calls, each in its contract", len(jobs), len(jobs)/len(inputs), total)
}

// stubDriver runs each job (a program, its folder, argv, stdin and entry)
// in turn in one python3, with the stand-in client, and prints the calls
// each made. A program that fails on the stand-in's answers, or runs past
// five seconds, is stopped; what it sent before counts.
const stubDriver = `
import io, json, os, runpy, signal, sys
stub = sys.argv[1]
jobs = json.loads(sys.stdin.read())
results = []
def alarm(*_):
    raise TimeoutError("stopped")
signal.signal(signal.SIGALRM, alarm)
for job in jobs:
    os.chdir(job["dir"])
    with open("main.py", "w") as f:
        f.write(job["src"])
    log = os.path.join(job["dir"], "calls.log")
    os.environ["STUB_LOG"] = log
    sys.modules.pop("gatehouse", None)
    sys.path[:] = [stub, job["dir"]] + [p for p in sys.path if p not in (stub, job["dir"])]
    sys.argv = ["main.py"] + job["argv"]
    sys.stdin = io.StringIO(job["stdin"])
    out = io.StringIO()
    sys.stdout, saved = out, sys.stdout
    signal.alarm(5)
    try:
        g = runpy.run_path("main.py", run_name="__main__")
        if job["entry"]:
            g[job["entry"]]({"invoice": "INV-7", "callback_url": "/cb"})
    except BaseException:
        pass
    finally:
        signal.alarm(0)
        sys.stdout = saved
        gh = sys.modules.get("gatehouse")
        if gh is not None and hasattr(gh, "_LOG"):
            gh._LOG.close()
    calls = []
    if os.path.exists(log):
        with open(log) as f:
            calls = [json.loads(l) for l in f if l.strip()]
    results.append(calls)
sys.__stdout__.write(json.dumps(results))
`

type sentCall struct{ Provider, Method, Path string }

// inContract matches a call against the contract the way the policy does:
// the method, and the path segment by segment, a placeholder standing for
// one non-empty segment. The path is cleaned as the provider sink cleans it.
func inContract(c *contract.Contract, call sentCall) bool {
	p := path.Join("/", call.Path)
	if strings.HasSuffix(call.Path, "/") && p != "/" {
		p += "/"
	}
	for _, op := range c.Operations {
		if op.Provider != call.Provider || op.Method != call.Method {
			continue
		}
		ts, ps := strings.Split(op.Template, "/"), strings.Split(p, "/")
		if len(ts) != len(ps) {
			continue
		}
		ok := true
		for i := range ts {
			if strings.HasPrefix(ts[i], "{") && strings.HasSuffix(ts[i], "}") {
				ok = ok && ps[i] != ""
			} else {
				ok = ok && ts[i] == ps[i]
			}
		}
		if ok {
			return true
		}
	}
	return false
}
