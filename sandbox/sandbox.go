package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"
)

// Tier names one way of confining a child. The zero value is not a tier.
type Tier string

// The tiers, in the order Detect tries them by default.
const (
	TierBwrap      Tier = "bubblewrap" // bwrap 0.8+, started as the unprivileged uid
	TierNamespaces Tier = "namespaces" // Go clone flags + this binary as helper: mounts, pivot_root, lo, no nested userns
	TierLandlock   Tier = "landlock"   // strict Landlock + seccomp in the helper, no namespaces
	TierUnconfined Tier = "unconfined" // limits only: the child reaches the network and the host
)

// DefaultTiers is the order Detect tries when Config.Tiers is nil.
var DefaultTiers = []Tier{TierBwrap, TierNamespaces, TierLandlock, TierUnconfined}

// Confining reports whether t is meant to confine (every tier but unconfined).
func (t Tier) Confining() bool { return t != TierUnconfined && t != "" }

// Errors returned by this package, wrapped with %w; check with errors.Is.
var (
	// ErrSpec: the Spec is unusable (no program, a Files path that is not a clean relative path, ...).
	ErrSpec = errors.New("sandbox: invalid spec")
	// ErrWorkspace: the workspace cannot be prepared or cannot be reached by the sandbox uid.
	ErrWorkspace = errors.New("sandbox: workspace")
	// ErrStart: the helper or the tier failed before the program ran (namespaces refused, Landlock
	// unavailable, bwrap could not set up, the program could not be executed).
	ErrStart = errors.New("sandbox: could not start")
	// ErrNoHelper: the re-executed binary did not act as the helper (MaybeHelper is not called first in main
	// or TestMain, or Config.Helper points at another program).
	ErrNoHelper = errors.New("sandbox: helper did not answer (is sandbox.MaybeHelper called first in main/TestMain?)")
	// ErrTierUnknown: Config.Tiers names a tier this package does not know.
	ErrTierUnknown = errors.New("sandbox: unknown tier")
)

// Config chooses tiers and identities. The zero value is useful: default tiers, the default uid range
// (DefaultFirstUID, DefaultUIDCount), this binary as helper, slog.Default.
type Config struct {
	// Tiers to self-test, in order; nil means DefaultTiers. []Tier{TierUnconfined} forces unconfined.
	Tiers []Tier
	// UID and GID are the first uid and gid of the range programs run as (uid i of the range goes with gid i),
	// UIDs how many: with more than one, each run leases a uid of its own (see doc.go, Identities), with one
	// every run shares it. UID 0 means DefaultFirstUID with DefaultUIDCount uids; GID 0 means the same number
	// as UID; UIDs 0 means 1 when UID is set. Never root: a range holding uid 0 or this process's own uid is
	// not used (programs then run as this process's ids, SeparateUID is false).
	UID, GID, UIDs int
	// LeaseDir holds the host-wide uid leases; "" means DefaultLeaseDir.
	LeaseDir string
	// Helper is the argv prefix that re-executes this binary as the helper (it must end with HelperArg);
	// nil means os.Executable() and HelperArg.
	Helper []string
	// WorkRoot is the host folder fresh workspaces are made in; "" means /tmp/gatehouse-sandbox
	// (/tmp/gatehouse-sandbox-<euid> for a process that is not root). It must be this process's user's and
	// writable by nobody else; every parent must be searchable (o+x) by UID, so never a folder under /root.
	WorkRoot string
	// Bwrap is the bubblewrap binary; "" means /usr/bin/bwrap.
	Bwrap string
	// CgroupRoot is the cgroup v1 pids hierarchy runs get a cgroup in; "" means /sys/fs/cgroup/pids when it
	// is writable, "-" disables cgroups (process limit falls back to RLIMIT_NPROC, see doc.go).
	CgroupRoot string
	Logger     *slog.Logger
}

// Probe is one self-test check.
type Probe struct {
	Name      string `json:"name"`
	Contained bool   `json:"contained"`
	Detail    string `json:"detail"`
}

