package sandbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
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
)

// Environment the host gives the probe.
const (
	envProbeTCP    = "GATEHOUSE_PROBE_TCP"
	envProbeUDP    = "GATEHOUSE_PROBE_UDP"
	envProbeUnix   = "GATEHOUSE_PROBE_UNIX"
	envProbeRead   = "GATEHOUSE_PROBE_READ"
	envProbeCanary = "GATEHOUSE_PROBE_CANARY"
)

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
