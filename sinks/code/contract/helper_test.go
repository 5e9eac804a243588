package contract_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse/gatehouse/sinks/code/contract"
)

// dump runs the dumper on the host's python3 (the tests' own programs;
// the code sink runs it in the sandbox).
func dump(t testing.TB, src string) []byte {
	t.Helper()
	cmd := exec.Command("python3", "-I", "-S", "-c", contract.Dumper)
	cmd.Stdin = strings.NewReader(src)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("dumper: %v: %s", err, errb.String())
	}
	return out.Bytes()
}

// batchDriver runs the dumper's dump() on many sources in one python3.
const batchDriver = `
import json, sys
ns = {"__name__": "batch"}
exec(compile(sys.argv[1], "astdump.py", "exec"), ns)
srcs = json.loads(sys.stdin.read())
sys.stdout.write(json.dumps([ns["dump"](s.encode("utf-8")) for s in srcs]))
`

var (
	batchMu    sync.Mutex
	batchTrees = map[string][]byte{}
)

// dumpAll dumps every source in one python3 run and keeps the trees.
func dumpAll(t testing.TB, srcs []string) {
	t.Helper()
	in, _ := json.Marshal(srcs)
	cmd := exec.Command("python3", "-I", "-S", "-c", batchDriver, contract.Dumper)
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("dumper: %v: %s", err, errb.String())
	}
	var trees []string
	if err := json.Unmarshal(out.Bytes(), &trees); err != nil || len(trees) != len(srcs) {
		t.Fatalf("dumper batch: %v", err)
	}
	batchMu.Lock()
	defer batchMu.Unlock()
	for i, s := range srcs {
		batchTrees[s] = []byte(trees[i])
	}
}

func read(t testing.TB, src string, opts contract.Options) *contract.Contract {
	t.Helper()
	batchMu.Lock()
	tree, ok := batchTrees[src]
	batchMu.Unlock()
	if !ok {
		tree = dump(t, src)
	}
	return contract.ReadJSON(tree, opts)
}

// corpus returns the corpus programs' paths and sources, their trees
// dumped in one python3 run.
func corpus(t testing.TB) (paths, srcs []string) {
	t.Helper()
	paths, err := filepath.Glob("testdata/corpus/*.py")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, string(b))
	}
	dumpAll(t, srcs)
	return paths, srcs
}
