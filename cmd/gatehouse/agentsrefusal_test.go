package main

import (
	"strings"
	"testing"
)

// agents add of a registered name and rotate or remove of an unknown one
// exit 1 and say what to do next, on a real data dir (identities.json).
func TestAgentsRefusalsSayWhatToDo(t *testing.T) {
	dir := t.TempDir()
	cli := func(args ...string) (int, string) {
		code, _, errs := runCLI(append(args, "--data-dir", dir)...)
		return code, errs
	}
	if code, msg := cli("agents", "add", "invoice-bot"); code != 0 {
		t.Fatalf("agents add: exit %d, %s", code, msg)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"agents", "add", "invoice-bot"}, "agent invoice-bot: already registered (a new credential for it: gatehouse agents rotate invoice-bot)"},
		{[]string{"agents", "rotate", "nobody"}, "agent nobody: not registered (the registered ones: gatehouse agents list --data-dir " + dir + ")"},
		{[]string{"apps", "remove", "nobody"}, "not registered (the registered ones: gatehouse apps list --data-dir " + dir + ")"},
	} {
		code, msg := cli(c.args...)
		if code != 1 || !strings.Contains(msg, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and %q", c.args, code, msg, c.want)
		}
	}
}
