package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// removeOwned takes what the uid owns, directly in the folder and in its
// sticky world-writable folders, links as links; it leaves others' files,
// and folders someone opened to everyone without the sticky bit (a share).
func TestRemoveOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	const uid = 64999
	root := t.TempDir()
	outside := t.TempDir()
	target := filepath.Join(outside, "target")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(target, []byte("keep"), 0o600))
	mk := func(p string, own bool, mode os.FileMode, dir bool) {
		t.Helper()
		if dir {
			must(os.Mkdir(p, mode))
		} else {
			must(os.WriteFile(p, []byte("x"), mode))
		}
		must(os.Chmod(p, mode))
		if own {
			must(os.Lchown(p, uid, uid))
		}
	}
	mk(filepath.Join(root, "left"), true, 0o600, false)
	mk(filepath.Join(root, "dir"), true, 0o700, true)
	mk(filepath.Join(root, "dir", "deep"), true, 0o600, false)
	must(os.Symlink(target, filepath.Join(root, "link")))
	must(os.Lchown(filepath.Join(root, "link"), uid, uid))
	mk(filepath.Join(root, "others"), false, 0o644, false)
	mk(filepath.Join(root, ".X11-unix"), false, os.ModeSticky|0o777, true)
	mk(filepath.Join(root, ".X11-unix", "X9"), true, 0o600, false)
	mk(filepath.Join(root, "share"), false, 0o777, true)
	mk(filepath.Join(root, "share", "marker"), true, 0o600, false)

	removeOwned(root, uid, 2)

	for _, gone := range []string{"left", "dir", "link", ".X11-unix/X9"} {
		if _, err := os.Lstat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is left: %v", gone, err)
		}
	}
	for _, kept := range []string{"others", ".X11-unix", "share/marker"} {
		if _, err := os.Lstat(filepath.Join(root, kept)); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "keep" {
		t.Fatalf("the link's target: %q %v", b, err)
	}
}

// BenchmarkRemoveLeftovers: the cost a lease's release adds to every host
// command, on this host's real temporary folders, for a uid that left
// nothing (the common case: every entry is looked at, none removed).
func BenchmarkRemoveLeftovers(b *testing.B) {
	for b.Loop() {
		removeLeftovers(64998)
	}
}
