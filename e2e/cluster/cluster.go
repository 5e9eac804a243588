// Package cluster starts the scaled-out shape of Gatehouse without
// containers, for end-to-end tests: a NATS cluster of standalone
// nats-server processes with JetStream on loopback ports, and a
// redis-server (through sinks/sinktest.StartRedis).
//
// The nats-server binary is the released v2.15.2 built from the Go module
// proxy with `go install` into a cache folder (NATSServerDir), reused when
// present; .ci/install-deps builds it ahead of the tests. $GATEHOUSE_NATS_SERVER
// names another binary.
//
// Every server has two accounts: GATEHOUSE (JetStream on), whose users are
// Gatehouse's roles with the permissions the embedded server gives them
// (embedded.Users, rendered by embedded.UsersConf as an operator would with
// `gatehouse agents nats-conf`), so the scaled-out shape enforces the same
// identities and inbox-only replies; and the system account SYS, which
// `gatehouse status` reads with SysUser and SysPassword to see every server's
// JetStream state. A client without credentials is refused. Creds gives each
// role's seed. Each process is owned by the test that started it and is
// killed at its cleanup.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// NATSServerVersion is the nats-server release the cluster runs.
const NATSServerVersion = "v2.15.2"

// NATSServerDir is where the nats-server binary is cached.
const NATSServerDir = "/var/cache/gatehouse/nats-server-" + NATSServerVersion

// System account credentials of the test cluster (a loopback-only test
// fixture, not a secret).
const (
	SysUser     = "sys"
	SysPassword = "sys-test-only"
)

var buildOnce sync.Once
var buildErr error

// NATSServer returns the path of the nats-server binary, building it into
// NATSServerDir on first use.
func NATSServer(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("GATEHOUSE_NATS_SERVER"); p != "" {
		return p
	}
	bin := filepath.Join(NATSServerDir, "nats-server")
	buildOnce.Do(func() {
		if _, err := os.Stat(bin); err == nil {
			return
		}
		if err := os.MkdirAll(NATSServerDir, 0o755); err != nil {
			buildErr = err
			return
		}
		cmd := exec.Command("go", "install", "github.com/nats-io/nats-server/v2@"+NATSServerVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+NATSServerDir, "GOFLAGS=-mod=mod")
		cmd.Dir = NATSServerDir
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go install nats-server %s: %v\n%s", NATSServerVersion, err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// Node is one nats-server process of a NATS cluster.
type Node struct {
	Name        string
	Port        int // client port
	ClusterPort int
	dir, conf   string
	bin         string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// URL is the node's client URL.
func (n *Node) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.Port) }

// NATS is a running NATS cluster.
type NATS struct {
	Nodes []*Node
	// credsDir holds the roles' seeds (embedded.CredsPath).
	credsDir string
	users    string // the GATEHOUSE account's users list
}

// Creds is the seed file of role r on this cluster.
func (c *NATS) Creds(r embedded.Role) string { return embedded.CredsPath(c.credsDir, r) }

// URL lists every node's client URL, comma-separated, as nats.go and
// `gatehouse --nats-url` take it: a client fails over between them.
func (c *NATS) URL() string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL()
	}
	return strings.Join(urls, ",")
}

