package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/e2e/cluster"
	"github.com/gatehouse/gatehouse/policy"
)

// TestNATSPasswordNeverShown runs serve against a NATS that takes a user
// and password in --nats-url: the password is not printed at start, nor
// shown on the status page or /api/status to a signed-in user.
func TestNATSPasswordNeverShown(t *testing.T) {
	const secret = "s3cret-nats-pw"
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true, Username: "gh", Password: secret})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	data := t.TempDir()
	if r := ghIn(t, dashPassword+"\n", "users", "add", "olga", "--role", "operator", "--data-dir", data, "--password-stdin"); r.code != 0 {
		t.Fatalf("users add: %+v", r)
	}
	url := strings.Replace(ns.ClientURL(), "nats://", "nats://gh:"+secret+"@", 1)
	s := serve(t, data, "--nats-url", url)
	sess := signIn(t, s.ep.HTTP, "olga")
	for _, p := range []string{"/status", "/api/status"} {
		if body := sess.get(t, p); strings.Contains(body, secret) {
			t.Errorf("%s shows the NATS password:\n%s", p, body)
		}
	}
	s.stop(t)
	if strings.Contains(s.out.String(), secret) {
		t.Errorf("serve printed the NATS password:\n%s", s.out)
	}
}

// TestExternalNATSWithGatehousePermissions is the operator's path on a NATS
// Gatehouse did not start: `gatehouse agents add` and `agents nats-conf`
// give the users and permissions, a real nats-server process includes
// them, and serve (--nats-creds, --nats-replies-creds) works through it with
// the same guarantees as on the embedded server: a named agent acts on its
// run, no credential speaks as another, a reply aimed outside the
// requester's inbox is dropped, and the replies connection is confined (no
// warning at start).
func TestExternalNATSWithGatehousePermissions(t *testing.T) {
	data := t.TempDir()
	if r := gh(t, "agents", "add", "bob", "--data-dir", data); r.code != 0 {
		t.Fatalf("agents add: %+v", r)
	}
	conf := gh(t, "agents", "nats-conf", "--data-dir", data)
	if conf.code != 0 || !strings.Contains(conf.stdout, "users: [") {
		t.Fatalf("agents nats-conf: %+v", conf)
	}
	ndir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ndir, "users.conf"), []byte(conf.stdout), 0o600))
	port := cluster.FreePort(t)
	must(t, os.WriteFile(filepath.Join(ndir, "nats.conf"), []byte(fmt.Sprintf(
		"listen: 127.0.0.1:%d\njetstream { store_dir: %q }\naccounts { GATEHOUSE { jetstream: enabled, include \"users.conf\" } }\n",
		port, filepath.Join(ndir, "js"))), 0o600))
	srv := exec.Command(cluster.NATSServer(t), "-c", filepath.Join(ndir, "nats.conf"))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	creds := func(r embedded.Role) string { return embedded.CredsPath(filepath.Join(data, "nats"), r) }
	var nc *nats.Conn
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if nc, err = nats.Connect(url, seedOpt(t, creds(embedded.RoleBroker))); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server did not start: %v", err)
		}
	}
	defer nc.Close()
	if _, err := nats.Connect(url); err == nil {
		t.Fatal("the NATS lets a client in without a credential")
	}

	s := serve(t, data, "--mode", "strict", "--nats-url", url, "--nats-creds", creds(embedded.RoleBroker),
		"--nats-replies-creds", creds(embedded.RoleReplies), "--policy", writeFile(t, data, "cards.yaml", "agents:\n  - name: bob\n"))
	open := gh(t, "work", "open", "--nats-url", url, "--creds", creds(embedded.RoleApp), "--tenant", "acme", "--person", "ada", "--agent", "bob")
	run := strings.TrimSpace(open.stdout)
	if !broker.ValidRunID(run) {
		t.Fatalf("work open: %+v", open)
	}
	if r := gh(t, "effect", "output", "--nats-url", url, "--data-dir", data, "--agent", "bob", "--run", run, "--result", "1"); r.code != 0 {
		t.Fatalf("bob's output: %+v", r)
	}
	if r := gh(t, "effect", "output", "--nats-url", url, "--creds", creds(embedded.RoleAgent), "--run", run, "--result", "1", "--json"); r.code == 0 || !strings.Contains(r.stdout, string(broker.CodeNotRunAgent)) {
		t.Fatalf("the shared agent on bob's run: %+v", r)
	}

	shared, err := nats.Connect(url, seedOpt(t, creds(embedded.RoleAgent)), nats.CustomInboxPrefix(subject.AgentInboxOf(subject.Shared)),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	must(t, err)
	defer shared.Close()
	js, _ := jetstream.New(nc)
	mem, err := js.KeyValue(context.Background(), subject.MemoryBucket)
	must(t, err)
	body, _ := json.Marshal(broker.EffectRequest{Run: run, Action: "deliver", Params: json.RawMessage(`{"status":"ok"}`)})
	must(t, shared.PublishRequest(subject.Effect(subject.Shared, policy.SinkOutput), "$KV."+subject.MemoryBucket+".eA", body))
	if _, err := shared.Request(subject.Effect(subject.Shared, policy.SinkOutput), body, 10*time.Second); err != nil {
		t.Fatalf("the shared agent's own request: %v", err) // answered (refused: bob's run), after the one above was dropped
	}
	if _, err := mem.Get(context.Background(), "eA"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a reply was written into the memory bucket: %v", err)
	}
	must(t, shared.Publish(subject.Effect("bob", policy.SinkOutput), body))
	_ = shared.Flush()
	if !errors.Is(shared.LastError(), nats.ErrPermissionViolation) {
		t.Fatalf("the shared credential published as bob: %v", shared.LastError())
	}
	s.stop(t)
	if strings.Contains(s.out.String(), "publish outside inbox spaces") {
		t.Fatalf("serve says its replies connection is not confined:\n%s", s.out)
	}
}

// writeFile writes text to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	must(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}
