package main

import (
	"net"
	"strings"
	"testing"
)

// A client command whose NATS cannot be reached says NO_BROKER, that
// nothing was decided and what to do, without echoing the URL's password;
// it exits 1 as the README's table says (no broker).
func TestClientCommandWithoutNATSSaysNoBroker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	url := "nats://bob:s3cret@" + addr
	for _, args := range [][]string{
		{"effect", "output", "--run", "r_01m8n75ye327hsa7apgb8fqfxn", "--result", "1"},
		{"work", "open", "--tenant", "acme", "--person", "ada"},
	} {
		code, _, msg := runCLI(append(args, "--nats-url", url, "--data-dir", t.TempDir(), "--timeout", "2s")...)
		if code != 1 || !strings.Contains(msg, "NO_BROKER: cannot reach NATS at nats://[redacted]@"+addr) ||
			!strings.Contains(msg, "nothing was decided") || strings.Contains(msg, "s3cret") {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and NO_BROKER with the URL redacted", args[0], code, msg)
		}
	}
}

// gatehouse mcp's stdout is the MCP session, so it has no --json: the flag
// is a usage error (exit 2), not silently ignored.
func TestMCPHasNoJSONFlag(t *testing.T) {
	if code, _, msg := runCLI("mcp", "--run", "r_01m8n75ye327hsa7apgb8fqfxn", "--json"); code != 2 || !strings.Contains(msg, "unknown flag --json") {
		t.Fatalf("mcp --json: exit %d, stderr %q; want exit 2, unknown flag", code, msg)
	}
}
