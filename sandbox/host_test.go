package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatehouse/gatehouse/sandbox"
)

var (
	hostOnce sync.Once
	hostSB   *sandbox.Sandbox
	hostRep  *sandbox.Report
)

// host is the unconfined Sandbox of these tests' uid range: RunHost and the unconfined tier.
func host(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	hostOnce.Do(func() {
		hostSB, hostRep = sandbox.Detect(context.Background(), testConfig(sandbox.TierUnconfined))
		for _, p := range hostRep.Host.Probes {
			t.Logf("host %s contained=%v: %s", p.Name, p.Contained, p.Detail)
		}
	})
	h := hostRep.Host
	if !h.SeparateUID || !h.OwnPID || !hostSB.SeparateUID() || h.UIDs != fmt.Sprintf("%d-%d", firstUID, firstUID+uidCount-1) {
		t.Fatalf("this machine runs the tests as root: host commands must get a uid of their own and a pid namespace: %+v", h)
	}
	return hostSB
}

func runHost(t *testing.T, spec sandbox.Spec) *sandbox.Result {
	t.Helper()
	res, err := host(t).RunHost(context.Background(), spec)
	if err != nil {
		t.Fatalf("RunHost: %v", err)
	}
	t.Logf("exit %d signal %q killed %q uid %d; stdout %q stderr %q", res.ExitCode, res.Signal, res.Killed, res.UID, clip(res.Stdout), clip(res.Stderr))
	return res
}

func inRange(uid int) bool { return uid >= firstUID && uid < firstUID+uidCount }

// TestRunHostIdentity: a host command runs as a uid of the range with its gid and no other group, no
// capability in any set, no_new_privs, in its own working folder owned by that uid, and sees no process but
// its own tree.
func TestRunHostIdentity(t *testing.T) {
	res := runHost(t, sandbox.Spec{Argv: []string{"/bin/sh", "-c", fmt.Sprintf(`
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G)"
grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status
echo "owner=$(stat -c %%u:%%g .) mode=$(stat -c %%a .) pwd=$(pwd)"
echo "procs=$(ls /proc | grep -c '^[0-9]')"
echo "umask=$(umask)"
cat /proc/%d/cmdline && echo READ-BROKER-CMDLINE
cat /proc/%d/environ && echo READ-BROKER-ENVIRON
kill -0 %d && echo SIGNALED-BROKER
exit 0`, os.Getpid(), os.Getpid(), os.Getpid())}})
	out := string(res.Stdout)
	if !inRange(res.UID) || !res.SeparateUID || res.Confined || res.Tier != sandbox.TierUnconfined {
		t.Fatalf("result uid %d separate %v tier %s confined %v", res.UID, res.SeparateUID, res.Tier, res.Confined)
	}
	u := strconv.Itoa(res.UID)
	for _, want := range []string{
		"uid=" + u + " gid=" + u + " groups=" + u + "\n",
		"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1",
		"owner=" + u + ":" + u + " mode=700 pwd=" + res.Workdir + "\n", "umask=0077\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	for _, bad := range []string{"READ-BROKER", "SIGNALED-BROKER"} {
		if strings.Contains(out, bad) {
			t.Errorf("the host command could %s", bad)
		}
	}
	var procs int
	fmt.Sscanf(out[strings.Index(out, "procs=")+6:], "%d", &procs)
	if procs == 0 || procs > 4 {
		t.Errorf("the host command saw %d processes in /proc, want only its own few", procs)
	}
}

