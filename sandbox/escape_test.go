package sandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/sandbox"
)

// These tests' sandboxes run as uids firstUID..firstUID+uidCount-1, one
// per run: outside the default range (sandbox.DefaultFirstUID...) that
// other packages' tests use at the same time under go test ./..., so a
// process of these uids left behind can only be one of ours. sharedUID,
// just below, is the one uid of the sandboxes whose every run shares it
// (TestEscapeSignalHost's victim runs as it).
const (
	firstUID  = 64936
	uidCount  = 64
	sharedUID = firstUID - 1
)

// outsideDir makes a host folder anyone may write, so only confinement stops the program.
func outsideDir(t *testing.T) string {
	t.Helper()
	if err := os.MkdirAll("/tmp/gatehouse-sandbox", 0o711); err != nil {
		t.Fatal(err)
	}
	d, err := os.MkdirTemp("/tmp/gatehouse-sandbox", "test-outside-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o777)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func nonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func run(t *testing.T, sb *sandbox.Sandbox, spec sandbox.Spec) *sandbox.Result {
	t.Helper()
	res, err := sb.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("exit %d signal %q killed %q in %v; stdout %q stderr %q", res.ExitCode, res.Signal, res.Killed,
		res.Duration.Round(time.Millisecond), clip(res.Stdout), clip(res.Stderr))
	return res
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

func py(code string) []string { return []string{"/usr/bin/python3", "-c", code} }

type countingListener struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
}

func listen(t *testing.T, network, addr string) *countingListener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{ln: ln}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(l.close)
	return l
}

func (l *countingListener) close() { l.ln.Close(); l.wg.Wait() }

func TestEscapeTCP(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		l := listen(t, "tcp4", "127.0.0.1:0")
		port := l.ln.Addr().(*net.TCPAddr).Port
		res := run(t, sb, sandbox.Spec{Argv: py(fmt.Sprintf(
			"import socket\ns=socket.create_connection(('127.0.0.1',%d),2)\ns.sendall(b'x')\nprint('connected')", port))})
		l.close()
		if n := l.conns.Load(); n != 0 || res.ExitCode == 0 {
			t.Fatalf("TCP escape: host accepted %d connection(s), exit %d", n, res.ExitCode)
		}
	})
}

func TestEscapeUDP(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var got atomic.Int64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 2048)
			for {
				n, _, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				got.Add(int64(n))
			}
		}()
		port := pc.LocalAddr().(*net.UDPAddr).Port
		run(t, sb, sandbox.Spec{Argv: py(fmt.Sprintf(
			"import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nfor i in range(20): s.sendto(b'escape',('127.0.0.1',%d))", port))})
		time.Sleep(100 * time.Millisecond)
		pc.Close()
		wg.Wait()
		if n := got.Load(); n != 0 {
			t.Fatalf("UDP escape: host received %d bytes", n)
		}
	})
}

func TestEscapeUnixSocket(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		path := filepath.Join(outsideDir(t), "host.sock")
		l := listen(t, "unix", path)
		os.Chmod(path, 0o777)
		res := run(t, sb, sandbox.Spec{Argv: py(fmt.Sprintf(
			"import socket\ns=socket.socket(socket.AF_UNIX)\ns.connect(%q)\nprint('connected')", path))})
		l.close()
		if n := l.conns.Load(); n != 0 || res.ExitCode == 0 {
			t.Fatalf("unix socket escape: host accepted %d, exit %d", n, res.ExitCode)
		}
	})
}

func TestEscapeWriteOutside(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		dir := outsideDir(t)
		canary := filepath.Join(dir, "canary-"+nonce())
		hostTmp := "/tmp/gatehouse-canary-" + nonce()
		res := run(t, sb, sandbox.Spec{Argv: []string{"/bin/sh", "-c",
			fmt.Sprintf("echo x > %s; echo x > %s; echo x > /usr/gatehouse-canary; echo x > ../escape; echo ok > inside", canary, hostTmp)}})
		for _, p := range []string{canary, hostTmp, "/usr/gatehouse-canary"} {
			if _, err := os.Lstat(p); err == nil {
				os.Remove(p)
				t.Errorf("the program wrote %s on the host", p)
			}
		}
		if len(res.Files) != 1 || res.Files[0].Path != "inside" {
			t.Errorf("workspace files = %+v, want just inside", res.Files)
		}
	})
}

