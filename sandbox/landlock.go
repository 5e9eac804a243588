package sandbox

import (
	"fmt"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// minLandlockABI is the lowest Landlock ABI the landlock tier accepts: 6 scopes signals and abstract unix
// sockets to the child's own domain. Below it the tier refuses to start rather than confine less.
const minLandlockABI = 6

// landlockPresets are go-landlock's configs per ABI; the tier uses the one matching the kernel, never
// BestEffort (which silently enforces nothing where Landlock is missing).
var landlockPresets = map[int]landlock.Config{
	6: landlock.V6, 7: landlock.V7, 8: landlock.V8, 9: landlock.V9, 10: landlock.V10, 11: landlock.V11,
}

// LandlockABI returns the kernel's Landlock ABI version, 0 when Landlock is unavailable.
func LandlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// procSelf are the entries of a process's own /proc/<pid> the landlock tier lets the program read; procHost the
// host-wide files it may read, none of which names a process. Nothing else of /proc is readable or listable, so
// the program sees no other process: not their list, command lines, environments or status, and neither
// /proc/<pid>/net (the host's sockets) nor mountinfo. Landlock grants by inode: the rules name the helper's own
// entries (the program keeps its pid across exec), so a child the program forks cannot read its own
// /proc/self, and an entry the kernel drops from its cache and makes anew becomes unreadable: both fail
// closed. /sys is not readable either, but for the two CPU lists libc reads to count CPUs.
var (
	procSelf = []string{"status", "stat", "statm", "cmdline", "limits", "auxv", "uid_map", "gid_map"}
	procHost = []string{"/proc/cpuinfo", "/proc/meminfo", "/sys/devices/system/cpu/online", "/sys/devices/system/cpu/possible"}
)

func procFiles(pid int) []string {
	var out []string
	for _, f := range procSelf {
		out = append(out, fmt.Sprintf("/proc/%d/%s", pid, f))
	}
	return existing(append(out, procHost...)...)
}

// existing keeps the paths that exist (a Landlock rule on a missing path fails the whole ruleset).
func existing(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func helperLandlock(h helperFailure, hc *helperConfig) {
	abi := LandlockABI()
	if abi < minLandlockABI {
		h.fail("landlock ABI %d is below %d (unavailable or too old)", abi, minLandlockABI)
	}
	preset := abi
	if preset > 11 {
		preset = 11
	}
	cfg := landlockPresets[preset]
	filter, err := seccompProgram(true, abi < 9)
	if err != nil {
		h.fail("seccomp: %v", err)
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
	ws := landlock.RWDirs(hc.Dir).WithRefer()
	if abi >= 9 {
		ws = ws.WithResolveUnix()
	}
	var etc, dev []string
	for _, f := range etcFiles {
		if _, err := os.Stat(f); err == nil {
			etc = append(etc, f)
		}
	}
	for _, f := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"} {
		if _, err := os.Stat(f); err == nil {
			dev = append(dev, f)
		}
	}
	// No network rules: with the preset's TCP rights handled, every TCP bind and connect is refused.
	fd, flags, err := cfg.NewRulesetFD(
		landlock.RODirs("/usr"),
		landlock.ROFiles(procFiles(os.Getpid())...),
		landlock.RODirs(existing(fmt.Sprintf("/proc/%d/fd", os.Getpid()))...),
		landlock.ROFiles(etc...),
		landlock.RWFiles(dev...),
		ws,
	)
	if err != nil {
		h.fail("landlock ruleset (ABI %d): %v", abi, err)
	}
	if fd < 0 {
		h.fail("landlock: nothing to enforce at ABI %d", abi)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		h.fail("no_new_privs: %v", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		h.fail("landlock_restrict_self: %v", err)
	}
	unix.Close(fd)
	if err := installSeccomp(filter); err != nil {
		h.fail("%v", err)
	}
	execProgram(h, argv0, hc.Argv, hc.Env, hc.Rlimits)
}
