package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/dashboard"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/artifact"
	"github.com/gatehouse/gatehouse/sinks/memory"
	"github.com/gatehouse/gatehouse/sinks/output"
	"github.com/gatehouse/gatehouse/sinks/peer"
	"github.com/gatehouse/gatehouse/sinks/process"
	"github.com/gatehouse/gatehouse/sinks/provider"
	"github.com/gatehouse/gatehouse/sinks/workspace"
	"github.com/gatehouse/gatehouse/web"
)

const serveUsage = `Usage: gatehouse serve [flags]

Runs Gatehouse: an embedded NATS server with JetStream on loopback (unless
--nats-url names one), the broker service, the journal writer and the web
dashboard. Data lives under --data-dir. Ctrl-C stops it cleanly; SIGHUP
re-reads --policy (a file that cannot be read refuses every effect until a
reload succeeds, as at start).

Every flag can also be set in the environment: --mode is GATEHOUSE_MODE,
--policy is GATEHOUSE_POLICY, and so on (GATEHOUSE_ and the flag name in
capitals, '-' as '_').
`

// serveConfig is serve's parsed configuration.
type serveConfig struct {
	dataDir   string
	natsURL   string
	natsCreds string
	// natsReplies is the credential of the connection the broker answers
	// on (embedded.RoleReplies' permissions); "" is natsCreds.
	natsReplies string
	natsHost    string
	natsPort    int
	httpAddr    string
	mode        string
	policy      string
	noWriter    bool
	replicas    int
	logFormat   string
	logLevel    string
	pprofAddr   string

	agents       listFlag
	sandboxTiers listFlag
	sandboxUIDs  string

	providers     string
	credentials   string
	grounding     string
	artifactStore string
	artifactDir   string
	workspaceRoot string
	redisURL      string
	approvals     approvalFlags
	integrity     integrityFlags
	dashboard     dashboardFlags // dashboard_serve.go
	mcp           mcpFlags       // mcpserve.go
	streams       streamFlags    // streamflags.go
	quotas        quotaFlags     // quotaflags.go

	journalCapture     string
	journalContentDays int
	contentStore       string // dir or objectstore
	journalDurability  string // auto, fsync or stream (journalpath.go)
}

func (c *serveConfig) journalDir() string { return filepath.Join(c.dataDir, "journal") }

