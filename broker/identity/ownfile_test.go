package identity

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReadOwnFileRefusesAPipe: a named pipe where the policy should be is
// refused at once as not a regular file; opening it does not wait for a
// writer (serve would hang at start or at a reload). A file of this user
// that nobody else may write is read.
func TestReadOwnFileRefusesAPipe(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "rules.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if _, err := ReadOwnFile(fifo, "rewrite the policy", 1<<20); !errors.Is(err, ErrNotOwnFile) {
		t.Fatalf("a named pipe: %v, want ErrNotOwnFile", err)
	}
	ok := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(ok, []byte("rules: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadOwnFile(ok, "rewrite the policy", 1<<20); err != nil || string(b) != "rules: []\n" {
		t.Fatalf("an own file: %q %v", b, err)
	}
}
