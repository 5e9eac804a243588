package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/dashboard/reveal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/nats-io/nats.go"
)

// connFlags are the flags every client command shares.
type connFlags struct {
	agent   string // a named agent's own credential (effect only)
	app     string // a named application's own credential (work, approve)
	dataDir string
	natsURL string
	creds   string
	timeout time.Duration
	json    bool
}

func (c *connFlags) register(fs *flagSet) {
	c.registerConn(fs)
	fs.BoolVar(&c.json, "json", false, "print the reply as JSON")
}

// registerConn adds the connection flags alone, for a command that prints
// no reply of its own (gatehouse mcp speaks MCP on stdout).
func (c *connFlags) registerConn(fs *flagSet) {
	fs.stringVar(&c.dataDir, "data-dir", ".gatehouse", "a running 'gatehouse serve' data dir, to find its NATS URL and credentials")
	fs.stringVar(&c.natsURL, "nats-url", "", "NATS URL (default: the one the local 'gatehouse serve' wrote)")
	fs.stringVar(&c.creds, "creds", "", "nkey seed file (default: the local server's credentials for this role)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "how long to wait for a broker")
}

// registerApp adds --app, for the commands an application runs.
func (c *connFlags) registerApp(fs *flagSet) {
	fs.stringVar(&c.app, "app", "", "connect as this named application, with its own credential (gatehouse apps add); default the shared app credential")
}

// dial connects as role, filling the URL and credentials from the local
// server's endpoints file when not given.
func (c *connFlags) dial(role client.Role) (*client.Client, error) {
	url, creds := c.natsURL, c.creds
	// A named identity's seed is the one `gatehouse agents/apps add` made
	// in the data dir, if there is one (a NATS without auth needs none).
	if role == client.Agent && c.agent != "" && creds == "" {
		creds = existing(embedded.AgentCredsPath(filepath.Join(c.dataDir, "nats"), c.agent))
	}
	if role == client.App && c.app != "" && creds == "" {
		creds = existing(embedded.AppCredsPath(filepath.Join(c.dataDir, "nats"), c.app))
	}
	named := c.agent != "" && role == client.Agent || c.app != "" && role == client.App
	if url == "" || creds == "" {
		ep, err := readEndpoints(c.dataDir)
		if err != nil && url == "" {
			return nil, err
		}
		if ep != nil {
			if url == "" {
				url = ep.NATSURL
			}
			if creds == "" && !named {
				creds = map[client.Role]string{client.App: ep.AppCreds, client.Agent: ep.AgentCreds}[role]
			}
		}
	}
	var cl *client.Client
	var err error
	switch {
	case role == client.Agent && c.agent != "":
		cl, err = client.DialAgent(url, c.agent, creds)
	case role == client.App && c.app != "":
		cl, err = client.DialApp(url, c.app, creds)
	default:
		cl, err = client.Dial(url, role, creds)
	}
	return cl, noBroker(url, err)
}

// noBroker gives a NATS that cannot be reached its stable code and what to
// do (the client's own message names the URL as given, password and all);
// other errors, such as a credential that cannot be read, are left as
// they are.
func noBroker(url string, err error) error {
	if !errors.Is(err, nats.ErrNoServers) {
		return err
	}
	return fmt.Errorf("%s: cannot reach NATS at %s (%w); nothing was decided: start 'gatehouse serve', or fix --nats-url, then retry",
		broker.CodeNoBroker, redactURL(url), nats.ErrNoServers)
}

// existing is path if a file is there, else "".
func existing(path string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

const workUsage = `Usage:
  gatehouse work open --tenant T --person P [--scope S]... [--agent A] [--mandate-* ...] [--app APP]
  gatehouse work close RUN [--status S] [--app APP]

An application's side: open work on behalf of a person and get a run id to
hand to an agent, or close a run. Whom work is for comes only from here,
and the run is bound to the agent named (only its credential may act on
it) and to the application that opened it (only it may close it).
`

func cmdWork(ctx context.Context, env *cliEnv, args []string) error {
	if done, err := subcommandHelp(env, args, "work", workUsage); done {
		return err
	}
	switch args[0] {
	case "open":
		return cmdWorkOpen(ctx, env, args[1:])
	case "close":
		return cmdWorkClose(ctx, env, args[1:])
	}
	return unknownSubcommand("work", args[0], "open", "close")
}

func cmdWorkOpen(ctx context.Context, env *cliEnv, args []string) error {
	var (
		cf                        connFlags
		w                         broker.OpenWork
		scopes, mSystems, mScopes listFlag
		mEffects                  listFlag
		mExpires                  string
		input                     string
	)
	fs := newEnvFlags(env, "work open", workUsage)
	cf.register(fs)
	cf.registerApp(fs)
	fs.StringVar(&w.Tenant, "tenant", "", "the tenant the person belongs to (required)")
	fs.StringVar(&w.Person, "person", "", "the person the work is for (required)")
	fs.StringVar(&w.Agent, "agent", "", "the agent doing the work: only that agent's own credential may act on the run (gatehouse agents add), and its card in the policy applies; none: the shared agent credential")
	fs.Var(&scopes, "scope", "a scope the person holds (repeat or comma-separate)")
	fs.Var(&mSystems, "mandate-systems", "mandate: the systems handed over (providers or sinks)")
	fs.Var(&mEffects, "mandate-effects", "mandate: the effects handed over (read, write, destructive, notify)")
	fs.Var(&mScopes, "mandate-scopes", "mandate: the scopes handed over")
	fs.StringVar(&input, "input", "", "the caller's structured input, a JSON object (grounding rules with selectors_from: [input] read it)")
	fs.StringVar(&mExpires, "mandate-expires", "", "mandate: expiry, RFC 3339 time or a duration from now (2h)")
	if _, err := fs.parse(args); err != nil {
		return err
	}
	if w.Tenant == "" || w.Person == "" {
		return usageError("--tenant and --person are required")
	}
	w.Scopes = scopes
	if input != "" {
		if !json.Valid([]byte(input)) {
			return usageError("--input is not JSON")
		}
		w.Input = json.RawMessage(input)
	}
	if len(mSystems)+len(mEffects)+len(mScopes) > 0 || mExpires != "" {
		m := &policy.Mandate{Systems: mSystems, Scopes: mScopes}
		for _, e := range mEffects {
			m.Effects = append(m.Effects, policy.EffectClass(e))
		}
		if mExpires != "" {
			t, err := parseExpiry(mExpires, time.Now())
			if err != nil {
				return usageError("--mandate-expires %q is neither an RFC 3339 time (2026-12-31T18:00:00Z) nor a duration from now (2h)", mExpires)
			}
			if !t.After(time.Now()) {
				return usageError("--mandate-expires %s is not in the future: the mandate would allow nothing", mExpires)
			}
			m.ExpiresAt = t
		}
		w.Mandate = m
	}
	c, err := cf.dial(client.App)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	run, err := c.OpenWork(ctx, w)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(env, map[string]string{"run": run})
	}
	fmt.Fprintln(env.stdout, run)
	return nil
}

func parseExpiry(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(d).UTC(), nil
	}
	return time.Parse(time.RFC3339, s)
}

func cmdWorkClose(ctx context.Context, env *cliEnv, args []string) error {
	var (
		cf     connFlags
		status string
	)
	fs := newEnvFlags(env, "work close", workUsage)
	cf.register(fs)
	cf.registerApp(fs)
	fs.StringVar(&status, "status", "done", "how the work ended")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("work close takes one run id")
	}
	c, err := cf.dial(client.App)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	if err := c.CloseWork(ctx, pos[0], status); err != nil {
		return err
	}
	if cf.json {
		return printJSON(env, map[string]string{"run": pos[0], "status": "closed"})
	}
	fmt.Fprintln(env.stdout, "closed", pos[0])
	return nil
}

const effectUsage = `Usage:
  gatehouse effect SINK --run RUN [--action A] [--params JSON] [--agent NAME] [--json]
  gatehouse effect output --run RUN [--status ok] [--result JSON]

An agent's side: propose one effect for a run and print the decision and,
if it happened, the outcome.
`

// exitHeld is effect's exit status for an effect held for approval.
const exitHeld = 3

func cmdEffect(ctx context.Context, env *cliEnv, args []string) error {
	var sinkName string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sinkName, args = args[0], args[1:]
	}
	var (
		cf     connFlags
		req    broker.EffectRequest
		params string
		status string
		result string
		origin string
	)
	fs := newEnvFlags(env, "effect", effectUsage)
	cf.register(fs)
	fs.StringVar(&req.Run, "run", "", "the run id the application opened (required)")
	fs.StringVar(&req.Action, "action", "", "the sink's action; a sink with one action (output, process, provider, mcp) needs none (gatehouse sinks lists them)")
	fs.StringVar(&params, "params", "", "the sink's params as a JSON object")
	fs.StringVar(&origin, "origin", "", "normally left out: Gatehouse establishes the origin (model, or what the deployment declared for --agent); naming another is refused")
	fs.StringVar(&req.Tool, "tool", "", "normally left out: Gatehouse names the effect SINK.ACTION; naming another is refused")
	fs.StringVar(&cf.agent, "agent", "", "connect as this named agent, with its own credential (gatehouse agents add, serve --agents)")
	fs.StringVar(&status, "status", "ok", "output: the step's status")
	fs.StringVar(&result, "result", "", "output: the step's result as JSON")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if sinkName == "" && len(pos) > 0 {
		sinkName, pos = pos[0], pos[1:]
	}
	if sinkName == "" {
		return usageHint("effect", "name a sink: gatehouse effect SINK --run RUN [--action A] [--params JSON]")
	}
	sink := policy.Sink(sinkName)
	if req.Run == "" && len(pos) == 1 {
		req.Run = pos[0]
	} else if len(pos) > 0 {
		return usageError("unexpected arguments: %s", strings.Join(pos, " "))
	}
	if req.Run == "" {
		return usageHint("effect", "--run is required: the run id 'gatehouse work open' printed")
	}
	req.Origin = policy.Origin(origin)
	if sink == policy.SinkOutput {
		if req.Action == "" {
			req.Action = "deliver"
		}
		if params == "" {
			r := json.RawMessage("null")
			if result != "" {
				r = json.RawMessage(result)
				if !json.Valid(r) {
					return usageError("--result is not JSON (quote a string: --result '\"done\"')")
				}
			}
			b, _ := json.Marshal(map[string]any{"status": status, "result": r})
			params = string(b)
		}
	}
	if params != "" {
		if !json.Valid([]byte(params)) {
			return usageError("--params is not JSON")
		}
		if t := bytes.TrimLeft([]byte(params), " \t\r\n"); t[0] != '{' {
			return usageError("--params must be a JSON object, {...} (the params of sink %s: gatehouse sinks %s)", sink, sink)
		}
		req.Params = json.RawMessage(params)
	}
	if req.Action == "" {
		switch acts := actionsOf(sink); len(acts) {
		case 1:
			req.Action = acts[0] // the sink's only action
		case 0:
			// Not a sink this command knows: the broker says which sinks
			// it serves (UNKNOWN_SINK), or what the one it serves needs.
		default:
			return usageHint("effect", fmt.Sprintf("--action is required for sink %s: one of %s (their params: gatehouse sinks %s)", sink, strings.Join(acts, ", "), sink))
		}
	}
	c, err := cf.dial(client.Agent)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	reply, err := c.Effect(ctx, sink, req)
	if reply == nil {
		var eb *broker.ErrorBody
		if errors.As(err, &eb) && eb.Code == broker.CodeCredentialRefused {
			return &exitError{code: exitUsage, err: err} // the wrong flags: no broker saw it
		}
		return err
	}
	if cf.json {
		if jerr := printJSON(env, reply); jerr != nil {
			return jerr
		}
	} else {
		printEffect(env, reply)
		printEffectResult(env, reply)
	}
	return effectExit(env, reply, err, cf.json)
}

func printEffect(env *cliEnv, r *broker.EffectReply) {
	d := r.Decision
	if d == nil {
		return
	}
	line := fmt.Sprintf("%s (%s mode)", d.Outcome, d.Mode)
	if d.Refusal != "" {
		what := "enforced"
		if !d.Enforced {
			what = "strict mode would refuse"
		}
		line += fmt.Sprintf(": %s, rule %s, %s", d.Refusal, d.Rule, what)
	}
	if d.AllowedBy != "" {
		line += ", allowed by rule " + d.AllowedBy
	}
	if !d.Recorded && d.Mode != policy.ModeOff {
		line += " [NOT RECORDED]"
	}
	fmt.Fprintf(env.stdout, "%s\n  run %s effect %s\n", reveal.Line(line), reveal.Line(r.Run), reveal.Line(r.Effect))
	for _, rs := range d.Reasons {
		fmt.Fprintf(env.stdout, "  - %s (%s): %s\n", rs.Refusal, reveal.Line(rs.Rule), reveal.Line(rs.Detail))
	}
	if o := r.Outcome; o != nil {
		fmt.Fprintf(env.stdout, "  outcome %s, %d bytes, %s\n", reveal.Line(o.Status), o.Size, reveal.Line(o.Digest))
	}
}
