package contract

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/e2e/deptest"
)

// TestDeps keeps the reader pure: it reads a tree handed to it and does
// no I/O of its own (the sandboxed parser runs in sinks/code).
func TestDeps(t *testing.T) {
	deptest.Check(t, "contract", map[string]string{
		"github.com/nats-io/":                    "the reader does no I/O",
		"github.com/redis/":                      "the reader does no I/O",
		"github.com/gatehouse/gatehouse/broker":  "the reader knows nothing of the broker; sinks/code records its contracts",
		"github.com/gatehouse/gatehouse/sandbox": "the reader runs nothing; sinks/code runs the parser in the sandbox",
		"net/http":                               "the reader does no I/O",
		"os/exec":                                "the parser runs in the sandbox, started by sinks/code, never here",
	})
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{"bytes": true, "cmp": true, "embed": true, "encoding/json": true, "errors": true,
		"fmt": true, "io": true, "math/big": true, "net/url": true, "path": true, "slices": true, "strconv": true, "strings": true,
		"unicode": true, "unicode/utf8": true}
	for _, imp := range strings.Fields(string(out)) {
		if !allowed[imp] {
			t.Errorf("contract imports %s directly; it may import only %v (no I/O: os, io/fs, syscall, net and the like are for sinks/code)", imp, allowed)
		}
	}
}
