package sandbox

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Probe names. Contained means the probe's required outcome held: the escape failed, or, for
// write-workspace, the write succeeded.
const (
	ProbeLoopback     = "loopback-connect" // TCP connect to a host listener on 127.0.0.1 fails, and none is accepted
	ProbeUDP          = "udp-send"         // no datagram reaches a host UDP listener on 127.0.0.1
	ProbeUnix         = "unix-connect"     // connect to a host unix socket file (mode 0777) fails
	ProbeWriteOutside = "write-outside"    // creating a canary in a host folder (mode 0777) fails
	ProbeCanary       = "canary-absent"    // the host finds no canary afterwards
	ProbeReadOutside  = "read-outside"     // reading a host 0644 file outside the workspace fails
	ProbeCaps         = "capabilities"     // CapEff, CapPrm and CapAmb are 0 (/proc/self/status, else capget)
	ProbeUserns       = "nested-userns"    // creating a user namespace fails
	ProbeRemount      = "remount"          // remounting / read-write fails
	ProbeWorkspace    = "write-workspace"  // writing the workspace succeeds
	ProbeNoNewPrivs   = "no-new-privs"     // no_new_privs is set: no setuid or file-capability binary raises privileges
	ProbeBrokerFiles  = "broker-files"     // reading a 0600 file of the broker's and creating one in its 0755 folder fail
	ProbeSignalBroker = "signal-broker"    // kill(0) of the broker process fails
	ProbeSignalHost   = "signal-host"      // kill(0) of a host process of the run's own uid fails
	ProbePtraceHost   = "ptrace-host"      // PTRACE_SEIZE of that process fails
	ProbeProcHidden   = "proc-hidden"      // /proc shows no host process: not that one's command line or environment, nor the broker's command line
	ProbeOwnUID       = "own-uid"          // the program's host uid and gid are the run's, not the broker's, with no supplementary group
)

// Environment the host gives the probe.
const (
	envProbeTCP    = "GATEHOUSE_PROBE_TCP"
	envProbeUDP    = "GATEHOUSE_PROBE_UDP"
	envProbeUnix   = "GATEHOUSE_PROBE_UNIX"
	envProbeRead   = "GATEHOUSE_PROBE_READ"
	envProbeCanary = "GATEHOUSE_PROBE_CANARY"
	// The broker's pid, uid and the SHA-256 (hex) of its /proc/<pid>/cmdline.
	envProbeBroker = "GATEHOUSE_PROBE_BROKER"
	// A host process of the run's uid: its pid. The mark in its command line and environment is in the
	// workspace file probeMarkFile (not in the environment, which bwrap's own command line repeats).
	envProbeHostPID = "GATEHOUSE_PROBE_HOST_PID"
	// A 0600 file of the broker's, in a 0755 folder of the broker's.
	envProbePrivate = "GATEHOUSE_PROBE_PRIVATE"
)

// probeMarkFile is the workspace file holding the host process's mark; the probe removes it once read.
const probeMarkFile = ".gatehouse-probe-mark"

