package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// probeExe is the name of the probe binary in the self-test workspace.
const probeExe = ".gatehouse-probe"

// Detect self-tests how programs run outside any tier (Report.Host: the uid switch and the process view of
// RunHost and the unconfined tier), then each configured tier in order, and returns a Sandbox using the first
// tier every probe proved confined, else an unconfined one. It never fails: a tier that cannot start is
// reported with its error and skipped. The self-test runs once per call; keep the Sandbox (it caches the
// result) rather than calling Detect per run. An unknown tier is reported as an error entry.
func Detect(ctx context.Context, cfg Config) (*Sandbox, *Report) {
	cfg = cfg.withDefaults()
	rep := &Report{Chosen: TierUnconfined}
	var ownPID bool
	rep.Host, ownPID = selfTestHost(ctx, cfg)
	cfg.Logger.Info("sandbox: host self-test", "uids", rep.Host.UIDs, "separate_uid", rep.Host.SeparateUID, "own_pid", rep.Host.OwnPID, "error", rep.Host.Err)
	chosen := Tier("")
	for _, t := range cfg.Tiers {
		tr := TierReport{Tier: t}
		if err := validTier(t); err != nil {
			tr.Err = err.Error()
			rep.Tiers = append(rep.Tiers, tr)
			continue
		}
		tr = selfTest(ctx, cfg, t, ownPID)
		cfg.Logger.Info("sandbox: self-test", "tier", t, "confined", tr.Confined, "error", tr.Err)
		rep.Tiers = append(rep.Tiers, tr)
		if tr.Confined {
			chosen = t // later tiers are not tried
			break
		}
	}
	if chosen == "" {
		chosen = TierUnconfined
	}
	rep.Chosen = chosen
	rep.Confined = chosen != TierUnconfined
	if !rep.Confined {
		cfg.Logger.Warn("sandbox: no tier proved confined; programs run unconfined")
	}
	if !rep.Host.SeparateUID {
		cfg.Logger.Warn("sandbox: host commands and unconfined programs would run as this process's own user and could read its keys", "why", rep.Host.Err)
	}
	sb := newSandbox(cfg, chosen, rep.Confined, rep)
	sb.ownPID, sb.separate = ownPID, rep.Host.SeparateUID
	return sb, rep
}

// Probes every confining tier must pass; own-uid is only reported (a tier started by a broker that is not root
// runs the program as the broker's uid, inside the tier, which keeps the broker's files out of its view).
var allProbes = []string{ProbeLoopback, ProbeUDP, ProbeUnix, ProbeWriteOutside, ProbeReadOutside, ProbeCaps,
	ProbeUserns, ProbeRemount, ProbeWorkspace, ProbeCanary, ProbeNoNewPrivs, ProbeBrokerFiles, ProbeSignalBroker,
	ProbeSignalHost, ProbePtraceHost, ProbeProcHidden}

// Probes of the host self-test: separateProbes decide HostReport.SeparateUID, ownPIDProbes HostReport.OwnPID.
var (
	separateProbes = []string{ProbeOwnUID, ProbeCaps, ProbeNoNewPrivs, ProbeBrokerFiles, ProbeSignalBroker}
	ownPIDProbes   = []string{ProbeProcHidden, ProbeSignalHost, ProbePtraceHost}
)

// selfTest runs the probe inside tier t against real host listeners, a real canary folder and a real host
// process of the run's own uid.
func selfTest(ctx context.Context, cfg Config, t Tier, ownPID bool) TierReport {
	tr := TierReport{Tier: t}
	s := newSandbox(cfg, t, false, nil)
	s.ownPID = ownPID
	probes, err := s.probe(ctx, modeOf(t), t)
	if err != nil {
		tr.Err = err.Error()
		return tr
	}
	tr.Probes = probes
	tr.Confined = t.Confining() && holds(probes, allProbes)
	return tr
}

// selfTestHost runs the probe the way RunHost runs a command, in pid and mount namespaces of its own first and,
// should those not start, without. It returns the report and whether the namespaces are used.
func selfTestHost(ctx context.Context, cfg Config) (HostReport, bool) {
	hr := HostReport{UIDs: cfg.uidRange()}
	s := newSandbox(cfg, TierUnconfined, false, nil)
	s.ownPID = true
	probes, err := s.probe(ctx, modePlain, TierUnconfined)
	if err != nil {
		s.ownPID = false
		probes, err = s.probe(ctx, modePlain, TierUnconfined)
	}
	if err != nil {
		hr.Err = err.Error()
		return hr, false
	}
	for _, p := range probes {
		if slices.Contains(separateProbes, p.Name) || slices.Contains(ownPIDProbes, p.Name) {
			hr.Probes = append(hr.Probes, p)
		}
	}
	hr.SeparateUID = s.id.switchUID && holds(probes, separateProbes)
	hr.OwnPID = s.ownPID && holds(probes, ownPIDProbes)
	switch {
	case !s.id.switchUID:
		hr.Err = s.id.why
	case !hr.SeparateUID:
		hr.Err = "the uid switch did not hold (see the probes)"
	}
	if s.id.switchUID && !s.id.pool.exclusive() {
		cfg.Logger.Warn("sandbox: every run shares one uid, so concurrent runs outside a pid namespace can reach each other's files and processes; give a range", "uid", cfg.UID)
	}
	return hr, s.ownPID
}

