package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The uid range a zero Config uses: 256 uids no account on a Debian host holds (above systemd's container
// ranges, below 2^31 so no program sees a negative uid), one per concurrent run.
const (
	DefaultFirstUID = 2100000000
	DefaultUIDCount = 256
)

// DefaultLeaseDir is where a uid lease is held host-wide (one lock file per uid), so brokers on one host never
// give the same uid to two runs at once.
const DefaultLeaseDir = "/run/gatehouse/sandbox-uids"

// ErrNoSeparateUID: this process cannot switch to another uid (it is not root, or lacks CAP_SETUID, CAP_SETGID
// and CAP_SETPCAP, or the uids are not mapped in its user namespace), so an unconfined program would run as the
// broker's own user and could read everything the broker can.
var ErrNoSeparateUID = errors.New("sandbox: programs cannot run as a uid other than the broker's")

// ParseUIDs reads a uid range as the --sandbox-uid flag writes it: "N" (one uid, shared by every run) or
// "FIRST-LAST" (inclusive, one uid per concurrent run). uid 0 and uids above 2^31-2 are refused.
func ParseUIDs(s string) (first, count int, err error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	first, err = strconv.Atoi(strings.TrimSpace(a))
	last := first
	if err == nil && isRange {
		last, err = strconv.Atoi(strings.TrimSpace(b))
	}
	switch {
	case err != nil:
		return 0, 0, fmt.Errorf("uid range %q: want N or FIRST-LAST", s)
	case first <= 0:
		return 0, 0, fmt.Errorf("uid range %q: uids must be above 0 (never root)", s)
	case last < first:
		return 0, 0, fmt.Errorf("uid range %q: LAST is below FIRST", s)
	case last > 1<<31-2:
		return 0, 0, fmt.Errorf("uid range %q: uids must be below 2147483647", s)
	case last-first >= 1<<16:
		return 0, 0, fmt.Errorf("uid range %q: at most 65536 uids", s)
	}
	return first, last - first + 1, nil
}

// Accounts returns the accounts of /etc/passwd whose uid lies in [first, first+count), as "name(uid)". A range of
// more than one uid is leased one uid per run and whatever is left of a uid after a run is killed: it must hold
// no account's uid.
func Accounts(first, count int) []string {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 {
			continue
		}
		if uid, err := strconv.Atoi(fields[2]); err == nil && uid >= first && uid < first+count {
			out = append(out, fmt.Sprintf("%s(%d)", fields[0], uid))
		}
	}
	return out
}

// canSwitchUID reports whether this process may take the uids and gids of the range: CAP_SETUID, CAP_SETGID
// and CAP_SETPCAP (to empty the bounding set) effective, and the whole range mapped in its user namespace.
// euid 0 alone is not the test: inside a container root may lack both.
func canSwitchUID(uid, gid, count int) (bool, string) {
	caps, err := effectiveCaps()
	if err != nil {
		return false, err.Error()
	}
	for _, c := range []struct {
		bit  uint
		name string
	}{{unix.CAP_SETUID, "CAP_SETUID"}, {unix.CAP_SETGID, "CAP_SETGID"}, {unix.CAP_SETPCAP, "CAP_SETPCAP"}} {
		if caps&(1<<c.bit) == 0 {
			return false, fmt.Sprintf("this process (uid %d) lacks %s, so it cannot switch uids (run serve as root)", os.Getuid(), c.name)
		}
	}
	for _, m := range []struct {
		file  string
		first int
	}{{"/proc/self/uid_map", uid}, {"/proc/self/gid_map", gid}} {
		if !idMapped(m.file, m.first, count) {
			return false, fmt.Sprintf("ids %d-%d are not mapped in this user namespace (%s)", m.first, m.first+count-1, m.file)
		}
	}
	if own := os.Getuid(); own >= uid && own < uid+count {
		return false, fmt.Sprintf("the range holds this process's own uid %d", own)
	}
	return true, ""
}