func serveFlags(env *cliEnv, c *serveConfig) *flagSet {
	fs := newEnvFlags(env, "serve", serveUsage)
	fs.envAll = true // every flag, as GATEHOUSE_<NAME>
	fs.stringVar(&c.dataDir, "data-dir", ".gatehouse", "where the journal, the embedded NATS store and credentials live")
	fs.stringVar(&c.natsURL, "nats-url", "", "use this NATS (with JetStream) instead of the embedded server")
	fs.stringVar(&c.natsCreds, "nats-creds", "", "nkey seed file for --nats-url")
	fs.stringVar(&c.natsReplies, "nats-replies-creds", "", "nkey seed file of the connection the broker answers requests on, one the server lets publish only into inbox spaces (gatehouse agents nats-conf); default --nats-creds")
	fs.stringVar(&c.natsHost, "nats-host", "127.0.0.1", "address the embedded NATS listens on")
	fs.intVar(&c.natsPort, "nats-port", 4222, "port the embedded NATS listens on (-1 picks a free one)")
	fs.stringVar(&c.httpAddr, "http", "127.0.0.1:8080", "address of the web status page, /metrics, /healthz and /readyz")
	fs.stringVar(&c.mode, "mode", "report", "off, report or strict")
	fs.stringVar(&c.policy, "policy", "", "deployment rules file (JSON or YAML); empty: built-in rules only")
	fs.boolVar(&c.noWriter, "no-writer", false, "do not run the journal writer in this process (run 'gatehouse writer' elsewhere)")
	fs.intVar(&c.replicas, "replicas", 1, "JetStream replicas for the journal stream and buckets (3 on a cluster)")
	fs.Var(&c.agents, "agents", "agents that get a NATS credential of their own while serve runs, NAME or NAME=ORIGIN (see gatehouse agents add): each acts only on its own runs and reads only its own peer messages and replies")
	fs.Var(&c.sandboxTiers, "sandbox-tiers", "sandbox tiers to try, in order (default bubblewrap,namespaces,landlock,unconfined; 'unconfined' alone forces it)")
	fs.stringVar(&c.sandboxUIDs, "sandbox-uid", defaultSandboxUIDs, sandboxUIDUsage)
	fs.stringVar(&c.providers, "providers", "", "provider catalogue (YAML or JSON): providers and integrations; without it the provider sink is off")
	fs.stringVar(&c.credentials, "credentials", "", "people's provider credentials (YAML, mode 0600); default: the JetStream KV credential store")
	fs.stringVar(&c.grounding, "grounding", "", "grounding rules file (YAML or JSON)")
	fs.stringVar(&c.artifactStore, "artifact-store", "objectstore", "where artifacts (and browser screenshots) are kept: objectstore (NATS), dir (--artifact-dir) or redis (--redis-url)")
	fs.stringVar(&c.artifactDir, "artifact-dir", "", "the folder for --artifact-store dir")
	fs.stringVar(&c.workspaceRoot, "workspace-root", "", "where the workspace sink writes agents' files (default DATA_DIR/workspaces)")
	fs.stringVar(&c.redisURL, "redis-url", "", "keep memories in Redis (redis://host:port/db) instead of JetStream KV")
	c.approvals.register(fs)
	c.integrity.register(fs)
	c.dashboard.register(fs)
	c.mcp.register(fs)
	c.streams.register(fs)
	c.quotas.register(fs)
	fs.stringVar(&c.journalCapture, "journal-capture", envOr(env, "JOURNAL_CAPTURE", "full"), "what is kept of what decisions depended on, beside the journal in DATA_DIR/content: full (replayable), digests (verifiable only) or off (also $JOURNAL_CAPTURE)")
	fs.stringVar(&c.contentStore, "content-store", "dir", "where captured content is kept: dir (DATA_DIR/content, this host only) or objectstore (the NATS Object Store bucket gatehouse_content, shared by every broker of a cluster)")
	fs.stringVar(&c.journalDurability, "journal-durability", durabilityAuto, durabilityUsage)
	fs.intVar(&c.journalContentDays, "journal-content-days", envInt(env, "JOURNAL_CONTENT_DAYS", 30), "erase captured content unused for this many days; 0 keeps it (also $JOURNAL_CONTENT_DAYS)")
	fs.stringVar(&c.pprofAddr, "pprof", "", pprofUsage)
	fs.stringVar(&c.logFormat, "log-format", "text", "text or json")
	fs.stringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	return fs
}

