package cluster

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a process a test started and owns: it is killed at the test's
// cleanup, and everything it printed is kept, so a test that waits on it
// says which process failed and what it said, instead of only that a
// port did not answer.
type Proc struct {
	Name string
	Cmd  *exec.Cmd

	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error // how it exited, once done is closed
}

// Start starts cmd (its Stdout and Stderr are the Proc's), named name in
// failures.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Name: name, Cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p, p
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.Kill)
	return p
}

// Write keeps what the process prints.
func (p *Proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output is what the process printed so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Exited reports whether the process has ended, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Kill ends the process with SIGKILL and waits for it.
func (p *Proc) Kill() {
	if ok, _ := p.Exited(); ok {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Signal sends sig and waits up to timeout for the process to end; false
// when it did not.
func (p *Proc) Signal(sig syscall.Signal, timeout time.Duration) bool {
	_ = p.Cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Done is closed when the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// failf fails the test naming the process and what it printed.
func (p *Proc) failf(t testing.TB, format string, a ...any) {
	t.Helper()
	state := "still running"
	if ok, err := p.Exited(); ok {
		state = fmt.Sprintf("exited (%v)", err)
	}
	out := p.Output()
	if len(out) > 6000 {
		out = "..." + out[len(out)-6000:]
	}
	t.Fatalf("%s: %s; the process is %s; it printed:\n%s", p.Name, fmt.Sprintf(format, a...), state, out)
}

// WaitOutput waits until the process's output matches re, and returns the
// first submatch (or the whole match). It fails at once when the process
// exits first, and after timeout.
func (p *Proc) WaitOutput(t testing.TB, re *regexp.Regexp, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(p.Output()); m != nil {
			return m[len(m)-1]
		}
		if ok, _ := p.Exited(); ok {
			p.failf(t, "exited before printing %s", re)
		}
		if time.Now().After(deadline) {
			p.failf(t, "printed no %s within %s", re, timeout)
		}
		select {
		case <-p.done:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitHTTP waits until url, served by the process, answers code, and
// returns the body. It fails at once when the process exits, and after
// timeout with the last answer.
func (p *Proc) WaitHTTP(t testing.TB, url string, code int, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		body, last, ok := Get(url, code)
		if ok {
			return body
		}
		if ok, _ := p.Exited(); ok {
			p.failf(t, "exited while GET %s answered %s", url, last)
		}
		if time.Now().After(deadline) {
			p.failf(t, "GET %s: want %d within %s, last %s", url, code, timeout, last)
		}
		select {
		case <-p.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Get fetches url once: the body when it answers code (ok), else what it
// answered (status and body, or the error).
func Get(url string, code int) (body, last string, ok bool) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return "", err.Error(), false
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == code {
		return string(b), "", true
	}
	return "", resp.Status + " " + string(b), false
}
