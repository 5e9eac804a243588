// Package process is the process sink: a command run on the host, outside
// the sandbox. Such a command reaches the network and the host past every
// broker, so in strict mode a command the model chose is refused
// (unconfined-execution) unless a deployment rule allows it, and that rule
// is then on record with every run it lets through.
//
// # Who a command runs as
//
// Never as the broker. Every command runs through sandbox.Sandbox.RunHost:
// as a uid of --sandbox-uid's range that no other run holds at the time,
// with no supplementary group, no capability and no_new_privs (a setuid or
// file-capability binary gains nothing), in pid and mount namespaces of
// its own with a /proc of its own where the host allows them (it sees no
// other process, so it can neither read the broker's command line nor name
// it to signal or ptrace it), in a fresh working folder owned by that uid,
// with umask 077 (what it leaves in the host's /tmp is not readable by
// the next run's uid), with the same limits and whole-tree kill as
// sandboxed code. It reads and
// writes what that uid may: never DATA_DIR, which serve keeps 0700 (see
// cmd/gatehouse/datadir.go), so no credential seed, signing key, user,
// session, journal file or content blob.
//
// A broker that cannot switch uids (not root, or root without
// CAP_SETUID/CAP_SETGID/CAP_SETPCAP, as in many containers) would run
// commands as its own user, which owns DATA_DIR. Unless Config.AllowSameUID
// says otherwise (serve sets it in report and off mode only), Describe
// then answers every exec with broker.ErrSinkUnavailable (code
// UNAVAILABLE) wrapping sandbox.ErrNoSeparateUID, before anything is
// decided, naming why the switch is impossible and what to do. With
// AllowSameUID the command runs as the broker's user, and its outcome in
// the journal says so: detail uid (the uid it ran as) and separate_uid
// false.
//
// Params: {"argv": ["git", "status"], "stdin": "...", "timeout_ms": 5000}.
// argv[0] is resolved on the host's PATH (or Config.Path) before the
// decision, so the decision and the journal name the program that will
// really run (Effect.Target is its absolute path). The journal records the
// program, the SHA-256 digest and size of argv and stdin, and the exit code
// and output digest as the outcome; never the arguments or output.
package process

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/code"
)

// ActionExec is the process sink's one action.
const ActionExec = "exec"

// Config configures the sink. Zero values are useful, and refuse to run
// commands as the broker's own user.
type Config struct {
	// AllowSameUID lets commands run as the broker's own user where the
	// sandbox cannot switch uids (Sandbox.SeparateUID is false), instead of
	// answering UNAVAILABLE. Such a command can read the broker's keys.
	AllowSameUID bool
	// Path is the search path for argv[0] (default "/usr/local/bin:/usr/bin:/bin").
	Path string
	// Limits bound every command; a request may ask for a shorter wall time.
	Limits sandbox.Limits
	// MaxInput bounds argv and stdin together (default 1 MiB).
	MaxInput int
}

