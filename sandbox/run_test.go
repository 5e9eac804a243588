package sandbox_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/sandbox"
)

func TestRunBasics(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		res := run(t, sb, sandbox.Spec{
			Argv:  []string{"/bin/sh", "-c", `cat in/data.txt; read line; echo "stdin=$line"; env | sort; pwd; id -u; echo err >&2; echo made > out.txt; exit 7`},
			Env:   []string{"PATH=/usr/bin:/bin", "GREETING=hello"},
			Stdin: []byte("from-stdin\n"),
			Files: map[string][]byte{"in/data.txt": []byte("data\n")},
		})
		if res.ExitCode != 7 || res.Killed != "" || res.Signal != "" {
			t.Fatalf("exit %d killed %q signal %q", res.ExitCode, res.Killed, res.Signal)
		}
		out := string(res.Stdout)
		for _, want := range []string{"data\n", "stdin=from-stdin", "GREETING=hello", res.Workdir + "\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "HOME=") || strings.Contains(out, "GOPATH") {
			t.Errorf("environment inherited:\n%s", out)
		}
		if string(res.Stderr) != "err\n" {
			t.Errorf("stderr = %q", res.Stderr)
		}
		if !res.Confined || res.Tier != sb.Tier() {
			t.Errorf("result tier %s confined %v", res.Tier, res.Confined)
		}
		sum := sha256.Sum256([]byte("made\n"))
		want := []sandbox.FileInfo{
			{Path: "in/data.txt", Size: 5, Digest: digest([]byte("data\n"))},
			{Path: "out.txt", Size: 5, Digest: "sha256:" + hex.EncodeToString(sum[:])},
		}
		if len(res.Files) != len(want) || res.Files[0] != want[0] || res.Files[1] != want[1] {
			t.Errorf("files = %+v, want %+v", res.Files, want)
		}
	})
}

func digest(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }

func TestRunLimits(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		t.Run("wall", func(t *testing.T) {
			res := run(t, sb, sandbox.Spec{Argv: []string{"/bin/sleep", "30"}, Limits: sandbox.Limits{Wall: 300 * time.Millisecond}})
			if res.Killed != sandbox.KilledWall || res.Duration > 3*time.Second {
				t.Fatalf("killed %q after %v", res.Killed, res.Duration)
			}
		})
		t.Run("canceled", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			res, err := sb.Run(ctx, sandbox.Spec{Argv: []string{"/bin/sleep", "30"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Killed != sandbox.KilledCanceled {
				t.Fatalf("killed %q", res.Killed)
			}
		})
		t.Run("file-size", func(t *testing.T) {
			res := run(t, sb, sandbox.Spec{
				Argv:   py("open('big','wb').write(b'x' * (2 << 20))\nprint('wrote')"),
				Limits: sandbox.Limits{FileSize: 1 << 20},
			})
			if res.ExitCode == 0 && res.Killed == "" {
				t.Fatalf("wrote 2 MiB under a 1 MiB limit")
			}
			for _, f := range res.Files {
				if f.Size > 1<<20 {
					t.Fatalf("%s is %d bytes", f.Path, f.Size)
				}
			}
		})
		t.Run("open-files", func(t *testing.T) {
			res := run(t, sb, sandbox.Spec{
				Argv:   py("import os\nfs=[open('/dev/null') for _ in range(100)]\nprint('opened')"),
				Limits: sandbox.Limits{OpenFiles: 32},
			})
			if bytes.Contains(res.Stdout, []byte("opened")) {
				t.Fatalf("opened 100 files under a limit of 32")
			}
		})
		t.Run("output", func(t *testing.T) {
			res := run(t, sb, sandbox.Spec{
				Argv:   py("import sys\nsys.stdout.write('x' * 100000)"),
				Limits: sandbox.Limits{Output: 1000},
			})
			if len(res.Stdout) != 1000 || !res.Truncated {
				t.Fatalf("kept %d bytes, truncated %v", len(res.Stdout), res.Truncated)
			}
		})
	})
}

func TestRunSpecErrors(t *testing.T) {
	sb, _ := sandbox.Detect(context.Background(), testConfig(sandbox.TierUnconfined))
	for _, spec := range []sandbox.Spec{
		{},
		{Argv: []string{"/bin/true"}, Files: map[string][]byte{"../x": nil}},
		{Argv: []string{"/bin/true"}, Files: map[string][]byte{"/etc/x": nil}},
		{Argv: []string{"/bin/true"}, Env: []string{"NOEQUALS"}},
	} {
		if _, err := sb.Run(context.Background(), spec); !errors.Is(err, sandbox.ErrSpec) {
			t.Errorf("Run(%+v) = %v, want ErrSpec", spec, err)
		}
	}
	if _, err := sb.Run(context.Background(), sandbox.Spec{Argv: []string{"/bin/true"}, Workspace: "/nonexistent-gatehouse"}); !errors.Is(err, sandbox.ErrWorkspace) {
		t.Errorf("missing workspace: %v, want ErrWorkspace", err)
	}
	if _, err := sb.Run(context.Background(), sandbox.Spec{Argv: []string{"/no/such/program"}}); !errors.Is(err, sandbox.ErrStart) {
		t.Errorf("missing program: %v, want ErrStart", err)
	}
}

