package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

const agentsUsage = `Usage: gatehouse agents <command> [flags]

Manages named agents: each gets a NATS credential of its own (an nkey seed,
DATA_DIR/nats/creds/agent-NAME.nk, mode 0600) and may then propose effects
only for runs opened for it (work open --agent NAME), read only its own
replies and fetch only its own peer messages. This is the normal way to
run agents; the shared agent credential (creds/agent.nk) is for a quick
start and acts only on runs opened without an agent.

Commands:
  add NAME [--origin O]   register an agent and make its credential
  rotate NAME             replace its credential; the old one stops working
  remove NAME             delete its credential and forget it; an agent
                          added later under NAME is another identity: it
                          cannot act in the runs opened for this one nor
                          read the messages sent to it
  list                    the registered agents
  nats-conf               the users and permissions to give an external
                          NATS (the account's "users" list)

--origin declares where the code behind this credential comes from, for
agents the deployment owns: shipped, runtime, registry, model (the
default) or direct. Every effect it proposes is decided with that origin;
nothing an agent sends can change it.

Each but nats-conf takes --json (what was done, and the credential file;
list: every one). Changes are written to DATA_DIR/identities.json; a
running 'gatehouse serve' on the same data dir applies them at once (new
users on its embedded NATS, connections of a removed or rotated
credential closed), no restart needed.
`

const appsUsage = `Usage: gatehouse apps <command> [flags]

Manages named applications: each gets a NATS credential of its own
(DATA_DIR/nats/creds/app-NAME.nk) and may close and read the outputs of
only the runs it opened. One registered with --tenant opens work only for
those tenants and may not use the approval endpoints (they span tenants).

Commands:
  add NAME [--tenant T]...   register an application and make its credential
  rotate NAME                replace its credential
  remove NAME                delete its credential and forget it
  list                       the registered applications

Each takes --json (what was done, and the credential file; list: every
one). A running 'gatehouse serve' on the same data dir applies changes at once.
`

func cmdAgents(ctx context.Context, env *cliEnv, args []string) error {
	return cmdIdentities(ctx, env, args, subject.ClassAgent)
}

func cmdApps(ctx context.Context, env *cliEnv, args []string) error {
	return cmdIdentities(ctx, env, args, subject.ClassApp)
}

