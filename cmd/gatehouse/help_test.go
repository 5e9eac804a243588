package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
)

// Every example a command's help shows parses with that command's flags
// (it is run with --help appended, in process), and every command in the
// top-level list has examples and exit statuses.
func TestHelpExamplesParse(t *testing.T) {
	for name, d := range cmdDocs {
		if len(d.examples) == 0 || len(d.exits) == 0 {
			t.Errorf("%s: %d examples, %d exit statuses", name, len(d.examples), len(d.exits))
		}
		for _, ex := range d.examples {
			line := regexp.MustCompile(`\s+#.*$`).ReplaceAllString(ex, "")
			if i := strings.Index(line, "| gatehouse "); i >= 0 {
				line = line[i+2:]
			}
			for strings.HasPrefix(line, "GATEHOUSE_") {
				_, line, _ = strings.Cut(line, " ")
			}
			args := splitArgs(line)
			if len(args) == 0 || args[0] != "gatehouse" {
				t.Errorf("%s: example %q is not a gatehouse command", name, ex)
				continue
			}
			var out, errb bytes.Buffer
			err := run(context.Background(), append(args[1:], "--help"), func(string) string { return "" }, strings.NewReader(""), &out, &errb)
			var ee *exitError
			if err != nil && !(errors.As(err, &ee) && ee.code == 0) {
				t.Errorf("%s: example %q does not parse: %v\n%s", name, ex, err, errb.String())
			}
		}
	}
	for _, line := range strings.Split(topUsage, "\n") {
		if f := strings.Fields(line); len(line) > 2 && line[:2] == "  " && len(f) > 1 && line[2] != ' ' {
			if _, ok := cmdDocs[f[0]]; !ok {
				t.Errorf("command %s has no examples (helpdocs.go)", f[0])
			}
		}
	}
}

// splitArgs splits a command line on spaces, keeping '...' and "..." whole.
func splitArgs(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			if quote == '"' && r == '\\' {
				continue
			}
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
