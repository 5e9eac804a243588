package sandbox_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/sandbox"
)

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a", "a/b.txt", "../x", "/etc/passwd", "a//b", "a/./b", "./a", "a/", "", "..", "a\\b", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := sandbox.CleanPath(p)
		if err != nil {
			if !errors.Is(err, sandbox.ErrSpec) {
				t.Fatalf("CleanPath(%q) error %v does not wrap ErrSpec", p, err)
			}
			return
		}
		if got != p {
			t.Fatalf("CleanPath(%q) = %q", p, got)
		}
		joined := filepath.Join("/ws", p)
		if !strings.HasPrefix(joined, "/ws/") || filepath.Clean(p) != p || filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
			t.Fatalf("CleanPath accepted %q (joins to %q)", p, joined)
		}
		for _, el := range strings.Split(p, "/") {
			if el == "" || el == "." || el == ".." {
				t.Fatalf("CleanPath accepted %q with element %q", p, el)
			}
		}
	})
}

func TestCleanPath(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"a", true}, {"dir/file.py", true}, {".hidden", true}, {"a..b", true},
		{"", false}, {"/abs", false}, {"..", false}, {"../up", false}, {"a/../b", false}, {"a/./b", false},
		{"a//b", false}, {"a/", false}, {"./a", false}, {"a\\b", false}, {"a\x00", false},
		{strings.Repeat("x", 256), false}, {strings.Repeat("a/", 2049) + "a", false},
	} {
		if _, err := sandbox.CleanPath(tc.in); (err == nil) != tc.ok {
			t.Errorf("CleanPath(%q) error %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}