// TierReport is the outcome of one tier's self-test.
type TierReport struct {
	Tier     Tier    `json:"tier"`
	Confined bool    `json:"confined"`
	Probes   []Probe `json:"probes"`
	Err      string  `json:"error,omitempty"`
}

// Report is what Detect found: every tier tried and the one chosen, and who programs run as.
type Report struct {
	Chosen   Tier         `json:"chosen"`
	Confined bool         `json:"confined"`
	Tiers    []TierReport `json:"tiers"`
	Host     HostReport   `json:"host"`
}

// HostReport is the self-test of how host commands (RunHost) and unconfined code run: outside any tier, so
// only their identity keeps the broker's files and processes from them.
type HostReport struct {
	// SeparateUID: programs run as a uid of the range, never the broker's, with no supplementary group, no
	// capability and no_new_privs; the probe could neither read a 0600 file of the broker's, nor create a file
	// in its folder, nor signal it. False when this process cannot switch uids (Err says why): programs would
	// then run as the broker's own user.
	SeparateUID bool `json:"separate_uid"`
	// OwnPID: they also run in pid and mount namespaces of their own with their own /proc, so they see no
	// other process (the proc-hidden, signal-host and ptrace-host probes held).
	OwnPID bool `json:"own_pid"`
	// UIDs is the range, "FIRST-LAST" or one uid.
	UIDs   string  `json:"uids"`
	Probes []Probe `json:"probes"`
	Err    string  `json:"error,omitempty"`
}

// Tier returns the report of tier t, or nil when it was not tried.
func (r *Report) Tier(t Tier) *TierReport {
	for i := range r.Tiers {
		if r.Tiers[i].Tier == t {
			return &r.Tiers[i]
		}
	}
	return nil
}

// Limits bound one run. Zero fields take the defaults of DefaultLimits.
type Limits struct {
	Wall      time.Duration // whole run, wall clock
	CPU       time.Duration // RLIMIT_CPU of each process
	Memory    int64         // bytes of address space per process (RLIMIT_AS)
	FileSize  int64         // bytes per file written (RLIMIT_FSIZE)
	OpenFiles int           // RLIMIT_NOFILE
	Processes int           // processes and threads in the tree (cgroup v1 pids; see doc.go)
	Output    int64         // bytes of stdout and of stderr kept, each
	TmpSize   int64         // size of the private /tmp tmpfs in the bubblewrap and namespaces tiers
}