func cmdServe(ctx context.Context, env *cliEnv, args []string) error {
	var c serveConfig
	fs := serveFlags(env, &c)
	if _, err := fs.parse(args); err != nil {
		return err
	}
	if err := c.validate(env); err != nil { // servecheck.go: before anything starts
		return err
	}
	mode, err := policy.ParseMode(c.mode)
	if err != nil {
		return usageError("--mode: %v", err)
	}
	if err := c.dashboard.webConfig(&web.Config{}); err != nil {
		return err
	}
	if _, err := sandboxConfig(c.sandboxTiers, c.sandboxUIDs); err != nil {
		return err
	}
	log, err := newLogger(env, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	release, err := c.claimDataDir() // no other serve here (before touching it), the ports free
	if err != nil {
		return err
	}
	defer release()
	if c.dataDir, err = secureDataDir(c.dataDir, log); err != nil {
		return err // before anything is written into it
	}
	stopPprof, err := startPprof(c.pprofAddr, log)
	if err != nil {
		return err
	}
	defer stopPprof()

	// Identities: the register (gatehouse agents/apps) and --agents.
	flagAgents, err := parseAgentsFlag(c.agents)
	if err != nil {
		return err
	}
	idReg, err := loadIdentities(c.dataDir, flagAgents)
	if err != nil {
		return err
	}
	ids := &identities{dataDir: c.dataDir, flag: flagAgents, holder: identity.NewHolder(idReg), log: log}

	// NATS: embedded unless a URL is given. nc is the broker's own
	// connection (streams, buckets); rc the one it answers requests on.
	var ns *embedded.Server
	var nc, rc *nats.Conn
	if c.natsURL == "" {
		ns, err = embedded.Start(embedded.Config{Dir: filepath.Join(c.dataDir, "nats"), Host: c.natsHost, Port: c.natsPort, Identities: idReg, Logger: log})
		if err != nil {
			return err
		}
		defer ns.Shutdown()
		ids.ns = ns
		if nc, err = ns.Connect(embedded.RoleBroker); err == nil {
			rc, err = ns.Connect(embedded.RoleReplies, repliesErrors(log))
		}
	} else {
		replies := c.natsReplies
		if replies == "" {
			replies = c.natsCreds
		}
		if nc, err = connectNATS(c.natsURL, c.natsCreds, "gatehouse-serve"); err == nil {
			rc, err = connectNATS(c.natsURL, replies, "gatehouse-replies", repliesErrors(log))
		}
	}
	if err != nil {
		return fmt.Errorf("connect broker to NATS: %w", err)
	}
	defer nc.Close()
	defer rc.Close()
	logNATSErrors(log, nc, rc) // natslog.go
	if err := broker.ProbeReplies(rc); err != nil {
		if ns != nil {
			return fmt.Errorf("embedded NATS: %w", err)
		}
		log.Error("the NATS server lets the connection the broker answers on publish outside inbox spaces: replies are kept to each requester's inbox by the broker's check alone; give it --nats-replies-creds with the replies permissions (gatehouse agents nats-conf)", "err", err)
	}
	natsURL := c.natsURL
	if ns != nil {
		natsURL = ns.URL
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := ensureJournalStream(ctx, js, c.replicas, log); err != nil { // startup.go: asks again on a timeout
		return err
	}
	runs, err := broker.OpenKVRuns(ctx, js, c.replicas)
	if err != nil {
		return err
	}
	defer runs.Stop()
	sb := detectSandbox(ctx, &c, log)
	sinks, err := openSinks(ctx, js, &c, sb, log)
	defer sinks.close()
	if err != nil {
		return err
	}

	pol, polErr := loadPolicy(c.policy)
	if polErr != nil {
		log.Error("policy could not be read: every effect is refused until it is fixed", "file", c.policy, "err", polErr)
	}

	prov := providerOf(sinks.sinks)
	capture, eraser, err := openContent(ctx, js, &c, pol, prov, log)
	if err != nil {
		return err
	}
	defer eraser()
	keepRecordContent(sinks.sinks, capture)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	broker.RegisterJournalLag(reg, js) // gatehouse_journal_lag, with or without a writer in this process
	// The journal writer opens here, before anything is recorded, because
	// the broker may record through it (--journal-durability); its loop
	// runs below.
	var (
		loop             *writerLoop
		writerErr        = make(chan error, 1)
		wctx, stopWriter = context.WithCancel(context.Background())
		wg               sync.WaitGroup
	)
	defer func() { stopWriter(); wg.Wait() }()
	signKey := c.integrity.signingKey(env, log)
	if !c.noWriter {
		if loop, err = newWriterLoop(ctx, js, c.journalDir(), c.replicas, &c.integrity, signKey, log); err == nil {
			err = loop.start()
		}
		if err != nil {
			return fmt.Errorf("journal writer: %w", err)
		}
	}
	rec, closeRec, err := serveJournal(ctx, js, &c, mode, loop, log)
	if err != nil {
		return err
	}
	defer closeRec()
	apv, err := openApprovals(ctx, js, c.redisURL, c.replicas, c.approvals, env.getenv, rec, log)
	if err != nil {
		return err
	}
	actx, stopApprovals := context.WithCancel(context.Background())
	apvDone := make(chan struct{})
	go func() { defer close(apvDone); apv.Run(actx) }() // marks unsettled claims OUTCOME_UNKNOWN
	defer func() { stopApprovals(); <-apvDone }()
	metrics := broker.NewMetrics(reg)
	pendingDone := make(chan struct{})
	go func() { defer close(pendingDone); approvalsPending(actx, apv, metrics, 30*time.Second, log) }() // gatehouse_approvals_pending
	defer func() { stopApprovals(); <-pendingDone }()
	reqIDs, err := broker.OpenRequestIDs(ctx, js, broker.RequestIDsConfig{Replicas: c.replicas, Logger: log})
	if err != nil {
		return err
	}
	b, err := broker.New(broker.Config{Mode: mode, Logger: log, Metrics: metrics, Approvals: apv, ApprovalLife: c.approvals.life,
		Content: capture, Requests: reqIDs, Identities: ids.holder}, runs, rec, pol, sinks.sinks...)
	if err != nil {
		return err
	}
	for _, bind := range sinks.bind {
		bind(b)
	}
	// A run's close waits for the other brokers' decisions for it too.
	fence, err := broker.StartFence(nc, b)
	if err != nil {
		return fmt.Errorf("broker fence: %w", err)
	}
	defer fence.Close()
	// SIGHUP (and the dashboard) re-read the policy and grounding files.
	pols := &policyHolder{path: c.policy, log: log, broker: b, capture: capture, pol: pol, err: polErr,
		groundingPath: c.grounding, provider: prov, groundErr: sinks.groundingErr}
	defer pols.reloadOnHangup(ctx)()
	// The register is re-read when gatehouse agents/apps change it.
	stopIdentities, err := ids.watch(ctx)
	if err != nil {
		return err
	}
	defer stopIdentities()
	svc, err := broker.Serve(rc, b, broker.ServiceConfig{Status: instanceStatus(ns, pols)})
	if err != nil {
		return err
	}

	// The journal writer: the loop `gatehouse writer` runs, so a full disk
	// or a NATS hiccup makes it report failing in the writer health bucket
	// (strict mode refuses effects) and retry, never stop serve; it signs
	// checkpoints on the schedule. Only another writer holding the folder
	// stops serve.
	if loop != nil {
		wg.Go(func() { writerErr <- loop.run(wctx) })
		registerWriterMetrics(reg, js, loop)
	}

	started := time.Now()
	status := func() dashboard.Status {
		pol, polErr := pols.current()
		st := dashboard.Status{
			Version: version, Mode: string(mode), PolicyName: policyName(c.policy), PolicyDigest: pol.Digest(),
			NATSURL: redactURL(natsURL), Embedded: ns != nil, JournalDir: c.journalDir(), Started: started, Now: time.Now(),
			WriterRunning: loop != nil, SandboxTier: string(sb.Tier()), SandboxConfined: sb.Confined(),
		}
		if polErr != nil {
			st.PolicyError = polErr.Error()
		}
		if gErr := pols.groundingError(); gErr != nil {
			st.GroundingError = gErr.Error()
		}
		if ns != nil {
			st.CredsDir = filepath.Join(c.dataDir, "nats", "creds")
		}
		for _, s := range b.Sinks() {
			st.Sinks = append(st.Sinks, string(s))
		}
		sort.Strings(st.Sinks)
		if loop != nil {
			st.EventsWritten = loop.Written()
			st.Pending, _ = journalPending(context.Background(), js)
		}
		return st
	}
	ready := func() error {
		if nc.Status() != nats.CONNECTED {
			return fmt.Errorf("NATS connection is %s", nc.Status())
		}
		return nil
	}
	users, setupToken, err := dashboardUsers(c.dataDir)
	if err != nil {
		return err
	}
	webCfg := web.Config{Addr: c.httpAddr, Status: status, Ready: ready,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), Logger: log,
		Users: users, SetupToken: setupToken, Approvals: apv, JournalDir: c.journalDir(),
		Integrity: writerIntegrity(&c.integrity, signKey, loop, log), ReloadPolicy: pols.reload,
		Policy: policyByDigest(c.dataDir, func() *policy.Policy { p, _ := pols.current(); return p })}
	if err := c.dashboard.webConfig(&webCfg); err != nil {
		_ = svc.Close()
		return err
	}
	if webCfg.State, err = openDashboardState(ctx, js, c.redisURL, c.replicas); err != nil {
		_ = svc.Close()
		return err
	}
	srv, err := web.Start(webCfg)
	if err != nil {
		_ = svc.Close()
		return fmt.Errorf("web server on %s: %w (use --http to pick another address)", c.httpAddr, err)
	}

	mcpSrv, err := c.mcp.startHTTP(&c, ns, natsURL, b, log)
	if err != nil {
		_ = srv.Shutdown(ctx)
		_ = svc.Close()
		return fmt.Errorf("--mcp-http %s: %w", c.mcp.httpAddr, err)
	}
	defer mcpSrv.stop()
	ep := endpoints{NATSURL: natsURL, HTTP: srv.URL(), JournalDir: c.journalDir()}
	if mcpSrv != nil {
		ep.MCP = mcpSrv.URL()
	}
	if ns != nil {
		ep.AppCreds = embedded.CredsPath(filepath.Join(c.dataDir, "nats"), embedded.RoleApp)
		ep.AgentCreds = embedded.CredsPath(filepath.Join(c.dataDir, "nats"), embedded.RoleAgent)
	}
	if err := writeEndpoints(c.dataDir, ep); err != nil {
		log.Warn("could not write endpoints file", "err", err)
	}
	fmt.Fprintf(env.stdout, `Gatehouse %s is running (mode %s).
  NATS        %s%s
  dashboard   %s/login
  metrics     %s/metrics
  journal     %s
  policy      %s (reload: kill -HUP %d, or the status page)
  sandbox     %s (confined: %v)
`, version, mode, redactURL(natsURL), map[bool]string{true: " (embedded)", false: ""}[ns != nil], srv.URL(), srv.URL(), c.journalDir(), policyName(c.policy), os.Getpid(), sb.Tier(), sb.Confined())
	if ns != nil {
		fmt.Fprintf(env.stdout, "  app creds   %s (shared)\n  agent creds %s (shared: runs opened without --agent only)\n", ep.AppCreds, ep.AgentCreds)
		for _, a := range idReg.Agents {
			fmt.Fprintf(env.stdout, "  agent %-5s %s (origin %s)\n", a.Name, embedded.AgentCredsPath(filepath.Join(c.dataDir, "nats"), a.Name), a.EffectiveOrigin())
		}
		for _, a := range idReg.Apps {
			fmt.Fprintf(env.stdout, "  app %-7s %s\n", a.Name, embedded.AppCredsPath(filepath.Join(c.dataDir, "nats"), a.Name))
		}
	}
	if mcpSrv != nil {
		fmt.Fprintf(env.stdout, "  mcp         %s?run=RUN (bearer tokens in %s)\n", mcpSrv.URL(), mcpTokenDir(c.dataDir))
	}
	if setupToken != "" {
		fmt.Fprintf(env.stdout, "  first run   no dashboard user yet: create the admin at %s/setup?token=%s\n              (or: gatehouse users add NAME --role admin --data-dir %s)\n", srv.URL(), setupToken, c.dataDir)
	}
	fmt.Fprintln(env.stdout, "Press Ctrl-C to stop.")

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-writerErr:
		runErr = fmt.Errorf("journal writer stopped: %w", err)
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	mcpSrv.stop()
	_ = svc.Close()
	_ = b.Flush(sctx) // the outcomes of the last effects answered
	if loop != nil && runErr == nil && loop.Ready() == nil {
		// Let the writer catch up with what the brokers recorded, so the
		// journal on disk is complete when serve exits.
		if n := waitDrained(sctx, js); n > 0 {
			log.Warn("journal writer stopped with events pending; they stay in the stream and are written on the next start", "pending", n)
		}
	}
	stopWriter()
	wg.Wait()
	if loop != nil && runErr == nil {
		select {
		case err := <-writerErr: // closing the journal
			runErr = err
		default:
		}
	}
	_ = rc.Drain()
	_ = nc.Drain()
	_ = os.Remove(filepath.Join(c.dataDir, endpointsFile))
	fmt.Fprintln(env.stdout, "Gatehouse stopped.")
	return runErr
}

// sinkSet is every sink serve runs, what each needs from the broker once
// it exists (peers open sub-runs, sandboxed code and grounding rereads
// propose provider calls), and what to close at the end.
type sinkSet struct {
	sinks   []broker.Sink
	bind    []func(*broker.Broker)
	closers []func() error
	// groundingErr is why --grounding could not be read at start (every
	// provider call is refused then); nil when it was read.
	groundingErr error
}

func (s *sinkSet) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		_ = s.closers[i]()
	}
}

