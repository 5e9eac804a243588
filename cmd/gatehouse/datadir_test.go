package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecureDataDirTightens(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "data")
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := secureDataDir(dir, log); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("a new DATA_DIR: %v %v", fi.Mode(), err)
	}
	for _, d := range []string{"nats/creds", "journal/runs"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	files := map[string]os.FileMode{"nats/creds/broker.nk": 0o644, "users.json": 0o666, "journal/runs/r.jsonl": 0o640, "ro.key": 0o400}
	for f, m := range files {
		os.WriteFile(filepath.Join(dir, f), []byte("x"), m)
		os.Chmod(filepath.Join(dir, f), m)
	}
	os.Chmod(dir, 0o755)
	target := filepath.Join(parent, "outside.txt")
	os.WriteFile(target, []byte("x"), 0o644)
	os.Symlink(target, filepath.Join(dir, "link"))
	logs.Reset()
	abs, err := secureDataDir(dir, log)
	if err != nil || abs != dir {
		t.Fatalf("%q %v", abs, err)
	}
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.Mode()&os.ModeSymlink != 0 {
			return err
		}
		want := os.FileMode(0o600)
		switch {
		case fi.IsDir():
			want = 0o700
		case strings.HasSuffix(p, "ro.key"):
			want = 0o400
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s is %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// data, nats, nats/creds, journal, journal/runs and three files.
	for _, want := range []string{"DATA_DIR WAS READABLE BY OTHER USERS", "changed=8", "SYMBOLIC LINK"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o644 {
		t.Errorf("the link's target was changed: %v", fi.Mode())
	}
}

func TestSecureDataDirRefusesAnotherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	dir := t.TempDir()
	planted := filepath.Join(dir, "nats", "creds", "broker.nk")
	os.MkdirAll(filepath.Dir(planted), 0o700)
	os.WriteFile(planted, []byte("x"), 0o600)
	os.Chown(planted, 2100000007, 2100000007)
	_, err := secureDataDir(dir, slog.New(slog.DiscardHandler))
	if !errors.Is(err, errDataDir) || !strings.Contains(err.Error(), planted) || !strings.Contains(err.Error(), "uid 2100000007") {
		t.Fatalf("err = %v", err)
	}
}

func TestSecureDataDirWarnsOfAnOpenParent(t *testing.T) {
	parent := t.TempDir()
	os.Chmod(parent, 0o777)
	var logs bytes.Buffer
	if _, err := secureDataDir(filepath.Join(parent, "data"), slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "A PARENT OF DATA_DIR LETS OTHER USERS REPLACE IT") {
		t.Fatalf("no warning:\n%s", logs.String())
	}
}
