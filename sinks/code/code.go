// Package code is the code sink: a program run in the sandbox. Model-written
// code, registry integrations and shipped integrations all come here, so
// each run is decided (with whether its child is confined) and recorded
// before it starts.
//
// Params: {"program": "python3", "source": "...", "args": [...],
// "stdin": "...", "files": {"data.csv": "<base64>"}, "timeout_ms": 5000}.
// program names an interpreter from Config.Programs (never a host path from
// the agent); source is written to the workspace as the program's entry
// file; files are written beside it. The program sees only its workspace
// and gets no network when the sandbox is confined; its input comes through
// the request and its output goes back in the reply, never through folders
// outside the workspace.
//
// The journal records the origin, the program, whether the child was
// confined (and by which tier), the size and SHA-256 digest of everything
// run (source, args, stdin and files), and as the outcome the exit code, the
// limit that killed it if any, the size and digest of its output and, with
// a gateway, how many calls the program proposed through it
// (gateway_calls) and how many requests were refused before anything was
// proposed (gateway_refused). Never the source or the output themselves.
//
// # Who a program runs as
//
// In a confined tier, as the tier runs it (sandbox/doc.go): the broker's
// files are out of its view. In the unconfined tier (no tier proved
// confined, or --sandbox-tiers unconfined, where an effects allow rule
// must lift unconfined-execution in strict mode) it runs as a host command
// does (see sinks/process): a uid of --sandbox-uid's range, no group, no
// capability, no_new_privs, its own pid namespace and /proc. Where the
// broker cannot switch uids, an unconfined program would run as the
// broker's own user: unless Config.AllowSameUID (serve: report and off
// mode), Describe then answers broker.ErrSinkUnavailable (UNAVAILABLE)
// wrapping sandbox.ErrNoSeparateUID before anything is decided. The
// outcome's detail records uid and separate_uid either way.
//
// # The provider gateway
//
// Once Bind has given the sink the broker, every program gets the sandbox's
// gateway (sandbox.Spec.Gateway): it writes one provider call per line to
// fd 3 ($GATEHOUSE_GATEWAY_OUT) and reads one reply per line from fd 4
// ($GATEHOUSE_GATEWAY_IN). A request is the provider sink's params, a JSON
// object ({"provider": "erp", "method": "GET", "path": "/invoices/7",
// "atom": "erp.read"}); the sink proposes it through the broker as a
// provider call of the same run by Gatehouse itself (broker.Internal) with
// the origin the broker established for the code effect, passed in
// process, so it is decided (the origin table, contracts, scopes, grounding,
// deployment rules), recorded and carried out like any agent's call, and
// the reply is the broker's EffectReply. The program cannot choose its
// origin: a request with an "origin" member other than the code's own is
// answered with a BAD_REQUEST reply and nothing is decided (the code's own
// origin is accepted and dropped, which re-encodes the request compactly).
// Every other member is the provider sink's to judge, so "run", "tenant"
// or "person" are refused there as unknown params. Calls are served one at
// a time, in order, while the program runs; the program still has no
// network of its own.
//
// Python programs get Gatehouse's client module beside them (gatehouse.py,
// embedded in the binary; the README documents it): gatehouse.call(provider,
// method, path, body=...) and gatehouse.get/post/put/patch/delete/head/
// options write the requests above and read the replies. A file the agent
// gives whose name Python would import as "gatehouse" is a bad request.
//
// # Operation contracts
//
// With a gateway bound, Describe reads a Python program's contract before
// the decision (see Reader and package contract): every operation
// (provider, method, path template) its own code can send, whether that
// is verified, and why not. The contract is recorded with the code
// effect's decision (journal.Decision.Contract). Each call the program
// then makes through the gateway is proposed with the program's contract
// for that provider on the context (broker.ContextWithProgramContract, the
// provider sink's seam: in process, never from what the program writes).
// For registry and model code, a mutating call inside a verified contract
// is allowed and recorded verified, one outside it is outside-contract,
// and with an unverified contract (or none read) every mutating call is
// unverified-model-code. Shipped and runtime code are handed no operations
// (nil), which holds them to the catalogue's contracts only. Either way
// the catalogue's contract of the integration a call names holds too. A
// program that is not Python has an unverified contract.
//
// # Stored integrations
//
// With a Registry, action "register" stores code for reuse,
// {"name": "erp-remind", "program": "python3", "source": "...",
// "effect": "write"}: decided (target the name, class write) and recorded
// with the contract read from the source; a verified contract sending a
// method beyond the declared effect is a bad request. A run of
// {"integration": "erp-remind", "stdin": ..., "args": ...} runs the stored
// source as origin registry, or as the origin of the work that stored it
// when that is trusted less (StoredBy.Origin: code a model agent stored
// runs as model code, so storing it launders no trust; an entry that
// names no registrar's origin runs as model), with its name as atom and
// its declared effect; its contract is the one read from the stored source (cached when
// stored, re-read by every broker's watch when the entry changes). A run
// whose stored source no longer matches its digest is UNAVAILABLE, and one
// whose verified contract now sends beyond the declared effect is a bad
// request: neither runs.
//
// The registry is one namespace for every tenant, so a name is held by the
// tenant whose work stored it, and within the tenant by the most trusted
// origin that stored it (MayReplace): another tenant's work, or model work
// over what shipped or registry work stored, storing under it is a bad
// request, refused before it is decided and again, as one compare-and-set,
// when the entry is written; an operator's entry (no tenant) is replaced
// by no agent's work. An entry another tenant's work stored does not run
// in this tenant's work (as if there were none); an operator's entry runs
// in anyone's. An approval of a run of a stored integration is bound
// to the source the name resolved to (broker.Proposal.Resolved), so code
// stored under the name after the approval asks again.
package code

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	_ "embed"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sandbox"
	"github.com/gatehouse/gatehouse/sinks/code/contract"
)