func TestEscapeReadOutside(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		secret := "secret-" + nonce()
		path := filepath.Join(outsideDir(t), "secret.txt")
		if err := os.WriteFile(path, []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
		res := run(t, sb, sandbox.Spec{Argv: []string{"/bin/sh", "-c",
			fmt.Sprintf("cat %s; cat /etc/shadow; ls /root; cat /proc/1/environ", path)}})
		if bytes.Contains(res.Stdout, []byte(secret)) {
			t.Fatalf("the program read %s", path)
		}
		if bytes.Contains(res.Stdout, []byte("root:")) {
			t.Fatalf("the program read /etc/shadow")
		}
	})
}

func TestEscapeRemount(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		marker := "/usr/gatehouse-remount-" + nonce()
		res := run(t, sb, sandbox.Spec{Argv: []string{"/bin/sh", "-c", fmt.Sprintf(`
mount -o remount,rw / && echo REMOUNTED-ROOT
mount -o remount,rw /usr && echo REMOUNTED-USR
mount --bind "$PWD" /usr && echo BOUND
unshare -Urm sh -c 'mount -o remount,rw /usr && echo x > %s' && echo NESTED
echo x > %s && echo WROTE
exit 0`, marker, marker)}})
		for _, w := range []string{"REMOUNTED", "BOUND", "NESTED", "WROTE"} {
			if bytes.Contains(res.Stdout, []byte(w)) {
				t.Errorf("remount attempt succeeded: %s", w)
			}
		}
		if _, err := os.Lstat(marker); err == nil {
			os.Remove(marker)
			t.Fatalf("the program wrote %s", marker)
		}
	})
}

func TestEscapeSignalHost(t *testing.T) {
	eachSharedTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		// A host process of the sandbox's own uid: file modes would let the signal through, only confinement stops it.
		victim := exec.Command("/bin/sleep", "60")
		victim.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sharedUID, Gid: sharedUID}}
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { victim.Process.Kill(); victim.Wait() }()
		res := run(t, sb, sandbox.Spec{Argv: []string{"/bin/sh", "-c", fmt.Sprintf(
			"kill -9 %d && echo KILLED-VICTIM; kill -9 %d && echo KILLED-HOST; kill -0 1 && echo SIGNALED-INIT; exit 0",
			victim.Process.Pid, os.Getpid())}})
		var ws syscall.WaitStatus
		if pid, _ := syscall.Wait4(victim.Process.Pid, &ws, syscall.WNOHANG, nil); pid == victim.Process.Pid {
			t.Fatalf("the host sleep process was killed: %v", ws)
		}
		if bytes.Contains(res.Stdout, []byte("KILLED")) {
			t.Fatalf("a kill reported success: %s", res.Stdout)
		}
	})
}

// processesOf lists the host processes of the test uids (sharedUID and the
// range), except the given pids.
func processesOf(except ...int) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
next:
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		for _, x := range except {
			if x == pid {
				continue next
			}
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		mine, state := false, ""
		for _, line := range strings.Split(string(st), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "Uid:" {
				if uid, err := strconv.Atoi(f[1]); err == nil && uid >= sharedUID && uid < firstUID+uidCount {
					mine = true
				}
			}
			if len(f) >= 2 && f[0] == "State:" {
				state = f[1]
			}
		}
		// A zombie is dead, waiting for its reaper (init here) to collect it; it runs nothing.
		if mine && state != "Z" {
			cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			out = append(out, fmt.Sprintf("%d %s %q", pid, state, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// leftover returns the processes of the test uids still there after a
// short grace: a SIGKILLed process takes a moment to be torn down, and the
// promise is that nothing survives, not that it vanishes in the same
// instant.
func leftover() []string {
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := processesOf()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestEscapeForkBomb(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		start := time.Now()
		res := run(t, sb, sandbox.Spec{
			Argv:   py("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"),
			Limits: sandbox.Limits{Processes: 32, Wall: 10 * time.Second, CPU: 5 * time.Second},
		})
		if res.Killed == "" {
			t.Fatalf("the fork bomb was not ended by a limit: %+v", res)
		}
		if d := time.Since(start); d > 12*time.Second {
			t.Fatalf("the run took %v", d)
		}
		if left := leftover(); len(left) > 0 {
			t.Fatalf("processes left after the fork bomb: %v", left)
		}
		// The host is still healthy: it can start a process at once.
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil || time.Since(t0) > 2*time.Second {
			t.Fatalf("host unhealthy after the fork bomb: %v after %v", err, time.Since(t0))
		}
	})
}

func TestEscapeSetsidGrandchild(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		mark := "3000." + strconv.Itoa(int(time.Now().UnixNano()%1e6))
		res := run(t, sb, sandbox.Spec{
			Argv:   []string{"/bin/sh", "-c", fmt.Sprintf("setsid /bin/sleep %s & echo started; exit 0", mark)},
			Limits: sandbox.Limits{Wall: 20 * time.Second},
		})
		if res.Duration > 10*time.Second {
			t.Fatalf("Run waited %v for the grandchild", res.Duration)
		}
		if left := leftover(); len(left) > 0 {
			t.Fatalf("the setsid grandchild outlived the run: %v", left)
		}
		if procs := findCmdline(mark); len(procs) > 0 {
			t.Fatalf("sleep %s still runs: %v", mark, procs)
		}
	})
}

func findCmdline(needle string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(cmd, []byte(needle)) {
			out = append(out, pid)
		}
	}
	return out
}

