package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gatehouse/gatehouse/e2e/cluster"
)

// composeConfig runs `docker compose config` (or the standalone
// docker-compose, which .ci/install-deps installs where the compose plugin
// is missing) on the repository's docker-compose.yml and returns the
// resolved file. No Docker engine is needed for this.
func composeConfig(t *testing.T) []byte {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("the docker client is not installed: docker compose config cannot be checked here")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) ([]byte, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir = root
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			return nil, &composeErr{err: err, stderr: errb.String()}
		}
		return out.Bytes(), nil
	}
	out, err := run("docker", "compose", "config")
	if err == nil {
		return out
	}
	plugin := err
	if _, lerr := exec.LookPath("docker-compose"); lerr != nil {
		t.Fatalf("docker compose config: %v; and no docker-compose either (bash .ci/install-deps installs it)", plugin)
	}
	if out, err = run("docker-compose", "config"); err != nil {
		t.Fatalf("docker-compose config: %v", err)
	}
	return out
}

type composeErr struct {
	err    error
	stderr string
}

func (e *composeErr) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }

// TestComposeFile checks docker-compose.yml is valid for docker compose,
// that it holds the scaled-out shape (three NATS nodes, Redis, two brokers,
// the writer, a witness, the dashboard), that every gatehouse command in it
// parses with this binary's flags, and that the NATS configuration it
// mounts is accepted by nats-server itself (-t).
func TestComposeFile(t *testing.T) {
	var cfg struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Entrypoint  []string          `yaml:"entrypoint"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []any             `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(composeConfig(t), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nats-1", "nats-2", "nats-3", "redis", "broker-1", "broker-2", "writer", "witness", "dashboard"} {
		if _, ok := cfg.Services[name]; !ok {
			t.Errorf("docker-compose.yml has no service %s", name)
		}
	}
	for name, s := range cfg.Services {
		if s.Image != "gatehouse:dev" || len(s.Entrypoint) > 0 || len(s.Command) == 0 {
			continue
		}
		// The command must parse: its flags are this binary's flags.
		r := gh(t, append(append([]string{}, s.Command...), "--help")...)
		if r.code != 0 {
			t.Errorf("service %s: gatehouse %s does not parse (exit %d):\n%s", name, strings.Join(s.Command, " "), r.code, r.stderr)
		}
	}
	for _, n := range []string{"broker-1", "broker-2", "writer"} {
		if c := strings.Join(cfg.Services[n].Command, " "); !strings.Contains(c, "--replicas 3") {
			t.Errorf("%s does not replicate three ways: %s", n, c)
		}
	}

	// The nodes include the users the keys service writes into the keys
	// volume (mounted at /etc/nats/keys): made here the same way.
	text, err := os.ReadFile("compose/nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	etc := t.TempDir()
	conf := filepath.Join(etc, "nats.conf")
	must(t, os.WriteFile(conf, text, 0o600))
	users := gh(t, "agents", "nats-conf", "--data-dir", filepath.Join(etc, "keys", "gatehouse"))
	if users.code != 0 {
		t.Fatalf("agents nats-conf: %+v", users)
	}
	must(t, os.WriteFile(filepath.Join(etc, "keys", "nats-users.conf"), []byte(users.stdout), 0o600))
	for _, n := range []string{"broker-1", "writer", "status", "bench"} {
		if c := strings.Join(cfg.Services[n].Command, " "); !strings.Contains(c, "/keys/gatehouse/nats/creds/") {
			t.Errorf("%s connects to NATS without a credential: %s", n, c)
		}
	}
	cmd := exec.Command(cluster.NATSServer(t), "-t", "-c", conf)
	cmd.Env = append(os.Environ(), "NATS_SERVER_NAME=nats-1", "NATS_SYS_PASSWORD=x")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nats-server -t %s: %v\n%s", conf, err, out)
	}
}
