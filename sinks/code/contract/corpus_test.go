package contract_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/sinks/code/contract"
)

var update = flag.Bool("update", false, "rewrite the corpus's golden contracts")

// corpusOptions reads a program's header: "# files: a.py, data.csv" names
// files written beside it, "# entry: run" an entry function.
func corpusOptions(src string) contract.Options {
	var o contract.Options
	for _, line := range strings.Split(src, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		if v, ok := strings.CutPrefix(line, "# files:"); ok {
			for _, f := range strings.Split(v, ",") {
				o.Files = append(o.Files, strings.TrimSpace(f))
			}
		}
		if v, ok := strings.CutPrefix(line, "# entry:"); ok {
			o.Entry = strings.TrimSpace(v)
		}
	}
	return o
}

// TestCorpus reads every program in testdata/corpus and compares its
// contract with the golden file beside it (go test -run Corpus -update
// rewrites them; review the diff: each one is a claim about soundness).
func TestCorpus(t *testing.T) {
	progs, _ := corpus(t)
	verified := 0
	reasons := map[contract.Reason]int{}
	for _, p := range progs {
		name := strings.TrimSuffix(filepath.Base(p), ".py")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			c := read(t, string(src), corpusOptions(string(src)))
			got, _ := json.MarshalIndent(c, "", "  ")
			got = append(got, '\n')
			golden := strings.TrimSuffix(p, ".py") + ".json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("no golden contract (run with -update and review it): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("contract of %s:\n%s\nwant:\n%s", name, got, want)
			}
			if c.Verified {
				verified++
			}
			for _, pr := range c.Problems {
				reasons[pr.Reason]++
			}
		})
	}
	t.Logf("corpus: %d of %d programs verified; reasons: %v", verified, len(progs), reasons)
}
