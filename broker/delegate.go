package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// Delegated work.
//
// An agent may hand part of its work to another agent (the peer sink's
// "delegate"). The recipient then works in a sub-run of its own, so its
// effects are decided, recorded and attributed separately, but the sub-run
// is for exactly the same person, under exactly the same mandate and scopes,
// as the run it came from: OpenChild copies them from the parent's stored
// record and takes nothing else from anyone. A sub-run of a sub-run inherits
// the same way, so every run of a piece of work carries what the
// application gave its first run, and nothing can widen it. The mandate is
// copied whole, its expiry included: a mandate that has expired is expired
// in every sub-run too.
//
// A sub-run lives as long as the work it belongs to: once the application
// closes any run it descends from, its effects are refused with
// ErrRunClosed (checkLineage, on every effect).

// MaxDelegationDepth bounds how deeply delegation nests: work an application
// opens is depth 0, and a run at this depth may not delegate further.
const MaxDelegationDepth = 8

// Peer actions, the peer sink's wire contract with agents.
const (
	PeerSend      = "send"      // a message to one agent, for the sender's run
	PeerDelegate  = "delegate"  // a task to one agent, in a sub-run opened for it
	PeerBroadcast = "broadcast" // a step result to every other run of the work
)

// PeerMessage is what an agent receives on its peer subject
// (subject.Peer). Sender and run come from the sending run's record, never
// from what the sending agent wrote.
type PeerMessage struct {
	Kind string `json:"kind"` // PeerSend, PeerDelegate or PeerBroadcast
	// Run is the run the message is about: the sender's run (send, which
	// the recipient cannot act in: a run accepts only its own agent), the
	// sub-run opened for the recipient (delegate), or the recipient's own
	// run of the same work (broadcast).
	Run string `json:"run"`
	// From is the sending run's agent ("" when the application's run has
	// none); FromRun is the sending run.
	From    string          `json:"from,omitempty"`
	FromRun string          `json:"from_run"`
	Body    json.RawMessage `json:"body,omitempty"` // send, broadcast
	Task    json.RawMessage `json:"task,omitempty"` // delegate
	Time    time.Time       `json:"time"`
	// Incarnation is the registration of the recipient the message is
	// for, set by the sending broker, never by the sender: the one in force
	// at a send, the one its run was opened for at a delegation or
	// broadcast (Run.Incarnation). It is handed over only to that
	// registration (peernext.go); "" for none recorded.
	Incarnation string `json:"incarnation,omitempty"`
}

// OpenChild opens a sub-run of the run parent for agent and returns it.
//
// The parent is read from the run store by id, so the sub-run inherits
// from the record the application wrote, never from a caller's copy. The
// child has the parent's principal, mandate (a deep copy, with its digest
// and expiry), scopes and opening application; only Agent is its own, and
// so only that agent's identity may act in it. Parent names the parent,
// Root the first run of the work, Depth is the parent's plus one. As with
// Open, run.open (naming the parent) is recorded before the child exists:
// a sub-run that cannot be recorded does not open (except in mode off,
// which records nothing).
//
// Errors: ErrUnknownRun; ErrRunClosed when the parent or a run it descends
// from is closed; ErrBadRequest when agent is not a valid agent name
// (subject.ValidAgent) or the parent is at MaxDelegationDepth; ErrJournal;
// ErrRunStore.
func (b *Broker) OpenChild(ctx context.Context, parent, agent string) (*Run, error) {
	if !subject.ValidAgent(agent) {
		return nil, fmt.Errorf("%w: agent %q must be 1 to %d letters, digits, '-' or '_'", ErrBadRequest, clip(agent), subject.MaxAgentLen)
	}
	p, err := b.runs.Get(ctx, parent)
	if err != nil {
		return nil, err
	}
	if p.Closed {
		return nil, fmt.Errorf("%w: %s", ErrRunClosed, p.ID)
	}
	if err := b.checkLineage(ctx, p); err != nil {
		return nil, err
	}
	if p.Depth >= MaxDelegationDepth {
		return nil, fmt.Errorf("%w: run %s is %d delegations deep, the limit", ErrBadRequest, p.ID, p.Depth)
	}
	now := b.now().UTC()
	root := p.Root
	if root == "" {
		root = p.ID
	}
	c := &Run{
		ID: NewRunID(now), For: p.For, Mandate: copyMandate(p.Mandate), MandateDigest: p.MandateDigest,
		Scopes: slices.Clone(nonNil(p.Scopes)), Agent: agent, App: p.App, Input: p.Input, Opened: now,
		Parent: p.ID, Root: root, Depth: p.Depth + 1,
	}
	c.Incarnation = b.AgentIncarnation(agent) // the delegate's registration now (caller.go)
	if b.mode != policy.ModeOff {
		ev, err := b.event(c.ID, journal.TypeRunOpen, "", journal.RunOpen{
			ActingFor: c.For, Mandate: c.Mandate, MandateDigest: c.MandateDigest, Scopes: c.Scopes, Agent: c.Agent, Parent: c.Parent,
			InputDigest: digestOf(c.Input),
		})
		if err != nil {
			return nil, err
		}
		if err := b.journal.Record(ctx, ev); err != nil {
			return nil, err
		}
	}
	if err := b.runs.Create(ctx, c); err != nil {
		return nil, err
	}
	b.log.Info("work delegated", "run", c.ID, "parent", c.Parent, "root", c.Root, "agent", c.Agent, "depth", c.Depth)
	return c, nil
}

// checkLineage returns ErrRunClosed when a run r descends from is closed.
// Work an application opened has no lineage and costs nothing here; a
// sub-run costs one (usually cached) run lookup per level.
func (b *Broker) checkLineage(ctx context.Context, r *Run) error {
	for level := 0; r.Parent != ""; level++ {
		if level >= MaxDelegationDepth {
			return fmt.Errorf("%w: run %s descends through more than %d runs", ErrRunStore, r.ID, MaxDelegationDepth)
		}
		p, err := b.runs.Get(ctx, r.Parent)
		if err != nil {
			return err
		}
		if p.Closed {
			return fmt.Errorf("%w: %s belongs to work %s, which the application closed", ErrRunClosed, r.ID, p.ID)
		}
		r = p
	}
	return nil
}

func copyMandate(m *policy.Mandate) *policy.Mandate {
	if m == nil {
		return nil
	}
	c := *m
	c.Systems = slices.Clone(m.Systems)
	c.Effects = slices.Clone(m.Effects)
	c.Scopes = slices.Clone(m.Scopes)
	return &c
}