// holds reports whether every probe named in want is present and contained.
func holds(probes []Probe, want []string) bool {
	for _, name := range want {
		ok := false
		for _, p := range probes {
			if p.Name == name {
				ok = p.Contained
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// probe runs this binary's probe (HelperArg "probe", copied into the workspace) in mode with everything the
// probes try to reach set up on the host, checks on the host what reached it, and returns every probe.
func (s *Sandbox) probe(ctx context.Context, mode string, t Tier) ([]Probe, error) {
	cfg := s.cfg
	if err := makeWorkRoot(cfg.WorkRoot); err != nil {
		return nil, err
	}
	outside, err := os.MkdirTemp(cfg.WorkRoot, "probe-outside-")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorkspace, err)
	}
	defer os.RemoveAll(outside)
	// Open to everyone, so only confinement (not file modes) can stop the probe.
	os.Chmod(outside, 0o777)
	secret := filepath.Join(outside, "secret")
	canary := filepath.Join(outside, "canary-"+randomHex())
	if err := os.WriteFile(secret, []byte("gatehouse secret"), 0o644); err != nil {
		return nil, err
	}
	// The broker's own files, as DATA_DIR holds them: only the uid keeps the program out.
	privDir := filepath.Join(outside, "broker")
	private := filepath.Join(privDir, "key")
	if err := os.Mkdir(privDir, 0o755); err != nil {
		return nil, err
	}
	os.Chmod(privDir, 0o755)
	if err := os.WriteFile(private, []byte("gatehouse private key"), 0o600); err != nil {
		return nil, err
	}

	l := &listeners{}
	if err := l.start(filepath.Join(outside, "sock")); err != nil {
		return nil, err
	}
	defer l.stop()

	ls, err := s.lease(ctx)
	if err != nil {
		return nil, err
	}
	host, err := startHostProcess(ls, s.id.switchUID)
	if err != nil {
		ls.release(false)
		return nil, fmt.Errorf("%w: host process for the probe: %v", ErrStart, err)
	}
	hostAlive := true
	defer func() {
		if hostAlive {
			host.stop()
		}
		ls.release(false)
	}()

	ws, err := os.MkdirTemp(cfg.WorkRoot, "probe-ws-")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorkspace, err)
	}
	defer os.RemoveAll(ws)
	if err := placeProbe(cfg.Helper[0], filepath.Join(ws, probeExe)); err != nil {
		return nil, fmt.Errorf("%w: probe binary: %v", ErrStart, err)
	}
	if err := os.WriteFile(filepath.Join(ws, probeMarkFile), []byte(host.mark), 0o600); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorkspace, err)
	}
	exe := filepath.Join(ws, probeExe)
	if mode == modeBwrap || mode == modeNamespaces {
		exe = "/work/" + probeExe
	}
	cmdline, _ := os.ReadFile("/proc/self/cmdline")
	sum := sha256.Sum256(cmdline)

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := s.run(ctx, Spec{
		Argv: []string{exe, HelperArg, "probe"},
		Env: []string{
			envProbeTCP + "=" + l.tcp.Addr().String(),
			envProbeUDP + "=" + l.udp.LocalAddr().String(),
			envProbeUnix + "=" + l.unixPath,
			envProbeRead + "=" + secret,
			envProbeCanary + "=" + canary,
			envProbePrivate + "=" + private,
			envProbeBroker + "=" + fmt.Sprintf("%d:%d:%s", os.Getpid(), os.Getuid(), hex.EncodeToString(sum[:])),
			envProbeHostPID + "=" + strconv.Itoa(host.cmd.Process.Pid),
		},
		Workspace: ws,
		// The probe is a Go binary: its runtime reserves far more address space than the default RLIMIT_AS.
		Limits: Limits{Wall: 20 * time.Second, Memory: 16 << 30},
	}, mode, t, false, ls)
	if err != nil {
		return nil, err
	}
	var probes []Probe
	if err := json.Unmarshal(res.Stdout, &probes); err != nil || len(probes) == 0 {
		return nil, fmt.Errorf("%w: probe output unreadable (exit %d %s %s): %q", ErrStart, res.ExitCode, res.Signal, res.Killed, excerpt(append(res.Stdout, res.Stderr...)))
	}
	l.stop()
	hostAlive = false
	if err := host.stop(); err != nil {
		mark(probes, ProbeSignalHost, "; "+err.Error())
	}
	for i := range probes {
		switch probes[i].Name {
		case ProbeLoopback:
			if n := l.tcpConns.Load(); n > 0 {
				probes[i].Contained = false
				probes[i].Detail += fmt.Sprintf("; host accepted %d connection(s)", n)
			}
		case ProbeUDP:
			n := l.udpBytes.Load()
			probes[i].Contained = n == 0
			probes[i].Detail += fmt.Sprintf("; host received %d byte(s)", n)
		case ProbeUnix:
			if n := l.unixConns.Load(); n > 0 {
				probes[i].Contained = false
				probes[i].Detail += fmt.Sprintf("; host accepted %d connection(s)", n)
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(privDir, "planted")); err == nil {
		mark(probes, ProbeBrokerFiles, "; the host found the planted file")
	}
	if _, err := os.Lstat(canary); errors.Is(err, os.ErrNotExist) {
		probes = append(probes, Probe{Name: ProbeCanary, Contained: true, Detail: "no canary outside the workspace"})
	} else {
		probes = append(probes, Probe{Name: ProbeCanary, Contained: false, Detail: "canary found at " + canary})
	}
	if fi, err := os.Lstat(filepath.Join(ws, "probe-workspace")); err != nil {
		mark(probes, ProbeWorkspace, "; the host did not find the file")
		mark(probes, ProbeOwnUID, "; the host found no file of the probe's")
	} else if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		detail := fmt.Sprintf("; its file is %d:%d on the host (the run's: %d:%d, the broker's uid %d)", st.Uid, st.Gid, ls.uid, ls.gid, os.Getuid())
		if int(st.Uid) != ls.uid || int(st.Gid) != ls.gid || int(st.Uid) == os.Getuid() {
			mark(probes, ProbeOwnUID, detail)
		} else {
			for i := range probes {
				if probes[i].Name == ProbeOwnUID {
					probes[i].Detail += detail
				}
			}
		}
	}
	return probes, nil
}

