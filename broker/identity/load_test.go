package identity_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/policy"
)

// The register declares origins, so a file another user could write (or
// owns), directly or behind a symbolic link, is refused, and a file only
// this process's user may write is read, links followed.
func TestLoadRefusesARegisterOthersCanWrite(t *testing.T) {
	dir := t.TempDir()
	reg := &identity.Registry{Agents: []identity.Agent{{Name: "runner", Origin: policy.OriginShipped}}}
	path := identity.Path(dir)
	if err := reg.Save(path); err != nil {
		t.Fatal(err)
	}
	if r, err := identity.Load(path); err != nil || r.Agents[0].Origin != policy.OriginShipped {
		t.Fatalf("a private register: %+v %v", r, err)
	}
	outside := filepath.Join(t.TempDir(), "ids.json")
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(outside, b, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), identity.FileName)
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if _, err := identity.Load(link); err != nil {
		t.Fatalf("a link to a file only this user writes: %v", err)
	}
	for _, mode := range []os.FileMode{0o666, 0o620, 0o602} {
		for _, p := range []string{path, outside} {
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
		}
		for what, p := range map[string]string{"the register": path, "a link's target": link} {
			if _, err := identity.Load(p); !errors.Is(err, identity.ErrBadRegistry) {
				t.Errorf("%s of mode %04o: %v", what, mode, err)
			}
		}
	}
	if os.Geteuid() == 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, 64990, 64990); err != nil {
			t.Fatal(err)
		}
		if _, err := identity.Load(path); !errors.Is(err, identity.ErrBadRegistry) {
			t.Errorf("a register another uid owns: %v", err)
		}
	}
}