func TestRunGivenWorkspaceKeepsFilesAndRefusesSymlinkWrites(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		ws, err := os.MkdirTemp("/tmp/gatehouse-sandbox", "test-ws-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(ws)
		run(t, sb, sandbox.Spec{Argv: []string{"/bin/sh", "-c", "ln -s /etc sub; echo kept > keep.txt"}, Workspace: ws})
		if b, err := os.ReadFile(ws + "/keep.txt"); err != nil || string(b) != "kept\n" {
			t.Fatalf("keep.txt: %q %v", b, err)
		}
		// A link the last run left must not turn a host-side write (as root) into a write outside.
		_, err = sb.Run(context.Background(), sandbox.Spec{Argv: []string{"/bin/true"}, Workspace: ws,
			Files: map[string][]byte{"sub/gatehouse-planted": []byte("x")}})
		if !errors.Is(err, sandbox.ErrWorkspace) {
			t.Fatalf("write through a symlink: %v, want ErrWorkspace", err)
		}
		if _, err := os.Lstat("/etc/gatehouse-planted"); err == nil {
			os.Remove("/etc/gatehouse-planted")
			t.Fatal("wrote /etc/gatehouse-planted through a planted symlink")
		}
	})
}

func TestUnconfinedIsNotContained(t *testing.T) {
	sb, rep := sandbox.Detect(context.Background(), testConfig(sandbox.TierUnconfined))
	if sb.Confined() || rep.Confined || sb.Tier() != sandbox.TierUnconfined || rep.Chosen != sandbox.TierUnconfined {
		t.Fatalf("forced unconfined: tier %s confined %v, report %+v", sb.Tier(), sb.Confined(), rep)
	}
	tr := rep.Tier(sandbox.TierUnconfined)
	if tr == nil || tr.Err != "" {
		t.Fatalf("unconfined self-test: %+v", tr)
	}
	escaped := map[string]bool{}
	for _, p := range tr.Probes {
		t.Logf("%s contained=%v: %s", p.Name, p.Contained, p.Detail)
		escaped[p.Name] = !p.Contained
	}
	for _, name := range []string{sandbox.ProbeLoopback, sandbox.ProbeUDP, sandbox.ProbeUnix, sandbox.ProbeWriteOutside,
		sandbox.ProbeReadOutside, sandbox.ProbeCanary} {
		if !escaped[name] {
			t.Errorf("probe %s contained while unconfined: the probe proves nothing", name)
		}
	}
	// The same host-side checks the escape tests use see the escape here, so they are real.
	l := listen(t, "tcp4", "127.0.0.1:0")
	port := l.ln.Addr().String()
	res := run(t, sb, sandbox.Spec{Argv: py("import socket\nh,p='" + port + "'.split(':')\nsocket.create_connection((h,int(p)),2)")})
	l.close()
	if l.conns.Load() != 1 || res.ExitCode != 0 || res.Confined {
		t.Fatalf("unconfined connect: %d accepted, exit %d", l.conns.Load(), res.ExitCode)
	}
}

func TestDetectDefaultChoosesFirstConfined(t *testing.T) {
	sb, rep := sandbox.Detect(context.Background(), testConfig())
	for _, tr := range rep.Tiers {
		t.Logf("%s: confined=%v err=%q", tr.Tier, tr.Confined, tr.Err)
	}
	if rep.Chosen != sb.Tier() || rep.Confined != sb.Confined() {
		t.Fatalf("report %s/%v vs sandbox %s/%v", rep.Chosen, rep.Confined, sb.Tier(), sb.Confined())
	}
	for _, tr := range rep.Tiers {
		if tr.Confined {
			if tr.Tier != rep.Chosen {
				t.Fatalf("chose %s although %s was confined first", rep.Chosen, tr.Tier)
			}
			return
		}
	}
	if rep.Chosen != sandbox.TierUnconfined {
		t.Fatalf("no tier confined, chose %s", rep.Chosen)
	}
}

func TestDetectUnknownTierAndBrokenTier(t *testing.T) {
	cfg := testConfig("chroot", sandbox.TierBwrap)
	cfg.Bwrap = "/nonexistent/bwrap"
	sb, rep := sandbox.Detect(context.Background(), cfg)
	if sb.Confined() || rep.Chosen != sandbox.TierUnconfined {
		t.Fatalf("chose %s", rep.Chosen)
	}
	if len(rep.Tiers) != 2 || rep.Tiers[0].Err == "" || rep.Tiers[1].Err == "" {
		t.Fatalf("tiers %+v", rep.Tiers)
	}
	t.Logf("errors: %q, %q", rep.Tiers[0].Err, rep.Tiers[1].Err)
}
