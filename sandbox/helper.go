package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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
// The helper is started by Run as root (or as root of a fresh user namespace in the namespaces tier), reads
// its config from fd 3, sets the tier up, writes "ok" on fd 4 (close-on-exec) and execs the program — or, in
// the bubblewrap tier, bwrap, after switching to the sandbox uid.
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

type helperFailure struct{ status *os.File }

func (h helperFailure) fail(format string, args ...any) {
	msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ")
	fmt.Fprintf(h.status, "error: %s\n", msg)
	os.Exit(125)
}

func helperRun() {
	// Credentials, capabilities, no_new_privs, Landlock and seccomp are per thread: everything is done on this
	// thread and the exec happens from it, so the program inherits exactly this thread's state.
	runtime.LockOSThread()
	syscall.CloseOnExec(5) // the helper binary, in the namespaces tier
	status := os.NewFile(4, "status")
	h := helperFailure{status}
	cfgFile := os.NewFile(3, "config")
	var hc helperConfig
	if err := json.NewDecoder(cfgFile).Decode(&hc); err != nil {
		h.fail("reading config: %v", err)
	}
	cfgFile.Close()
	if hc.Mode != modeBwrap {
		syscall.CloseOnExec(4)
	}
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

func dropIDs(uid, gid int) error {
	if err := syscall.Setgroups([]int{}); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("setresgid: %w", err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresuid: %w", err)
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
	fmt.Fprintln(h.status, "ok")

	for i, r := range rl {
		if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(r.Resource), uintptr(unsafe.Pointer(&lims[i])), 0, 0, 0); e != 0 {
			rawFail(failPrefix, e, newline)
		}
	}
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(argv0p)), uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	rawFail(failPrefix, e, newline)
}

// rawFail writes "error: ..." to the status fd and exits, without allocating.
func rawFail(prefix []byte, e syscall.Errno, newline []byte) {
	msg := e.Error() // a constant from the errno table
	unix.RawSyscall(unix.SYS_WRITE, 4, uintptr(unsafe.Pointer(&prefix[0])), uintptr(len(prefix)))
	if len(msg) > 0 {
		unix.RawSyscall(unix.SYS_WRITE, 4, uintptr(unsafe.Pointer(unsafe.StringData(msg))), uintptr(len(msg)))
	}
	unix.RawSyscall(unix.SYS_WRITE, 4, uintptr(unsafe.Pointer(&newline[0])), 1)
	unix.RawSyscall(unix.SYS_EXIT_GROUP, 125, 0, 0)
}

func helperPlain(h helperFailure, hc *helperConfig) {
	if err := os.Chdir(hc.Dir); err != nil {
		h.fail("chdir: %v", err)
	}
	argv0 := lookPath(hc.Argv[0], hc.Env)
	if hc.Drop {
		if err := dropIDs(hc.UID, hc.GID); err != nil {
			h.fail("%v", err)
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			h.fail("no_new_privs: %v", err)
		}
	}
	execProgram(h, argv0, hc.Argv, hc.Env, hc.Rlimits)
}

func helperBwrap(h helperFailure, hc *helperConfig) {
	filter, err := seccompProgram(false, false)
	if err != nil {
		h.fail("seccomp: %v", err)
	}
	// bwrap reads the filter from a pipe; it is small (well under the pipe buffer).
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil {
		h.fail("pipe: %v", err)
	}
	if _, err := unix.Write(p[1], filter); err != nil {
		h.fail("seccomp pipe: %v", err)
	}
	unix.Close(p[1])
	if err := dropIDs(hc.UID, hc.GID); err != nil {
		h.fail("%v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		h.fail("no_new_privs: %v", err)
	}
	args := []string{hc.Bwrap,
		"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--clearenv", "--json-status-fd", "4",
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
