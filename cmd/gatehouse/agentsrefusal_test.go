package main

import (
	"errors"
	"os"
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

// mcp token makes a bearer token only for an agent registered in the data
// dir: for any other name it exits 1, says how to register it, and writes
// no token file.
func TestMCPTokenOnlyForARegisteredAgent(t *testing.T) {
	dir := t.TempDir()
	code, out, msg := runCLI("mcp", "token", "nobody", "--data-dir", dir)
	if code != 1 || out != "" || !strings.Contains(msg, "agent nobody: not registered") || !strings.Contains(msg, "gatehouse agents add nobody") {
		t.Fatalf("mcp token nobody: exit %d, stdout %q, stderr %q; want exit 1, not registered", code, out, msg)
	}
	if _, err := os.Stat(mcpTokenPath(dir, "nobody")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a token file for an unregistered agent: %v", err)
	}
	if code, _, msg := runCLI("agents", "add", "bob", "--data-dir", dir); code != 0 {
		t.Fatalf("agents add bob: exit %d %s", code, msg)
	}
	code, out, msg = runCLI("mcp", "token", "bob", "--data-dir", dir)
	tok, err := os.ReadFile(mcpTokenPath(dir, "bob"))
	if code != 0 || err != nil || strings.TrimSpace(string(tok)) != strings.TrimSpace(out) || !strings.HasPrefix(out, mcpTokenPrefix) {
		t.Fatalf("mcp token bob: exit %d, stdout %q, file %q (%v), stderr %s", code, out, tok, err, msg)
	}
}
