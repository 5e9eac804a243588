package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HelperArg is argv[1] that makes this binary act as the sandbox helper.
const HelperArg = "__gatehouse-sandbox-helper"

// MaybeHelper must be the first call in main, and in TestMain of every package that runs programs through
// this package. When os.Args say this process is the helper (or the self-test probe) it does that work and
// exits; otherwise it returns at once.
//
// The helper is started by Run and RunHost as this process's user (root, or root of a fresh user namespace in
// the namespaces tier), reads its config from fd 3, arranges the program's descriptors (arrangeFDs), sets the
// tier up, becomes the run's uid (becomeUser, where uids are switched), writes "ok" on its status fd
// (close-on-exec) and execs the program — or, in the bubblewrap tier, bwrap.
func MaybeHelper() {
	if len(os.Args) < 3 || os.Args[1] != HelperArg {
		return
	}
	switch os.Args[2] {
	case "run":
		helperRun()
	case "probe":
		os.Exit(probeMain())
	case "exit0":
		os.Exit(0)
	}
	os.Exit(125)
}

// The helper's descriptors, as the host passes them (cmd.ExtraFiles, in this order). The helper moves the
// status fd to fdStatusMin or above and the gateway's ends to GatewayOutFD and GatewayInFD before anything
// else; see arrangeFDs.
const (
	fdConfig     = 3  // config in (JSON), read once
	fdStatus     = 4  // status out: "ok" or "error: ...", then bwrap's --json-status-fd lines
	fdHelperBin  = 5  // the helper binary, in the namespaces tier (executed through /proc/self/fd/5)
	fdGatewayOut = 6  // the program's end of the request pipe, with Spec.Gateway
	fdGatewayIn  = 7  // the program's end of the reply pipe, with Spec.Gateway
	fdStatusMin  = 10 // where the status fd moves to
)

// helperFailure reports a failure of the helper on its status fd (raw writes: no *os.File owns it, so no
// finalizer can close it behind the helper's back).
type helperFailure struct{ status int }

func (h helperFailure) fail(format string, args ...any) {
	msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ")
	unix.Write(h.status, []byte("error: "+msg+"\n"))
	os.Exit(125)
}

// fdReader reads a descriptor with raw reads, so that no *os.File claims it.
type fdReader int

func (r fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func helperRun() {
	// Credentials, capabilities, no_new_privs, Landlock and seccomp are per thread: everything is done on this
	// thread and the exec happens from it, so the program inherits exactly this thread's state.
	runtime.LockOSThread()
	h := helperFailure{fdStatus}
	var hc helperConfig
	if err := json.NewDecoder(fdReader(fdConfig)).Decode(&hc); err != nil {
		h.fail("reading config: %v", err)
	}
	status, err := arrangeFDs(hc.Gateway, hc.Mode == modeBwrap)
	if err != nil {
		h.fail("%v", err)
	}
	// What the program creates is its uid's alone unless it says otherwise: a file a host command leaves in
	// the host's /tmp or /dev/shm is not readable by the next run's uid.
	unix.Umask(0o077)
	h = helperFailure{status}
	if len(hc.Argv) == 0 {
		h.fail("empty argv")
	}
	switch hc.Mode {
	case modePlain:
		helperPlain(h, &hc)
	case modeLandlock:
		helperLandlock(h, &hc)
	case modeNamespaces:
		helperNamespaces(h, &hc)
	case modeBwrap:
		helperBwrap(h, &hc)
	default:
		h.fail("unknown mode %q", hc.Mode)
	}
}

// arrangeFDs leaves the program exactly stdin, stdout and stderr and, with a gateway, the gateway's two pipes
// at GatewayOutFD and GatewayInFD: the status fd moves to fdStatusMin or above (close-on-exec, except for bwrap,
// which reports its child's pid through it and does not pass it on), the config fd is closed, and every other
// descriptor from 5 up is marked close-on-exec, including any the host process itself inherited without
// close-on-exec (a shell's or a supervisor's), which would otherwise reach the program through every tier.
// It returns the status fd.
func arrangeFDs(gateway, bwrap bool) (int, error) {
	status, err := unix.FcntlInt(fdStatus, unix.F_DUPFD_CLOEXEC, fdStatusMin)
	if err != nil {
		return fdStatus, fmt.Errorf("moving the status fd: %w", err)
	}
	if gateway {
		if err := unix.Dup3(fdGatewayOut, GatewayOutFD, 0); err != nil {
			return status, fmt.Errorf("gateway fd: %w", err)
		}
		if err := unix.Dup3(fdGatewayIn, GatewayInFD, 0); err != nil {
			return status, fmt.Errorf("gateway fd: %w", err)
		}
		unix.Close(fdGatewayOut)
		unix.Close(fdGatewayIn)
	} else {
		unix.Close(fdConfig)
		unix.Close(fdStatus)
	}
	if err := cloexecFrom(fdHelperBin); err != nil {
		return status, err
	}
	if bwrap {
		if _, err := unix.FcntlInt(uintptr(status), unix.F_SETFD, 0); err != nil {
			return status, fmt.Errorf("status fd for bwrap: %w", err)
		}
	}
	return status, nil
}

// cloexecFrom marks every descriptor from first up close-on-exec: close_range(CLOSE_RANGE_CLOEXEC) where the
// kernel has it (5.11+), else one by one from /proc/self/fd.
func cloexecFrom(first int) error {
	if unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return nil
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing descriptors: %w", err)
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= first {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

// lookPath resolves a bare program name in PATH from env, relative to the current root.
func lookPath(name string, env []string) string {
	if strings.Contains(name, "/") {
		return name
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return name
}

// execProgram reports "ok", applies the rlimits and execs. Everything the exec needs is prepared first and
// only raw system calls follow the rlimits: under the program's RLIMIT_AS the Go runtime cannot grow its heap,
// so nothing may allocate between setting it and the exec.
func execProgram(h helperFailure, argv0 string, argv, env []string, rl []rlimit) {
	argv0p, err := syscall.BytePtrFromString(argv0)
	if err != nil {
		h.fail("exec %s: %v", argv0, err)
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		h.fail("exec %s: %v", argv0, err)
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		h.fail("exec %s: %v", argv0, err)
	}
	lims := make([]unix.Rlimit, len(rl))
	for i, r := range rl {
		lims[i] = unix.Rlimit{Cur: r.Cur, Max: r.Max}
	}
	failPrefix := []byte("error: exec " + argv0 + ": ")
	newline := []byte("\n")
	unix.Write(h.status, []byte("ok\n"))

	for i, r := range rl {
		if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(r.Resource), uintptr(unsafe.Pointer(&lims[i])), 0, 0, 0); e != 0 {
			rawFail(h.status, failPrefix, e, newline)
		}
	}
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(argv0p)), uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	rawFail(h.status, failPrefix, e, newline)
}

// rawFail writes "error: ..." to the status fd and exits, without allocating.
func rawFail(status int, prefix []byte, e syscall.Errno, newline []byte) {
	msg := e.Error() // a constant from the errno table
	fd := uintptr(status)
	unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&prefix[0])), uintptr(len(prefix)))
	if len(msg) > 0 {
		unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.StringData(msg))), uintptr(len(msg)))
	}
	unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&newline[0])), 1)
	unix.RawSyscall(unix.SYS_EXIT_GROUP, 125, 0, 0)
}