// StartNATS starts a cluster of n nats-server nodes with JetStream and
// waits until it has a JetStream meta leader.
func StartNATS(t testing.TB, n int) *NATS {
	t.Helper()
	bin := NATSServer(t)
	c := &NATS{credsDir: filepath.Join(t.TempDir(), "nats")}
	users, err := embedded.Users(c.credsDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.users = embedded.UsersConf(users)
	for i := range n {
		c.Nodes = append(c.Nodes, &Node{Name: fmt.Sprintf("n%d", i+1), bin: bin})
	}
	root := t.TempDir()
	// A port can still be taken between the pick and the bind (another
	// test process picking the same): the node then exits at start saying
	// "address already in use", and the cluster starts again on new ports.
	for attempt := 1; ; attempt++ {
		err := c.start(t, root)
		if err == nil {
			break
		}
		for _, node := range c.Nodes {
			node.kill()
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("NATS cluster did not start (attempt %d): %v", attempt, err)
		}
		t.Logf("NATS cluster: a port was taken, starting again on others: %v", err)
	}
	for _, node := range c.Nodes {
		t.Cleanup(node.kill)
	}
	if err := c.WaitReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// start picks ports for every node, writes their configurations and
// starts them; an error names the node that failed and what it printed.
func (c *NATS) start(t testing.TB, root string) error {
	for _, node := range c.Nodes {
		node.Port, node.ClusterPort = FreePort(t), FreePort(t)
	}
	for _, node := range c.Nodes {
		node.dir = filepath.Join(root, node.Name)
		if err := os.MkdirAll(node.dir, 0o700); err != nil {
			return err
		}
		node.conf = filepath.Join(node.dir, "nats.conf")
		if err := os.WriteFile(node.conf, []byte(c.config(node)), 0o600); err != nil {
			return err
		}
		if err := node.start(); err != nil {
			return err
		}
	}
	return nil
}

func (c *NATS) config(n *Node) string {
	var routes []string
	for _, o := range c.Nodes {
		if o != n {
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", o.ClusterPort))
		}
	}
	return fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
jetstream { store_dir: %q }
accounts {
  SYS { users: [ { user: %s, password: %s } ] }
  GATEHOUSE { jetstream: enabled, users: %s }
}
system_account: SYS
cluster {
  name: gatehouse-test
  listen: 127.0.0.1:%d
  routes: [ %s ]
}
`, n.Name, n.Port, filepath.Join(n.dir, "js"), SysUser, SysPassword, c.users, n.ClusterPort, strings.Join(routes, ", "))
}

func (n *Node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("%s is already running", n.Name)
	}
	lf, err := os.OpenFile(filepath.Join(n.dir, "nats.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(n.bin, "-c", n.conf)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); lf.Close(); close(done) }()
	n.cmd, n.done, n.log = cmd, done, lf
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port)), time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			n.cmd = nil
			return fmt.Errorf("%s exited at start:\n%s", n.Name, n.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen within 20s:\n%s", n.Name, n.Log())
		}
	}
}

// Log returns the node's log so far.
func (n *Node) Log() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "nats.log"))
	return string(b)
}

// Kill ends the node with SIGKILL and waits for it to exit.
func (n *Node) Kill() {
	n.kill()
}

func (n *Node) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
	n.cmd = nil
}

// Restart starts a killed node again on the same ports and store.
func (n *Node) Restart() error { return n.start() }

// WaitReady waits until JetStream answers on every running node: the
// cluster has a meta leader and each node has caught up enough to serve
// the JetStream API.
func (c *NATS) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, n := range c.Nodes {
		n.mu.Lock()
		running := n.cmd != nil
		n.mu.Unlock()
		if !running {
			continue
		}
		var last error
		for {
			if last = jsReady(n.URL(), c.Creds(embedded.RoleBroker)); last == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("JetStream not ready on %s after %s: %v", n.Name, timeout, last)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// A node answers the JetStream API before every node's report names
	// the meta leader; ask until one does.
	for {
		_, err := c.MetaLeader()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jsReady(url, creds string) error {
	o, err := nats.NkeyOptionFromSeed(creds)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(url, o, nats.Timeout(time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// MetaLeader asks the system account which server leads the JetStream
// meta group.
func (c *NATS) MetaLeader() (string, error) {
	var last error
	for _, n := range c.Nodes {
		nc, err := nats.Connect(n.URL(), nats.UserInfo(SysUser, SysPassword), nats.Timeout(time.Second))
		if err != nil {
			last = err
			continue
		}
		msg, err := nc.Request("$SYS.REQ.SERVER.PING.JSZ", nil, 2*time.Second)
		nc.Close()
		if err != nil {
			last = err
			continue
		}
		if i := strings.Index(string(msg.Data), `"leader":"`); i >= 0 {
			rest := string(msg.Data)[i+len(`"leader":"`):]
			if j := strings.IndexByte(rest, '"'); j > 0 {
				return rest[:j], nil
			}
		}
		last = errors.New("no meta leader in the JetStream report")
	}
	return "", fmt.Errorf("meta leader: %w", last)
}

// Redis is a redis-server the test owns.
type Redis struct {
	URL     string
	Stop    func() // SIGTERM, waits for exit
	Restart func() // starts it again on the same port
}

// StartRedis starts a real redis-server on a free loopback port (skips the
// test when redis-server is not installed: .ci/install-deps installs it).
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	url, stop, restart := sinktest.StartRedis(t)
	return &Redis{URL: url, Stop: stop, Restart: restart}
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// FreePort returns a loopback TCP port nothing listens on right now, for
// a process that must be told its port before it starts (a nats-server
// node: the routes of each name the others'). A process that can listen
// on 127.0.0.1:0 and say which port it got should do that instead: there
// is then no port to race for.
//
// The port is picked at random below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), where the kernel never assigns ports of
// its own accord: between the pick and the bind, neither an outgoing
// connection's source port nor another process listening on :0 can take
// it, as they can take one in the ephemeral range (which is how
// TestScaledOutShape's writer once found no port: its listener never came
// up, and the test waited 30 s on "connection refused"). It is never given
// twice in one test binary, and is checked free by listening on it.
func FreePort(t testing.TB) int {
	t.Helper()
	lo, _ := ephemeralRange()
	const floor = 20000
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 200 {
		if lo-floor < 1000 {
			break // no room below the ephemeral range: take the kernel's
		}
		p := floor + rand.IntN(lo-floor)
		if portsGiven[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		portsGiven[p] = true
		return p
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	portsGiven[p] = true
	return p
}

// ephemeralRange is the kernel's range of ports it assigns itself
// (Linux's default when it cannot be read).
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	if f := strings.Fields(string(b)); len(f) == 2 {
		if a, err := strconv.Atoi(f[0]); err == nil {
			lo = a
		}
		if b, err := strconv.Atoi(f[1]); err == nil {
			hi = b
		}
	}
	return lo, hi
}