// detectSandbox self-tests the sandbox tiers and says what it found.
func detectSandbox(ctx context.Context, c *serveConfig, log *slog.Logger) *sandbox.Sandbox {
	cfg, _ := sandboxConfig(c.sandboxTiers, c.sandboxUIDs) // checked by cmdServe before anything started
	cfg.Logger = log
	sb, rep := sandbox.Detect(ctx, cfg)
	if sb.Confined() {
		log.Info("sandbox self-test passed", "tier", sb.Tier())
	} else {
		log.Warn("no confined sandbox tier works here: strict mode refuses model code (unconfined-execution) unless a rule allows it; see 'gatehouse sandbox check'", "tiers", rep.Tiers)
	}
	logHostIdentity(sb, c.mode, log)
	return sb
}

// openSinks builds every sink on the embedded defaults or on what the
// flags name. On error the sinks opened so far are in the set, to close.
func openSinks(ctx context.Context, js jetstream.JetStream, c *serveConfig, sb *sandbox.Sandbox, log *slog.Logger) (*sinkSet, error) {
	s := &sinkSet{}
	peerLim, outLim, err := c.streams.limits()
	if err != nil {
		return s, err
	}
	out, err := output.NewWithLimits(ctx, js, c.replicas, outLim)
	if err != nil {
		return s, err
	}
	peers, err := peer.NewWithLimits(ctx, js, c.replicas, peerLim)
	if err != nil {
		return s, err
	}
	for _, st := range []struct {
		name, flag  string
		asked, took int64
	}{{"outputs", "--output-max-mb", outLim.OrDefault().MaxBytes, out.Limits().MaxBytes}, {"peer", "--peer-max-mb", peerLim.OrDefault().MaxBytes, peers.Limits().MaxBytes}} {
		if st.took < st.asked {
			log.Warn("stream bound lowered: JetStream cannot reserve the bytes asked on this storage", "stream", st.name,
				"asked_mb", st.asked>>20, "bound_mb", st.took>>20, "fix", "more free disk (or max_file_store), or a smaller "+st.flag)
		}
	}
	memQuota, artQuota, err := c.quotas.bytes()
	if err != nil {
		return s, err
	}
	art, err := openArtifactStore(ctx, js, c, s)
	if err != nil {
		return s, err
	}
	art = artifact.WithQuota(art, artQuota) // the browser's screenshots count too
	s.sinks = append(s.sinks, artifact.New(art, artifact.Config{}))

	sameUID := sameUIDAllowed(c.mode)
	codeSink, err := openCode(ctx, js, c, sb, log, s, sameUID)
	if err != nil {
		return s, err
	}
	// Chromium starts on the first goto; screenshots go to the artifact
	// store, under the names the artifact sink's get reads.
	pool := browser.New(browser.Config{Logger: log, Artifacts: art,
		ArtifactName: func(tenant, key string) string { return artifact.TenantDir(tenant) + "/" + key }})
	s.closers = append(s.closers, pool.Close)
	s.sinks = append(s.sinks, out, peers, codeSink, process.New(sb, process.Config{AllowSameUID: sameUID}), pool)
	s.bind = append(s.bind, func(b *broker.Broker) { peers.Bind(b) }, func(b *broker.Broker) { codeSink.Bind(b) },
		func(b *broker.Broker) { pool.Bind(b) })

	root := c.workspaceRoot
	if root == "" {
		root = filepath.Join(c.dataDir, "workspaces")
	}
	ws, err := workspace.New(workspace.Config{Root: root})
	if err != nil {
		return s, fmt.Errorf("--workspace-root: %w", err)
	}
	s.closers = append(s.closers, ws.Close)
	s.sinks = append(s.sinks, ws)
	s.bind = append(s.bind, func(b *broker.Broker) { ws.Bind(b) }) // an export is decided by its most restricted path

	var mem memory.Store
	if c.redisURL != "" {
		r, err := memory.OpenRedis(ctx, memory.RedisConfig{URL: c.redisURL})
		if err != nil {
			return s, fmt.Errorf("--redis-url: %w", err)
		}
		s.closers = append(s.closers, r.Close)
		mem = r
	} else if mem, err = memory.OpenKV(ctx, js, memory.KVConfig{Replicas: c.replicas}); err != nil {
		return s, fmt.Errorf("memory bucket: %w", err)
	}
	s.sinks = append(s.sinks, memory.New(mem, memory.Config{QuotaBytes: memQuota}))

	prov, err := openProvider(ctx, js, c, &s.groundingErr, log)
	if err != nil {
		return s, err
	}
	if err := c.mcp.openSink(ctx, js, c, sb, prov, s, log); err != nil { // mcpserve.go
		return s, err
	}
	if prov == nil {
		return s, nil
	}
	s.closers = append(s.closers, func() error { prov.Close(); return nil })
	s.sinks = append(s.sinks, prov)
	s.bind = append(s.bind, func(b *broker.Broker) { prov.RouteRereads(b) })
	return s, nil
}

