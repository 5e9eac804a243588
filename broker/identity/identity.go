// Package identity is the deployment's register of the agents and
// applications that have NATS credentials of their own, and what the
// deployment declares about each: the origin of a deployment-owned agent's
// requests, the tenants an application may open work for.
//
// The register is a JSON file, DATA_DIR/identities.json (Path), written
// by `gatehouse agents` and `gatehouse apps` and read by serve at start and
// on SIGHUP. It holds names and declarations only; the credentials (nkey
// seeds) live beside it (package broker/embedded) and the NATS server
// enforces who holds which. Nothing in it comes from an agent.
//
// What a declaration means:
//
//   - An agent's Origin is the origin of every effect it proposes
//     (policy.Effect.Origin). Left out it is model: whatever holds an agent
//     credential is taken to run code the model chose, unless the
//     deployment says it runs something else, e.g. a deployment-owned
//     integration runner declared shipped. The shared agent credential is
//     always model; it cannot be declared.
//   - An application's Tenants bound the work it may open (and so close and
//     read): empty is any tenant. A bound application may not use the
//     approval endpoints, which span tenants.
//   - An agent's Incarnation names its registration: `gatehouse agents add`
//     draws a fresh random one each time a name is registered, so an agent
//     removed and registered again under the same name is another identity
//     (see Incarnation below).
//
// # Incarnations, and why not times
//
// A run opened for a named agent records a stamp of the registration the
// broker saw when it opened it (broker.Run.Incarnation, the Stamp of
// AgentRegistration), and a peer message the stamp of its recipient when
// a broker sent it; the broker accepts an effect in the run, and hands
// over the message, only to the registration that owns the stamp
// (Registration.Owns): the one it was made for; the first registration
// of a name also what was made for the name before it was registered; the
// registration following a removal also what was made for the name while
// it was removed. Nothing is compared with a clock: an earlier design
// recorded when a name was removed, by the CLI's clock, and compared it
// with a run's open time, by the broker's, so clock skew between machines
// let a re-added agent act on the removed one's runs (broker clock ahead)
// or refused it on its own (behind).
//
// Registers written before incarnations load unchanged: an agent without
// one whose name was never removed has the incarnation "", which is also
// the stamp of what was made for it before (its own: no other
// registration of the name existed). One without one whose name was
// removed before (re-added under an old Gatehouse) gets LegacyIncarnation,
// derived from the file, the same for every broker loading it: what was
// made for the name before the upgrade cannot be told from the removed
// agent's and is refused (the application opens new work), what is made
// since is its. Agents given with serve --agents are not in the file and
// have the incarnation "" for as long as serve runs with the flag.
//
// # What incarnations do not do
//
// The broker knows a requester by its name (the subject NATS let it
// publish on), never by its credential: incarnations tell apart the runs
// and messages made for two registrations of a name, not the two
// credentials. So the NATS server must refuse a removed agent's
// credential before the name is registered again. The embedded server
// does (serve reloads its users, closing the removed key's connections,
// between a register in force that knows no registration of the name
// and the next); on an external NATS the operator must reload nats-server
// with the removal (agents nats-conf) before adding the name again, or
// the old credential acts as the new registration until then.
//
// A message sent by name (peer send) is for the registration of the
// recipient in force when it is sent, even when the sender's work was
// delegated by an earlier registration of that name: a worker reporting
// back to a removed and re-added agent reaches the new one. Delegations
// and broadcasts are for the registration their run was opened for.
//
// Agents given with serve --agents have the incarnation "" and own what
// was stamped "" (First); a name moved from the flag to the file by
// `gatehouse agents add` keeps, as a rotation would, what was made for
// the flag's agent, since nothing removed it.
//
// A Registry value is not safe for concurrent change; Holder shares one
// read-only snapshot between goroutines and swaps it on reload.
package identity

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// FileName is the register's file name inside the data dir.
const FileName = "identities.json"

// Path is the register's file in dataDir.
func Path(dataDir string) string { return filepath.Join(dataDir, FileName) }

