package mcp

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gatehouse/gatehouse/sinks/provider"
)

// A server's last words reach the log bounded, valid UTF-8, and without
// the person's credential (a server may print its environment).
func TestStderrTail(t *testing.T) {
	cred := provider.Credential{Token: provider.NewSecret("tok-secret-42")}
	got := stderrTail([]byte("env: UPSTREAM_TOKEN=tok-secret-42\nError: boom\n"), cred)
	if got != "env: UPSTREAM_TOKEN=[credential]\nError: boom" {
		t.Fatalf("%q", got)
	}
	long := strings.Repeat("é", 5000) + "tok-secret-42 the end"
	got = stderrTail([]byte(long), cred)
	if !strings.HasPrefix(got, "...") || !strings.HasSuffix(got, "[credential] the end") || len(got) > 2<<10+3 || !utf8.ValidString(got) {
		t.Fatalf("%d bytes, valid %v: %.40q...%q", len(got), utf8.ValidString(got), got, got[len(got)-30:])
	}
	if got := stderrTail([]byte(" plain \n"), provider.Credential{}); got != "plain" {
		t.Fatalf("no credential: %q", got)
	}
}
