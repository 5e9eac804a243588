package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Helper modes, one per tier (plain serves unconfined and RunHost).
const (
	modePlain      = "plain"
	modeBwrap      = "bwrap"
	modeNamespaces = "namespaces"
	modeLandlock   = "landlock"
)

// helperEnv marks the helper's own environment (the program gets Spec.Env instead).
const helperEnv = "GATEHOUSE_SANDBOX_HELPER"

// helperConfig is what the host sends the helper on fd 3, as JSON.
type helperConfig struct {
	Mode    string   `json:"mode"`
	Argv    []string `json:"argv"`
	Env     []string `json:"env"`
	Dir     string   `json:"dir"` // host workspace
	UID     int      `json:"uid"`
	GID     int      `json:"gid"`
	Drop    bool     `json:"drop"`    // switch to UID/GID (root only; else the program keeps this process's ids)
	OwnPID  bool     `json:"own_pid"` // plain mode: the helper is pid 1 of fresh pid and mount namespaces
	Rlimits []rlimit `json:"rlimits"`
	TmpSize int64    `json:"tmp_size"`
	Bwrap   string   `json:"bwrap,omitempty"`
	Gateway bool     `json:"gateway,omitempty"` // fds 6 and 7 are the gateway's ends, for the program's 3 and 4
}