// openArtifactStore opens the store --artifact-store names.
func openArtifactStore(ctx context.Context, js jetstream.JetStream, c *serveConfig, s *sinkSet) (artifact.Store, error) {
	switch c.artifactStore {
	case "dir":
		if c.artifactDir == "" {
			return nil, usageError("--artifact-store dir needs --artifact-dir")
		}
		d, err := artifact.OpenDir(c.artifactDir)
		if err != nil {
			return nil, fmt.Errorf("--artifact-dir: %w", err)
		}
		s.closers = append(s.closers, d.Close)
		return d, nil
	case "redis":
		if c.redisURL == "" {
			return nil, usageError("--artifact-store redis needs --redis-url")
		}
		r, err := artifact.OpenRedis(ctx, artifact.RedisConfig{URL: c.redisURL})
		if err != nil {
			return nil, fmt.Errorf("--redis-url: %w", err)
		}
		s.closers = append(s.closers, r.Close)
		return r, nil
	case "objectstore":
		o, err := artifact.OpenObjectStore(ctx, js, artifact.ObjectStoreConfig{Replicas: c.replicas})
		if err != nil {
			return nil, fmt.Errorf("artifact object store: %w", err)
		}
		return o, nil
	}
	return nil, usageError("--artifact-store must be objectstore, dir or redis, not %q", c.artifactStore)
}