// DefaultLimits returns the limits a zero Limits stands for.
func DefaultLimits() Limits {
	return Limits{
		Wall:      30 * time.Second,
		CPU:       10 * time.Second,
		Memory:    512 << 20,
		FileSize:  64 << 20,
		OpenFiles: 256,
		Processes: 64,
		Output:    1 << 20,
		TmpSize:   64 << 20,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.Wall <= 0 {
		l.Wall = d.Wall
	}
	if l.CPU <= 0 {
		l.CPU = d.CPU
	}
	if l.Memory <= 0 {
		l.Memory = d.Memory
	}
	if l.FileSize <= 0 {
		l.FileSize = d.FileSize
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = d.OpenFiles
	}
	if l.Processes <= 0 {
		l.Processes = d.Processes
	}
	if l.Output <= 0 {
		l.Output = d.Output
	}
	if l.TmpSize <= 0 {
		l.TmpSize = d.TmpSize
	}
	return l
}

// Spec is one program to run.
type Spec struct {
	// Argv is the program and its arguments. Argv[0] is an absolute path as seen inside the sandbox
	// (/usr/bin/python3); a bare name is looked up in the PATH of Env (default /usr/bin:/bin).
	Argv []string
	// Env is the child's whole environment; nothing is inherited.
	Env   []string
	Stdin []byte
	// StdinStream and StdoutStream, when set, are the program's standard input and output as they are read
	// and written, for a program spoken to over its standard streams while it runs (an MCP server on stdio):
	// Stdin is then unused and Result.Stdout stays empty. They are handed to the program as they are (the
	// caller keeps the other ends of its pipes and closes them); Limits.Output does not apply to a stream.
	StdinStream, StdoutStream *os.File
	// Files are written into the workspace before the run; keys must pass CleanPath.
	Files map[string][]byte
	// Workspace is the host folder the program gets as its working directory (/work in the bubblewrap and
	// namespaces tiers, its own host path in the others). "" means a fresh folder, removed after the run.
	// A given folder is chowned, recursively, to the run's uid for the run, and back to this process's user
	// after it (where uids are switched).
	Workspace string
	Limits    Limits
	// Gateway, when set, is the program's one way out: it gets GatewayOutFD (write) and GatewayInFD (read),
	// named by EnvGatewayOut and EnvGatewayIn, writes one JSON request per line and reads one reply line per
	// request, in order. Gateway is called on a goroutine Run owns, one request at a time, with Run's ctx and
	// one complete JSON value of at most MaxGatewayLine bytes (the line without its newline); its reply is
	// written back as one line (compacted; a reply that is not JSON becomes an error reply). A line that is
	// too long, empty or not JSON gets an error reply from the gateway itself and never reaches Gateway.
	// Serving stops when the program ends: a call in progress is let finish (so Gateway MUST return once ctx
	// is done, and should be bounded in time), lines still unread are dropped, and Run returns after that.
	// Gateway must not keep request. nil: the program gets no descriptor but 0, 1 and 2.
	Gateway func(ctx context.Context, request []byte) []byte
}

// Reasons in Result.Killed.
const (
	KilledWall      = "wall-time"
	KilledCPU       = "cpu"
	KilledMemory    = "memory"
	KilledFileSize  = "file-size"
	KilledProcesses = "processes"
	KilledCanceled  = "canceled"
)

// Result is what a run did. A program that fails is a Result, not an error.
type Result struct {
	Tier      Tier          `json:"tier"`
	Confined  bool          `json:"confined"`
	ExitCode  int           `json:"exit_code"` // -1 when killed by a signal
	Signal    string        `json:"signal,omitempty"`
	Killed    string        `json:"killed,omitempty"` // "" or one of the Killed* reasons
	Stdout    []byte        `json:"-"`
	Stderr    []byte        `json:"-"`
	Truncated bool          `json:"truncated,omitempty"`
	Duration  time.Duration `json:"duration"`
	Files     []FileInfo    `json:"files"`
	// Workdir is the program's working directory as it saw it ("/work", or the host path where the tier has no
	// mount namespace).
	Workdir string `json:"workdir"`
	// UID is the host uid the program ran as; SeparateUID reports that it was not the broker's (see
	// HostReport.SeparateUID).
	UID         int  `json:"uid"`
	SeparateUID bool `json:"separate_uid"`
}

// FileInfo describes one regular file left in the workspace.
type FileInfo struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"` // "sha256:<hex>"
}

// Sandbox runs programs confined by the tier Detect proved. It is safe for concurrent use; it holds no
// goroutines and needs no Close.
type Sandbox struct {
	cfg      Config
	tier     Tier
	confined bool
	report   *Report
	cg       string // cgroup v1 pids parent, "" when unavailable
	log      *slog.Logger
	id       identity
	ownPID   bool // plain mode (RunHost, unconfined) gets pid and mount namespaces of its own
	separate bool // the host self-test proved the uid switch (HostReport.SeparateUID)
}

// Tier is the tier runs use.
func (s *Sandbox) Tier() Tier { return s.tier }

// Confined reports whether the tier passed every self-test probe.
func (s *Sandbox) Confined() bool { return s.confined }

// Report is the self-test report Detect made (shared; do not modify).
func (s *Sandbox) Report() *Report { return s.report }

// SeparateUID reports whether programs run as a uid other than the broker's (HostReport.SeparateUID). When it
// is false, a program outside a confined tier (RunHost, or Run with the unconfined tier) runs as the broker's
// own user and can read whatever the broker can: its keys, credentials and journal. Callers that must not
// allow that refuse such runs (ErrNoSeparateUID).
func (s *Sandbox) SeparateUID() bool { return s.id.switchUID && s.separate }