type rlimit struct {
	Resource int    `json:"resource"`
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

func rlimitsFor(l Limits, nproc bool) []rlimit {
	cpu := uint64((l.CPU + time.Second - 1) / time.Second)
	rl := []rlimit{
		{unix.RLIMIT_CPU, cpu, cpu + 1}, // SIGXCPU at the soft limit, SIGKILL a second later
		{unix.RLIMIT_AS, uint64(l.Memory), uint64(l.Memory)},
		{unix.RLIMIT_FSIZE, uint64(l.FileSize), uint64(l.FileSize)},
		{unix.RLIMIT_NOFILE, uint64(l.OpenFiles), uint64(l.OpenFiles)},
		{unix.RLIMIT_CORE, 0, 0},
	}
	if nproc {
		rl = append(rl, rlimit{unix.RLIMIT_NPROC, uint64(l.Processes), uint64(l.Processes)})
	}
	return rl
}

// cappedBuffer keeps the first max bytes written to it and drops the rest.
type cappedBuffer struct {
	max   int64
	buf   bytes.Buffer
	trunc bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.max - int64(c.buf.Len())
	if int64(len(p)) > room {
		c.trunc = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	c.buf.Write(p)
	return len(p), nil
}

// run runs spec in mode as the lease's uid, or a uid it leases itself when ls is nil (and gives back once no
// process of the run is left and its temporary workspace is gone).
func (s *Sandbox) run(ctx context.Context, spec Spec, mode string, tier Tier, confined bool, ls *lease) (*Result, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, fmt.Errorf("%w: empty Argv", ErrSpec)
	}
	for _, e := range spec.Env {
		if !strings.Contains(e, "=") || strings.ContainsRune(e, 0) {
			return nil, fmt.Errorf("%w: env entry %q is not KEY=VALUE", ErrSpec, e)
		}
	}
	lim := spec.Limits.withDefaults()
	ownPID := mode == modePlain && s.ownPID
	ownLease := ls == nil
	if ownLease {
		var err error
		if ls, err = s.lease(ctx); err != nil {
			return nil, err
		}
		// Only a run with neither a pid namespace nor a cgroup can leave a process behind (a setsid
		// grandchild); with a uid of its own, that process is the run's and is killed before the uid is reused.
		nsKill := mode == modeBwrap || mode == modeNamespaces || ownPID
		defer func() {
			if err := ls.release(s.cg == "" && !nsKill); err != nil {
				s.log.Error("sandbox: processes left of a run's uid", "uid", ls.uid, "err", err)
			}
		}()
	}
	drop := s.id.switchUID
	ws, temp, err := prepareWorkspace(s.cfg.WorkRoot, spec.Workspace, spec.Files, ls.uid, ls.gid, drop)
	if err != nil {
		return nil, err
	}
	if temp {
		defer os.RemoveAll(ws) // before the lease is given back (defers run last in, first out)
	} else if drop && ownLease {
		// A kept workspace goes back to this process's user, so whoever gets the uid next cannot reach it
		// (a caller that brought its own lease keeps the folder as the program left it).
		defer func() {
			if err := chownTree(ws, os.Getuid(), os.Getgid()); err != nil {
				s.log.Warn("sandbox: giving a workspace back", "dir", ws, "err", err)
			}
		}()
	}
	hc := helperConfig{
		Mode: mode, Argv: spec.Argv, Env: spec.Env, Dir: ws, UID: ls.uid, GID: ls.gid, Drop: drop, OwnPID: ownPID,
		Rlimits: rlimitsFor(lim, s.cg == "" && ls.uid != 0), TmpSize: lim.TmpSize, Bwrap: s.cfg.Bwrap,
		Gateway: spec.Gateway != nil,
	}
	if hc.Gateway {
		hc.Env = gatewayEnv(spec.Env)
	}
	res, err := s.launch(ctx, hc, lim, stdio{in: spec.Stdin, inStream: spec.StdinStream, outStream: spec.StdoutStream}, spec.Gateway)
	if err != nil {
		return nil, err
	}
	res.Tier, res.Confined = tier, confined
	res.UID, res.SeparateUID = ls.uid, drop
	res.Workdir = ws
	if mode == modeBwrap || mode == modeNamespaces {
		res.Workdir = "/work"
	}
	files, err := listFiles(ws)
	if err != nil {
		s.log.Warn("sandbox: listing workspace", "dir", ws, "err", err)
	}
	res.Files = files
	return res, nil
}

// launch starts the helper, places it in the run's cgroup, hands it its config and supervises the tree until
// the program exits or a limit or ctx ends it; then it kills whatever is left of the tree. With gw it serves
// the program's gateway until then (see gateway.serve).
// stdio is a run's standard input and output: stdin's bytes, or the streams of Spec.StdinStream and
// Spec.StdoutStream.
type stdio struct {
	in                  []byte
	inStream, outStream *os.File
}

func (s *Sandbox) launch(ctx context.Context, hc helperConfig, lim Limits, sio stdio, gw func(context.Context, []byte) []byte) (*Result, error) {
	if os.Getenv(helperEnv) != "" {
		// This process was started as a helper but MaybeHelper did not take over (a TestMain without it): starting
		// another helper would recurse without end.
		return nil, fmt.Errorf("%w: this process is itself an unanswered helper", ErrNoHelper)
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStart, err)
	}
	defer cfgW.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		return nil, fmt.Errorf("%w: %v", ErrStart, err)
	}
	defer stR.Close()
	var g *gateway
	if gw != nil {
		if g, err = newGateway(gw); err != nil {
			cfgR.Close()
			stW.Close()
			return nil, fmt.Errorf("%w: gateway pipes: %v", ErrStart, err)
		}
	}

	stdout := &cappedBuffer{max: lim.Output}
	stderr := &cappedBuffer{max: lim.Output}
	cmd := exec.Command(s.cfg.Helper[0], append(append([]string{}, s.cfg.Helper[1:]...), "run")...)
	cmd.Env = []string{helperEnv + "=1"}
	cmd.Dir = "/"
	if len(sio.in) > 0 {
		cmd.Stdin = bytes.NewReader(sio.in)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if sio.inStream != nil {
		cmd.Stdin = sio.inStream
	}
	if sio.outStream != nil {
		cmd.Stdout = sio.outStream
	}
	cmd.ExtraFiles = []*os.File{cfgR, stW} // fdConfig, fdStatus
	var bin *os.File                       // fdHelperBin, in the namespaces tier
	cmd.WaitDelay = time.Second
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if hc.OwnPID {
		// An IPC namespace too: System V shared memory, semaphores and
		// message queues a run leaves are gone with it, never seen by the
		// next run that holds the same uid.
		attr.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC
	}
	if hc.Mode == modeNamespaces {
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
			syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: hc.UID, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: hc.GID, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// Without this the child keeps host root's credentials inside the new namespace (notes: trap).
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}
		// The clone already runs as the sandbox uid, which may not reach the helper's folder (go test builds in
		// a 0700 one): exec it through a descriptor opened here instead of by path.
		if bin, err = os.Open(s.cfg.Helper[0]); err != nil {
			cfgR.Close()
			stW.Close()
			if g != nil {
				g.closeAll()
			}
			return nil, fmt.Errorf("%w: helper binary: %v", ErrStart, err)
		}
		defer bin.Close()
		cmd.Path = "/proc/self/fd/5"
	}
	if bin != nil || g != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, bin) // a nil entry leaves fd 5 closed in the helper
	}
	if g != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, g.childOut, g.childIn) // fdGatewayOut, fdGatewayIn
	}
	cmd.SysProcAttr = attr

	start := time.Now()
	err = cmd.Start()
	cfgR.Close()
	stW.Close()
	if err != nil {
		if g != nil {
			g.closeAll()
		}
		return nil, fmt.Errorf("%w: %s helper: %v", ErrStart, hc.Mode, err)
	}
	pid := cmd.Process.Pid
	if g != nil {
		g.started()
		go g.serve(ctx)
	}

	statusCh := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(stR); statusCh <- b }()
	exited := make(chan struct{})
	go func() {
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
		close(exited)
	}()

	var cg *runCgroup
	var setupErr error
	killed := ""
	kill := func() {
		syscall.Kill(-pid, syscall.SIGKILL)
		syscall.Kill(pid, syscall.SIGKILL)
		if cg != nil {
			if err := cg.kill(5 * time.Second); err != nil {
				s.log.Error("sandbox: tree kill", "err", err)
			}
		}
	}
	if s.cg != "" {
		cg, err = newRunCgroup(s.cg, lim.Processes)
		if err == nil {
			err = cg.add(pid)
		}
		if err != nil {
			setupErr = fmt.Errorf("cgroup: %v", err)
		}
	}
	if setupErr == nil {
		cfgW.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := json.NewEncoder(cfgW).Encode(hc); err != nil {
			setupErr = fmt.Errorf("sending the helper its config: %v", err)
		}
		cfgW.Close()
	}
	if setupErr != nil {
		killed = "setup"
	}

	wall := time.NewTimer(lim.Wall - time.Since(start))
	defer wall.Stop()
	var tick <-chan time.Time
	if cg != nil {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		tick = t.C
	}