func TestEscapeMemory(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		res := run(t, sb, sandbox.Spec{
			Argv:   py("b = bytearray(2 << 30)\nprint('allocated', len(b))"),
			Limits: sandbox.Limits{Memory: 512 << 20},
		})
		if bytes.Contains(res.Stdout, []byte("allocated")) || res.ExitCode == 0 {
			t.Fatalf("2 GiB allocated under a 512 MiB limit")
		}
		if res.Killed == "" && !bytes.Contains(res.Stderr, []byte("MemoryError")) {
			t.Fatalf("neither killed nor MemoryError: %+v", res)
		}
	})
}

func TestEscapeCPU(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		res := run(t, sb, sandbox.Spec{
			Argv:   py("while True: pass"),
			Limits: sandbox.Limits{CPU: time.Second, Wall: 20 * time.Second},
		})
		if res.Killed != sandbox.KilledCPU {
			t.Fatalf("Killed = %q, want %q", res.Killed, sandbox.KilledCPU)
		}
		if res.Duration > 15*time.Second {
			t.Fatalf("a 1s CPU limit took %v", res.Duration)
		}
	})
}

func TestEscapeNestedUserns(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		res := run(t, sb, sandbox.Spec{Argv: []string{"/bin/sh", "-c", "unshare -U -r id && echo NESTED; exit 0"}})
		if bytes.Contains(res.Stdout, []byte("NESTED")) {
			t.Fatalf("created a nested user namespace")
		}
	})
}

// TestEscapeSeeHostProcesses: in every tier the program sees no host
// process, not even one of its own uid (file modes would show that one's
// environment): /proc lists none, their command lines and environments
// cannot be read by pid either, the broker's command line neither, and
// /sys does not list the runs' cgroups.
func TestEscapeSeeHostProcesses(t *testing.T) {
	eachSharedTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		mark := strconv.Itoa(int(time.Now().UnixNano() % 1e9))
		victim := exec.Command("/bin/sleep", "60."+mark)
		victim.Env = []string{"VICTIM_MARK=" + mark}
		victim.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sharedUID, Gid: sharedUID}}
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { victim.Process.Kill(); victim.Wait() }()
		v, me := victim.Process.Pid, os.Getpid()
		res := run(t, sb, sandbox.Spec{Argv: py(fmt.Sprintf(`
import os
seen = []
try:
    pids = [p for p in os.listdir('/proc') if p.isdigit()]
    print('listed', len(pids))
except OSError as e:
    pids = []
    print('listing refused', e)
for p in pids + ['%d', '%d']:
    for f in ('cmdline', 'environ', 'status'):
        try:
            seen.append(open('/proc/%%s/%%s' %% (p, f), 'rb').read().replace(b'\0', b' ').decode(errors='replace'))
        except OSError:
            pass
for d in ('/sys/fs/cgroup/pids/gatehouse-sandbox', '/sys/fs/cgroup'):
    try:
        seen.append(' '.join(os.listdir(d)))
    except OSError:
        pass
print('\n'.join(seen))
`, v, me))})
		out := string(res.Stdout)
		if res.ExitCode != 0 {
			t.Fatalf("the program failed: %s", res.Stderr)
		}
		for _, leak := range []string{mark, filepath.Base(os.Args[0]), "run-"} {
			if strings.Contains(out, leak) {
				t.Errorf("the program saw %q of a host process or cgroup:\n%s", leak, clip(res.Stdout))
			}
		}
	})
}
