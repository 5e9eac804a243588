package sinktest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// StartRedis starts a real redis-server for the test on a free loopback
// port, with no persistence, and waits until it answers PING. It returns
// the server's URL, stop (SIGTERM, then wait for it to exit) and restart
// (start it again on the same port, wait for PING). The server is killed in
// t.Cleanup. The test is skipped only when redis-server is not on PATH (CI
// installs it: apt-get install redis-server).
//
// stop and restart may be called from the test goroutine only.
func StartRedis(t testing.TB) (url string, stop func(), restart func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH; install it (apt-get install redis-server) to run the Redis tests")
	}
	dir := t.TempDir()
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	r := &redisProc{bin: bin, dir: dir, port: port, addr: addr}
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.kill)
	stop = func() {
		t.Helper()
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	restart = func() {
		t.Helper()
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
	}
	return "redis://" + addr + "/0", stop, restart
}

// redisProc is one redis-server the test owns; mu guards cmd and done.
type redisProc struct {
	bin, dir, addr string
	port           int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (r *redisProc) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return errors.New("redis-server is already running")
	}
	logPath := filepath.Join(r.dir, "redis.log")
	cmd := exec.Command(r.bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(r.port), "--save", "",
		"--appendonly", "no", "--dir", r.dir, "--daemonize", "no", "--logfile", logPath)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.cmd, r.done = cmd, done
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(r.addr) {
			return nil
		}
		select {
		case <-done:
			r.cmd = nil
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("redis-server on port %d exited at start:\n%s", r.port, log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			r.cmd = nil
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("redis-server on port %d did not answer PING within 10s:\n%s", r.port, log)
		}
	}
}

// stop sends SIGTERM and waits for the server to exit.
func (r *redisProc) stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return errors.New("redis-server is not running")
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	r.cmd = nil
	return nil
}

// kill ends the server at cleanup, whatever state the test left it in.
func (r *redisProc) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// ping reports whether a Redis server at addr answers PING with PONG.
func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// freePort returns a loopback TCP port nothing listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
