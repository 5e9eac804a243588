// Package embedded runs the nats-server Gatehouse embeds when no --nats-url
// is given: JetStream on, listening on loopback, with one nkey credential
// per role and per named identity, and permissions that keep them apart.
//
//	broker    everything: JetStream, streams, buckets (connected in-process);
//	          it never answers a request
//	replies   the broker's NATS micro service: takes requests and may
//	          publish only into inbox spaces, so no reply can be aimed at a
//	          stream, a bucket, a peer queue or an output
//	app       the shared application credential (identity subject.Shared)
//	agent     the shared agent credential (identity subject.Shared)
//	agent-N   each named agent (identity.Registry): its own credential
//	app-N     each named application: its own credential
//
// Credentials are nkey seed files under Dir/creds, made on first start with
// mode 0600 and reused after. The nats CLI takes them with --nkey.
//
// # What each identity may do
//
// Identity is carried by subjects (package subject): an identity may
// publish requests only under its own token and read replies only in its
// own inbox space, so the token the broker reads from a request's subject
// is the one the server let that credential use. Permissions returns the
// exact lists; in short:
//
//   - an agent proposes effects on gatehouse.v1.agent.<id>.effect.> and
//     reads _INBOX_agent.<id>.>; a named agent also asks a broker for its
//     next peer message on gatehouse.v1.agent.<id>.peer.next
//     (subject.PeerNext), which the broker takes from the agent's consumer
//     and answers in the agent's inbox. The shared agent credential has no
//     peer messages at all: it cannot fetch, subscribe to or be answered on
//     any named agent's subjects.
//   - an application opens and closes work on gatehouse.v1.app.<id>.work.*,
//     reads _INBOX_app.<id>.> and the outputs of its own runs
//     (subject.OutputsOf); one not bound to tenants also uses the approval
//     endpoints. It can never propose an effect.
//
// No agent or application holds any $JS or $SRV permission. The NATS
// server checks only the subject a client publishes to, never the reply
// subject it names, and JetStream (an API request, a fetch, an
// acknowledgement with a reply) and NATS micro discovery answer on that
// reply subject with the server's or the service's own rights: a
// credential allowed even its own consumer's info could have JetStream
// write the answer into a run record, the writer health key, a journal or
// output subject or another identity's inbox. Gatehouse's own endpoints
// check the reply subject first (broker.Service); JetStream and micro
// cannot, so they are the broker's and the operator's alone (gatehouse
// status and `nats micro ls` use the broker credential).
//
// An operator running Gatehouse on an external NATS sets the same
// permissions there: UsersConf renders them as a nats-server users list
// (`gatehouse agents nats-conf`), and the e2e cluster runs with it.
//
// # Changing identities while serving
//
// Reload takes a new register and gives the server the new users, so a
// credential added, rotated or removed takes effect without a restart:
// nats-server re-checks every connected client and closes those whose key
// is no longer a user, and applies the new permissions to the rest.
package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/broker/subject"
)

// Role is a kind of NATS client with a credential of its own.
type Role string

const (
	RoleBroker  Role = "broker"
	RoleReplies Role = "replies"
	RoleApp     Role = "app"
	RoleAgent   Role = "agent"
)

// Roles lists every role, in a stable order.
var Roles = []Role{RoleBroker, RoleReplies, RoleApp, RoleAgent}

// Config configures the embedded server.
type Config struct {
	Dir  string // JetStream store and credentials live here
	Host string // default 127.0.0.1
	Port int    // default 4222; -1 picks a free port
	// SyncAlways makes JetStream fsync every message (slower, survives a
	// power cut); the default syncs on an interval as nats-server does.
	SyncAlways bool
	Logger     *slog.Logger
	// Identities are the named agents and applications that get a
	// credential of their own; nil is none.
	Identities *identity.Registry
	// Agents are further named agents (declaring nothing: origin model),
	// for callers that need no register.
	Agents []string
}

// Server is a running embedded nats-server.
type Server struct {
	NS  *server.Server
	URL string
	dir string

	mu     sync.Mutex // serialises Reload
	opts   server.Options
	agents []string // from Config.Agents, kept through reloads
}

// CredsPath returns the nkey seed file of role under dir.
func CredsPath(dir string, r Role) string {
	return filepath.Join(dir, "creds", string(r)+".nk")
}

// AgentCredsPath returns the nkey seed file of the named agent under dir.
func AgentCredsPath(dir, agent string) string {
	return filepath.Join(dir, "creds", "agent-"+agent+".nk")
}

// AppCredsPath returns the nkey seed file of the named application under
// dir.
func AppCredsPath(dir, app string) string {
	return filepath.Join(dir, "creds", "app-"+app+".nk")
}