// TestRunHostBrokerFiles: a host command cannot read a 0600 file of the broker's (as DATA_DIR's are), write
// into a 0755 folder of the broker's, or change either; a setuid-root binary gains nothing under no_new_privs;
// ptrace of a host process of the run's uid finds nothing to attach to.
func TestRunHostBrokerFiles(t *testing.T) {
	dir := filepath.Join(outsideDir(t), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	key := filepath.Join(dir, "broker.nk")
	if err := os.WriteFile(key, []byte("SUAKEY-"+nonce()), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(key)
	// A setuid-root copy of id: without no_new_privs it would print euid=0.
	suid := filepath.Join(dir, "suid-id")
	if err := sandbox.CopyFile("/usr/bin/id", suid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o4755); err != nil {
		t.Fatal(err)
	}
	res := runHost(t, sandbox.Spec{Argv: []string{"/bin/sh", "-c", fmt.Sprintf(`
cat %[1]s && echo READ-KEY
echo x >> %[1]s && echo APPENDED-KEY
chmod 644 %[1]s && echo CHMODDED-KEY
rm -f %[1]s && echo REMOVED-KEY
echo x > %[2]s/planted && echo PLANTED
%[3]s
exit 0`, key, dir, suid)}})
	out := string(res.Stdout)
	for _, bad := range []string{"SUAKEY", "READ-KEY", "APPENDED-KEY", "CHMODDED-KEY", "REMOVED-KEY", "PLANTED", "euid=0", "uid=0"} {
		if strings.Contains(out, bad) {
			t.Errorf("stdout holds %q:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "uid="+strconv.Itoa(res.UID)) {
		t.Errorf("the setuid binary did not run as the run's uid:\n%s", out)
	}
	after, err := os.ReadFile(key)
	if fi, serr := os.Stat(key); err != nil || serr != nil || !bytes.Equal(before, after) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the broker's key changed: %v %v", err, serr)
	}
	if _, err := os.Lstat(filepath.Join(dir, "planted")); err == nil {
		t.Fatal("the host command created a file in the broker's folder")
	}
}

// TestRunHostKillsTheTree: a setsid grandchild dies with the run (pid namespace and cgroup), and the wall
// limit holds.
func TestRunHostKillsTheTree(t *testing.T) {
	mark := "3001." + strconv.Itoa(int(time.Now().UnixNano()%1e6))
	res := runHost(t, sandbox.Spec{
		Argv:   []string{"/bin/sh", "-c", "setsid /bin/sleep " + mark + " & echo x > made; exit 3"},
		Limits: sandbox.Limits{Wall: 10 * time.Second},
	})
	if res.ExitCode != 3 || len(res.Files) != 1 || res.Files[0].Path != "made" {
		t.Fatalf("exit %d files %+v", res.ExitCode, res.Files)
	}
	if procs := findCmdline(mark); len(procs) > 0 {
		t.Fatalf("setsid grandchild of a host command survived: %v", procs)
	}
	if left := leftover(); len(left) > 0 {
		t.Fatalf("processes of the test uids left: %v", left)
	}
	res = runHost(t, sandbox.Spec{Argv: []string{"sleep", "10"}, Limits: sandbox.Limits{Wall: 200 * time.Millisecond}})
	if res.Killed != sandbox.KilledWall {
		t.Fatalf("RunHost wall: %+v", res)
	}
}

// TestRunHostConcurrentRunsGetTheirOwnUID: runs in flight at once, in this Sandbox and in another one of the
// same range (as another broker on this host would be), never share a uid, so one cannot read the other's
// working folder or signal its processes.
func TestRunHostConcurrentRunsGetTheirOwnUID(t *testing.T) {
	other, _ := sandbox.Detect(context.Background(), testConfig(sandbox.TierUnconfined))
	const n = 6
	// Each run waits until all have started (a file per run in a shared folder), so they overlap.
	meet := outsideDir(t)
	uids := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		sb := host(t)
		if i%2 == 1 {
			sb = other
		}
		wg.Go(func() {
			res, err := sb.RunHost(context.Background(), sandbox.Spec{
				Argv: []string{"/bin/sh", "-c", fmt.Sprintf(
					"touch %s/$(id -u); while [ $(ls %s | wc -l) -lt %d ]; do sleep 0.02; done; id -u", meet, meet, n)},
				Limits: sandbox.Limits{Wall: 20 * time.Second},
			})
			if err == nil && res.ExitCode == 0 {
				uids[i], _ = strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
			} else {
				t.Errorf("run %d: %v %+v", i, err, res)
			}
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, u := range uids {
		if !inRange(u) || seen[u] {
			t.Fatalf("uids of concurrent runs: %v", uids)
		}
		seen[u] = true
	}
}

// TestLeaseKillsWhatOutlivesTheRun: without a cgroup the landlock tier (no pid namespace) cannot end a
// setsid grandchild with the run; the run's uid is its alone, so what is left of it is killed before the uid
// is handed out again.
func TestLeaseKillsWhatOutlivesTheRun(t *testing.T) {
	cfg := testConfig(sandbox.TierLandlock)
	cfg.CgroupRoot = "-"
	sb, rep := sandbox.Detect(context.Background(), cfg)
	if tr := rep.Tier(sandbox.TierLandlock); tr.Err != "" {
		t.Skipf("landlock cannot start here: %s", tr.Err)
	}
	if !sb.Confined() {
		t.Fatalf("landlock not confined: %+v", rep.Tier(sandbox.TierLandlock).Probes)
	}
	mark := "3002." + strconv.Itoa(int(time.Now().UnixNano()%1e6))
	run(t, sb, sandbox.Spec{Argv: []string{"/bin/sh", "-c", "setsid /bin/sleep " + mark + " & exit 0"}})
	if procs := findCmdline(mark); len(procs) > 0 {
		t.Fatalf("the grandchild outlived the run's lease: %v", procs)
	}
}

func TestParseUIDs(t *testing.T) {
	for in, want := range map[string][2]int{"65534": {65534, 1}, "1000-1009": {1000, 10}, " 7 - 7 ": {7, 1}} {
		if f, n, err := sandbox.ParseUIDs(in); err != nil || f != want[0] || n != want[1] {
			t.Errorf("ParseUIDs(%q) = %d %d %v, want %v", in, f, n, err, want)
		}
	}
	for _, in := range []string{"", "0", "0-10", "-5", "10-5", "x", "1-2-3", "4294967295", "1-70000"} {
		if _, _, err := sandbox.ParseUIDs(in); err == nil {
			t.Errorf("ParseUIDs(%q) accepted", in)
		}
	}
	if acc := sandbox.Accounts(0, 1); len(acc) != 1 || !strings.HasPrefix(acc[0], "root(") {
		t.Errorf("Accounts(0, 1) = %v", acc)
	}
}

// TestNotRoot runs this test binary as an unprivileged uid: it cannot switch uids, so Detect says host
// commands would run as its own user (SeparateUID false, with why), RunHost runs them so, and the confined
// tiers still start, confining the program as that uid.
func TestNotRoot(t *testing.T) {
	if os.Getenv("GATEHOUSE_SANDBOX_TEST_NOT_ROOT") != "" {
		notRootChild(t)
		return
	}
	dir := outsideDir(t)
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "sandbox.test")
	if err := sandbox.CopyFile(os.Args[0], exe); err != nil {
		t.Fatal(err)
	}
	os.Chmod(exe, 0o755)
	const uid = sharedUID - 1
	cmd := exec.Command(exe, "-test.run", "^TestNotRoot$", "-test.v")
	cmd.Env = []string{"GATEHOUSE_SANDBOX_TEST_NOT_ROOT=1", "PATH=/usr/bin:/bin"}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	t.Logf("as uid %d:\n%s", uid, out)
	if err != nil {
		t.Fatal(err)
	}
}

func notRootChild(t *testing.T) {
	cfg := testConfig(sandbox.TierBwrap, sandbox.TierNamespaces, sandbox.TierLandlock)
	cfg.WorkRoot = filepath.Join(os.TempDir(), fmt.Sprintf("gatehouse-sandbox-%d", os.Getuid()))
	t.Cleanup(func() { os.RemoveAll(cfg.WorkRoot) })
	sb, rep := sandbox.Detect(context.Background(), cfg)
	if rep.Host.SeparateUID || sb.SeparateUID() || rep.Host.Err == "" {
		t.Fatalf("as uid %d, host report %+v", os.Getuid(), rep.Host)
	}
	t.Logf("host: %s", rep.Host.Err)
	for _, tr := range rep.Tiers {
		t.Logf("%s confined=%v err=%q", tr.Tier, tr.Confined, tr.Err)
	}
	if !sb.Confined() {
		t.Fatalf("no tier confines as uid %d", os.Getuid())
	}
	res, err := sb.RunHost(context.Background(), sandbox.Spec{Argv: []string{"id", "-u"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(os.Getuid()) || res.SeparateUID || res.UID != os.Getuid() {
		t.Fatalf("RunHost as uid %d: %v %+v %q", os.Getuid(), err, res, res.Stdout)
	}
	res, err = sb.Run(context.Background(), sandbox.Spec{Argv: []string{"/bin/sh", "-c", "cat /proc/1/cmdline; ls /proc | grep -c '^[0-9]'"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run in %s as uid %d: %v %+v %q", sb.Tier(), os.Getuid(), err, res, res.Stderr)
	}
}

// TestRunHostSeesNoOtherProcMount: a second proc mount of the host's (a
// container's, a chroot's) would list the host's processes; a host command
// finds it empty.
func TestRunHostSeesNoOtherProcMount(t *testing.T) {
	dir := filepath.Join(outsideDir(t), "proc with space")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("proc", dir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	res := runHost(t, sandbox.Spec{Argv: []string{"/bin/sh", "-c", fmt.Sprintf("cat '%s/%d/cmdline' && echo READ; ls '%s' | grep -c '^[0-9]'", dir, os.Getpid(), dir)}})
	if strings.Contains(string(res.Stdout), "READ") || strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Fatalf("the host command saw host processes through %s: %q", dir, res.Stdout)
	}
}