// Errors. Load and the edit methods wrap them with %w.
var (
	ErrBadRegistry = errors.New("identity register unreadable")
	ErrBadName     = errors.New("not a valid agent or application name")
	ErrBadOrigin   = errors.New("not an origin")
	ErrExists      = errors.New("already registered")
	ErrNotFound    = errors.New("not registered")
)

// Agent is one named agent.
type Agent struct {
	Name string `json:"name"`
	// Origin is the declared origin of the agent's requests; "" is model.
	Origin policy.Origin `json:"origin,omitempty"`
	// Incarnation names this registration of the name: fresh and random
	// at every AddAgent, kept by rotations, never reused. "" in registers
	// written before incarnations existed (see AgentIncarnation).
	Incarnation string `json:"incarnation,omitempty"`
	// Follows is AfterRemoval of the registration removed before this
	// one, if the name was removed before: what was made for the name
	// while it was removed is this registration's.
	Follows string    `json:"follows,omitempty"`
	Added   time.Time `json:"added"`
	Rotated time.Time `json:"rotated,omitzero"`
}

// EffectiveOrigin is a's origin, model when none is declared.
func (a Agent) EffectiveOrigin() policy.Origin {
	if a.Origin == "" {
		return policy.OriginModel
	}
	return a.Origin
}

// App is one named application.
type App struct {
	Name string `json:"name"`
	// Tenants bound the work the application may open; empty is any.
	Tenants []string  `json:"tenants,omitempty"`
	Added   time.Time `json:"added"`
	Rotated time.Time `json:"rotated,omitzero"`
}

// Registry is the register's content.
type Registry struct {
	Agents []Agent `json:"agents"`
	Apps   []App   `json:"apps"`
	// Removed lists the agent names removed at least once, each with its
	// last removal. An agent registered under the name again is a new
	// identity, told apart by its Incarnation; Removed only says that the
	// name had another registration before (what AgentIncarnation needs
	// for registers written before incarnations existed) and, for people,
	// when and which one was removed.
	Removed []Removal `json:"removed,omitempty"`
}

// Removal is the last removal of an agent name. At is the removing CLI's
// clock, for people only: no decision compares it with anything.
type Removal struct {
	Name string    `json:"name"`
	At   time.Time `json:"at"`
	// Incarnation is the removed registration's ("" if it had none).
	Incarnation string `json:"incarnation,omitempty"`
}

// Load reads the register at path; a missing file is an empty register.
// Errors wrap ErrBadRegistry.
//
// The register is authority (it declares origins), so a file another user
// could write is refused: one owned by another uid than this process's, or
// open to group or other writes, the target of a symbolic link included.
func Load(path string) (*Registry, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Registry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRegistry, err)
	}
	defer f.Close()
	if err := privateFile(f); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadRegistry, path, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRegistry, err)
	}
	var r Registry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadRegistry, path, err)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadRegistry, path, err)
	}
	return &r, nil
}

// privateFile fails unless f (what was opened, links followed) is a
// regular file of this process's uid that no group or other may write.
func privateFile(f *os.File) error {
	return ownFile(f, "declare any agent's origin", false)
}

// Validate checks every name, origin and tenant, and that no name is
// registered twice in a class.
func (r *Registry) Validate() error {
	removed := map[string]*Removal{}
	for i, rm := range r.Removed {
		if err := checkName(rm.Name); err != nil {
			return fmt.Errorf("removed: %w", err)
		}
		if err := checkIncarnation(rm.Incarnation); err != nil {
			return fmt.Errorf("removed %s: %w", rm.Name, err)
		}
		if removed[rm.Name] != nil {
			return fmt.Errorf("removed %s: listed twice (the register keeps the last removal of a name only)", rm.Name)
		}
		removed[rm.Name] = &r.Removed[i]
	}
	seen := map[string]bool{}
	for _, a := range r.Agents {
		if err := checkName(a.Name); err != nil {
			return err
		}
		if err := CheckOrigin(a.Origin); err != nil {
			return fmt.Errorf("agent %s: %w", a.Name, err)
		}
		if err := checkRegistration(a, removed[a.Name]); err != nil {
			return fmt.Errorf("agent %s: %w", a.Name, err)
		}
		if seen[a.Name] {
			return fmt.Errorf("agent %s: %w twice", a.Name, ErrExists)
		}
		seen[a.Name] = true
	}
	seen = map[string]bool{}
	for _, a := range r.Apps {
		if err := checkName(a.Name); err != nil {
			return err
		}
		for _, t := range a.Tenants {
			if t == "" || len(t) > 128 {
				return fmt.Errorf("app %s: tenant %q must be 1 to 128 characters", a.Name, t)
			}
		}
		if seen[a.Name] {
			return fmt.Errorf("app %s: %w twice", a.Name, ErrExists)
		}
		seen[a.Name] = true
	}
	return nil
}

