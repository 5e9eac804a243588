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

// TestReadOwnFileChecksItsFolders: a rules file kept well (0600, this
// user's) in a folder others may write is refused, since they could put
// another file in its place; so is one reached through a link into such a
// folder. A sticky world-writable folder (as /tmp) is fine, and so is the
// file once the folder is fixed.
func TestReadOwnFileChecksItsFolders(t *testing.T) {
	root := t.TempDir()
	open := filepath.Join(root, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // not the umask's doing
		t.Fatal(err)
	}
	rules := filepath.Join(open, "rules.yaml")
	if err := os.WriteFile(rules, []byte("rules: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadOwnFile(rules, "rewrite the policy", 1<<20); !errors.Is(err, ErrNotOwnFile) {
		t.Fatalf("a file in a world-writable folder: %v, want ErrNotOwnFile", err)
	}
	link := filepath.Join(root, "rules.yaml")
	if err := os.Symlink(rules, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadOwnFile(link, "rewrite the policy", 1<<20); !errors.Is(err, ErrNotOwnFile) {
		t.Fatalf("a link into a world-writable folder: %v, want ErrNotOwnFile", err)
	}
	if err := os.Chmod(open, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadOwnFile(rules, "rewrite the policy", 1<<20); err != nil {
		t.Fatalf("a sticky folder: %v", err)
	}
	if err := os.Chmod(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadOwnFile(link, "rewrite the policy", 1<<20); err != nil || string(b) != "rules: []\n" {
		t.Fatalf("fixed: %q %v", b, err)
	}
}