// openProvider builds the provider sink when a catalogue is given. Broken
// grounding rules do not stop serve: every provider call is then refused
// (fail closed), the log says why and *groundingErr holds the read error.
func openProvider(ctx context.Context, js jetstream.JetStream, c *serveConfig, groundingErr *error, log *slog.Logger) (*provider.Sink, error) {
	if c.providers == "" {
		if c.grounding != "" || (c.credentials != "" && c.mcp.servers == "") {
			return nil, usageError("--grounding and --credentials need --providers")
		}
		return nil, nil
	}
	cat, err := provider.LoadCatalogue(c.providers)
	if err != nil {
		return nil, fmt.Errorf("--providers: %w", err)
	}
	cfg := provider.Config{Catalogue: cat, Logger: log}
	if c.credentials != "" {
		if cfg.Credentials, err = provider.LoadCredentials(c.credentials); err != nil {
			return nil, fmt.Errorf("--credentials: %w", err)
		}
	} else if cfg.Credentials, err = provider.OpenKVCredentials(ctx, js, provider.KVConfig{Replicas: c.replicas}); err != nil {
		return nil, fmt.Errorf("credential store: %w", err)
	}
	if c.grounding != "" {
		if cfg.ToolServers, err = toolServerNames(c.mcp.servers); err != nil {
			return nil, fmt.Errorf("--mcp-servers: %w", err)
		}
		rules, err := loadGrounding(c.grounding, cat.WithToolServers(cfg.ToolServers...)) // rulesfiles.go
		if err != nil {
			log.Error("grounding rules could not be read: every provider call is refused until they are fixed", "file", c.grounding, "err", err)
			rules = grounding.Unreadable(c.grounding, err)
			*groundingErr = fmt.Errorf("grounding rules: %w", err)
		}
		cfg.Grounding = rules
		if c.redisURL != "" {
			if cfg.Records, err = provider.OpenRedisRecords(ctx, provider.RedisConfig{URL: c.redisURL}); err != nil {
				return nil, fmt.Errorf("--redis-url: %w", err)
			}
		}
	}
	return provider.New(ctx, js, cfg)
}

