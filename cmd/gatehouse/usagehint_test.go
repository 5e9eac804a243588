package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runCLI runs gatehouse with args and an empty environment and stdin, and
// returns its exit status, stdout and stderr as the process would.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	code = exitCode(err, &errb)
	return code, out.String(), errb.String()
}

// Every command-line mistake prints one line saying what is wrong and one
// naming the help to read (the subcommand's for a group), exit 2, as the
// README's "Using the CLI" promises; a message that names a help already
// is not given a second.
func TestUsageMistakesNameTheirHelp(t *testing.T) {
	for _, c := range []struct {
		args []string
		help string
	}{
		{[]string{"work", "open", "--tenant", "acme"}, "work open"},
		{[]string{"agents", "add"}, "agents add"},
		{[]string{"approve", "approve"}, "approve approve"},
		{[]string{"approve", "list", "pending"}, "approve list"},
		{[]string{"mcp", "upstream", "show"}, "mcp upstream"},
		{[]string{"mcp"}, "mcp"},
		{[]string{"verify", "a", "b"}, "verify"},
		{[]string{"evidence"}, "evidence"},
		{[]string{"checkpoint", "--jsn"}, "checkpoint"},
	} {
		code, out, errs := runCLI(c.args...)
		lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
		if code != 2 || out != "" || len(lines) != 2 || lines[1] != "Run 'gatehouse "+c.help+" --help' for usage." {
			t.Errorf("gatehouse %s: exit %d, stderr %q; want exit 2 and two lines, the second naming %q's help",
				strings.Join(c.args, " "), code, errs, c.help)
		}
	}
}