// mark sets the named probe not contained, adding detail.
func mark(probes []Probe, name, detail string) {
	for i := range probes {
		if probes[i].Name == name {
			probes[i].Contained = false
			probes[i].Detail += detail
		}
	}
}

func randomHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// hostProcess is a process of the run's uid on the host, outside every tier, with a mark in its command line
// and its environment: the probe must neither see, signal nor trace it.
type hostProcess struct {
	cmd  *exec.Cmd
	mark string
}

func startHostProcess(ls *lease, asLease bool) (*hostProcess, error) {
	var b [6]byte
	rand.Read(b[:])
	mark := fmt.Sprintf("%d", uint64(b[0])<<40|uint64(b[1])<<32|uint64(b[2])<<24|uint64(b[3])<<16|uint64(b[4])<<8|uint64(b[5]))
	cmd := exec.Command("/bin/sleep", "86400."+mark)
	cmd.Env = []string{"GATEHOUSE_HOST_MARK=" + mark}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if asLease {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(ls.uid), Gid: uint32(ls.gid), Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &hostProcess{cmd: cmd, mark: mark}, nil
}

// stop kills the process and reports an error when it was no longer running (the probe ended it).
func (h *hostProcess) stop() error {
	alive := h.cmd.Process.Signal(syscall.Signal(0)) == nil
	var ws syscall.WaitStatus
	if pid, _ := syscall.Wait4(h.cmd.Process.Pid, &ws, syscall.WNOHANG, nil); pid == h.cmd.Process.Pid {
		alive = false
	}
	h.cmd.Process.Kill()
	h.cmd.Wait()
	if !alive {
		return errors.New("the host process had been ended")
	}
	return nil
}

// placeProbe copies the helper binary into the workspace (a hard link would be chowned to the sandbox uid
// along with the workspace, and so would the original).
func placeProbe(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// listeners are the host ends the probe tries to reach; each counts what arrives. Their goroutines are owned
// by stop, which closes the sockets and waits for them.
type listeners struct {
	tcp       net.Listener
	udp       net.PacketConn
	unix      net.Listener
	unixPath  string
	tcpConns  atomic.Int64
	unixConns atomic.Int64
	udpBytes  atomic.Int64
	wg        sync.WaitGroup
	once      sync.Once
}

func (l *listeners) start(sock string) error {
	var err error
	if l.tcp, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
		return err
	}
	if l.udp, err = net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
		l.tcp.Close()
		return err
	}
	if l.unix, err = net.Listen("unix", sock); err != nil {
		l.tcp.Close()
		l.udp.Close()
		return err
	}
	l.unixPath = sock
	os.Chmod(sock, 0o777)
	accept := func(ln net.Listener, n *atomic.Int64) {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}
	l.wg.Add(3)
	go accept(l.tcp, &l.tcpConns)
	go accept(l.unix, &l.unixConns)
	go func() {
		defer l.wg.Done()
		buf := make([]byte, 2048)
		for {
			n, _, err := l.udp.ReadFrom(buf)
			if err != nil {
				return
			}
			l.udpBytes.Add(int64(n))
		}
	}()
	return nil
}

func (l *listeners) stop() {
	l.once.Do(func() {
		// Give datagrams in flight a moment to land before counting.
		time.Sleep(20 * time.Millisecond)
		l.tcp.Close()
		l.udp.Close()
		l.unix.Close()
		l.wg.Wait()
	})
}
