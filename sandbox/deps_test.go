package sandbox_test

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The sandbox sits below every sink: it may use the standard library, x/sys and x/net/bpf, Landlock and
// seccomp, and nothing of Gatehouse or its services (NATS, Redis, echo, ...), so that confinement never
// depends on them and they never on its internals.
func TestDependencies(t *testing.T) {
	allowed := []string{"golang.org/x/sys/", "golang.org/x/net/bpf", "github.com/landlock-lsm/go-landlock/", "github.com/elastic/go-seccomp-bpf"}
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
	imports:
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if !strings.Contains(strings.Split(p, "/")[0], ".") {
				continue // standard library
			}
			for _, a := range allowed {
				if strings.HasPrefix(p, a) {
					continue imports
				}
			}
			t.Errorf("%s imports %s: the sandbox may not depend on it", e.Name(), p)
		}
	}
}
