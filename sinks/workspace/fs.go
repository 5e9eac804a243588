package workspace

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/gatehouse/gatehouse/broker"
)

// Errors of Perform. The journal records their type, never a message.
var (
	ErrNotFound   = broker.NewOutcomeError("not-found", "file not found")
	ErrUnsafePath = broker.NewOutcomeError("unsafe-path", "path goes through a symbolic link or is not a regular file")
	ErrTooLarge   = broker.NewOutcomeError("too-large", "file too large to return in a reply")
	ErrStore      = broker.NewOutcomeError("store-error", "workspace folder failed")
	ErrPartial    = broker.NewOutcomeError("partial", "export partly applied")
)

// MaxPathBytes bounds a path.
const MaxPathBytes = 1024

// CheckPath accepts a path relative to a run folder: 1 to MaxPathBytes
// bytes of "/"-separated segments of [A-Za-z0-9._+@,=-], each at most 255
// bytes, none empty, "." or "..". Errors wrap broker.ErrBadRequest.
func CheckPath(p string) error {
	if p == "" {
		return fmt.Errorf("%w: path is required", broker.ErrBadRequest)
	}
	if len(p) > MaxPathBytes {
		return fmt.Errorf("%w: path is %d bytes, the limit is %d", broker.ErrBadRequest, len(p), MaxPathBytes)
	}
	if p[0] == '/' {
		return fmt.Errorf("%w: path %q is absolute: paths are relative to the run's folder", broker.ErrBadRequest, clip(p))
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch {
		case seg == "" || seg == "." || seg == "..":
			return fmt.Errorf("%w: path %q has an empty, \".\" or \"..\" segment", broker.ErrBadRequest, clip(p))
		case len(seg) > 255:
			return fmt.Errorf("%w: path %q has a segment longer than 255 bytes", broker.ErrBadRequest, clip(p))
		}
		for i := 0; i < len(seg); i++ {
			if !pathByte(seg[i]) {
				return fmt.Errorf("%w: path %q: segments are made of A-Z, a-z, 0-9 and . _ + @ , = -", broker.ErrBadRequest, clip(p))
			}
		}
	}
	return nil
}

func pathByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-' || c == '+' || c == '@' || c == ',' || c == '='
}

// TenantDir returns the path segment a tenant's runs live under: the tenant
// itself when it is 1 to 64 bytes of [A-Za-z0-9._-] not starting with '.',
// else "~" and 32 hex digits of its SHA-256. No safe name starts with '~',
// so two tenants never share a segment.
func TenantDir(tenant string) string {
	if len(tenant) > 0 && len(tenant) <= 64 && tenant[0] != '.' {
		safe := true
		for i := 0; i < len(tenant); i++ {
			c := tenant[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				safe = false
				break
			}
		}
		if safe {
			return tenant
		}
	}
	sum := sha256.Sum256([]byte(tenant))
	return "~" + hex.EncodeToString(sum[:16])
}

// checkNoSymlink fails with ErrUnsafePath when any existing part of p under
// root is a symbolic link. Missing parts end the walk: they will be made
// as folders.
func checkNoSymlink(root *os.Root, p string) error {
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		fi, err := root.Lstat(p[:i])
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %q: %v", ErrUnsafePath, clip(p[:i]), err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: %q is a symbolic link; the workspace never follows one", ErrUnsafePath, clip(p[:i]))
		}
	}
	return nil
}

// readFile reads p under root, refusing symbolic links, non-regular files
// and files over max bytes.
func readFile(root *os.Root, p string, max int64) ([]byte, error) {
	if err := checkNoSymlink(root, p); err != nil {
		return nil, err
	}
	f, err := root.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, clip(p))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrUnsafePath, clip(p), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %q is not a regular file", ErrUnsafePath, clip(p))
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %q is %d bytes, the limit is %d", ErrTooLarge, clip(p), fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: %q grew past %d bytes while read", ErrTooLarge, clip(p), max)
	}
	return data, nil
}

// existing returns the digest of the regular file at p, "" when there is
// none.
func existing(root *os.Root, p string) (string, error) {
	f, err := root.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrUnsafePath, clip(p), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrStore, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %q is a folder or special file, not a file", ErrUnsafePath, clip(p))
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%w: %v", ErrStore, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// apply carries out changes in the run folder root: check and stage every
// write under a temporary name, then rename and delete. See the package
// documentation for what a failure leaves behind.
func apply(ctx context.Context, root *os.Root, changes []change) (ExportReply, error) {
	var counts ExportReply
	type staged struct{ tmp, path string }
	var stage []staged
	var deletes []string
	cleanup := func() {
		for _, s := range stage {
			_ = root.Remove(s.tmp)
		}
	}
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			cleanup()
			return counts, err
		}
		if err := checkNoSymlink(root, c.path); err != nil {
			cleanup()
			return counts, err
		}
		old, err := existing(root, c.path)
		if err != nil {
			cleanup()
			return counts, err
		}
		switch {
		case c.content == nil && old == "":
			counts.Unchanged++
			continue
		case c.content == nil:
			counts.Deleted++
			deletes = append(deletes, c.path)
			continue
		case old == c.digest:
			counts.Unchanged++
			continue
		case old == "":
			counts.Added++
		default:
			counts.Changed++
		}
		tmp, err := writeTemp(root, c.path, c.content)
		if err != nil {
			cleanup()
			return counts, err
		}
		stage = append(stage, staged{tmp, c.path})
	}
	dirs := map[string]bool{}
	for i, s := range stage {
		if err := root.Rename(s.tmp, s.path); err != nil {
			for _, rest := range stage[i:] {
				_ = root.Remove(rest.tmp)
			}
			return counts, partial(i, err)
		}
		dirs[path.Dir(s.path)] = true
	}
	for i, p := range deletes {
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return counts, partial(len(stage)+i, err)
		}
		dirs[path.Dir(p)] = true
	}
	for d := range dirs {
		if err := syncDir(root, d); err != nil {
			return counts, fmt.Errorf("%w: sync %q: %v", ErrStore, clip(d), err)
		}
	}
	return counts, nil
}

// partial reports a failure in the commit phase after done changes.
func partial(done int, err error) error {
	if done > 0 {
		return fmt.Errorf("%w: some changes were applied before: %v", ErrPartial, err)
	}
	return fmt.Errorf("%w: %v", ErrStore, err)
}

// writeTemp makes p's folder and writes content, synced, to a temporary
// file beside p, returning its name. The name starts with '~', which no
// path may contain.
func writeTemp(root *os.Root, p string, content []byte) (string, error) {
	dir := path.Dir(p)
	if err := root.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("%w: folder %q: %v", ErrStore, clip(dir), err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, "~tmp-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrStore, err)
	}
	_, err = f.Write(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = root.Remove(tmp)
		return "", fmt.Errorf("%w: %v", ErrStore, err)
	}
	return tmp, nil
}

func syncDir(root *os.Root, dir string) error {
	f, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// clip shortens untrusted text before it goes into an error message.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
