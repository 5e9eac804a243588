// Package embedded runs the nats-server Gatehouse embeds when no --nats-url
// is given: JetStream on, listening on loopback, with one nkey credential
// per role and permissions that keep the roles apart:
//
//	broker   everything (the trusted component, connected in-process)
//	app      request gatehouse.v1.work.* and read outputs; never effects
//	agent    request gatehouse.v1.effect.* and fetch peer messages; never
//	         open work, never read the journal or outputs
//
// Credentials are nkey seed files under Dir/creds, made on first start with
// mode 0600 and reused after. The nats CLI takes them with --nkey.
//
// # Agents and peer messages
//
// An agent receives peer messages (subject.Peer) only by fetching from its
// durable consumer on the peer stream, which the broker creates: agents
// may pull from and acknowledge on consumers of that stream, and read their
// inbox, nothing else. They cannot create or change a consumer (a push
// consumer could be pointed at any subject), read a stream's messages
// directly, subscribe to peer subjects, nor touch the journal, outputs,
// runs or any other stream.
//
// Every agent that uses the shared "agent" credential is the same user to
// NATS, so the server cannot tell them apart: among them, isolation is by
// subject only, a convention each agent keeps by fetching its own consumer,
// not something the server enforces. Any holder of the shared credential
// can fetch any agent's peer messages and read any agent's replies.
//
// Agents named in Config.Agents get a credential of their own
// (AgentCredsPath) that is enforced: it may fetch only its own consumer
// (subject.PeerConsumer), read only its own inbox space
// (subject.AgentInboxOf, which client.DialAgent uses), and propose effects.
// Give each agent its own credential where agents must not read each
// other's messages, and do not hand the shared one to them.
package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gatehouse/gatehouse/broker/subject"
)

// Role is a kind of NATS client.
type Role string

const (
	RoleBroker Role = "broker"
	RoleApp    Role = "app"
	RoleAgent  Role = "agent"
)

// Roles lists every role, in a stable order.
var Roles = []Role{RoleBroker, RoleApp, RoleAgent}

// Config configures the embedded server.
type Config struct {
	Dir  string // JetStream store and credentials live here
	Host string // default 127.0.0.1
	Port int    // default 4222; -1 picks a free port
	// SyncAlways makes JetStream fsync every message (slower, survives a
	// power cut); the default syncs on an interval as nats-server does.
	SyncAlways bool
	Logger     *slog.Logger
	// Agents each get a credential of their own, allowed to fetch only
	// their own peer messages (see the package doc). Names must satisfy
	// subject.ValidAgent.
	Agents []string
}

// Server is a running embedded nats-server.
type Server struct {
	NS  *server.Server
	URL string
	dir string
}

// CredsPath returns the nkey seed file of role under dir.
func CredsPath(dir string, r Role) string {
	return filepath.Join(dir, "creds", string(r)+".nk")
}

// AgentCredsPath returns the nkey seed file of the named agent under dir.
func AgentCredsPath(dir, agent string) string {
	return filepath.Join(dir, "creds", "agent-"+agent+".nk")
}

// Start starts the server and waits until it accepts connections.
func Start(cfg Config) (*Server, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = 4222
	}
	users := make([]*server.NkeyUser, 0, len(Roles))
	for _, r := range Roles {
		pub, err := ensureSeed(CredsPath(cfg.Dir, r))
		if err != nil {
			return nil, err
		}
		users = append(users, &server.NkeyUser{Nkey: pub, Permissions: permissions(r)})
	}
	for _, a := range cfg.Agents {
		if !subject.ValidAgent(a) {
			return nil, fmt.Errorf("embedded nats: agent %q: a name must be 1 to %d letters, digits, '-' or '_'", a, subject.MaxAgentLen)
		}
		pub, err := ensureSeed(AgentCredsPath(cfg.Dir, a))
		if err != nil {
			return nil, err
		}
		users = append(users, &server.NkeyUser{Nkey: pub, Permissions: agentPermissions(a)})
	}
	opts := &server.Options{
		ServerName: "gatehouse-embedded",
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   filepath.Join(cfg.Dir, "jetstream"),
		Nkeys:      users,
		NoSigs:     true,
		SyncAlways: cfg.SyncAlways,
		NoLog:      true,
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready after 10s on %s (is the port %d free? use --nats-port)", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)), cfg.Port)
	}
	return &Server{NS: ns, URL: ns.ClientURL(), dir: cfg.Dir}, nil
}

