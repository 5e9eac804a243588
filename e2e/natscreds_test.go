package e2e

import (
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
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