// The code sink's actions.
const (
	ActionRun      = "run"
	ActionRegister = "register"
)

// Client is the Python client module written beside every Python program
// as ClientFile.
//
//go:embed gatehouse.py
var Client []byte

// ClientFile is the client module's file name in the workspace.
const ClientFile = "gatehouse.py"

// Program is an interpreter agents may name.
type Program struct {
	Path  string // absolute path as the sandbox sees it, e.g. /usr/bin/python3
	Entry string // file name the source is written to, e.g. main.py
	// Python marks CPython: the client module is written beside the
	// program and its contract is read.
	Python bool
}

// Config configures the sink. Zero values are useful.
type Config struct {
	// Programs agents may run, by name. nil: python3 and sh.
	Programs map[string]Program
	// Limits bound every run; a request may ask for a shorter wall time.
	Limits sandbox.Limits
	// MaxInput bounds source, stdin and files together (default 4 MiB).
	MaxInput int
	// AllowSameUID lets programs run unconfined as the broker's own user
	// where no tier is confined and the sandbox cannot switch uids, instead
	// of answering UNAVAILABLE. Such a program can read the broker's keys.
	AllowSameUID bool
	// Gateway proposes the provider calls programs make through the
	// sandbox's gateway: the broker serving this sink. Usually nil here
	// and given later with Bind, since the broker is built after its sinks.
	// nil: programs get no gateway.
	Gateway Proposer
	// Reader reads Python programs' contracts; nil reads in the sink's own
	// sandbox with DefaultReaderLimits.
	Reader *Reader
	// Registry keeps stored integrations; nil: actions and runs naming an
	// integration are bad requests.
	Registry *Registry
}

// Proposer is what gateway calls are proposed through; *broker.Broker
// satisfies it.
type Proposer interface {
	Propose(ctx context.Context, from broker.Caller, sink policy.Sink, data []byte) *broker.EffectReply
}

// DefaultPrograms are the interpreters offered when Config.Programs is nil.
var DefaultPrograms = map[string]Program{
	"python3": {Path: "/usr/bin/python3", Entry: "main.py", Python: true},
	"sh":      {Path: "/bin/sh", Entry: "main.sh"},
}