// Connect opens an in-process connection as role.
func (s *Server) Connect(r Role, opts ...nats.Option) (*nats.Conn, error) {
	o, err := nats.NkeyOptionFromSeed(CredsPath(s.dir, r))
	if err != nil {
		return nil, err
	}
	opts = append([]nats.Option{o, nats.InProcessServer(s.NS), nats.Name("gatehouse-" + string(r))}, opts...)
	return nats.Connect(s.URL, opts...)
}

// ConnectAgent opens an in-process connection as the named agent, with its
// own credential and inbox space. The agent must be in Config.Agents.
func (s *Server) ConnectAgent(agent string, opts ...nats.Option) (*nats.Conn, error) {
	o, err := nats.NkeyOptionFromSeed(AgentCredsPath(s.dir, agent))
	if err != nil {
		return nil, err
	}
	opts = append([]nats.Option{o, nats.InProcessServer(s.NS), nats.Name("gatehouse-agent-" + agent),
		nats.CustomInboxPrefix(subject.AgentInboxOf(agent))}, opts...)
	return nats.Connect(s.URL, opts...)
}

// Dir is the folder holding the store and credentials.
func (s *Server) Dir() string { return s.dir }

// Shutdown stops the server and waits for it.
func (s *Server) Shutdown() {
	s.NS.Shutdown()
	s.NS.WaitForShutdown()
}

func permissions(r Role) *server.Permissions {
	switch r {
	case RoleApp:
		return &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{
				subject.WorkOpen, subject.WorkClose, subject.ApprovalDecide, subject.ApprovalList, subject.ApprovalGet, "$SRV.PING", "$SRV.PING.>", "$SRV.INFO", "$SRV.INFO.>", "$SRV.STATS", "$SRV.STATS.>",
			}},
			Subscribe: &server.SubjectPermission{Allow: []string{subject.AppInbox + ".>", subject.OutputPrefix + ".>"}},
		}
	case RoleAgent:
		return agentPermissions("")
	default: // broker
		return nil
	}
}

// agentPermissions are those of the shared agent credential (agent "") or
// of one named agent. Fetching from a pull consumer is a request to
// $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer> whose messages arrive on
// the requester's inbox, and acknowledging is a publish to
// $JS.ACK.<stream>.<consumer>...; consumer info is read when binding.
// Nothing here lets an agent create a consumer or read a stream directly.
func agentPermissions(agent string) *server.Permissions {
	consumer, inbox := "*", subject.AgentInbox+".>"
	if agent != "" {
		consumer, inbox = subject.PeerConsumer(agent), subject.AgentInboxOf(agent)+".>"
	}
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			subject.EffectAll, subject.ToolsList, subject.ToolsWait,
			"$JS.API.CONSUMER.INFO." + subject.PeerStream + "." + consumer,
			"$JS.API.CONSUMER.MSG.NEXT." + subject.PeerStream + "." + consumer,
			"$JS.ACK." + subject.PeerStream + "." + consumer + ".>",
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{inbox}},
	}
}

// ensureSeed reads the seed at path, or creates one (0600), and returns its
// public key.
func ensureSeed(path string) (string, error) {
	seed, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return "", err
		}
		if seed, err = kp.Seed(); err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, append(seed, '\n'), 0o600); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", fmt.Errorf("read credentials: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(seed)
	if err != nil {
		return "", fmt.Errorf("credentials %s: not an nkey seed: %w", path, err)
	}
	return kp.PublicKey()
}
