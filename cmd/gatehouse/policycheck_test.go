package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// An agent card written from what the agent's MCP client lists
// (files__read, output_deliver) matches nothing, since cards match card
// names (files/read, output.deliver): policy check says so and what to
// write; card names as cards match them pass.
func TestPolicyCheckFindsClientToolSpellings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(`agents:
  - name: bot
    allowed_tools: ["files/read", "output.deliver", "files__read"]
    blocked_tools: ["output_deliver", "*/wipe*"]
    require_approval_for: ["bank__transfer", "snake_case_tool"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := runPolicyCheck(file, "", "", "")
	var got []string
	for _, p := range rep.Problems {
		got = append(got, p.Part+" -> "+p.Fix)
		if !strings.Contains(p.Problem, "SINK.ACTION, SERVER/TOOL") {
			t.Errorf("problem %q does not say how cards name tools", p.Problem)
		}
	}
	want := []string{`files__read -> write "files/read"`, `output_deliver -> write "output.deliver"`, `bank__transfer -> write "bank/transfer"`}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || rep.OK {
		t.Fatalf("problems %q (ok %v), want %q", got, rep.OK, want)
	}
}
