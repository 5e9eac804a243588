package identity

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNotOwnFile: a file that is authority to Gatehouse (the register, the
// policy, the grounding rules) could be written by another user.
var ErrNotOwnFile = errors.New("another user could write this file")

// ReadOwnFile reads the file at path, at most limit bytes, and fails,
// wrapping ErrNotOwnFile, unless what it opened (the target of a symbolic
// link included) is a regular file of this process's uid, or of root (who
// could change anything anyway), that no group or other may write:
// whoever can write it could change what Gatehouse allows. The check and
// the read are of the one open file, so the file cannot be swapped
// between them. power says what such a user could do, for the error
// ("rewrite the policy"); the error names the file and the fix.
func ReadOwnFile(path, power string, limit int64) ([]byte, error) {
	// O_NONBLOCK: a named pipe planted in its place opens at once (and is
	// then refused as not a regular file) instead of hanging serve.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := ownFile(f, power, true); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := ownFolders(path, f, power); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, nil
}

// ownFolders checks, as sshd's StrictModes does, every folder from the
// one holding the file path resolves to up to /: each must belong to this
// process's uid or to root, and no group or other may write it unless its
// sticky bit is set (as /tmp's is: then nobody may rename or remove
// another's file in it). Whoever can write a folder on the way could put
// another file in the rules file's place, however well that file is kept.
// f must be the file path resolves to (checked, so a swap between the
// open and this check is caught).
func ownFolders(path string, f *os.File, power string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return err
	}
	opened, err := f.Stat()
	if err != nil {
		return err
	}
	if now, err := os.Stat(real); err != nil || !os.SameFile(opened, now) {
		return fmt.Errorf("%w: the file changed while it was read; try again", ErrNotOwnFile)
	}
	for dir := filepath.Dir(real); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
			return fmt.Errorf("%w: its folder %s belongs to uid %d, who could put another file in its place and so %s; keep it in a folder of uid %d or root",
				ErrNotOwnFile, dir, st.Uid, power, os.Geteuid())
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("%w: its folder %s (mode %04o) lets other users put another file in its place, and so %s (chmod go-w %s)",
				ErrNotOwnFile, dir, fi.Mode().Perm(), power, dir)
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

// ownFile is ReadOwnFile's check of what f opened; root's files pass only with
// rootOK.
func ownFile(f *os.File, power string, rootOK bool) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file", ErrNotOwnFile)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && (!rootOK || st.Uid != 0) {
		return fmt.Errorf("%w: it belongs to uid %d, not %d (the user Gatehouse runs as), so that user could %s; chown it to uid %d and chmod 600",
			ErrNotOwnFile, st.Uid, os.Geteuid(), power, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: mode %04o lets other users write it, and so %s (chmod 600)", ErrNotOwnFile, fi.Mode().Perm(), power)
	}
	return nil
}
