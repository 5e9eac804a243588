package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/policy"
	mcpsink "github.com/gatehouse/gatehouse/sinks/mcp"
	"github.com/gatehouse/gatehouse/sinks/provider"
)

// validate checks every flag value serve can check without starting
// anything, so a mistyped value is answered at once (exit status 2),
// before the sandbox self-test and before NATS starts. The values checked
// again where they are used are checked the same way here.
func (c *serveConfig) validate(env *cliEnv) error {
	if _, err := policy.ParseMode(c.mode); err != nil {
		return usageError("--mode: %v", err)
	}
	if _, err := sandboxConfig(c.sandboxTiers, c.sandboxUIDs); err != nil {
		return err
	}
	if _, err := newLogger(env, c.logFormat, c.logLevel); err != nil {
		return err
	}
	if c.replicas < 1 || c.replicas > 5 {
		return usageError("--replicas must be 1 to 5 (JetStream's limit), not %d", c.replicas)
	}
	if c.natsURL == "" && (c.natsPort < -1 || c.natsPort > 65535) {
		return usageError("--nats-port must be a port, or -1 for any free one, not %d", c.natsPort)
	}
	if _, err := parseAgentsFlag(c.agents); err != nil {
		return err
	}
	switch c.artifactStore {
	case "objectstore":
	case "dir":
		if c.artifactDir == "" {
			return usageError("--artifact-store dir needs --artifact-dir")
		}
	case "redis":
		if c.redisURL == "" {
			return usageError("--artifact-store redis needs --redis-url")
		}
	default:
		return usageError("--artifact-store must be objectstore, dir or redis, not %q", c.artifactStore)
	}
	if c.redisURL != "" {
		if _, err := redis.ParseURL(c.redisURL); err != nil {
			return usageError("--redis-url is not a redis:// or rediss:// URL") // its error would quote the password
		}
	}
	if c.providers == "" && (c.grounding != "" || (c.credentials != "" && c.mcp.servers == "")) {
		return usageError("--grounding and --credentials need --providers")
	}
	// The catalogues and credentials are read again where they are used;
	// one that cannot be read is a bad flag, answered before anything
	// starts. (An unreadable --policy or --grounding is not: serve then
	// runs and refuses what they would decide, as after a broken reload.)
	if c.providers != "" {
		if _, err := provider.LoadCatalogue(c.providers); err != nil {
			return usageError("--providers: %v", err)
		}
	}
	if c.credentials != "" {
		if _, err := provider.LoadCredentials(c.credentials); err != nil {
			return usageError("--credentials: %v", err)
		}
	}
	if c.mcp.servers != "" {
		if _, err := mcpsink.LoadCatalogue(c.mcp.servers); err != nil {
			return usageError("--mcp-servers: %v", err)
		}
	}
	if _, _, err := c.streams.limits(); err != nil {
		return usageError("%v", err)
	}
	if _, _, err := c.quotas.bytes(); err != nil {
		return err
	}
	if c.mcp.wait < 0 {
		return usageError("--mcp-approval-wait must be 0 (never wait) or more")
	}
	if _, err := content.ParseMode(c.journalCapture); err != nil {
		return usageError("--journal-capture: %v", err)
	}
	if c.journalContentDays < 0 {
		return usageError("--journal-content-days must be 0 or more")
	}
	if c.contentStore != "dir" && c.contentStore != "objectstore" {
		return usageError("--content-store must be dir or objectstore, not %q", c.contentStore)
	}
	if c.approvals.key != "" {
		if _, err := loadOnePublicKey(c.approvals.key); err != nil {
			return usageError("--approval-key: %v", err)
		}
	}
	switch c.journalDurability {
	case durabilityAuto, durabilityStream:
	case durabilityFsync:
		if c.noWriter {
			return usageError("--journal-durability fsync needs the journal writer in this process (drop --no-writer)")
		}
	default:
		return usageError("--journal-durability must be auto, fsync or stream, not %q", c.journalDurability)
	}
	if c.approvals.claimTimeout <= 0 {
		return usageError("--approval-claim-timeout must be positive")
	}
	if c.approvals.life < 0 {
		return usageError("--approval-life must be 0 (approvals stand until their run closes) or positive, not %s", c.approvals.life)
	}
	return c.integrity.validate()
}

// validate checks the signing and checkpoint flags' values. A signing key
// that cannot be read is not an error here: serve and writer then write
// events unsigned, saying so loudly (integrityFlags.signingKey).
func (f *integrityFlags) validate() error {
	if f.interval <= 0 {
		return usageError("--checkpoint-interval must be positive")
	}
	for _, k := range f.witnessKeys {
		if _, err := noteVerifierArg(k, true); err != nil {
			return usageError("--witness-key: %v", err)
		}
	}
	for _, p := range f.previous {
		if _, err := loadTrustedKeys(p); err != nil {
			return usageError("--previous-key: %v", err)
		}
	}
	return nil
}

// dataDirLock is the file a running serve holds locked (flock) in its data
// dir, with its pid in it, for as long as it runs.
const dataDirLock = "serve.lock"

// claimDataDir makes sure no other serve runs on the data dir or the
// ports this one would take, and holds the data dir until release (it
// makes the folder, 0700, when there is none; secureDataDir then checks
// it, once the data dir is this serve's): a
// second serve fails at once, saying where the first one is, instead of
// meeting it half-way through its start (the embedded NATS's store, the
// journal's lock, a port) after seconds.
func (c *serveConfig) claimDataDir() (release func(), err error) {
	if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(c.dataDir, dataDirLock)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &exitError{code: exitUsage, err: alreadyRunning(c.dataDir, strings.TrimSpace(string(b[:n])))}
		}
		return nil, fmt.Errorf("lock the data dir: %w", err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	release = func() { _ = f.Close() } // closing drops the lock; the file stays, empty of meaning
	if err := c.portsFree(); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// alreadyRunning says which Gatehouse holds dataDir and where it listens.
func alreadyRunning(dataDir, pid string) error {
	where := ""
	if ep, err := readEndpoints(dataDir); err == nil {
		where = fmt.Sprintf("; NATS %s, dashboard %s", redactURL(ep.NATSURL), ep.HTTP)
	}
	if pid != "" {
		pid = " (pid " + pid + where + ")"
	} else if where != "" {
		pid = " (" + strings.TrimPrefix(where, "; ") + ")"
	}
	return fmt.Errorf("a Gatehouse already runs in %s%s: stop it, use it (gatehouse status --data-dir %s), or give this one another --data-dir", dataDir, pid, dataDir)
}

// portsFree checks the embedded NATS's port and the web address can be
// listened on, so a port another program holds is named at once.
func (c *serveConfig) portsFree() error {
	try := func(flagName, addr string) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return &exitError{code: exitUsage, err: fmt.Errorf("%s %s is taken by another program (another Gatehouse? 'gatehouse status' finds one on this data dir): pick another address with %s, or stop it", flagName, addr, flagName)}
			}
			return &exitError{code: exitUsage, err: fmt.Errorf("%s %s: %w", flagName, addr, err)}
		}
		return ln.Close()
	}
	if c.natsURL == "" && c.natsPort > 0 {
		if err := try("--nats-port", net.JoinHostPort(c.natsHost, strconv.Itoa(c.natsPort))); err != nil {
			return err
		}
	}
	if err := try("--http", c.httpAddr); err != nil {
		return err
	}
	if c.mcp.httpAddr != "" {
		return try("--mcp-http", c.mcp.httpAddr)
	}
	return nil
}