// lease is the uid and gid of one run: a leased uid of the range, or this process's own ids where it cannot
// switch.
func (s *Sandbox) lease(ctx context.Context) (*lease, error) {
	if !s.id.switchUID {
		return &lease{uid: os.Getuid(), gid: os.Getgid()}, nil
	}
	return s.id.pool.acquire(ctx)
}

// Run runs spec under the sandbox's tier, with spec's limits. It returns an error only when the run could not
// start (ErrSpec, ErrWorkspace, ErrStart, ErrNoHelper); the program's failure, a limit or ctx ending are in
// the Result. When Run returns, no process of the run is left.
func (s *Sandbox) Run(ctx context.Context, spec Spec) (*Result, error) {
	return s.run(ctx, spec, modeOf(s.tier), s.tier, s.confined, nil)
}

// RunHost runs a command on the host (the process sink): outside any tier, so with the host's files and
// network, but as the run's own unprivileged uid (see Config.UID), with no supplementary group, no capability
// and no_new_privs, in pid and mount namespaces of its own where the host allows them (HostReport.OwnPID), in
// a working folder owned by that uid (Workspace "" means a fresh one, removed after the run), with the same
// limits, output capture and whole-tree kill as Run. Where this process cannot switch uids (SeparateUID is
// false) the command runs as this process's own user: callers decide whether to allow that. The binary must
// call MaybeHelper first in main (or TestMain), since limits are set by the helper.
func (s *Sandbox) RunHost(ctx context.Context, spec Spec) (*Result, error) {
	return s.run(ctx, spec, modePlain, TierUnconfined, false, nil)
}

func newSandbox(cfg Config, tier Tier, confined bool, rep *Report) *Sandbox {
	cfg = cfg.withDefaults()
	if rep == nil {
		rep = &Report{Chosen: tier, Confined: confined}
	}
	s := &Sandbox{cfg: cfg, tier: tier, confined: confined, report: rep, log: cfg.Logger}
	s.cg = cgroupParent(cfg.CgroupRoot, s.log)
	s.id.pool = newUIDPool(cfg.UID, cfg.GID, cfg.UIDs, cfg.LeaseDir)
	s.id.switchUID, s.id.why = canSwitchUID(cfg.UID, cfg.GID, cfg.UIDs)
	return s
}

// uidRange is the range as the --sandbox-uid flag writes it.
func (c Config) uidRange() string {
	if c.UIDs == 1 {
		return strconv.Itoa(c.UID)
	}
	return fmt.Sprintf("%d-%d", c.UID, c.UID+c.UIDs-1)
}

func (c Config) withDefaults() Config {
	if c.Tiers == nil {
		c.Tiers = DefaultTiers
	}
	if c.UID <= 0 {
		c.UID, c.UIDs = DefaultFirstUID, DefaultUIDCount
	}
	if c.UIDs <= 0 {
		c.UIDs = 1
	}
	if c.GID <= 0 {
		c.GID = c.UID
	}
	if c.LeaseDir == "" {
		c.LeaseDir = DefaultLeaseDir
	}
	if c.Helper == nil {
		exe, err := os.Executable()
		if err != nil {
			exe = "/proc/self/exe"
		}
		c.Helper = []string{exe, HelperArg}
	}
	if c.WorkRoot == "" {
		c.WorkRoot = "/tmp/gatehouse-sandbox"
		if uid := os.Geteuid(); uid != 0 {
			c.WorkRoot += "-" + strconv.Itoa(uid)
		}
	}
	if c.Bwrap == "" {
		c.Bwrap = "/usr/bin/bwrap"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func modeOf(t Tier) string {
	switch t {
	case TierBwrap:
		return modeBwrap
	case TierNamespaces:
		return modeNamespaces
	case TierLandlock:
		return modeLandlock
	default:
		return modePlain
	}
}

func validTier(t Tier) error {
	switch t {
	case TierBwrap, TierNamespaces, TierLandlock, TierUnconfined:
		return nil
	}
	return fmt.Errorf("%w: %q", ErrTierUnknown, t)
}
