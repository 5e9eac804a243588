package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// helperNamespaces runs as uid 0 of a fresh user namespace (host uid: the sandbox uid) and pid 1 of fresh
// mount, pid, net, ipc, uts and cgroup namespaces. It builds a root of read-only /usr and a few /etc files,
// the workspace at /work, minimal /dev, a new /proc and a sized /tmp; pivots into it; brings lo up; forbids
// nested user namespaces; drops every capability for good; and execs the program as pid 1, so its exit or
// its kill ends every process of the run.
func helperNamespaces(h helperFailure, hc *helperConfig) {
	filter, err := seccompProgram(false, false)
	if err != nil {
		h.fail("seccomp: %v", err)
	}
	if err := buildRoot(hc); err != nil {
		h.fail("%v", err)
	}
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
		h.fail("forbidding nested user namespaces: %v", err)
	}
	if err := unix.Sethostname([]byte("sandbox")); err != nil {
		h.fail("sethostname: %v", err)
	}
	if err := loUp(); err != nil {
		h.fail("lo up: %v", err)
	}
	argv0 := lookPath(hc.Argv[0], hc.Env)
	if err := dropCaps(); err != nil {
		h.fail("%v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		h.fail("no_new_privs: %v", err)
	}
	if err := installSeccomp(filter); err != nil {
		h.fail("%v", err)
	}
	execProgram(h, argv0, hc.Argv, hc.Env, hc.Rlimits)
}

func buildRoot(hc *helperConfig) error {
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return step("make / private", err)
	}
	// Hold the workspace by descriptor: the new root is mounted over /tmp, where the workspace may live.
	wsfd, err := unix.Open(hc.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return step("open workspace", err)
	}
	defer unix.Close(wsfd)
	const root = "/tmp"
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m,mode=0755"); err != nil {
		return step("root tmpfs", err)
	}
	in := func(p string) string { return filepath.Join(root, p) }
	if err := bindRO("/usr", in("/usr"), true); err != nil {
		return err
	}
	for _, l := range [][2]string{{"usr/bin", "/bin"}, {"usr/sbin", "/sbin"}, {"usr/lib", "/lib"}, {"usr/lib64", "/lib64"}} {
		if _, err := os.Stat(filepath.Join("/", l[0])); err == nil {
			if err := os.Symlink(l[0], in(l[1])); err != nil {
				return step("symlink", err)
			}
		}
	}
	if err := os.Mkdir(in("/etc"), 0o755); err != nil {
		return step("mkdir etc", err)
	}
	for _, f := range etcFiles {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		if err := bindRO(f, in(f), false); err != nil {
			return err
		}
	}
	if err := os.Mkdir(in("/work"), 0o755); err != nil {
		return step("mkdir work", err)
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(wsfd), in("/work"), "", unix.MS_BIND, ""); err != nil {
		return step("bind workspace", err)
	}
	if err := remount(in("/work"), unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return step("remount workspace", err)
	}
	if err := os.Mkdir(in("/dev"), 0o755); err != nil {
		return step("mkdir dev", err)
	}
	if err := unix.Mount("tmpfs", in("/dev"), "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
		return step("dev tmpfs", err)
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if _, err := os.Stat("/dev/" + d); err != nil {
			continue
		}
		if err := bindDev("/dev/"+d, in("/dev/"+d)); err != nil {
			return err
		}
	}
	for _, l := range [][2]string{{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}} {
		if err := os.Symlink(l[0], in("/dev/"+l[1])); err != nil {
			return step("dev symlink", err)
		}
	}
	if err := os.Mkdir(in("/proc"), 0o555); err != nil {
		return step("mkdir proc", err)
	}
	if err := unix.Mount("proc", in("/proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return step("mount proc", err)
	}
	if err := os.Mkdir(in("/tmp"), 0o1777); err != nil {
		return step("mkdir tmp", err)
	}
	if err := unix.Mount("tmpfs", in("/tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=1777", hc.TmpSize)); err != nil {
		return step("tmp tmpfs", err)
	}
	if err := os.Chdir(root); err != nil {
		return step("chdir root", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return step("pivot_root", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return step("detach old root", err)
	}
	if err := os.Chdir("/"); err != nil {
		return step("chdir /", err)
	}
	if err := remount("/", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return step("remount / read-only", err)
	}
	return step("chdir /work", os.Chdir("/work"))
}

// lockedFlags returns the mount flags of path a user namespace may not clear on remount.
func lockedFlags(path string) uintptr {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return 0
	}
	var f uintptr
	for _, m := range []struct{ st, ms int64 }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
		{unix.ST_RDONLY, unix.MS_RDONLY},
	} {
		if st.Flags&m.st != 0 {
			f |= uintptr(m.ms)
		}
	}
	return f
}

func remount(path string, flags uintptr) error {
	return unix.Mount("", path, "", unix.MS_BIND|unix.MS_REMOUNT|flags|lockedFlags(path), "")
}

func bindRO(src, dst string, dir bool) error {
	if dir {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", dst, err)
		}
	} else if err := os.WriteFile(dst, nil, 0o644); err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if err := remount(dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return fmt.Errorf("remount %s read-only: %w", src, err)
	}
	return nil
}

func bindDev(src, dst string) error {
	if err := os.WriteFile(dst, nil, 0o644); err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return nil
}

func loUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// Securebits that keep uid 0 from regaining capabilities on exec or setuid, each locked.
const lockedNoRoot = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<6 | 1<<7

// dropCaps drops every capability of the calling thread for good: securebits so uid 0 gets none back on
// exec, an empty bounding set, no ambient set, and empty effective, permitted and inheritable sets.
func dropCaps() error {
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, lockedNoRoot, 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop bounding cap %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient caps: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