func effectiveCaps() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
				return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			}
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, fmt.Errorf("cannot read this process's capabilities: %v", err)
	}
	return uint64(data[1].Effective)<<32 | uint64(data[0].Effective), nil
}

// idMapped reports whether [first, first+count) lies inside one line of a uid_map or gid_map ("inside outside
// length"; ids here are as this namespace sees them, the first column).
func idMapped(file string, first, count int) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		in, err1 := strconv.ParseUint(f[0], 10, 32)
		n, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 == nil && err2 == nil && uint64(first) >= in && uint64(first+count) <= in+n {
			return true
		}
	}
	return false
}

// identity is who the programs of a Sandbox run as.
type identity struct {
	// switchUID: programs run as a uid of the range (else as this process's own uid and gid).
	switchUID bool
	why       string // why not, when !switchUID
	pool      *uidPool
}

// lease is the uid and gid one run has; release gives them back.
type lease struct {
	uid, gid int
	f        *os.File // the host-wide lock, nil when the range is one shared uid or ids are not switched
	pool     *uidPool
}

// uidPool hands out the uids of a range, one per run: held in this process (held) and host-wide by an
// exclusive flock on DIR/<uid>.lock, which the kernel drops if the process dies. A range of one uid is shared by
// every run and not leased. Safe for concurrent use.
type uidPool struct {
	uid, gid, count int
	dir             string

	mu   sync.Mutex
	next int
	held map[int]bool
	// sharing counts the runs holding the one uid of a range of one.
	sharing int
}

func newUIDPool(uid, gid, count int, dir string) *uidPool {
	return &uidPool{uid: uid, gid: gid, count: count, dir: dir, held: map[int]bool{}}
}

// exclusive reports whether each run gets a uid of its own.
func (p *uidPool) exclusive() bool { return p.count > 1 }

// acquire leases a free uid, waiting (until ctx ends) while every uid of the range is in use.
func (p *uidPool) acquire(ctx context.Context) (*lease, error) {
	if !p.exclusive() {
		p.mu.Lock()
		p.sharing++
		p.mu.Unlock()
		return &lease{uid: p.uid, gid: p.gid, pool: p}, nil
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: uid leases: %v", ErrStart, err)
	}
	wait := time.Millisecond
	for {
		l, err := p.tryAcquire()
		if l != nil || err != nil {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: all %d sandbox uids are in use: %v", ErrStart, p.count, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

func (p *uidPool) tryAcquire() (*lease, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; i < p.count; i++ {
		off := (p.next + i) % p.count
		uid := p.uid + off
		if p.held[uid] {
			continue
		}
		f, err := os.OpenFile(filepath.Join(p.dir, strconv.Itoa(uid)+".lock"), os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("%w: uid lease: %v", ErrStart, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue // another broker on this host runs a program as this uid
			}
			return nil, fmt.Errorf("%w: uid lease: %v", ErrStart, err)
		}
		p.held[uid] = true
		p.next = off + 1
		return &lease{uid: uid, gid: p.gid + off, f: f, pool: p}, nil
	}
	return nil, nil
}

// release gives the uid back. With kill, every process still running as the uid is killed first (the run's
// tree had no pid namespace or cgroup to end it; the uid is the run's alone, so they are the run's). Then
// what the uid left in the host's temporary folders is removed (removeLeftovers); for the one uid of a range
// of one, once the last run of this process holding it ends.
func (l *lease) release(kill bool) error {
	if l != nil && l.f == nil && l.pool != nil {
		// The one uid every run shares: what it left goes once no run of this process holds it.
		l.pool.mu.Lock()
		defer l.pool.mu.Unlock()
		if l.pool.sharing--; l.pool.sharing == 0 {
			removeLeftovers(l.uid)
		}
		return nil
	}
	if l == nil || l.f == nil {
		return nil
	}
	var err error
	if kill {
		err = killUID(l.uid, 5*time.Second)
	}
	if err == nil {
		// Nothing of the uid runs any more (its tree is gone, and no other process holds its lease), so
		// nothing can race the removal.
		removeLeftovers(l.uid)
	}
	l.pool.mu.Lock()
	delete(l.pool.held, l.uid)
	l.pool.mu.Unlock()
	l.f.Close() // drops the flock
	return err
}

// tempDirs are the host's folders every user may write. A program that holds a uid writes there what the next
// run holding the same uid (a range's uids come round again), maybe another tenant's, would find.
var tempDirs = []string{"/tmp", "/var/tmp", "/dev/shm"}

// removeLeftovers removes what uid left in the host's temporary folders: every entry of tempDirs that it
// owns, and of the sticky, world-writable folders in them (such as /tmp/.X11-unix), whole. An entry is
// looked at where it is (never through a link) and removed by name in its folder. Folders others made
// and opened to every user without the sticky bit are theirs to share, and are left alone.
func removeLeftovers(uid int) {
	if uid == 0 || uid == os.Getuid() {
		return // never the broker's own files
	}
	seen := map[string]bool{}
	for _, d := range tempDirs {
		real, err := filepath.EvalSymlinks(d) // /var/tmp may be /tmp
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		removeOwned(real, uid, 2)
	}
}

func removeOwned(dir string, uid, depth int) {
	f, err := os.Open(dir)
	if err != nil {
		return
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	for _, n := range names {
		p := filepath.Join(dir, n)
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			continue
		}
		switch {
		case int(st.Uid) == uid:
			_ = os.RemoveAll(p) // does not follow links: a link is removed, not its target
		case depth > 1 && st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Mode&0o1002 == 0o1002:
			removeOwned(p, uid, depth-1)
		}
	}
}

// killUID SIGKILLs every process whose real, effective or saved uid is uid until none is left.
func killUID(uid int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		pids := pidsOfUID(uid)
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox: %d processes of uid %d left", len(pids), uid)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// pidsOfUID lists the live (not zombie) processes with uid as real, effective or saved uid.
func pidsOfUID(uid int) []int {
	ents, _ := os.ReadDir("/proc")
	want := strconv.Itoa(uid)
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		mine, zombie := false, false
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 4 && f[0] == "Uid:":
				mine = f[1] == want || f[2] == want || f[3] == want
			case len(f) >= 2 && f[0] == "State:":
				zombie = f[1] == "Z"
			}
		}
		if mine && !zombie {
			out = append(out, pid)
		}
	}
	return out
}

// Securebits for a process giving up root: uid 0 gains nothing on exec (NOROOT), capabilities are not kept
// across the uid change (KEEP_CAPS off, locked) and none can be raised into the ambient set; each locked.
// SECBIT_NO_SETUID_FIXUP stays off so that setresuid clears every capability.
const droppedRootBits = 1<<0 | 1<<1 | 1<<5 | 1<<6 | 1<<7

// becomeUser makes the calling thread (and, for the ids, every thread) uid:gid for good, as a helper started
// by root does before exec: an empty bounding set and no ambient capabilities, locked securebits, no
// supplementary group, real, effective and saved ids switched, no capability left, and the parent-death signal
// set again (a uid change clears it). It checks the result rather than trusting the calls.
func becomeUser(uid, gid int) error {
	ppid := os.Getppid()
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop bounding cap %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient caps: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, droppedRootBits, 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	if err := syscall.Setgroups([]int{}); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("setresgid: %w", err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresuid: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for _, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return fmt.Errorf("capabilities left after the uid switch: %+v", data)
		}
	}
	if r, e, s := unix.Getresuid(); r != uid || e != uid || s != uid {
		return fmt.Errorf("uids are %d/%d/%d after switching to %d", r, e, s, uid)
	}
	if r, e, s := unix.Getresgid(); r != gid || e != gid || s != gid {
		return fmt.Errorf("gids are %d/%d/%d after switching to %d", r, e, s, gid)
	}
	if g, err := syscall.Getgroups(); err != nil || len(g) != 0 {
		return fmt.Errorf("supplementary groups left: %v %v", g, err)
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if os.Getppid() != ppid {
		return errors.New("the host process died during setup")
	}
	return nil
}
