package main

import (
	"os"
	"path/filepath"
	"testing"
)

// A data dir whose parents do not exist yet is made, 0700, as serve made
// it before it took a lock there; a second claim fails while the first
// holds it.
func TestClaimDataDirMakesItsParents(t *testing.T) {
	c := &serveConfig{dataDir: filepath.Join(t.TempDir(), "a", "b")}
	release, err := c.claimDataDir()
	if err != nil {
		t.Fatalf("claim a nested data dir: %v", err)
	}
	defer release()
	fi, err := os.Stat(c.dataDir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir: %v %v", fi, err)
	}
	if _, err := c.claimDataDir(); err == nil {
		t.Fatal("a second claim on a held data dir succeeded")
	}
}