func cmdIdentities(_ context.Context, env *cliEnv, args []string, class subject.Class) error {
	usage, cmd := agentsUsage, "agents"
	if class == subject.ClassApp {
		usage, cmd = appsUsage, "apps"
	}
	if done, err := subcommandHelp(env, args, cmd, usage); done {
		return err
	}
	var (
		dataDir string
		origin  string
		tenants listFlag
		asJSON  bool
		sub     = args[0]
	)
	fs := newEnvFlags(env, cmd+" "+sub, usage)
	fs.stringVar(&dataDir, "data-dir", ".gatehouse", "the data dir 'gatehouse serve' uses")
	switch sub {
	case "add":
		if class == subject.ClassAgent {
			fs.StringVar(&origin, "origin", "", "the declared origin of this agent's effects (default model)")
		} else {
			fs.Var(&tenants, "tenant", "a tenant the application may open work for (repeat; none: any tenant)")
		}
	case "list", "rotate", "remove":
	case "nats-conf":
		if class != subject.ClassAgent {
			return usageError("unknown apps command %q (the NATS users of agents and apps: gatehouse agents nats-conf)", sub)
		}
	default:
		subs := []string{"add", "rotate", "remove", "list"}
		if class == subject.ClassAgent {
			subs = append(subs, "nats-conf")
		}
		return unknownSubcommand(cmd, sub, subs...)
	}
	if sub != "nats-conf" {
		fs.BoolVar(&asJSON, "json", false, "print as JSON")
	}
	pos, err := fs.parse(args[1:])
	if err != nil {
		return err
	}
	if sub == "list" || sub == "nats-conf" {
		if len(pos) != 0 {
			return usageError("%s %s takes no arguments", cmd, sub)
		}
		reg, err := identity.Load(identity.Path(dataDir))
		if err != nil {
			return err
		}
		if sub == "nats-conf" {
			return printNATSConf(env, dataDir, reg)
		}
		return listIdentities(env, dataDir, reg, class, asJSON)
	}
	if len(pos) != 1 {
		return usageError("%s %s takes one NAME", cmd, sub)
	}
	name := pos[0]
	if !subject.ValidName(name) {
		return usageError("%q is not a name: 1 to %d letters, digits, '-' or '_', starting with a letter or digit", name, subject.MaxAgentLen)
	}
	if err := identity.CheckOrigin(policy.Origin(origin)); err != nil {
		return usageError("--origin: %v", err)
	}
	var seed, mcpNote string
	err = editRegistry(dataDir, func(reg *identity.Registry) error {
		now := time.Now().UTC()
		seed = credsOf(dataDir, class, name)
		switch sub {
		case "add":
			var err error
			if class == subject.ClassAgent {
				err = reg.AddAgent(identity.Agent{Name: name, Origin: policy.Origin(origin), Added: now})
			} else {
				err = reg.AddApp(identity.App{Name: name, Tenants: tenants, Added: now})
			}
			if err != nil {
				return err
			}
			_, err = embedded.NewSeed(seed)
			return err
		case "rotate":
			if err := reg.Touch(class, name, now); err != nil {
				return err
			}
			if _, err := embedded.NewSeed(seed); err != nil {
				return err
			}
			return rotateMCPToken(dataDir, class, name, &mcpNote)
		default: // remove
			err := reg.RemoveApp(name)
			if class == subject.ClassAgent {
				err = reg.RemoveAgent(name)
			}
			if err != nil {
				return err
			}
			if err := os.Remove(seed); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if class == subject.ClassAgent {
				// The agent's other credential: a token of a removed name must
				// not reach whoever is registered under it later.
				if err := os.Remove(mcpTokenPath(dataDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			return nil
		}
	})
	switch {
	case errors.Is(err, identity.ErrExists):
		return &exitError{code: exitFindings, err: fmt.Errorf("%w (a new credential for it: gatehouse %s rotate %s)", err, cmd, name)}
	case errors.Is(err, identity.ErrNotFound):
		return &exitError{code: exitFindings, err: fmt.Errorf("%w (the registered ones: gatehouse %s list --data-dir %s)", err, cmd, dataDir)}
	case errors.Is(err, identity.ErrBadName) || errors.Is(err, identity.ErrBadOrigin):
		return &exitError{code: exitUsage, err: err}
	case err != nil:
		return err
	}
	what := map[string]string{"add": "added", "rotate": "rotated", "remove": "removed"}[sub]
	if asJSON {
		rep := identityChange{Class: string(class), Name: name, Done: what}
		if sub != "remove" {
			rep.Credential = seed
		}
		if mcpNote != "" {
			rep.MCPToken = mcpTokenPath(dataDir, name)
		}
		return printJSON(env, rep)
	}
	fmt.Fprintf(env.stdout, "%s %s %s.\n", class, name, what)
	if sub != "remove" {
		fmt.Fprintf(env.stdout, "  credential %s (nkey seed, mode 0600: hand it to %s only)\n", seed, name)
	}
	if mcpNote != "" {
		fmt.Fprintf(env.stdout, "  %s\n", mcpNote)
	}
	fmt.Fprintln(env.stdout, "  a running 'gatehouse serve' on this data dir applies it now; an external NATS needs 'gatehouse agents nats-conf' in its config")
	return nil
}

// identityChange is what agents and apps add, rotate and remove print
// with --json: what was done to whom, and the credential files it made.
type identityChange struct {
	Class      string `json:"class"` // agent or app
	Name       string `json:"name"`
	Done       string `json:"done"` // added, rotated or removed
	Credential string `json:"credential,omitempty"`
	MCPToken   string `json:"mcp_token,omitempty"` // remade by a rotation
}

// rotateMCPToken remakes a named agent's MCP bearer token (serve
// --mcp-http), if it has one, with its seed: both are credentials of the
// identity, and a rotation must cut off a leaked one of either. note says
// what was done.
func rotateMCPToken(dataDir string, class subject.Class, name string, note *string) error {
	path := mcpTokenPath(dataDir, name)
	if _, err := os.Stat(path); class != subject.ClassAgent || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if _, err := newMCPToken(dataDir, name); err != nil {
		return fmt.Errorf("remake the MCP token: %w", err)
	}
	*note = "MCP token remade: " + path + " (the old one no longer works; give the agent's MCP client the new one)"
	return nil
}

// credsOf is the seed file of identity name of class.
func credsOf(dataDir string, class subject.Class, name string) string {
	dir := filepath.Join(dataDir, "nats")
	if class == subject.ClassApp {
		return embedded.AppCredsPath(dir, name)
	}
	return embedded.AgentCredsPath(dir, name)
}

// editRegistry changes the register under an exclusive lock, so two edits
// never lose one another, and saves it; serve sees the rename.
func editRegistry(dataDir string, edit func(*identity.Registry) error) error {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dataDir, ".identities.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	path := identity.Path(dataDir)
	reg, err := identity.Load(path)
	if err != nil {
		return err
	}
	if err := edit(reg); err != nil {
		return err
	}
	return reg.Save(path)
}

func listIdentities(env *cliEnv, dataDir string, reg *identity.Registry, class subject.Class, asJSON bool) error {
	type row struct {
		Name    string        `json:"name"`
		Origin  policy.Origin `json:"origin,omitempty"`
		Tenants []string      `json:"tenants,omitempty"`
		// Incarnation names the agent's registration: one removed and
		// added again under the name has another (package broker/identity).
		Incarnation string    `json:"incarnation,omitempty"`
		Creds       string    `json:"creds"`
		Added       time.Time `json:"added"`
		Rotated     time.Time `json:"rotated,omitzero"`
	}
	rows := []row{}
	if class == subject.ClassApp {
		for _, a := range reg.Apps {
			rows = append(rows, row{Name: a.Name, Tenants: a.Tenants, Creds: credsOf(dataDir, class, a.Name), Added: a.Added, Rotated: a.Rotated})
		}
	} else {
		for _, a := range reg.Agents {
			rows = append(rows, row{Name: a.Name, Origin: a.EffectiveOrigin(), Incarnation: reg.AgentRegistration(a.Name).Incarnation,
				Creds: credsOf(dataDir, class, a.Name), Added: a.Added, Rotated: a.Rotated})
		}
	}
	if asJSON {
		return printJSON(env, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(env.stdout, "No %s registered in %s. Add one: gatehouse %ss add NAME\n", class, identity.Path(dataDir), class)
		return nil
	}
	for _, r := range rows {
		detail := "origin " + string(r.Origin)
		if class == subject.ClassApp {
			detail = "any tenant"
			if len(r.Tenants) > 0 {
				detail = "tenants " + strings.Join(r.Tenants, ",")
			}
		}
		fmt.Fprintf(env.stdout, "%-24s %-24s %s\n", r.Name, detail, r.Creds)
	}
	return nil
}

// printNATSConf prints the users list an external NATS needs so that it
// enforces what the embedded server does (see package broker/embedded).
func printNATSConf(env *cliEnv, dataDir string, reg *identity.Registry) error {
	users, err := embedded.Users(filepath.Join(dataDir, "nats"), reg)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, `# Gatehouse's NATS users and permissions, for the account Gatehouse uses.
# Save this as users.conf beside nats.conf and include it there:
#   accounts { GATEHOUSE { jetstream: enabled, include "users.conf" } }
# (no no_auth_user: a client without a credential must be refused).
# Connect brokers with --nats-creds %s
# and --nats-replies-creds %s;
# hand each agent and application only its own seed. Run this again after
# gatehouse agents/apps add, rotate or remove, and reload nats-server.
users: %s
`, embedded.CredsPath(filepath.Join(dataDir, "nats"), embedded.RoleBroker), embedded.CredsPath(filepath.Join(dataDir, "nats"), embedded.RoleReplies), embedded.UsersConf(users))
	return nil
}