// Start starts the server and waits until it accepts connections.
func Start(cfg Config) (*Server, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = 4222
	}
	s := &Server{dir: cfg.Dir, agents: cfg.Agents}
	users, err := s.users(cfg.Identities)
	if err != nil {
		return nil, err
	}
	s.opts = server.Options{
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
	opts := s.opts
	ns, err := server.NewServer(&opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready after 10s on %s (is the port %d free? use --nats-port)", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)), cfg.Port)
	}
	s.NS, s.URL = ns, ns.ClientURL()
	// A reload must keep the port the server picked.
	s.opts.Port = ns.Addr().(*net.TCPAddr).Port
	return s, nil
}

// Reload gives the server the users of reg (and of Config.Agents), making
// seeds for new identities. Clients whose key is no longer a user are
// disconnected by the server; the others keep their connections under the
// new permissions. On error the users in force are unchanged.
func (s *Server) Reload(reg *identity.Registry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	users, err := s.users(reg)
	if err != nil {
		return err
	}
	opts := s.opts
	opts.Nkeys = users
	if err := s.NS.ReloadOptions(&opts); err != nil {
		return fmt.Errorf("embedded nats: reload users: %w", err)
	}
	s.opts.Nkeys = users
	return nil
}

// User is one credential's public key and permissions (nil: everything).
type User struct {
	Name        string // the seed file's base name without .nk, for comments
	Nkey        string
	Permissions *server.Permissions
}

// Users returns the users of the roles and of reg's identities whose seeds
// are under dir, making any seed that is missing.
func Users(dir string, reg *identity.Registry, extraAgents ...string) ([]User, error) {
	var out []User
	for _, r := range Roles {
		pub, err := EnsureSeed(CredsPath(dir, r))
		if err != nil {
			return nil, err
		}
		out = append(out, User{Name: string(r), Nkey: pub, Permissions: RolePermissions(r)})
	}
	if reg == nil {
		reg = &identity.Registry{}
	}
	agents := map[string]bool{}
	for _, a := range reg.Agents {
		agents[a.Name] = true
	}
	for _, a := range extraAgents {
		agents[a] = true
	}
	names := make([]string, 0, len(agents))
	for a := range agents {
		names = append(names, a)
	}
	slices.Sort(names)
	for _, a := range names {
		if !subject.ValidName(a) {
			return nil, fmt.Errorf("embedded nats: agent %q: a name must be 1 to %d letters, digits, '-' or '_', starting with a letter or digit", a, subject.MaxAgentLen)
		}
		pub, err := EnsureSeed(AgentCredsPath(dir, a))
		if err != nil {
			return nil, err
		}
		out = append(out, User{Name: "agent-" + a, Nkey: pub, Permissions: Permissions(subject.ClassAgent, a, false)})
	}
	for _, a := range reg.Apps {
		pub, err := EnsureSeed(AppCredsPath(dir, a.Name))
		if err != nil {
			return nil, err
		}
		out = append(out, User{Name: "app-" + a.Name, Nkey: pub, Permissions: Permissions(subject.ClassApp, a.Name, len(a.Tenants) > 0)})
	}
	return out, nil
}

func (s *Server) users(reg *identity.Registry) ([]*server.NkeyUser, error) {
	us, err := Users(s.dir, reg, s.agents...)
	if err != nil {
		return nil, err
	}
	out := make([]*server.NkeyUser, len(us))
	for i, u := range us {
		out[i] = &server.NkeyUser{Nkey: u.Nkey, Permissions: u.Permissions}
	}
	return out, nil
}

// Connect opens an in-process connection as role, with the role's inbox
// space.
func (s *Server) Connect(r Role, opts ...nats.Option) (*nats.Conn, error) {
	var inbox []nats.Option
	switch r {
	case RoleApp:
		inbox = []nats.Option{nats.CustomInboxPrefix(subject.AppInboxOf(subject.Shared))}
	case RoleAgent:
		inbox = []nats.Option{nats.CustomInboxPrefix(subject.AgentInboxOf(subject.Shared))}
	}
	return s.connect(CredsPath(s.dir, r), "gatehouse-"+string(r), append(inbox, opts...))
}

// ConnectAgent opens an in-process connection as the named agent, with its
// own credential and inbox space. The agent must be a user (Config,
// Reload).
func (s *Server) ConnectAgent(agent string, opts ...nats.Option) (*nats.Conn, error) {
	return s.connect(AgentCredsPath(s.dir, agent), "gatehouse-agent-"+agent,
		append([]nats.Option{nats.CustomInboxPrefix(subject.AgentInboxOf(agent))}, opts...))
}

