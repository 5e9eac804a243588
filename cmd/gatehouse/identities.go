package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"

	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/policy"
)

// parseAgentsFlag reads serve --agents: NAME or NAME=ORIGIN, each an agent
// with a credential of its own for as long as serve runs with the flag.
func parseAgentsFlag(list []string) ([]identity.Agent, error) {
	out := make([]identity.Agent, 0, len(list))
	for _, item := range list {
		name, origin, _ := strings.Cut(item, "=")
		a := identity.Agent{Name: name, Origin: policy.Origin(origin)}
		reg := &identity.Registry{}
		if err := reg.AddAgent(a); err != nil {
			return nil, usageError("--agents %q: %v", item, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// identities keeps serve's register in force: DATA_DIR/identities.json
// with the --agents flag's agents added, re-read whenever the file changes
// (gatehouse agents/apps write it by renaming a new file over it), and
// given to the embedded NATS (new users, changed permissions,
// connections of removed keys closed) and to the broker (declared origins
// and tenants). Run owns its goroutine until the returned stop is called.
type identities struct {
	dataDir string
	flag    []identity.Agent
	holder  *identity.Holder
	ns      *embedded.Server // nil on an external NATS
	// users gives the NATS server a register's users; nil is ns.Reload
	// (nothing on an external NATS). Tests see the order through it.
	users func(*identity.Registry) error
	log   *slog.Logger
	mu    sync.Mutex // serialises reload
}

// loadIdentities reads the register and merges the flag's agents; an agent
// the file declares with another origin is an error.
func loadIdentities(dataDir string, flagAgents []identity.Agent) (*identity.Registry, error) {
	reg, err := identity.Load(identity.Path(dataDir))
	if err != nil {
		return nil, err
	}
	for _, a := range flagAgents {
		if have, ok := reg.Agent(a.Name); ok {
			if have.EffectiveOrigin() != a.EffectiveOrigin() {
				return nil, fmt.Errorf("--agents %s declares origin %s; %s declares %s for it", a.Name, a.EffectiveOrigin(), identity.Path(dataDir), have.EffectiveOrigin())
			}
			continue
		}
		reg.Agents = append(reg.Agents, a)
	}
	return reg, nil
}

// reload re-reads the register; on error the one in force stays.
func (x *identities) reload() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	reg, err := loadIdentities(x.dataDir, x.flag)
	if err != nil {
		x.log.Error("identities not reloaded: the register in force stays", "err", err)
		return err
	}
	// Removals take effect before the users: a name removed, or removed
	// and added again, within one reload is first no identity at all, so
	// neither the removed agent (still connected until the NATS reload
	// closes it) nor the new one acts until the NATS server has the new
	// users. If that fails the name stays refused: closed, not open.
	x.holder.Store(withoutReplaced(x.holder.Load(), reg))
	users := x.users
	if users == nil && x.ns != nil {
		users = x.ns.Reload
	}
	if users != nil {
		if err := users(reg); err != nil {
			x.log.Error("identities not reloaded: the embedded NATS refused the users; the register in force stays", "err", err)
			return err
		}
	}
	x.holder.Store(reg)
	x.log.Info("identities reloaded", "agents", len(reg.Agents), "apps", len(reg.Apps))
	return nil
}

// withoutReplaced is cur without its agents that next removes or
// registers anew (another incarnation), with next's removals: in force
// while the NATS server's users change, no identity of those names acts,
// and work opened for them meanwhile is stamped for the registration that
// follows (identity.AfterRemoval).
func withoutReplaced(cur, next *identity.Registry) *identity.Registry {
	mid := *cur
	mid.Removed = slices.Clone(next.Removed)
	mid.Agents = nil
	for _, a := range cur.Agents {
		was, now := cur.AgentRegistration(a.Name), next.AgentRegistration(a.Name)
		if now.State == identity.Registered && now.Incarnation == was.Incarnation {
			mid.Agents = append(mid.Agents, a)
			continue
		}
		if !slices.ContainsFunc(mid.Removed, func(rm identity.Removal) bool { return rm.Name == a.Name }) {
			// Replaced without a removal on record (the file edited by hand).
			mid.Removed = append(mid.Removed, identity.Removal{Name: a.Name, Incarnation: was.Incarnation})
		}
	}
	return &mid
}

// watch reloads on every change of the register file until stop is
// called.
func (x *identities) watch(ctx context.Context) (stop func(), err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", identity.Path(x.dataDir), err)
	}
	if err := w.Add(x.dataDir); err != nil {
		w.Close()
		return nil, fmt.Errorf("watch %s: %w", x.dataDir, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Base(ev.Name) == identity.FileName && ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Rename|fsnotify.Remove) != 0 {
					_ = x.reload()
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				x.log.Warn("watching the identity register", "err", err)
			}
		}
	}()
	return func() { cancel(); <-done; _ = w.Close() }, nil
}