// journalPending is how many journal events the writer's consumer has not
// yet acknowledged, asked of the server within a second.
func journalPending(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, subject.JournalStream, subject.JournalConsumer)
	if err != nil {
		return 0, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}

// waitDrained waits until the journal consumer has nothing pending, or ctx
// ends, and returns what is still pending.
func waitDrained(ctx context.Context, js jetstream.JetStream) uint64 {
	for {
		pending, err := journalPending(ctx, js)
		if err == nil && pending == 0 {
			return 0
		}
		select {
		case <-ctx.Done():
			return pending
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func loadPolicy(path string) (*policy.Policy, error) {
	if path == "" {
		return policy.Default(), nil
	}
	p, err := loadPolicyFile(path) // rulesfiles.go
	if err != nil {
		return policy.Unreadable(path, err), err
	}
	return p, nil
}

func policyName(path string) string {
	if path == "" {
		return "built-in rules only"
	}
	return path
}

func newLogger(env *cliEnv, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError("--log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(env.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(env.stderr, opts)), nil
	}
	return nil, usageError("--log-format must be text or json, not %q", format)
}

func connectNATS(url, creds, name string, extra ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1)}, extra...)
	if creds != "" {
		o, err := nats.NkeyOptionFromSeed(creds)
		if err != nil {
			return nil, fmt.Errorf("--nats-creds %s: %w", creds, err)
		}
		opts = append(opts, o)
	}
	return nats.Connect(url, opts...)
}

