package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// CleanPath checks that p is a clean, relative, slash-separated path that stays inside a folder: not empty, not
// absolute, no "." or ".." element, no empty element, no NUL or backslash, at most 4096 bytes and 255 per
// element. It returns p unchanged or an error wrapping ErrSpec.
func CleanPath(p string) (string, error) {
	bad := func(why string) (string, error) { return "", fmt.Errorf("%w: file path %q: %s", ErrSpec, p, why) }
	switch {
	case p == "":
		return bad("empty")
	case len(p) > 4096:
		return bad("longer than 4096 bytes")
	case strings.ContainsAny(p, "\x00\\"):
		return bad("contains NUL or backslash")
	case strings.HasPrefix(p, "/"):
		return bad("absolute")
	}
	for _, el := range strings.Split(p, "/") {
		switch {
		case el == "":
			return bad("empty element")
		case el == "." || el == "..":
			return bad("dot element")
		case len(el) > 255:
			return bad("element longer than 255 bytes")
		}
	}
	if filepath.Clean(p) != p {
		return bad("not clean")
	}
	return p, nil
}

// prepareWorkspace makes (or adopts) the workspace, writes files and hands it to uid:gid. chown is false for
// RunHost, whose child runs as this process's user. It returns the folder and whether it is ours to remove.
func prepareWorkspace(root, given string, files map[string][]byte, uid, gid int, chown bool) (string, bool, error) {
	for p := range files {
		if _, err := CleanPath(p); err != nil {
			return "", false, err
		}
	}
	ws, temp := given, false
	if ws == "" {
		if err := makeWorkRoot(root); err != nil {
			return "", false, err
		}
		d, err := os.MkdirTemp(root, "ws-")
		if err != nil {
			return "", false, fmt.Errorf("%w: %v", ErrWorkspace, err)
		}
		ws, temp = d, true
	} else {
		abs, err := filepath.Abs(ws)
		if err != nil {
			return "", false, fmt.Errorf("%w: %v", ErrWorkspace, err)
		}
		ws = abs
		if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
			return "", false, fmt.Errorf("%w: %s is not a folder", ErrWorkspace, ws)
		}
	}
	fail := func(err error) (string, bool, error) {
		if temp {
			os.RemoveAll(ws)
		}
		return "", false, fmt.Errorf("%w: %v", ErrWorkspace, err)
	}
	if chown {
		if err := searchable(ws); err != nil {
			return fail(err)
		}
	}
	for p, data := range files {
		if err := writeBeneath(ws, p, data); err != nil {
			return fail(err)
		}
	}
	if chown {
		if err := chownTree(ws, uid, gid); err != nil {
			return fail(err)
		}
		if err := os.Chmod(ws, 0o700); err != nil {
			return fail(err)
		}
	}
	return ws, temp, nil
}

// makeWorkRoot creates the folder fresh workspaces are made in, or checks the one there: a folder (not a
// link) of this process's user that nobody else may write (0711: the sandbox uids pass through it, list
// nothing). One another user made first (a guessable name under /tmp) would let that user read or swap every
// workspace, so it is refused.
func makeWorkRoot(root string) error {
	if err := os.MkdirAll(root, 0o711); err != nil {
		return fmt.Errorf("%w: %v", ErrWorkspace, err)
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrWorkspace, err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a folder", ErrWorkspace, root)
	case st == nil || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%w: %s belongs to another user; remove it or set another work root", ErrWorkspace, root)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%w: %s is writable by other users (mode %04o)", ErrWorkspace, root, fi.Mode().Perm())
	}
	// MkdirAll keeps an existing folder's mode; the sandbox uid must be able to pass through it.
	if fi.Mode().Perm()&0o001 == 0 {
		if err := os.Chmod(root, fi.Mode().Perm()|0o011); err != nil {
			return fmt.Errorf("%w: %v", ErrWorkspace, err)
		}
	}
	return nil
}

// searchable fails when a parent of dir is not searchable by others (o+x): the sandbox uid could not reach it.
func searchable(dir string) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is not searchable by the sandbox uid (needs o+x; keep workspaces out of /root)", p)
		}
		if p == "/" {
			return nil
		}
	}
}

// writeBeneath writes data to rel under dir without following any symbolic link, so a link a previous run
// left in a reused workspace cannot redirect a write (done as root) outside it.
func writeBeneath(dir, rel string, data []byte) error {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC})
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	els := strings.Split(rel, "/")
	for _, el := range els[:len(els)-1] {
		if err := unix.Mkdirat(fd, el, 0o755); err != nil && err != unix.EEXIST {
			unix.Close(fd)
			return fmt.Errorf("mkdir %s: %w", rel, err)
		}
		next, err := unix.Openat2(fd, el, how)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("open %s: %w", rel, err)
		}
		fd = next
	}
	ffd, err := unix.Openat2(fd, els[len(els)-1], &unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Mode:    0o644,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	})
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("create %s: %w", rel, err)
	}
	f := os.NewFile(uintptr(ffd), rel)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// listFiles digests every regular file under ws, in path order. Symbolic links are not followed and not listed.
func listFiles(ws string) ([]FileInfo, error) {
	out := []FileInfo{}
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(ws, p)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return err
		}
		out = append(out, FileInfo{Path: filepath.ToSlash(rel), Size: n, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil))})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}
