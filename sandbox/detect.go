package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// probeExe is the name of the probe binary in the self-test workspace.
const probeExe = ".gatehouse-probe"

// Detect self-tests each configured tier in order and returns a Sandbox using the first one every probe proved
// confined, else an unconfined one. It never fails: a tier that cannot start is reported with its error and
// skipped. The self-test runs once per call; keep the Sandbox (it caches the result) rather than calling
// Detect per run. An unknown tier is reported as an error entry.
func Detect(ctx context.Context, cfg Config) (*Sandbox, *Report) {
	cfg = cfg.withDefaults()
	rep := &Report{Chosen: TierUnconfined}
	chosen := Tier("")
	for _, t := range cfg.Tiers {
		tr := TierReport{Tier: t}
		if err := validTier(t); err != nil {
			tr.Err = err.Error()
			rep.Tiers = append(rep.Tiers, tr)
			continue
		}
		tr = selfTest(ctx, cfg, t)
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
	return newSandbox(cfg, chosen, rep.Confined, rep), rep
}

// selfTest runs the probe inside tier t against real host listeners and a real canary folder.
func selfTest(ctx context.Context, cfg Config, t Tier) TierReport {
	tr := TierReport{Tier: t}
	fail := func(err error) TierReport { tr.Err = err.Error(); return tr }

	if err := os.MkdirAll(cfg.WorkRoot, 0o711); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrWorkspace, err))
	}
	outside, err := os.MkdirTemp(cfg.WorkRoot, "probe-outside-")
	if err != nil {
		return fail(fmt.Errorf("%w: %v", ErrWorkspace, err))
	}
	defer os.RemoveAll(outside)
	// Open to everyone, so only confinement (not file modes) can stop the probe.
	os.Chmod(outside, 0o777)
	var nonce [8]byte
	rand.Read(nonce[:])
	secret := filepath.Join(outside, "secret")
	canary := filepath.Join(outside, "canary-"+hex.EncodeToString(nonce[:]))
	if err := os.WriteFile(secret, []byte("gatehouse secret"), 0o644); err != nil {
		return fail(err)
	}

	l := &listeners{}
	if err := l.start(filepath.Join(outside, "sock")); err != nil {
		return fail(err)
	}
	defer l.stop()

	ws, err := os.MkdirTemp(cfg.WorkRoot, "probe-ws-")
	if err != nil {
		return fail(fmt.Errorf("%w: %v", ErrWorkspace, err))
	}
	defer os.RemoveAll(ws)
	if err := chownTree(ws, cfg.UID, cfg.GID); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrWorkspace, err))
	}
	os.Chmod(ws, 0o700)
	if err := placeProbe(cfg.Helper[0], filepath.Join(ws, probeExe)); err != nil {
		return fail(fmt.Errorf("%w: probe binary: %v", ErrStart, err))
	}
	exe := filepath.Join(ws, probeExe)
	if t == TierBwrap || t == TierNamespaces {
		exe = "/work/" + probeExe
	}

	s := newSandbox(cfg, t, false, nil)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := s.Run(ctx, Spec{
		Argv: []string{exe, HelperArg, "probe"},
		Env: []string{
			envProbeTCP + "=" + l.tcp.Addr().String(),
			envProbeUDP + "=" + l.udp.LocalAddr().String(),
			envProbeUnix + "=" + l.unixPath,
			envProbeRead + "=" + secret,
			envProbeCanary + "=" + canary,
		},
		Workspace: ws,
		// The probe is a Go binary: its runtime reserves far more address space than the default RLIMIT_AS.
		Limits: Limits{Wall: 20 * time.Second, Memory: 16 << 30},
	})
	if err != nil {
		return fail(err)
	}
	var probes []Probe
	if err := json.Unmarshal(res.Stdout, &probes); err != nil || len(probes) == 0 {
		return fail(fmt.Errorf("%w: probe output unreadable (exit %d %s %s): %q", ErrStart, res.ExitCode, res.Signal, res.Killed, excerpt(append(res.Stdout, res.Stderr...))))
	}
	l.stop()
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
	if _, err := os.Lstat(canary); errors.Is(err, os.ErrNotExist) {
		probes = append(probes, Probe{Name: ProbeCanary, Contained: true, Detail: "no canary outside the workspace"})
	} else {
		probes = append(probes, Probe{Name: ProbeCanary, Contained: false, Detail: "canary found at " + canary})
	}
	wrote := false
	for _, f := range res.Files {
		wrote = wrote || f.Path == "probe-workspace"
	}
	if !wrote {
		for i := range probes {
			if probes[i].Name == ProbeWorkspace {
				probes[i].Contained = false
				probes[i].Detail += "; the host did not find the file"
			}
		}
	}
	tr.Probes = probes
	tr.Confined = t.Confining() && len(probes) == len(allProbes)
	for _, p := range probes {
		tr.Confined = tr.Confined && p.Contained
	}
	return tr
}

var allProbes = []string{ProbeLoopback, ProbeUDP, ProbeUnix, ProbeWriteOutside, ProbeReadOutside, ProbeCaps,
	ProbeUserns, ProbeRemount, ProbeWorkspace, ProbeCanary}

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
