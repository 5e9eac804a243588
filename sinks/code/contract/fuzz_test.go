package contract_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/sinks/code/contract"
)

// FuzzReadTree feeds the tree reader and the analysis arbitrary bytes:
// they never panic or fault (a fault is recovered as reader-failed, which
// this target looks for), are deterministic, and a verified contract has
// no problems and only well-formed operations.
func FuzzReadTree(f *testing.F) {
	_, srcs := corpus(f)
	for _, s := range srcs[:min(len(srcs), 24)] {
		f.Add(batchTrees[s])
	}
	for _, s := range []string{`{}`, `{"v":1}`, `{"v":1,"module":{"_":"Module","body":[]}}`,
		`{"v":1,"module":{"_":"Module","body":[{"_":"Expr","value":{"_":"Call","func":{"_":"Name","id":"eval"},"args":[],"keywords":[]}}]}}`,
		`{"v":1,"module":{"_":"Module","body":[{"_":"Expr","value":null}]}}`, `{"v":1,"error":{"kind":"syntax","msg":"x","line":1,"col":2}}`,
		`[` + strings.Repeat(`[`, 3000), `{"v":1,"module":{"_":"Module","body":[{"_":"While","test":{"_":"Constant","value":{"t":"bool","v":true}},"body":[],"orelse":[]}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c1 := contract.ReadJSON(b, contract.Options{MaxSteps: 20000})
		c2 := contract.ReadJSON(b, contract.Options{MaxSteps: 20000})
		if !reflect.DeepEqual(c1, c2) {
			a, _ := json.Marshal(c1)
			bb, _ := json.Marshal(c2)
			t.Fatalf("not deterministic:\n%s\n%s", a, bb)
		}
		for _, p := range c1.Problems {
			if strings.HasPrefix(p.Detail, contract.InternalError) {
				t.Fatalf("the reader faulted: %s", p.Detail)
			}
		}
		if c1.Verified != (len(c1.Problems) == 0) {
			t.Fatalf("verified %v with problems %v", c1.Verified, c1.Problems)
		}
		for _, op := range c1.Operations {
			if op.Provider == "" || !strings.HasPrefix(op.Template, "/") || strings.ToUpper(op.Method) != op.Method {
				t.Fatalf("malformed operation %+v", op)
			}
		}
		if _, err := json.Marshal(c1); err != nil {
			t.Fatal(err)
		}
	})
}