// helperPlain runs host commands and unconfined code: the host's files and network, as the run's uid. With
// OwnPID it is pid 1 of fresh pid and mount namespaces (cloned by the host) and mounts a /proc of that pid
// namespace over the host's, so the program sees no other process (not the broker's command line, not another
// run), cannot name one to signal or ptrace, and its exit ends its whole tree. Without Drop (this process is
// not root) the program keeps the broker's own ids. Either way no_new_privs is set, so no setuid or
// file-capability binary raises its privileges.
func helperPlain(h helperFailure, hc *helperConfig) {
	if hc.OwnPID {
		if err := ownProc(); err != nil {
			h.fail("%v", err)
		}
	}
	if err := os.Chdir(hc.Dir); err != nil {
		h.fail("chdir: %v", err)
	}
	argv0 := lookPath(hc.Argv[0], hc.Env)
	if hc.Drop {
		if err := becomeUser(hc.UID, hc.GID); err != nil {
			h.fail("%v", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		h.fail("no_new_privs: %v", err)
	}
	execProgram(h, argv0, hc.Argv, hc.Env, hc.Rlimits)
}

// ownProc replaces, in this (fresh, private) mount namespace, the host's /proc and everything mounted under
// it with a proc of this process's pid namespace, and detaches every other proc mount of the host's (a
// container's or a chroot's), which would show the host's processes.
func ownProc() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	mounts, err := procMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && m == "/proc" {
			return fmt.Errorf("detach the host's /proc: %w", err)
		}
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	return nil
}

// procMounts lists the mount points of proc file systems, deepest first.
func procMounts() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source super-options
		f := strings.Fields(line)
		for i := range f {
			if f[i] == "-" && i+1 < len(f) && len(f) > 4 && f[i+1] == "proc" {
				out = append(out, unescapeMount(f[4]))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func helperBwrap(h helperFailure, hc *helperConfig) {
	filter, err := seccompProgram(false, false)
	if err != nil {
		h.fail("seccomp: %v", err)
	}
	// bwrap reads the filter from a pipe; it is small (well under the pipe buffer).
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil { // bwrap closes p[0] once it has read the filter
		h.fail("pipe: %v", err)
	}
	if _, err := unix.Write(p[1], filter); err != nil {
		h.fail("seccomp pipe: %v", err)
	}
	unix.Close(p[1])
	if hc.Drop {
		if err := becomeUser(hc.UID, hc.GID); err != nil {
			h.fail("%v", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		h.fail("no_new_privs: %v", err)
	}
	args := []string{hc.Bwrap,
		"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--clearenv", "--json-status-fd", strconv.Itoa(h.status),
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
	}
	for _, f := range etcFiles {
		args = append(args, "--ro-bind-try", f, f)
	}
	args = append(args,
		"--bind", hc.Dir, "/work", "--chdir", "/work",
		"--dev", "/dev", "--proc", "/proc",
		"--size", strconv.FormatInt(hc.TmpSize, 10), "--tmpfs", "/tmp",
		"--hostname", "sandbox",
		"--seccomp", strconv.Itoa(p[0]),
	)
	for _, e := range hc.Env {
		k, v, _ := strings.Cut(e, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args, "--")
	args = append(args, hc.Argv...)
	execProgram(h, hc.Bwrap, args, []string{}, hc.Rlimits)
}

// etcFiles are the only files of /etc a confined child sees.
var etcFiles = []string{"/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group"}