// repliesErrors logs the asynchronous errors of the connection the broker
// answers on, instead of printing them: the server's refusal of the start
// probe (broker.ProbeReplies) is expected; any other permissions violation
// is a reply the server kept from leaving the inbox spaces.
func repliesErrors(log *slog.Logger) nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject.ProbeSubject) {
			log.Debug("replies connection: the start probe was refused, as it must be", "err", err)
			return
		}
		log.Error("replies connection", "err", err)
	})
}

// endpoints is written to DATA_DIR/endpoints.json while serve runs, so the
// CLI's client commands find the server without flags.
type endpoints struct {
	NATSURL    string `json:"nats_url"`
	HTTP       string `json:"http"`
	JournalDir string `json:"journal_dir"`
	AppCreds   string `json:"app_creds,omitempty"`
	AgentCreds string `json:"agent_creds,omitempty"`
	MCP        string `json:"mcp,omitempty"` // the streamable HTTP MCP endpoint
}

const endpointsFile = "endpoints.json"

func writeEndpoints(dir string, ep endpoints) error {
	b, _ := json.MarshalIndent(ep, "", "  ")
	return os.WriteFile(filepath.Join(dir, endpointsFile), append(b, '\n'), 0o600)
}

func readEndpoints(dir string) (*endpoints, error) {
	b, err := os.ReadFile(filepath.Join(dir, endpointsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no running gatehouse found in %s (start one with 'gatehouse serve', or pass --nats-url)", dir)
	}
	if err != nil {
		return nil, err
	}
	var ep endpoints
	if err := json.Unmarshal(b, &ep); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, endpointsFile), err)
	}
	return &ep, nil
}