supervise:
	for killed == "" {
		select {
		case <-exited:
			break supervise
		case <-wall.C:
			killed = KilledWall
		case <-ctx.Done():
			killed = KilledCanceled
		case <-tick:
			if cg.hitMax() {
				killed = KilledProcesses
			}
		}
	}
	// The program has exited or is being killed: nothing of its tree may outlive the run.
	kill()
	<-exited
	waitErr := cmd.Wait()
	if g != nil {
		g.shutdown()
	}
	status := <-statusCh
	dur := time.Since(start)
	if cg != nil {
		cg.remove()
	}
	if setupErr != nil {
		return nil, fmt.Errorf("%w: %v", ErrStart, setupErr)
	}
	st := parseStatus(status)
	if st.err != "" {
		return nil, fmt.Errorf("%w: %s", ErrStart, st.err)
	}
	if !st.ok {
		if killed != "" {
			return &Result{ExitCode: -1, Signal: "SIGKILL", Killed: killed, Duration: dur}, nil
		}
		return nil, fmt.Errorf("%w (%s: %v; stderr %q)", ErrNoHelper, s.cfg.Helper[0], waitErr, excerpt(stderr.buf.Bytes()))
	}
	if hc.Mode == modeBwrap && !st.bwrapChild && killed == "" {
		return nil, fmt.Errorf("%w: bubblewrap: %s", ErrStart, excerpt(stderr.buf.Bytes()))
	}

	res := &Result{
		Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(), Truncated: stdout.trunc || stderr.trunc,
		Duration: dur, Killed: killed,
	}
	ps := cmd.ProcessState
	ws, _ := ps.Sys().(syscall.WaitStatus)
	var sig syscall.Signal
	switch {
	case ws.Signaled():
		sig = ws.Signal()
	case hc.Mode == modeBwrap && ws.ExitStatus() > 128 && ws.ExitStatus() <= 128+64:
		// bwrap exits 128+n when its child dies of signal n.
		sig = syscall.Signal(ws.ExitStatus() - 128)
	default:
		res.ExitCode = ws.ExitStatus()
	}
	if sig != 0 {
		res.ExitCode, res.Signal = -1, unix.SignalName(sig)
	}
	if res.Killed == "" {
		cpu := ps.UserTime() + ps.SystemTime()
		switch {
		case sig == syscall.SIGXCPU, sig == syscall.SIGKILL && cpu >= lim.CPU-50*time.Millisecond:
			res.Killed = KilledCPU
		case sig == syscall.SIGXFSZ:
			res.Killed = KilledFileSize
		}
	}
	return res, nil
}

type helperStatus struct {
	ok, bwrapChild bool
	err            string
}

// parseStatus reads the helper's status lines ("ok", "error: ...") and, in the bubblewrap tier, bwrap's
// --json-status-fd lines that follow.
func parseStatus(b []byte) helperStatus {
	var st helperStatus
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "ok":
			st.ok = true
		case strings.HasPrefix(line, "error: "):
			st.err = strings.TrimPrefix(line, "error: ")
		case strings.HasPrefix(line, "{") && strings.Contains(line, `"child-pid"`):
			st.bwrapChild = true
		}
	}
	return st
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}