// probeMain runs inside the sandbox and prints its probes as JSON on stdout.
func probeMain() int {
	var out []Probe
	add := func(name string, contained bool, format string, args ...any) {
		out = append(out, Probe{Name: name, Contained: contained, Detail: fmt.Sprintf(format, args...)})
	}

	if c, err := net.DialTimeout("tcp", os.Getenv(envProbeTCP), 2*time.Second); err != nil {
		add(ProbeLoopback, true, "connect refused: %v", err)
	} else {
		c.Close()
		add(ProbeLoopback, false, "connected to %s", os.Getenv(envProbeTCP))
	}

	if c, err := net.Dial("udp", os.Getenv(envProbeUDP)); err != nil {
		add(ProbeUDP, true, "udp socket refused: %v", err)
	} else {
		_, werr := c.Write([]byte("gatehouse-probe"))
		c.Close()
		add(ProbeUDP, werr != nil, "send: %v (the host's count decides)", werr)
	}

	if c, err := net.DialTimeout("unix", os.Getenv(envProbeUnix), 2*time.Second); err != nil {
		add(ProbeUnix, true, "connect refused: %v", err)
	} else {
		c.Close()
		add(ProbeUnix, false, "connected to %s", os.Getenv(envProbeUnix))
	}

	if err := os.WriteFile(os.Getenv(envProbeCanary), []byte("escaped"), 0o644); err != nil {
		add(ProbeWriteOutside, true, "write refused: %v", err)
	} else {
		add(ProbeWriteOutside, false, "wrote %s", os.Getenv(envProbeCanary))
	}

	if b, err := os.ReadFile(os.Getenv(envProbeRead)); err != nil {
		add(ProbeReadOutside, true, "read refused: %v", err)
	} else {
		add(ProbeReadOutside, false, "read %d bytes of %s", len(b), os.Getenv(envProbeRead))
	}

	contained, detail := probeCaps()
	add(ProbeCaps, contained, "%s", detail)

	// A user namespace gives back every capability inside it; clone needs no threads of its own.
	pid, err := syscall.ForkExec(os.Args[0], []string{os.Args[0], HelperArg, "exit0"}, &syscall.ProcAttr{
		Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER},
	})
	if err != nil {
		add(ProbeUserns, true, "clone(CLONE_NEWUSER) refused: %v", err)
	} else {
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
		add(ProbeUserns, false, "created a user namespace (child exit %d)", ws.ExitStatus())
	}

	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND, ""); err != nil {
		add(ProbeRemount, true, "remount refused: %v", err)
	} else {
		add(ProbeRemount, false, "remounted / read-write")
	}

	probeIdentity(add)
	probeHostProcesses(add)

	if err := os.WriteFile("probe-workspace", []byte("ok"), 0o644); err != nil {
		add(ProbeWorkspace, false, "workspace write failed: %v", err)
	} else {
		add(ProbeWorkspace, true, "wrote the workspace")
	}

	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return 1
	}
	return 0
}

func probeCaps() (bool, string) {
	uidMap, _ := os.ReadFile("/proc/self/uid_map")
	um := strings.Join(strings.Fields(string(uidMap)), " ")
	if f, err := os.Open("/proc/self/status"); err == nil {
		defer f.Close()
		caps := map[string]string{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.HasPrefix(k, "Cap") {
				caps[k] = strings.TrimSpace(v)
			}
		}
		zero := func(k string) bool { return strings.Trim(caps[k], "0") == "" && caps[k] != "" }
		ok := zero("CapEff") && zero("CapPrm") && zero("CapAmb")
		return ok, fmt.Sprintf("CapEff=%s CapPrm=%s CapBnd=%s uid=%d uid_map=%q", caps["CapEff"], caps["CapPrm"], caps["CapBnd"], os.Getuid(), um)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, fmt.Sprintf("cannot read capabilities: %v", err)
	}
	ok := data[0].Effective == 0 && data[1].Effective == 0 && data[0].Permitted == 0 && data[1].Permitted == 0
	return ok, fmt.Sprintf("capget effective=%x%08x permitted=%x%08x uid=%d", data[1].Effective, data[0].Effective, data[1].Permitted, data[0].Permitted, os.Getuid())
}

type addProbe func(name string, contained bool, format string, args ...any)