// Save writes the register to path (mode 0600) by renaming a complete new
// file over it, so a reader never sees half a register. Concurrent Saves
// must be serialised by the caller (gatehouse agents holds a lock).
func (r *Registry) Save(path string) error {
	if err := r.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(Registry{Agents: nonNil(r.Agents), Apps: nonNil(r.Apps), Removed: r.Removed}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Agent returns the named agent.
func (r *Registry) Agent(name string) (Agent, bool) {
	i := slices.IndexFunc(r.Agents, func(a Agent) bool { return a.Name == name })
	if i < 0 {
		return Agent{}, false
	}
	return r.Agents[i], true
}

// App returns the named application.
func (r *Registry) App(name string) (App, bool) {
	i := slices.IndexFunc(r.Apps, func(a App) bool { return a.Name == name })
	if i < 0 {
		return App{}, false
	}
	return r.Apps[i], true
}

// AddAgent registers a named agent; ErrExists if it is. An agent given
// without an Incarnation gets a fresh one (NewIncarnation): every
// registration of a name is a new identity. One of a name removed before
// follows that removal (Follows), so it owns what was made for the name
// while no agent held it.
func (r *Registry) AddAgent(a Agent) error {
	if err := checkName(a.Name); err != nil {
		return err
	}
	if err := CheckOrigin(a.Origin); err != nil {
		return err
	}
	if err := checkIncarnation(a.Incarnation); err != nil {
		return err
	}
	if _, ok := r.Agent(a.Name); ok {
		return fmt.Errorf("agent %s: %w", a.Name, ErrExists)
	}
	if a.Incarnation == "" {
		a.Incarnation = NewIncarnation()
	}
	var rm *Removal
	if i := slices.IndexFunc(r.Removed, func(rm Removal) bool { return rm.Name == a.Name }); i >= 0 {
		rm = &r.Removed[i]
	}
	if a.Follows == "" && rm != nil {
		a.Follows = AfterRemoval(rm.Incarnation)
	}
	if err := checkRegistration(a, rm); err != nil {
		return fmt.Errorf("agent %s: %w", a.Name, err)
	}
	r.Agents = append(r.Agents, a)
	return nil
}

// AddApp registers a named application; ErrExists if it is.
func (r *Registry) AddApp(a App) error {
	if err := checkName(a.Name); err != nil {
		return err
	}
	if _, ok := r.App(a.Name); ok {
		return fmt.Errorf("app %s: %w", a.Name, ErrExists)
	}
	r.Apps = append(r.Apps, a)
	return r.Validate()
}

// RemoveAgent unregisters a named agent and records that the name was
// removed (Removed, with the time by this process's clock, for people, and
// the removed incarnation); ErrNotFound if it is not registered.
func (r *Registry) RemoveAgent(name string) error {
	gone, ok := r.Agent(name)
	if !ok {
		return fmt.Errorf("agent %s: %w", name, ErrNotFound)
	}
	inc := r.AgentRegistration(name).Incarnation
	r.Agents = slices.DeleteFunc(r.Agents, func(a Agent) bool { return a.Name == gone.Name })
	r.Removed = slices.DeleteFunc(r.Removed, func(rm Removal) bool { return rm.Name == name })
	r.Removed = append(r.Removed, Removal{Name: name, At: time.Now().UTC(), Incarnation: inc})
	return nil
}

// AgentRemovedAt returns when an agent of this name was last removed, by
// the removing CLI's clock: for people, never to decide with.
func (r *Registry) AgentRemovedAt(name string) (time.Time, bool) {
	i := slices.IndexFunc(r.Removed, func(rm Removal) bool { return rm.Name == name })
	if i < 0 {
		return time.Time{}, false
	}
	return r.Removed[i].At, true
}

// State says what the register knows of an agent name.
type State int

const (
	// Unregistered: the register never knew the name (an agent whose
	// credentials the deployment keeps elsewhere, on an external NATS, or
	// one not added yet).
	Unregistered State = iota
	// Registered: the name is registered.
	Registered
	// Removed: the name was removed and is not registered again: no
	// identity of that name exists.
	Removed
)

// Registration is what the register says of an agent name: which
// registration is in force, and so which runs and messages made for the
// name are that registration's (Owns). Stamp is what a broker records on
// a run opened, or a message sent, for the name now.
type Registration struct {
	State State
	// Incarnation is the registration's (Registered only; "" for an agent
	// of a register written before incarnations, never removed).
	Incarnation string
	// Stamp is what is recorded now on what is made for the name:
	// Incarnation when Registered, "" when Unregistered, and when Removed
	// AfterRemoval of the last removal, which the next registration of
	// the name owns (Follows).
	Stamp string
	// Follows is the stamp made while the name was removed, before this
	// registration, which it owns ("" for none).
	Follows string
	// First is true when the name was never removed: the registration
	// owns what was stamped "" (made before it was added, or before
	// incarnations existed), there being no other it could be.
	First bool
}

// Owns reports whether what was stamped stamp (a run's Incarnation, a
// peer message's) belongs to this registration. A removed name owns
// nothing; an unregistered one (whoever the NATS server lets use it) only
// what was stamped "", made while the register did not know it either.
func (g Registration) Owns(stamp string) bool {
	switch g.State {
	case Registered:
		return stamp == g.Incarnation || (g.Follows != "" && stamp == g.Follows) || (stamp == "" && g.First)
	case Unregistered:
		return stamp == ""
	}
	return false
}

// AfterRemoval is the stamp of what is made for a name while it is
// removed: "after-" and the removed registration's incarnation (which may
// be "", for one registered before incarnations).
func AfterRemoval(removed string) string { return afterPrefix + removed }

const afterPrefix = "after-"

// AgentRegistration is what the register says of name:
//
//   - registered with an Incarnation: that, following the last removal of
//     the name if there was one (Agent.Follows);
//   - registered without one (a register written before incarnations),
//     never removed: incarnation "", First: everything made for the name
//     before is its;
//   - registered without one, removed before (re-added under an old
//     Gatehouse): LegacyIncarnation, which nothing made before the
//     upgrade carries (those runs cannot be told from the removed
//     agent's, and are refused: open new work);
//   - removed and not registered again: State Removed, Stamp
//     AfterRemoval of the removed incarnation;
//   - never known: State Unregistered, Stamp "".
func (r *Registry) AgentRegistration(name string) Registration {
	var a *Agent
	var rm *Removal
	if i := slices.IndexFunc(r.Agents, func(a Agent) bool { return a.Name == name }); i >= 0 {
		a = &r.Agents[i]
	}
	if i := slices.IndexFunc(r.Removed, func(rm Removal) bool { return rm.Name == name }); i >= 0 {
		rm = &r.Removed[i]
	}
	return registration(a, rm)
}

// registration is what a name's entry a (nil: none) and last removal rm
// (nil: none) make of it (AgentRegistration).
func registration(a *Agent, rm *Removal) Registration {
	switch {
	case a != nil:
		g := Registration{State: Registered, Incarnation: a.Incarnation, Follows: a.Follows, First: rm == nil}
		if g.Incarnation == "" && rm != nil {
			g.Incarnation = LegacyIncarnation(*a)
		}
		g.Stamp = g.Incarnation
		return g
	case rm != nil:
		return Registration{State: Removed, Stamp: AfterRemoval(rm.Incarnation)}
	}
	return Registration{State: Unregistered}
}

// LegacyIncarnation is the incarnation of a, registered without one after
// an agent of its name was removed: "legacy-" and a digest of its name and
// Added time, which identify that registration (Added is a time, but used
// here as a name, never compared), the same wherever the file is loaded.
func LegacyIncarnation(a Agent) string {
	sum := sha256.Sum256([]byte("gatehouse agent incarnation\x00" + a.Name + "\x00" + a.Added.UTC().Format(time.RFC3339Nano)))
	return "legacy-" + hex.EncodeToString(sum[:12])
}

// NewIncarnation returns a fresh incarnation: 128 random bits, in
// lowercase base32 after "i-".
func NewIncarnation() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "i-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// MaxIncarnationLen bounds an incarnation in the register.
const MaxIncarnationLen = 64

// ErrBadIncarnation is an incarnation the register cannot hold.
var ErrBadIncarnation = errors.New("not an incarnation")

func checkIncarnation(inc string) error {
	if len(inc) > MaxIncarnationLen {
		return fmt.Errorf("%w: %d characters, at most %d", ErrBadIncarnation, len(inc), MaxIncarnationLen)
	}
	for _, c := range inc {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("%w: %q: lowercase letters, digits and '-' only", ErrBadIncarnation, inc)
		}
	}
	return nil
}

// checkRegistration checks agent a's incarnation and what it follows
// against rm, the last removal of its name (nil: none), so that a
// register edited by hand cannot make a registration own what another
// was given: an incarnation is never that of the removed registration
// (they are never reused) nor a stamp of a removed name ("after-…"), and
// a registration follows only the removal the register records.
func checkRegistration(a Agent, rm *Removal) error {
	if err := checkIncarnation(a.Incarnation); err != nil {
		return err
	}
	if err := checkIncarnation(a.Follows); err != nil {
		return fmt.Errorf("follows: %w", err)
	}
	if strings.HasPrefix(a.Incarnation, afterPrefix) {
		return fmt.Errorf("%w: %q: %q begins what is made for a removed name, never a registration; leave the incarnation out and the next `gatehouse agents add` makes one", ErrBadIncarnation, a.Incarnation, afterPrefix)
	}
	if rm != nil && a.Incarnation != "" && a.Incarnation == rm.Incarnation {
		return fmt.Errorf("%w: %q is the incarnation of the registration removed before, and incarnations are never reused: `gatehouse agents remove` and `add` the agent again to register it anew", ErrBadIncarnation, a.Incarnation)
	}
	switch {
	case a.Follows == "":
	case rm == nil:
		return fmt.Errorf("follows: %w: %q names a removal of the name the register does not record", ErrBadIncarnation, a.Follows)
	case a.Follows != AfterRemoval(rm.Incarnation):
		return fmt.Errorf("follows: %w: %q, but the name's last removal is %q, which the registration after it follows as %q", ErrBadIncarnation, a.Follows, rm.Incarnation, AfterRemoval(rm.Incarnation))
	}
	return nil
}

// RemoveApp unregisters a named application; ErrNotFound if it is not.
func (r *Registry) RemoveApp(name string) error {
	n := len(r.Apps)
	r.Apps = slices.DeleteFunc(r.Apps, func(a App) bool { return a.Name == name })
	if len(r.Apps) == n {
		return fmt.Errorf("app %s: %w", name, ErrNotFound)
	}
	return nil
}

// Touch records that name's credential of class c was rotated at t.
func (r *Registry) Touch(c subject.Class, name string, t time.Time) error {
	if c == subject.ClassApp {
		for i := range r.Apps {
			if r.Apps[i].Name == name {
				r.Apps[i].Rotated = t
				return nil
			}
		}
		return fmt.Errorf("app %s: %w", name, ErrNotFound)
	}
	for i := range r.Agents {
		if r.Agents[i].Name == name {
			r.Agents[i].Rotated = t
			return nil
		}
	}
	return fmt.Errorf("agent %s: %w", name, ErrNotFound)
}

func checkName(name string) error {
	if !subject.ValidName(name) {
		return fmt.Errorf("%w: %q must be 1 to %d letters, digits, '-' or '_', starting with a letter or digit", ErrBadName, name, subject.MaxAgentLen)
	}
	return nil
}

// CheckOrigin accepts "" (model) and the five origins.
func CheckOrigin(o policy.Origin) error {
	switch o {
	case "", policy.OriginShipped, policy.OriginRuntime, policy.OriginRegistry, policy.OriginModel, policy.OriginDirect:
		return nil
	}
	return fmt.Errorf("%w: %q is not shipped, runtime, registry, model or direct", ErrBadOrigin, o)
}

// Holder shares the register in force between goroutines: readers get a
// snapshot they must not change, reload swaps it whole. The zero value
// holds an empty register. Safe for concurrent use.
type Holder struct {
	p atomic.Pointer[indexed]

	mu      sync.Mutex
	changed chan struct{} // closed by the next Store
}

// NewHolder returns a holder of r.
func NewHolder(r *Registry) *Holder {
	h := &Holder{}
	h.Store(r)
	return h
}

// indexed is a register in force with its agents and removals by name,
// so that what every effect asks costs no scan of the register.
type indexed struct {
	reg     *Registry
	agents  map[string]*Agent
	removed map[string]*Removal
}

func index(r *Registry) *indexed {
	x := &indexed{reg: r, agents: make(map[string]*Agent, len(r.Agents)), removed: make(map[string]*Removal, len(r.Removed))}
	for i := range r.Agents {
		if _, dup := x.agents[r.Agents[i].Name]; !dup { // the first, as Agent finds it
			x.agents[r.Agents[i].Name] = &r.Agents[i]
		}
	}
	for i := range r.Removed {
		if _, dup := x.removed[r.Removed[i].Name]; !dup {
			x.removed[r.Removed[i].Name] = &r.Removed[i]
		}
	}
	return x
}

func (h *Holder) loadIndexed() *indexed {
	if x := h.p.Load(); x != nil {
		return x
	}
	return index(&Registry{})
}

// Load returns the register in force.
func (h *Holder) Load() *Registry { return h.loadIndexed().reg }

// Store puts r in force, and tells every Changed channel taken before.
// r must not change from then on.
func (h *Holder) Store(r *Registry) {
	h.p.Store(index(r))
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
}

// Changed returns a channel closed at the next Store: what holds state
// derived from an identity (an MCP session authenticated to an agent)
// takes it, then looks at the register, and looks again once it closes.
func (h *Holder) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	return h.changed
}

// AgentOrigin is the origin Gatehouse establishes for requests of agent
// identity id: model for the shared credential and for an agent the
// register does not know (or declares nothing for), else its declared
// origin.
func (h *Holder) AgentOrigin(id string) policy.Origin {
	if id == subject.Shared {
		return policy.OriginModel
	}
	a, ok := h.loadIndexed().agents[id]
	if !ok {
		return policy.OriginModel
	}
	return a.EffectiveOrigin()
}

// AgentRegistration is Registry.AgentRegistration of the register in
// force; the shared credential is Unregistered.
func (h *Holder) AgentRegistration(id string) Registration {
	if id == subject.Shared {
		return Registration{State: Unregistered}
	}
	x := h.loadIndexed()
	return registration(x.agents[id], x.removed[id])
}

// AppTenants returns the tenants application identity id may open work
// for, and whether it is bound to them at all (false: any tenant).
func (h *Holder) AppTenants(id string) ([]string, bool) {
	if id == subject.Shared {
		return nil, false
	}
	a, ok := h.Load().App(id)
	if !ok || len(a.Tenants) == 0 {
		return nil, false
	}
	return a.Tenants, true
}
