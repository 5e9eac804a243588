// Package e2e runs Gatehouse as a user would: the built binary, a real
// NATS, real files, signals and kill -9.
package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// bin is the gatehouse binary built once for the whole package.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gatehouse-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "gatehouse")
	build := exec.Command("go", "build", "-o", bin, "github.com/gatehouse/gatehouse/cmd/gatehouse")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gatehouse:", err)
		os.Exit(1)
	}
	code := m.Run()
	closeChromium() // the dashboard tests' shared browser
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is a finished command.
type result struct {
	code           int
	stdout, stderr string
}

// gh runs the binary to completion.
func gh(t *testing.T, args ...string) result {
	t.Helper()
	return ghEnv(t, nil, args...)
}

// cleanEnv is the environment without GATEHOUSE_ settings of the machine.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GATEHOUSE_") {
			env = append(env, kv)
		}
	}
	return env
}

// server is a `gatehouse serve` process.
type server struct {
	cmd     *exec.Cmd
	dataDir string
	out     *lineCounter // written by exec while the test reads it
	ep      endpoints
}

type endpoints struct {
	NATSURL    string `json:"nats_url"`
	HTTP       string `json:"http"`
	JournalDir string `json:"journal_dir"`
	AppCreds   string `json:"app_creds"`
	AgentCreds string `json:"agent_creds"`
	MCP        string `json:"mcp"`
}

// serve starts `gatehouse serve` on free ports and waits until it has
// written its endpoints file.
func serve(t testing.TB, dataDir string, args ...string) *server {
	t.Helper()
	return serveWith(t, dataDir, nil, args...)
}

// serveWith is serve with the command adjusted by adjust before it starts
// (another binary path, another user).
func serveWith(t testing.TB, dataDir string, adjust func(*exec.Cmd), args ...string) *server {
	t.Helper()
	args = append([]string{"serve", "--data-dir", dataDir, "--nats-port", "-1", "--http", "127.0.0.1:0"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	if adjust != nil {
		adjust(cmd) // may add to the environment
	}
	out := &lineCounter{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, dataDir: dataDir, out: out}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Started once its endpoints are written and the banner (which
		// follows them, and which tests read) is out.
		b, err := os.ReadFile(filepath.Join(dataDir, "endpoints.json"))
		if err == nil && json.Unmarshal(b, &s.ep) == nil && s.ep.NATSURL != "" && strings.Contains(out.String(), "Press Ctrl-C to stop.") {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("gatehouse serve did not start:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGINT and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("gatehouse serve exited with %v:\n%s", err, s.out)
		}
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Fatalf("gatehouse serve did not stop on SIGINT:\n%s", s.out)
	}
}

// readRun returns a run's journal file as text.
func readRun(t *testing.T, dataDir, run string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "journal", "runs", run+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// existingNATS starts a plain nats-server with JetStream (no credentials),
// standing for a NATS Gatehouse did not start itself (--nats-url).
func existingNATS(t *testing.T) *natsserver.Server {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	return ns
}
