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
//
// A Registry value is not safe for concurrent change; Holder shares one
// read-only snapshot between goroutines and swaps it on reload.
package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
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
	Origin  policy.Origin `json:"origin,omitempty"`
	Added   time.Time     `json:"added"`
	Rotated time.Time     `json:"rotated,omitzero"`
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
	// Removed is when each agent name was last removed. An agent
	// registered under the name again is a new identity: runs opened for
	// the name before that moment, and peer messages sent to it before,
	// were the removed agent's and are never its (AgentRemovedAt).
	Removed []Removal `json:"removed,omitempty"`
}

// Removal is the last removal of an agent name.
type Removal struct {
	Name string    `json:"name"`
	At   time.Time `json:"at"`
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
	seen := map[string]bool{}
	for _, a := range r.Agents {
		if err := checkName(a.Name); err != nil {
			return err
		}
		if err := CheckOrigin(a.Origin); err != nil {
			return fmt.Errorf("agent %s: %w", a.Name, err)
		}
		if seen[a.Name] {
			return fmt.Errorf("agent %s: %w twice", a.Name, ErrExists)
		}
		seen[a.Name] = true
	}
	for _, rm := range r.Removed {
		if err := checkName(rm.Name); err != nil {
			return fmt.Errorf("removed: %w", err)
		}
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

// AddAgent registers a named agent; ErrExists if it is.
func (r *Registry) AddAgent(a Agent) error {
	if err := checkName(a.Name); err != nil {
		return err
	}
	if err := CheckOrigin(a.Origin); err != nil {
		return err
	}
	if _, ok := r.Agent(a.Name); ok {
		return fmt.Errorf("agent %s: %w", a.Name, ErrExists)
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

// RemoveAgent unregisters a named agent and records when (Removed);
// ErrNotFound if it is not registered.
func (r *Registry) RemoveAgent(name string) error {
	n := len(r.Agents)
	r.Agents = slices.DeleteFunc(r.Agents, func(a Agent) bool { return a.Name == name })
	if len(r.Agents) == n {
		return fmt.Errorf("agent %s: %w", name, ErrNotFound)
	}
	r.Removed = slices.DeleteFunc(r.Removed, func(rm Removal) bool { return rm.Name == name })
	r.Removed = append(r.Removed, Removal{Name: name, At: time.Now().UTC()})
	return nil
}

// AgentRemovedAt returns when an agent of this name was last removed.
func (r *Registry) AgentRemovedAt(name string) (time.Time, bool) {
	i := slices.IndexFunc(r.Removed, func(rm Removal) bool { return rm.Name == name })
	if i < 0 {
		return time.Time{}, false
	}
	return r.Removed[i].At, true
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
type Holder struct{ p atomic.Pointer[Registry] }

// NewHolder returns a holder of r.
func NewHolder(r *Registry) *Holder {
	h := &Holder{}
	h.Store(r)
	return h
}

// Load returns the register in force.
func (h *Holder) Load() *Registry {
	if r := h.p.Load(); r != nil {
		return r
	}
	return &Registry{}
}

// Store puts r in force.
func (h *Holder) Store(r *Registry) { h.p.Store(r) }

// AgentOrigin is the origin Gatehouse establishes for requests of agent
// identity id: model for the shared credential and for an agent the
// register does not know (or declares nothing for), else its declared
// origin.
func (h *Holder) AgentOrigin(id string) policy.Origin {
	if id == subject.Shared {
		return policy.OriginModel
	}
	a, ok := h.Load().Agent(id)
	if !ok {
		return policy.OriginModel
	}
	return a.EffectiveOrigin()
}

// AgentRemovedAt returns when an agent named id was last removed from
// the register: what was opened for or sent to the name until then was the
// removed agent's, never a later agent's of the same name.
func (h *Holder) AgentRemovedAt(id string) (time.Time, bool) {
	if id == subject.Shared {
		return time.Time{}, false
	}
	return h.Load().AgentRemovedAt(id)
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