// probeIdentity checks what the program runs as: no_new_privs, its host ids, and that the broker's private
// files and process are out of its reach.
func probeIdentity(add addProbe) {
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil {
		add(ProbeNoNewPrivs, false, "cannot read no_new_privs: %v", err)
	} else {
		add(ProbeNoNewPrivs, v == 1, "no_new_privs=%d", v)
	}

	// The host judges the uid by who owns the file the probe writes in its workspace (user namespaces nest).
	groups, _ := syscall.Getgroups()
	add(ProbeOwnUID, len(groups) == 0, "uid %d gid %d in the program's namespace, supplementary groups %v", os.Getuid(), os.Getgid(), groups)
	brokerPID, _, _ := brokerFromEnv()

	private := os.Getenv(envProbePrivate)
	_, rerr := os.ReadFile(private)
	planted := filepath.Join(filepath.Dir(private), "planted")
	werr := os.WriteFile(planted, []byte("x"), 0o644)
	add(ProbeBrokerFiles, rerr != nil && werr != nil, "read %s: %v; create %s: %v", private, errText(rerr), planted, errText(werr))

	if err := unix.Kill(brokerPID, 0); err != nil {
		add(ProbeSignalBroker, true, "kill(%d, 0) refused: %v", brokerPID, err)
	} else {
		add(ProbeSignalBroker, false, "kill(%d, 0) succeeded: the program may signal the broker", brokerPID)
	}
}

// probeHostProcesses looks for the host process of the run's own uid the host started (its mark in a command
// line or an environment), through the listing of /proc and at its pid, and for the broker's command line; it
// then tries to signal and to ptrace that process.
func probeHostProcesses(add addProbe) {
	pid, _ := strconv.Atoi(os.Getenv(envProbeHostPID))
	mark, _ := os.ReadFile(probeMarkFile)
	os.Remove(probeMarkFile)
	mark = bytes.TrimSpace(mark)
	brokerPID, _, brokerCmd := brokerFromEnv()

	var leaks []string
	listed := 0
	ents, lerr := os.ReadDir("/proc")
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err != nil || n == os.Getpid() {
			continue // the probe's own environment holds the mark
		}
		listed++
		for _, f := range []string{"cmdline", "environ"} {
			if b, err := os.ReadFile("/proc/" + e.Name() + "/" + f); err == nil && len(mark) > 0 && bytes.Contains(b, mark) {
				leaks = append(leaks, "/proc/"+e.Name()+"/"+f+" (listed)")
			}
		}
	}
	for _, f := range []string{"cmdline", "environ"} {
		p := fmt.Sprintf("/proc/%d/%s", pid, f)
		if b, err := os.ReadFile(p); err == nil && len(mark) > 0 && bytes.Contains(b, mark) {
			leaks = append(leaks, p)
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", brokerPID)); err == nil {
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) == brokerCmd {
			leaks = append(leaks, fmt.Sprintf("/proc/%d/cmdline (the broker's)", brokerPID))
		}
	}
	listing := fmt.Sprintf("listed %d other processes", listed)
	if lerr != nil {
		listing = fmt.Sprintf("listing /proc refused: %v", lerr)
	}
	add(ProbeProcHidden, len(leaks) == 0, "%s; host processes seen: %v", listing, leaks)

	if err := unix.Kill(pid, 0); err != nil {
		add(ProbeSignalHost, true, "kill(%d, 0) refused: %v", pid, err)
	} else {
		add(ProbeSignalHost, false, "kill(%d, 0) of a host process succeeded", pid)
	}
	// PTRACE_SEIZE does not stop the tracee; the tracer's exit detaches it.
	if err := unix.PtraceSeize(pid); err != nil {
		add(ProbePtraceHost, true, "PTRACE_SEIZE %d refused: %v", pid, err)
	} else {
		unix.PtraceDetach(pid)
		add(ProbePtraceHost, false, "PTRACE_SEIZE of host process %d succeeded", pid)
	}
}

// brokerFromEnv reads envProbeBroker: "PID:UID:SHA256-OF-CMDLINE".
func brokerFromEnv() (pid, uid int, cmdline string) {
	fmt.Sscanf(os.Getenv(envProbeBroker), "%d:%d:%s", &pid, &uid, &cmdline)
	return pid, uid, cmdline
}

func errText(err error) string {
	if err == nil {
		return "SUCCEEDED"
	}
	return err.Error()
}
