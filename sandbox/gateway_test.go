package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/sandbox"
)

// gatewayTiers runs f on every confining tier (eachTier) and on the unconfined one.
func gatewayTiers(t *testing.T, f func(t *testing.T, sb *sandbox.Sandbox)) {
	t.Helper()
	eachTier(t, f)
	t.Run(string(sandbox.TierUnconfined), func(t *testing.T) {
		sb, _ := sandbox.Detect(context.Background(), testConfig(sandbox.TierUnconfined))
		f(t, sb)
	})
}

// echo is a Gateway answering {"n": <calls so far>, "echo": <request>}.
type echo struct{ calls atomic.Int64 }

func (e *echo) serve(_ context.Context, req []byte) []byte {
	n := e.calls.Add(1)
	return []byte(fmt.Sprintf(`{
  "n": %d,
  "echo": %s
}`, n, req))
}

// leakHostFDs opens, in the test process, descriptors without close-on-exec (a /dev/null and a pipe's
// write end), as a shell or supervisor may leave to the broker; none may reach a sandboxed program.
func leakHostFDs(t *testing.T) []int {
	t.Helper()
	null, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(null); syscall.Close(p[0]); syscall.Close(p[1]) })
	return []int{null, p[0], p[1]}
}

// fdScript lists the program's descriptors as {"fd": "target"}; the descriptor the listing itself used is
// closed by the time it is resolved and left out.
const fdScript = `import os, json, sys
def fds():
    out = {}
    for name in os.listdir('/proc/self/fd'):
        try:
            out[name] = os.readlink('/proc/self/fd/' + name)
        except OSError:
            pass
    return out
`

func TestGatewayOnEveryTier(t *testing.T) {
	leaked := leakHostFDs(t)
	gatewayTiers(t, func(t *testing.T, sb *sandbox.Sandbox) {
		var e echo
		src := fdScript + `
seen = fds()
env = (os.environ.get('GATEHOUSE_GATEWAY_OUT'), os.environ.get('GATEHOUSE_GATEWAY_IN'))
w = os.fdopen(int(env[0]), 'w', buffering=1)
r = os.fdopen(int(env[1]), 'r')
replies = []
for i in range(3):
    w.write(json.dumps({"i": i, "text": "x" * (i * 100000)}) + "\n")
    replies.append(json.loads(r.readline()))
print(json.dumps({"fds": seen, "env": env, "replies": [[x["n"], x["echo"]["i"], len(x["echo"]["text"])] for x in replies]}))
`
		res := run(t, sb, sandbox.Spec{Argv: py(src), Env: []string{"PATH=/usr/bin:/bin", "GATEHOUSE_GATEWAY_OUT=9"}, Gateway: e.serve})
		var out struct {
			FDs     map[string]string `json:"fds"`
			Env     []string          `json:"env"`
			Replies [][3]int          `json:"replies"`
		}
		if err := json.Unmarshal(res.Stdout, &out); err != nil || res.ExitCode != 0 {
			t.Fatalf("exit %d, stdout %q: %v; stderr %s", res.ExitCode, res.Stdout, err, res.Stderr)
		}
		if !slices.Equal(out.Env, []string{"3", "4"}) {
			t.Errorf("gateway env = %v, want 3 and 4", out.Env)
		}
		want := [][3]int{{1, 0, 0}, {2, 1, 100000}, {3, 2, 200000}}
		if !slices.Equal(out.Replies, want) {
			t.Errorf("replies = %v, want %v", out.Replies, want)
		}
		t.Logf("%s: the program's descriptors: %v", sb.Tier(), out.FDs)
		checkFDs(t, out.FDs, leaked, "0", "1", "2", "3", "4")
		for _, fd := range []string{"3", "4"} {
			if !strings.HasPrefix(out.FDs[fd], "pipe:") {
				t.Errorf("fd %s is %q, want a pipe", fd, out.FDs[fd])
			}
		}
		if n := e.calls.Load(); n != 3 {
			t.Errorf("Gateway called %d times, want 3", n)
		}

		// Without a gateway the program gets stdin, stdout and stderr and nothing else.
		res = run(t, sb, sandbox.Spec{Argv: py(fdScript + "print(json.dumps(fds()))")})
		var plain map[string]string
		if err := json.Unmarshal(res.Stdout, &plain); err != nil {
			t.Fatalf("stdout %q: %v; stderr %s", res.Stdout, err, res.Stderr)
		}
		checkFDs(t, plain, leaked, "0", "1", "2")
	})
}

