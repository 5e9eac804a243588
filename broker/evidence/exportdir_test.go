package evidence

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// ExportDir takes the export folder or the folder an archive was
// unpacked into, and never follows a symlink to find one.
func TestExportDir(t *testing.T) {
	root := t.TempDir()
	exp := filepath.Join(root, "acme-evidence")
	if err := os.MkdirAll(exp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(exp, "export.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{exp, root} {
		if got, err := ExportDir(dir); err != nil || got != exp {
			t.Errorf("ExportDir(%s) = %s, %v; want %s", dir, got, err, exp)
		}
	}
	empty := t.TempDir()
	if _, err := ExportDir(empty); !errors.Is(err, ErrNotExport) {
		t.Errorf("an empty folder: %v", err)
	}
	linked := t.TempDir()
	if err := os.Symlink(exp, filepath.Join(linked, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	if _, err := ExportDir(linked); !errors.Is(err, ErrNotExport) {
		t.Errorf("a symlink to an export was followed: %v", err)
	}
	two := t.TempDir()
	for _, n := range []string{"a-evidence", "b-evidence"} {
		_ = os.MkdirAll(filepath.Join(two, n), 0o755)
		_ = os.WriteFile(filepath.Join(two, n, "export.json"), []byte("{}"), 0o644)
	}
	if _, err := ExportDir(two); !errors.Is(err, ErrNotExport) {
		t.Errorf("two exports: %v", err)
	}
}