// Params are the process sink's arguments.
type Params struct {
	Argv      []string `json:"argv"`
	Stdin     string   `json:"stdin,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
}

// Sink runs host commands. Safe for concurrent use.
type Sink struct {
	sb  *sandbox.Sandbox
	cfg Config
}

var _ broker.Sink = (*Sink)(nil)

// New returns a process sink running commands through sb's RunHost.
func New(sb *sandbox.Sandbox, cfg Config) *Sink {
	if cfg.Path == "" {
		cfg.Path = "/usr/local/bin:/usr/bin:/bin"
	}
	if cfg.MaxInput <= 0 {
		cfg.MaxInput = 1 << 20
	}
	return &Sink{sb: sb, cfg: cfg}
}

// Name implements broker.Sink.
func (s *Sink) Name() policy.Sink { return policy.SinkProcess }

type state struct {
	argv  []string
	stdin string
	lim   sandbox.Limits
}

// Describe implements broker.Sink.
func (s *Sink) Describe(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	if req.Action != ActionExec {
		return nil, fmt.Errorf("%w: the process sink's only action is %q", broker.ErrBadRequest, ActionExec)
	}
	var p Params
	if err := broker.DecodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	if len(p.Argv) == 0 || p.Argv[0] == "" {
		return nil, fmt.Errorf("%w: argv needs a program", broker.ErrBadRequest)
	}
	size := len(p.Stdin)
	for _, a := range p.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, fmt.Errorf("%w: argv holds a NUL byte", broker.ErrBadRequest)
		}
		size += len(a)
	}
	if size > s.cfg.MaxInput {
		return nil, fmt.Errorf("%w: input is %d bytes, the limit is %d", broker.ErrBadRequest, size, s.cfg.MaxInput)
	}
	prog, err := s.resolve(p.Argv[0])
	if err != nil {
		return nil, err
	}
	if !s.sb.SeparateUID() && !s.cfg.AllowSameUID {
		return nil, fmt.Errorf("%w: %w (%s): a host command would run as Gatehouse's own user, with access to its keys, credentials and journal, so none runs; run gatehouse serve as root so that commands run as a uid of --sandbox-uid, or in report mode, where they run as the broker's user and the journal records it", broker.ErrSinkUnavailable, sandbox.ErrNoSeparateUID, s.sb.Report().Host.Err)
	}
	if p.TimeoutMS < 0 {
		return nil, fmt.Errorf("%w: timeout_ms must be positive", broker.ErrBadRequest)
	}
	lim := s.cfg.Limits
	if d := time.Duration(p.TimeoutMS) * time.Millisecond; d > 0 && (lim.Wall == 0 || d < lim.Wall) {
		lim.Wall = d
	}
	origin := req.Origin
	if origin == "" {
		origin = policy.OriginModel // a command whose origin is not said is taken as the model's choice
	}
	argv := append([]string{prog}, p.Argv[1:]...)
	h := sha256.New()
	for _, a := range argv {
		h.Write([]byte(strconv.Itoa(len(a)) + ":" + a))
	}
	h.Write([]byte(strconv.Itoa(len(p.Stdin)) + ":" + p.Stdin))
	return &broker.Proposal{
		Effect: policy.Effect{Sink: policy.SinkProcess, Action: ActionExec, Origin: origin, Tool: req.Tool, Target: prog},
		Size:   int64(size),
		Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)),
		State:  &state{argv: argv, stdin: p.Stdin, lim: lim},
	}, nil
}

// resolve finds name on the configured path; a name with a slash must be
// an absolute path to an executable.
func (s *Sink) resolve(name string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			return "", fmt.Errorf("%w: program %q must be a name on the path or an absolute path", broker.ErrBadRequest, name)
		}
		if _, err := exec.LookPath(name); err != nil {
			return "", fmt.Errorf("%w: program %q: %v", broker.ErrBadRequest, name, err)
		}
		return filepath.Clean(name), nil
	}
	for _, dir := range filepath.SplitList(s.cfg.Path) {
		p := filepath.Join(dir, name)
		if _, err := exec.LookPath(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: program %q is not on the path %s", broker.ErrBadRequest, name, s.cfg.Path)
}

// Perform implements broker.Sink.
func (s *Sink) Perform(ctx context.Context, run *broker.Run, req *broker.EffectRequest, prop *broker.Proposal) (*broker.Performed, error) {
	st := prop.State.(*state)
	res, err := s.sb.RunHost(ctx, sandbox.Spec{
		Argv:   st.argv,
		Env:    []string{"PATH=" + s.cfg.Path, "LANG=C.UTF-8"},
		Stdin:  []byte(st.stdin),
		Limits: st.lim,
	})
	if err != nil {
		return nil, err
	}
	done, err := code.Performed(res)
	if err != nil {
		return nil, err
	}
	done.Result.Detail["program"] = st.argv[0]
	return done, nil
}
