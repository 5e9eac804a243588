package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
)

// errDataDir: DATA_DIR cannot be kept private to serve's user; serve does
// not start.
var errDataDir = errors.New("data dir")

// secureDataDir makes DATA_DIR private to the user serve runs as, before
// anything is written into it: it is created 0700 if missing, and every
// folder under it is made 0700 and every file loses its group and other
// bits (0600 at most), so NATS credential seeds (nats/creds/*.nk), the
// users file, sessions and TOTP secrets, the journal, the content store and
// signing keys kept there are unreadable to any other uid, which is what
// host commands and unconfined code run as (sandbox.Sandbox.RunHost). What
// serve writes later lands under these 0700 folders.
//
// It fails, naming the path and the fix, when DATA_DIR or anything under it
// belongs to another uid (that uid could read or replace it, chmod or not)
// or is open to every user and cannot be tightened (a read-only mount;
// group access that cannot be removed is only warned about: no sandboxed
// program holds a supplementary group). It warns,
// without failing, when it tightened anything, when a symbolic link points
// at something other uids can read (the link's target is not changed), and
// when a parent folder lets other users replace DATA_DIR. It returns the
// absolute path (symbolic links resolved).
func secureDataDir(dir string, log *slog.Logger) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("%w: %w", errDataDir, err)
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", errDataDir, err)
	}
	me := os.Geteuid()
	var tightened []string
	err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner", p)
		}
		if int(st.Uid) != me {
			return fmt.Errorf("%s belongs to uid %d, not to uid %d that serve runs as: that user could read or replace Gatehouse's keys and journal (chown -R %d %s)", p, st.Uid, me, me, abs)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if t, err := os.Stat(p); err == nil && t.Mode().Perm()&0o077 != 0 {
				log.Warn("DATA_DIR HOLDS A SYMBOLIC LINK TO SOMETHING OTHER USERS CAN READ; serve does not change what it points to", "link", p, "target_mode", t.Mode().Perm().String())
			}
			return nil
		}
		perm := fi.Mode().Perm()
		want := perm &^ 0o077
		if fi.IsDir() {
			want = 0o700
		}
		if perm == want {
			return nil
		}
		if err := os.Chmod(p, want); err != nil {
			if perm&0o007 != 0 {
				return fmt.Errorf("%s is mode %04o, open to every user, and cannot be made %04o (%v); make it private to uid %d, or move DATA_DIR", p, perm, want, err, me)
			}
			// A read-only mount (a journal shared from the writer): its group (never a sandbox gid, since
			// sandboxed programs hold no supplementary group and their own gids own nothing here) keeps access.
			log.Warn("DATA_DIR entry keeps group access: it cannot be tightened", "path", p, "mode", fmt.Sprintf("%04o", perm), "group", st.Gid, "err", err)
			return nil
		}
		tightened = append(tightened, fmt.Sprintf("%s %04o", p, perm))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("%w %s: %w", errDataDir, abs, err)
	}
	if len(tightened) > 0 {
		log.Warn("DATA_DIR WAS READABLE BY OTHER USERS: tightened it to 0700 folders and 0600 files; rotate any key other users could have read", "dir", abs, "changed", len(tightened), "first", tightened[0])
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil {
			st, _ := fi.Sys().(*syscall.Stat_t)
			openToOthers := fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0
			if openToOthers || st != nil && st.Uid != 0 && int(st.Uid) != me {
				log.Warn("A PARENT OF DATA_DIR LETS OTHER USERS REPLACE IT: keep DATA_DIR under folders only root and serve's user can write", "parent", p, "mode", fi.Mode().String())
			}
		}
		if p == "/" || p == "." {
			break
		}
	}
	return abs, nil
}