func checkFDs(t *testing.T, got map[string]string, leaked []int, want ...string) {
	t.Helper()
	names := make([]string, 0, len(got))
	for fd := range got {
		names = append(names, fd)
	}
	slices.SortFunc(names, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	if !slices.Equal(names, want) {
		t.Errorf("the program holds descriptors %v (%v), want exactly %v", names, got, want)
	}
	for _, fd := range leaked {
		if _, ok := got[strconv.Itoa(fd)]; ok {
			t.Errorf("a host descriptor without close-on-exec (%d) reached the program", fd)
		}
	}
}

// TestGatewayFraming: every line gets one reply, in order; lines the gateway cannot pass on get an error
// reply from the gateway and never reach the Gateway func; a reply that is not JSON becomes an error reply.
func TestGatewayFraming(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		var calls atomic.Int64
		gw := func(_ context.Context, req []byte) []byte {
			calls.Add(1)
			if string(req) == `"bad-reply"` {
				return []byte("not json")
			}
			return append([]byte(`{"got":`), append(req, '}')...)
		}
		src := `import os, json, sys
w = os.fdopen(3, 'wb', buffering=0)
r = os.fdopen(4, 'r')
for line in [b'garbage{', b'', b'   ', b'{"big":"' + b'y' * (2 << 20) + b'"}', b'"bad-reply"', b'{"ok":1}\r', b'[1,2]']:
    w.write(line + b'\n')
    print(r.readline().strip())
`
		res := run(t, sb, sandbox.Spec{Argv: py(src), Gateway: gw, Limits: sandbox.Limits{Wall: 20 * time.Second}})
		lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
		if res.ExitCode != 0 || len(lines) != 7 {
			t.Fatalf("exit %d, %d lines: %q; stderr %s", res.ExitCode, len(lines), res.Stdout, res.Stderr)
		}
		codes := []string{"BAD_REQUEST", "BAD_REQUEST", "BAD_REQUEST", "BAD_REQUEST", "INTERNAL", "", ""}
		for i, l := range lines {
			var r struct {
				Error *struct{ Code, Message string } `json:"error"`
				Got   json.RawMessage                 `json:"got"`
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("reply %d %q: %v", i, l, err)
			}
			switch {
			case codes[i] != "" && (r.Error == nil || r.Error.Code != codes[i]):
				t.Errorf("reply %d = %s, want error %s", i, l, codes[i])
			case codes[i] == "" && r.Error != nil:
				t.Errorf("reply %d = %s, want an answer", i, l)
			}
		}
		if string(lines[5]) != `{"got":{"ok":1}}` || lines[6] != `{"got":[1,2]}` {
			t.Errorf("answers %q %q", lines[5], lines[6])
		}
		if n := calls.Load(); n != 3 {
			t.Errorf("Gateway called %d times, want 3 (the bad-reply line and the two good ones)", n)
		}
	})
}

// TestGatewayMisbehavingPrograms: a program that closes its request end early, closes its reply end, or
// never reads its replies ends by its own exit or the wall limit, Run returns, and Gateway is not called
// after Run returned.
func TestGatewayMisbehavingPrograms(t *testing.T) {
	eachTier(t, func(t *testing.T, sb *sandbox.Sandbox) {
		for _, tc := range []struct {
			name, src string
			maxCalls  int64
		}{
			{"closes fd 3 early", "import os, time\nos.close(3)\ntime.sleep(0.2)\nprint('done')", 0},
			{"closes fd 4, keeps writing", `import os
os.close(4)
try:
    for i in range(1000):
        os.write(3, b'{"i":%d}\n' % i)
    print('wrote all')
except BrokenPipeError:
    print('broken pipe')
`, 1},
			{"never reads fd 4", `import os
try:
    for i in range(100000):
        os.write(3, b'{"i":%d,"pad":"` + strings.Repeat("p", 1000) + `"}\n' % i)
except BrokenPipeError:
    pass
`, 100000},
			{"writes and exits", `import os
os.write(3, b'{"i":1}\n{"i":2}\n{"i":3}\n')
`, 3},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var e echo
				wall := 2 * time.Second
				res := run(t, sb, sandbox.Spec{Argv: py(tc.src), Gateway: e.serve, Limits: sandbox.Limits{Wall: wall}})
				if res.Duration > wall+3*time.Second {
					t.Fatalf("the run took %v under a %v wall limit", res.Duration, wall)
				}
				if res.Killed != "" && res.Killed != sandbox.KilledWall {
					t.Fatalf("killed %q", res.Killed)
				}
				after := e.calls.Load()
				if after > tc.maxCalls {
					t.Fatalf("Gateway called %d times, at most %d expected", after, tc.maxCalls)
				}
				time.Sleep(50 * time.Millisecond)
				if e.calls.Load() != after {
					t.Fatal("Gateway was called after Run returned")
				}
			})
		}
	})
}

// TestGatewayCallInProgress: a program that writes a request and exits at once leaves the call in progress
// to finish (Run waits for it), and a Gateway that honours ctx ends with Run's ctx.
func TestGatewayCallInProgress(t *testing.T) {
	sb, _ := sandbox.Detect(context.Background(), testConfig(sandbox.TierUnconfined))
	var finished atomic.Bool
	slow := func(ctx context.Context, req []byte) []byte {
		select {
		case <-time.After(300 * time.Millisecond):
			finished.Store(true)
		case <-ctx.Done():
		}
		return []byte(`{}`)
	}
	res := run(t, sb, sandbox.Spec{Argv: py("import os, time\nos.write(3, b'{}\\n')\ntime.sleep(0.1)"), Gateway: slow})
	if res.ExitCode != 0 || !finished.Load() {
		t.Fatalf("exit %d, call finished %v", res.ExitCode, finished.Load())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	blocked := func(ctx context.Context, req []byte) []byte { <-ctx.Done(); return []byte(`{}`) }
	start := time.Now()
	res, err := sb.Run(ctx, sandbox.Spec{Argv: py("import os\nos.write(3, b'{}\\n')\nos.read(4, 10)"), Gateway: blocked})
	if err != nil || res.Killed != sandbox.KilledCanceled || time.Since(start) > 5*time.Second {
		t.Fatalf("Run: %v, killed %q after %v", err, res.Killed, time.Since(start))
	}
}