// ConnectApp opens an in-process connection as the named application.
func (s *Server) ConnectApp(app string, opts ...nats.Option) (*nats.Conn, error) {
	return s.connect(AppCredsPath(s.dir, app), "gatehouse-app-"+app,
		append([]nats.Option{nats.CustomInboxPrefix(subject.AppInboxOf(app))}, opts...))
}

func (s *Server) connect(seed, name string, opts []nats.Option) (*nats.Conn, error) {
	o, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		return nil, err
	}
	opts = append([]nats.Option{o, nats.InProcessServer(s.NS), nats.Name(name)}, opts...)
	return nats.Connect(s.URL, opts...)
}

// Dir is the folder holding the store and credentials.
func (s *Server) Dir() string { return s.dir }

// Shutdown stops the server and waits for it.
func (s *Server) Shutdown() {
	s.NS.Shutdown()
	s.NS.WaitForShutdown()
}

// RolePermissions are the permissions of role r; nil (everything) for the
// broker.
func RolePermissions(r Role) *server.Permissions {
	switch r {
	case RoleApp:
		return Permissions(subject.ClassApp, subject.Shared, false)
	case RoleAgent:
		return Permissions(subject.ClassAgent, subject.Shared, false)
	case RoleReplies:
		// Requests in; replies out, only into inbox spaces. Which inbox a
		// reply may go to is the broker's check (the requester's own);
		// that it can go nowhere else is the server's.
		return &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{
				subject.AgentInbox + ".>", subject.AppInbox + ".>", subject.OpsInbox + ".>",
			}},
			Subscribe: &server.SubjectPermission{Allow: []string{
				subject.AgentPrefix + ".*.effect.>", subject.AgentPrefix + ".*.tools.>", subject.PeerNextEndpoint, subject.AppPrefix + ".*.>", "$SRV.>",
			}},
		}
	default: // broker
		return nil
	}
}

// Permissions are those of identity id (a name or subject.Shared) of class
// c; bound is an application bound to tenants, which may not use the
// approval endpoints.
//
// Every subject an identity may publish is one a Gatehouse broker serves
// and answers only in the identity's own inbox; none is a subject the NATS
// server or JetStream answers itself (see the package doc: they would
// answer on any reply subject the identity named).
func Permissions(c subject.Class, id string, bound bool) *server.Permissions {
	if c == subject.ClassApp {
		pub := []string{subject.WorkOpen(id), subject.WorkClose(id)}
		if !bound {
			pub = append(pub, subject.App(id, subject.ApprovalDecideOp), subject.App(id, subject.ApprovalListOp), subject.App(id, subject.ApprovalGetOp))
		}
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: pub},
			Subscribe: &server.SubjectPermission{Allow: []string{subject.AppInboxOf(id) + ".>", subject.OutputsOf(id)}},
		}
	}
	pub := []string{subject.EffectsOf(id), subject.ToolsOf(id)}
	if id != subject.Shared {
		pub = append(pub, subject.PeerNext(id))
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: []string{subject.AgentInboxOf(id) + ".>"}},
	}
}

// UsersConf renders users as a nats-server configuration users list (the
// value of an account's or the authorization block's "users"), one user a
// line, for an operator setting Gatehouse's permissions on an external
// NATS.
func UsersConf(users []User) string {
	var b strings.Builder
	b.WriteString("[\n")
	for _, u := range users {
		fmt.Fprintf(&b, "  # %s\n  { nkey: %q", u.Name, u.Nkey)
		if p := u.Permissions; p != nil {
			b.WriteString(", permissions: {")
			if p.Publish != nil {
				fmt.Fprintf(&b, " publish: { allow: %s }", quoteList(p.Publish.Allow))
			}
			if p.Subscribe != nil {
				if p.Publish != nil {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, " subscribe: { allow: %s }", quoteList(p.Subscribe.Allow))
			}
			b.WriteString(" }")
		}
		b.WriteString(" }\n")
	}
	b.WriteString("]")
	return b.String()
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// EnsureSeed reads the seed at path, or creates one (0600), and returns its
// public key.
func EnsureSeed(path string) (string, error) {
	seed, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return NewSeed(path)
	} else if err != nil {
		return "", fmt.Errorf("read credentials: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(seed)
	if err != nil {
		return "", fmt.Errorf("credentials %s: not an nkey seed: %w", path, err)
	}
	return kp.PublicKey()
}

// NewSeed writes a fresh user seed to path (0600), replacing any there, and
// returns its public key: rotation. The file is replaced by a rename, so a
// reader sees the old seed or the new one, never a mix.
func NewSeed(path string) (string, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", err
	}
	seed, err := kp.Seed()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, append(seed, '\n'), 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	return kp.PublicKey()
}