// Params are the arguments of action run: a program and its source, or a
// stored integration by name.
type Params struct {
	Program     string            `json:"program,omitempty"`
	Source      string            `json:"source,omitempty"`
	Integration string            `json:"integration,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Stdin       string            `json:"stdin,omitempty"`
	Files       map[string][]byte `json:"files,omitempty"`
	TimeoutMS   int64             `json:"timeout_ms,omitempty"`
}

// RegisterParams are the arguments of action register.
type RegisterParams struct {
	Name    string             `json:"name"`
	Program string             `json:"program"`
	Source  string             `json:"source"`
	Effect  policy.EffectClass `json:"effect"`
}

// RegisterReply is what register answers.
type RegisterReply struct {
	Name     string                   `json:"name"`
	Digest   string                   `json:"digest"`
	Revision uint64                   `json:"revision"`
	Contract *journal.ProgramContract `json:"contract"`
}

// Reply is what the agent gets back.
type Reply struct {
	ExitCode  int                `json:"exit_code"`
	Killed    string             `json:"killed,omitempty"`
	Stdout    string             `json:"stdout"`
	Stderr    string             `json:"stderr"`
	Truncated bool               `json:"truncated,omitempty"`
	Tier      sandbox.Tier       `json:"tier"`
	Confined  bool               `json:"confined"`
	Files     []sandbox.FileInfo `json:"files"`
	Duration  string             `json:"duration"`
}

// Sink runs programs in a sandbox. Safe for concurrent use.
type Sink struct {
	sb      *sandbox.Sandbox
	cfg     Config
	reader  *Reader
	gateway atomic.Pointer[boundProposer]
}

type boundProposer struct{ Proposer }

var (
	_ broker.Sink = (*Sink)(nil)
	_ Proposer    = (*broker.Broker)(nil)
)

// New returns a code sink running programs in sb.
func New(sb *sandbox.Sandbox, cfg Config) *Sink {
	if cfg.Programs == nil {
		cfg.Programs = DefaultPrograms
	}
	if cfg.MaxInput <= 0 {
		cfg.MaxInput = 4 << 20
	}
	s := &Sink{sb: sb, cfg: cfg, reader: cfg.Reader}
	if s.reader == nil {
		s.reader = NewReader(sb, ReaderConfig{})
	}
	s.Bind(cfg.Gateway)
	return s
}

// Bind gives programs the gateway, proposing their calls through p (the
// broker serving this sink). It may be called once the broker exists,
// before or while serving; runs started after it get the gateway. Bind(nil)
// takes it away from later runs.
func (s *Sink) Bind(p Proposer) {
	if p == nil {
		s.gateway.Store(nil)
		return
	}
	s.gateway.Store(&boundProposer{p})
}

// Registry returns the registry of stored integrations, nil for none.
func (s *Sink) Registry() *Registry { return s.cfg.Registry }

// Name implements broker.Sink.
func (s *Sink) Name() policy.Sink { return policy.SinkCode }

type state struct {
	p        Params
	prog     Program
	lim      sandbox.Limits
	contract *contract.Contract // nil: not read (no gateway)
	register *Integration       // action register: the entry to store
}

// Describe implements broker.Sink.
func (s *Sink) Describe(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	switch req.Action {
	case ActionRun:
	case ActionRegister:
		return s.describeRegister(ctx, run, req)
	default:
		return nil, fmt.Errorf("%w: the code sink's actions are %q and %q", broker.ErrBadRequest, ActionRun, ActionRegister)
	}
	var p Params
	if err := broker.DecodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	origin := req.Origin
	var stored *Integration
	if p.Integration != "" {
		if p.Source != "" || p.Program != "" {
			return nil, fmt.Errorf("%w: give an integration, or a program and its source, not both", broker.ErrBadRequest)
		}
		in, src, err := s.stored(ctx, p.Integration)
		if err != nil {
			return nil, err
		}
		if t := in.StoredBy.Tenant; t != "" && t != run.For.Tenant {
			// Another tenant's work stored it: its code is that work's
			// words, not this tenant's, and the name says nothing of it.
			return nil, fmt.Errorf("%w: %w: %q", broker.ErrBadRequest, ErrNoIntegration, p.Integration)
		}
		stored, p.Program, p.Source = in, in.Program, string(src)
		// Stored code is held as registry code, whoever runs it, and never
		// as more than its registrar was: code a model wrote and stored
		// runs as model code (an entry naming no registrar's origin too).
		origin = policy.LeastTrusted(policy.OriginRegistry, in.StoredBy.Origin)
	}
	prog, ok := s.cfg.Programs[p.Program]
	if !ok {
		return nil, fmt.Errorf("%w: program %q is not one this broker runs (%v)", broker.ErrBadRequest, p.Program, slices.Sorted(maps.Keys(s.cfg.Programs)))
	}
	size := len(p.Source) + len(p.Stdin)
	for name, b := range p.Files {
		if name == prog.Entry {
			return nil, fmt.Errorf("%w: file %q would overwrite the program's source", broker.ErrBadRequest, name)
		}
		if prog.Python && shadowsClient(name) {
			return nil, fmt.Errorf("%w: file %q would be imported in place of Gatehouse's client module %s", broker.ErrBadRequest, name, ClientFile)
		}
		size += len(b)
	}
	for _, a := range p.Args {
		size += len(a)
	}
	if size > s.cfg.MaxInput {
		return nil, fmt.Errorf("%w: input is %d bytes, the limit is %d", broker.ErrBadRequest, size, s.cfg.MaxInput)
	}
	lim := s.cfg.Limits
	if p.TimeoutMS < 0 {
		return nil, fmt.Errorf("%w: timeout_ms must be positive", broker.ErrBadRequest)
	}
	if d := time.Duration(p.TimeoutMS) * time.Millisecond; d > 0 && (lim.Wall == 0 || d < lim.Wall) {
		lim.Wall = d
	}
	if origin == "" {
		origin = policy.OriginModel // code whose origin is not said is held to the strictest rules
	}
	if err := s.runnable(); err != nil {
		return nil, err
	}
	st := &state{p: p, prog: prog, lim: lim}
	prop := &broker.Proposal{
		Effect: policy.Effect{Sink: policy.SinkCode, Action: ActionRun, Origin: origin, Tool: req.Tool,
			Target: p.Program, Confined: s.sb.Confined()},
		Size:   int64(size),
		Digest: digestInput(&p),
		State:  st,
	}
	if stored != nil {
		prop.Effect.Atom, prop.Effect.Declared = stored.Name, stored.Effect
		// The params name the entry; what runs is its source now: an
		// approval of this run covers that source only.
		prop.Resolved = prop.Digest
	}
	if s.gateway.Load() != nil {
		st.contract = s.readContract(ctx, prog, []byte(p.Source), p.Files)
		prop.Contract = Record(st.contract)
		if stored != nil {
			if err := withinEffect(st.contract, stored.Effect); err != nil {
				return nil, fmt.Errorf("%w: the stored integration %s %v (its source was changed after it was stored)", broker.ErrBadRequest, stored.Name, err)
			}
		}
	}
	return prop, nil
}

// withinEffect says which operation of a verified contract its declared
// effect does not allow, nil when none.
func withinEffect(c *contract.Contract, effect policy.EffectClass) error {
	if !c.Verified {
		return nil // every mutating call is refused anyway (unverified-model-code)
	}
	for _, op := range c.Operations {
		if !declaredAllows(effect, op.Method) {
			return fmt.Errorf("sends %s, beyond the %s effect it declares; declare a wider effect or change the code", op, effect)
		}
	}
	return nil
}

// shadowsClient reports whether a file of this name would be imported as
// the module gatehouse.
func shadowsClient(name string) bool {
	first, _, _ := strings.Cut(name, "/")
	stem, _, _ := strings.Cut(first, ".")
	return stem == "gatehouse"
}

// readContract reads the contract of a program for prog.
func (s *Sink) readContract(ctx context.Context, prog Program, source []byte, files map[string][]byte) *contract.Contract {
	if !prog.Python {
		return contract.Unverified(contract.ReasonNotPython, "only Python programs' contracts are read; calls from this program are held as unverified")
	}
	return s.reader.Read(ctx, prog.Path, source, contract.Options{Files: slices.Sorted(maps.Keys(files))})
}

// stored fetches a stored integration for a run.
func (s *Sink) stored(ctx context.Context, name string) (*Integration, []byte, error) {
	if s.cfg.Registry == nil {
		return nil, nil, fmt.Errorf("%w: this broker keeps no registry of integrations", broker.ErrBadRequest)
	}
	in, src, err := s.cfg.Registry.Get(ctx, name)
	switch {
	case errors.Is(err, ErrNoIntegration):
		return nil, nil, fmt.Errorf("%w: %v", broker.ErrBadRequest, err)
	case err != nil:
		return nil, nil, fmt.Errorf("%w: %v", broker.ErrSinkUnavailable, err)
	}
	return in, src, nil
}

// describeRegister decides storing an integration: its contract is read
// now and recorded with the decision.
func (s *Sink) describeRegister(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	if s.cfg.Registry == nil {
		return nil, fmt.Errorf("%w: this broker keeps no registry of integrations", broker.ErrBadRequest)
	}
	var p RegisterParams
	if err := broker.DecodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	if !ValidIntegrationName(p.Name) {
		return nil, fmt.Errorf("%w: name must be 1 to 64 letters, digits, '.', '_' or '-'", broker.ErrBadRequest)
	}
	prog, ok := s.cfg.Programs[p.Program]
	if !ok {
		return nil, fmt.Errorf("%w: program %q is not one this broker runs (%v)", broker.ErrBadRequest, p.Program, slices.Sorted(maps.Keys(s.cfg.Programs)))
	}
	switch p.Effect {
	case policy.EffectRead, policy.EffectWrite, policy.EffectDestructive, policy.EffectNotify:
	default:
		return nil, fmt.Errorf("%w: effect must be read, write, destructive or notify", broker.ErrBadRequest)
	}
	if len(p.Source) > s.cfg.MaxInput {
		return nil, fmt.Errorf("%w: source is %d bytes, the limit is %d", broker.ErrBadRequest, len(p.Source), s.cfg.MaxInput)
	}
	c := s.readContract(ctx, prog, []byte(p.Source), nil)
	if err := withinEffect(c, p.Effect); err != nil {
		return nil, fmt.Errorf("%w: its code %v", broker.ErrBadRequest, err)
	}
	origin := req.Origin
	if origin == "" {
		origin = policy.OriginModel
	}
	in := &Integration{Name: p.Name, Program: p.Program, Effect: p.Effect, StoredBy: StoredBy{Run: run.ID,
		Tenant: run.For.Tenant, Person: run.For.Person, Agent: run.Agent, Origin: origin}}
	// Refused before it is decided when the name is another's (Put checks
	// again, atomically, when it stores).
	switch old, _, held, err := s.cfg.Registry.Holder(ctx, p.Name); {
	case err != nil:
		return nil, fmt.Errorf("%w: %v", broker.ErrSinkUnavailable, err)
	case held:
		if err := MayReplace(old, in.StoredBy); err != nil {
			return nil, fmt.Errorf("%w: integration %q: %w", broker.ErrBadRequest, p.Name, err)
		}
	}
	sum := sha256.Sum256([]byte(p.Source))
	return &broker.Proposal{
		Effect: policy.Effect{Sink: policy.SinkCode, Action: ActionRegister, Origin: origin, Tool: req.Tool,
			Target: p.Name, Atom: p.Name, Declared: p.Effect, Class: policy.EffectWrite, Confined: s.sb.Confined()},
		Size:     int64(len(p.Source)),
		Digest:   "sha256:" + hex.EncodeToString(sum[:]),
		Contract: Record(c),
		State:    &state{p: Params{Program: p.Program, Source: p.Source}, prog: prog, contract: c, register: in},
	}, nil
}

// declaredAllows is the policy's rule of which methods a declared effect
// allows: read and notify GET, HEAD, OPTIONS and POST; write all but
// DELETE; destructive all.
func declaredAllows(c policy.EffectClass, method string) bool {
	switch c {
	case policy.EffectRead, policy.EffectNotify:
		return method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "POST"
	case policy.EffectWrite:
		return method != "DELETE"
	case policy.EffectDestructive:
		return true
	}
	return false
}

// runnable refuses every run when programs would run unconfined as the
// broker's own user (see the package comment, "Who a program runs as").
func (s *Sink) runnable() error {
	if s.sb.Confined() || s.sb.SeparateUID() || s.cfg.AllowSameUID {
		return nil
	}
	return fmt.Errorf("%w: %w (%s): no sandbox tier is confined here, and unconfined code would run as Gatehouse's own user, with access to its keys, credentials and journal, so none runs; make a tier work (gatehouse sandbox check), run gatehouse serve as root so that code runs as a uid of --sandbox-uid, or use report mode, where it runs as the broker's user and the journal records it", broker.ErrSinkUnavailable, sandbox.ErrNoSeparateUID, s.sb.Report().Host.Err)
}

// digestInput is SHA-256 over everything the program is given, each part
// length-prefixed so no two inputs share a digest by moving bytes between
// parts.
func digestInput(p *Params) string {
	h := sha256.New()
	part := func(b []byte) {
		h.Write([]byte(strconv.Itoa(len(b)) + ":"))
		h.Write(b)
	}
	part([]byte(p.Program))
	part([]byte(p.Source))
	part([]byte(p.Stdin))
	for _, a := range p.Args {
		part([]byte(a))
	}
	for _, name := range slices.Sorted(maps.Keys(p.Files)) {
		part([]byte(name))
		part(p.Files[name])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Perform implements broker.Sink.
func (s *Sink) Perform(ctx context.Context, run *broker.Run, req *broker.EffectRequest, prop *broker.Proposal) (*broker.Performed, error) {
	st := prop.State.(*state)
	if st.register != nil {
		return s.performRegister(ctx, st)
	}
	files := map[string][]byte{st.prog.Entry: []byte(st.p.Source)}
	maps.Copy(files, st.p.Files)
	if st.prog.Python {
		files[ClientFile] = Client
	}
	spec := sandbox.Spec{
		Argv:   append([]string{st.prog.Path, st.prog.Entry}, st.p.Args...),
		Env:    []string{"PATH=/usr/bin:/bin", "HOME=/work", "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"},
		Stdin:  []byte(st.p.Stdin),
		Files:  files,
		Limits: st.lim,
	}
	var gw *gateway
	if b := s.gateway.Load(); b != nil {
		gw = &gateway{p: b.Proposer, run: run.ID, origin: prop.Effect.Origin, contract: st.contract}
		spec.Gateway = gw.serve
	}
	res, err := s.sb.Run(ctx, spec)
	if err != nil {
		return nil, err
	}
	done, err := Performed(res)
	if err != nil {
		return nil, err
	}
	if gw != nil {
		done.Result.Detail["gateway_calls"] = strconv.Itoa(gw.calls)
		done.Result.Detail["gateway_refused"] = strconv.Itoa(gw.refused)
	}
	return done, nil
}

// performRegister stores an integration.
func (s *Sink) performRegister(ctx context.Context, st *state) (*broker.Performed, error) {
	in := st.register
	in.StoredAt = time.Now().UTC()
	rev, err := s.cfg.Registry.Put(ctx, in, []byte(st.p.Source), st.contract)
	if err != nil {
		return nil, err
	}
	reply, err := json.Marshal(RegisterReply{Name: in.Name, Digest: in.Digest, Revision: rev, Contract: in.Contract})
	if err != nil {
		return nil, err
	}
	return &broker.Performed{Result: journal.Result{Status: "ok", Size: in.Size, Digest: in.Digest,
		Detail: map[string]string{"revision": strconv.FormatUint(rev, 10), "verified": strconv.FormatBool(in.Contract.Verified)}}, Reply: reply}, nil
}

// gateway proposes one program's calls. serve is called by the sandbox one
// request at a time and never after Run returns, so its counts need no lock.
type gateway struct {
	p        Proposer
	run      string
	origin   policy.Origin
	contract *contract.Contract // the program's, as read before it ran; nil when not read
	calls    int                // proposed to the broker
	refused  int                // answered with an error before anything was proposed
}

// gatewayAction is the provider sink's action (provider.ActionCall; this
// package does not import the provider sink).
const gatewayAction = "call"

// errGatewayOrigin: a request named an origin other than the code's own.
var errGatewayOrigin = fmt.Errorf("%w: a program calling through the gateway cannot choose its origin", broker.ErrBadRequest)

func (g *gateway) serve(ctx context.Context, line []byte) []byte {
	params, err := g.params(line)
	if err != nil {
		g.refused++
		code, advice := broker.CodeOf(err)
		return marshalReply(&broker.EffectReply{Run: g.run, Error: &broker.ErrorBody{Code: code, Message: err.Error() + "; " + advice}})
	}
	g.calls++
	data, err := json.Marshal(broker.EffectRequest{Run: g.run, Action: gatewayAction, Params: params})
	if err != nil { // params is a JSON object already decoded once
		return marshalReply(&broker.EffectReply{Run: g.run, Error: &broker.ErrorBody{Code: broker.CodeInternal, Message: err.Error()}})
	}
	// The origin and the program's contract travel in process, as the sink
	// established them for this program, never in a field it could write.
	return marshalReply(g.p.Propose(g.withContract(ctx, params), broker.Internal(g.origin), policy.SinkProvider, data))
}

// withContract puts on the context a call is proposed with the program's
// contract for the provider the call names (broker.ContextWithProgramContract,
// the provider sink's seam): for code held to its own contract (registry
// and model), its operations for that provider when verified, none (nil)
// when not, or when it was not read; for shipped and runtime code none,
// which holds it to nothing more than the catalogue's contracts.
func (g *gateway) withContract(ctx context.Context, params json.RawMessage) context.Context {
	if !untrusted(g.origin) || g.contract == nil {
		return broker.ContextWithProgramContract(ctx, nil)
	}
	var named struct {
		Provider string `json:"provider"`
	}
	_ = json.Unmarshal(params, &named) // a provider that is not a string is the provider sink's bad request
	return broker.ContextWithProgramContract(ctx, policyContract(g.contract, named.Provider))
}

// untrusted reports whether code of origin o is held to its own contract.
func untrusted(o policy.Origin) bool {
	switch o {
	case policy.OriginShipped, policy.OriginRuntime, policy.OriginDirect:
		return false
	}
	return true
}

// params checks a request is a JSON object and takes out an "origin"
// member (any case) that names the code's own origin; any other origin is
// errGatewayOrigin.
func (g *gateway) params(line []byte) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: a gateway request is one JSON object per line, the provider sink's params", broker.ErrBadRequest)
	}
	named := false
	for k, v := range obj {
		if !strings.EqualFold(k, "origin") {
			continue
		}
		var o policy.Origin
		if json.Unmarshal(v, &o) != nil || o != g.origin {
			return nil, fmt.Errorf("%w: this program's calls are decided as origin %s; leave origin out", errGatewayOrigin, g.origin)
		}
		delete(obj, k)
		named = true
	}
	if !named {
		return line, nil
	}
	return json.Marshal(obj)
}

func marshalReply(r *broker.EffectReply) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		b, _ = json.Marshal(broker.EffectReply{Run: r.Run, Error: &broker.ErrorBody{Code: broker.CodeInternal, Message: "the reply could not be encoded"}})
	}
	return b
}

// Performed turns a finished program into the journal's outcome and the
// agent's reply; the process sink reports the same way.
func Performed(res *sandbox.Result) (*broker.Performed, error) {
	reply, err := json.Marshal(Reply{
		ExitCode: res.ExitCode, Killed: res.Killed, Stdout: text(res.Stdout), Stderr: text(res.Stderr),
		Truncated: res.Truncated, Tier: res.Tier, Confined: res.Confined, Files: res.Files, Duration: res.Duration.String(),
	})
	if err != nil {
		return nil, err
	}
	return &broker.Performed{Result: Outcome(res), Reply: reply}, nil
}

// Outcome is the journal's record of a finished program: status "ok" for
// exit code 0, else "failed"; the exit code, the killing limit, the tier,
// the uid it ran as and whether that uid was other than the broker's
// (separate_uid), and the size and digest of its stdout. Never the output
// itself.
func Outcome(res *sandbox.Result) journal.Result {
	sum := sha256.Sum256(res.Stdout)
	r := journal.Result{
		Status: "ok", Size: int64(len(res.Stdout)), Digest: "sha256:" + hex.EncodeToString(sum[:]),
		Detail: map[string]string{
			"exit_code": strconv.Itoa(res.ExitCode), "tier": string(res.Tier), "confined": strconv.FormatBool(res.Confined),
			"uid": strconv.Itoa(res.UID), "separate_uid": strconv.FormatBool(res.SeparateUID),
		},
	}
	if res.ExitCode != 0 || res.Killed != "" {
		r.Status = "failed"
		r.Error = "exit"
	}
	if res.Killed != "" {
		r.Detail["killed"] = res.Killed
		r.Error = "limit"
	}
	return r
}

// text returns b as a string, invalid UTF-8 replaced, so the reply is
// valid JSON text.
func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }
