package sandbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupParent returns the cgroup v1 pids folder runs get their cgroups in, creating it, or "" when the
// hierarchy is absent or not writable (then the process limit is RLIMIT_NPROC, see doc.go).
func cgroupParent(root string, log *slog.Logger) string {
	if root == "-" {
		return ""
	}
	if root == "" {
		root = "/sys/fs/cgroup/pids"
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(root, "pids.max")); err != nil && root != "/sys/fs/cgroup/pids" {
		// A non-root cgroup of the pids hierarchy has pids.max; the root has not.
		return ""
	}
	dir := filepath.Join(root, "gatehouse-sandbox")
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		log.Debug("sandbox: cgroup v1 pids not usable", "dir", dir, "err", err)
		return ""
	}
	// Made by root earlier, it exists but is not ours to make cgroups in.
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		log.Debug("sandbox: cgroup v1 pids not writable", "dir", dir, "err", err)
		return ""
	}
	return dir
}

// runCgroup is the pids cgroup of one run: it bounds the processes of the tree and lists them for the kill.
type runCgroup struct{ dir string }

func newRunCgroup(parent string, max int) (*runCgroup, error) {
	var b [8]byte
	rand.Read(b[:])
	dir := filepath.Join(parent, "run-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	c := &runCgroup{dir: dir}
	if err := c.write("pids.max", strconv.Itoa(max)); err != nil {
		os.Remove(dir)
		return nil, err
	}
	return c, nil
}

func (c *runCgroup) write(file, val string) error {
	return os.WriteFile(filepath.Join(c.dir, file), []byte(val), 0)
}

func (c *runCgroup) add(pid int) error { return c.write("cgroup.procs", strconv.Itoa(pid)) }

// hitMax reports whether a fork in the tree was refused by pids.max.
func (c *runCgroup) hitMax() bool {
	b, err := os.ReadFile(filepath.Join(c.dir, "pids.events"))
	if err != nil {
		return false
	}
	f := bytes.Fields(b)
	return len(f) == 2 && string(f[0]) == "max" && string(f[1]) != "0"
}

func (c *runCgroup) pids() []int {
	b, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	var out []int
	for _, l := range bytes.Fields(b) {
		if n, err := strconv.Atoi(string(l)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// kill stops all forks (pids.max 0) and SIGKILLs every process until the cgroup is empty or the deadline passes.
func (c *runCgroup) kill(within time.Duration) error {
	c.write("pids.max", "0")
	deadline := time.Now().Add(within)
	for {
		ps := c.pids()
		if len(ps) == 0 {
			return nil
		}
		for _, p := range ps {
			syscall.Kill(p, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox: %d processes left in %s", len(ps), c.dir)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// remove deletes the cgroup; zombies not yet reaped keep it busy for a moment.
func (c *runCgroup) remove() {
	for i := 0; i < 200; i++ {
		if err := os.Remove(c.dir); err == nil || os.IsNotExist(err) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
