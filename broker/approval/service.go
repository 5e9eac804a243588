package approval

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// More sentinels for the broker's and the CLI's paths.
var (
	// ErrAlreadyClaimed: the approved action was started already (at most
	// once), or is not approved.
	ErrAlreadyClaimed = errors.New("approval: action already started or not approved")
	// ErrWrongState: the request is not in a state that allows this
	// (reconciling one whose outcome is known, ...).
	ErrWrongState = errors.New("approval: request is not in a state that allows this")
	// ErrBadAssertion: a signed assertion does not verify against the
	// configured key, or names another action than the request's.
	ErrBadAssertion = errors.New("approval: assertion not verified")
)

// Journal records events durably (broker.Journal).
type Journal interface {
	Record(ctx context.Context, e *journal.Event) error
}

// Config configures a Service. Zero values are useful.
type Config struct {
	Now    func() time.Time // nil is time.Now
	Logger *slog.Logger     // nil discards
	// Key verifies assertions signed by the deployment's backend; nil
	// refuses every assertion.
	Key ed25519.PublicKey
	// ClaimTimeout is how long a claim may stay unsettled before Sweep
	// marks it outcome_unknown (default 5 minutes).
	ClaimTimeout time.Duration
	// IntentTimeout is how long a change may stay half done (its journal
	// event maybe recorded, the store not yet changed) before another
	// caller finishes it (default 1 minute; see Intent).
	IntentTimeout time.Duration
}

// Service keeps approval requests in a Store and records every change in
// the run's journal chain. Safe for concurrent use by any number of
// goroutines and processes sharing the store: every change is a
// compare-and-swap, so the first decision stands and an approved action is
// claimed at most once.
//
// Journal before store: a decision, a reopening, a settlement and a
// reconciliation are durable in the journal before the store shows them
// (see Intent), so a crash can never leave an approved request with no
// recorded approval.decision. Two steps are the other way round, on
// purpose: Request stores the request before recording approval.request
// (a request nobody has recorded can only lead to a decision, which is
// recorded before it counts), and Claim wins the store's compare-and-swap
// before recording approval.claim (at most once needs the store to pick
// the one winner first; the action starts only after the claim is
// durable, and a claim that cannot be recorded is taken back).
//
// Who may not approve: the requester, which is both the agent that
// proposed the action and the person the work is for (an approval is a
// second person's check).
type Service struct {
	store   Store
	journal Journal
	now     func() time.Time
	log     *slog.Logger
	key     ed25519.PublicKey
	timeout time.Duration

	intentTimeout time.Duration
}

// New returns a service over store recording into j.
func New(store Store, j Journal, cfg Config) *Service {
	s := &Service{store: store, journal: j, now: cfg.Now, log: cfg.Logger, key: cfg.Key, timeout: cfg.ClaimTimeout}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.timeout <= 0 {
		s.timeout = 5 * time.Minute
	}
	s.intentTimeout = cfg.IntentTimeout
	if s.intentTimeout <= 0 {
		s.intentTimeout = time.Minute
	}
	return s
}

// Claim is the start of an approved action.
type Claim struct {
	Effect string
	Time   time.Time
}

// Settlement is how an approved action finished.
type Settlement struct {
	Effect string
	Status string // the effect.outcome status: ok, failed
	Time   time.Time
}

// RequestKeyPrefix starts the store key of every approval request; a
// Store's Watch need only deliver writes under it.
const RequestKeyPrefix = "req."

const (
	reqPrefix = RequestKeyPrefix
	digPrefix = "dig."
)

func reqKey(id string) string { return reqPrefix + id }

func digKey(run, digest string) string {
	return digPrefix + hex.EncodeToString([]byte(run)) + "." + strings.TrimPrefix(digest, "sha256:")
}

func newID(now time.Time) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("ap_%s_%s", now.UTC().Format("20060102T150405"), hex.EncodeToString(b[:]))
}

// ValidID reports whether id can be a request id (and a KV key part).
func ValidID(id string) bool {
	if !strings.HasPrefix(id, "ap_") || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func (s *Service) load(ctx context.Context, id string) (*Request, uint64, error) {
	if !ValidID(id) {
		return nil, 0, fmt.Errorf("%w: %q", ErrNotFound, clip(id))
	}
	raw, rev, err := s.store.Get(ctx, reqKey(id))
	if errors.Is(err, ErrNoSuchKey) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, 0, err
	}
	var r Request
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, 0, fmt.Errorf("%w: request %s: %v", ErrStore, id, err)
	}
	return &r, rev, nil
}

// change applies f to the stored request with compare-and-swap, retrying on
// a lost race (f sees the winner's state and decides again). f returns the
// error to give up with.
func (s *Service) change(ctx context.Context, id string, f func(r *Request) error) (*Request, error) {
	for range 16 {
		r, rev, err := s.load(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := f(r); err != nil {
			return r, err
		}
		r.Updated = s.now().UTC()
		raw, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		if _, err := s.store.Update(ctx, reqKey(id), raw, rev); errors.Is(err, ErrRevisionChanged) {
			continue
		} else if err != nil {
			return nil, err
		}
		return r, nil
	}
	return nil, fmt.Errorf("%w: request %s kept changing", ErrStore, id)
}

// record records one event in r's run; id "" is a fresh random one.
func (s *Service) record(ctx context.Context, r *Request, id string, typ journal.Type, data any) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	if id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = "ev_" + now.Format("20060102T150405.000000000") + "_" + hex.EncodeToString(b[:])
	}
	ev := &journal.Event{V: journal.Version, ID: id, Run: r.Run, Type: typ, Time: now, Effect: r.Effect, Data: raw}
	if err := s.journal.Record(ctx, ev); err != nil {
		return fmt.Errorf("record %s: %w", typ, err)
	}
	return nil
}

// Hold is what the broker knows of an effect that needs a person.
type Hold struct {
	Run, Effect, Tenant, Person, Agent string
	Sink, Action                       string
	ActionDigest                       string
	Arguments                          []Argument
	Checks                             []Check
	Need                               policy.ApprovalNeed
}

// Find returns the current request for the exact action (run and digest),
// or ErrNotFound.
func (s *Service) Find(ctx context.Context, run, digest string) (*Request, error) {
	raw, _, err := s.store.Get(ctx, digKey(run, digest))
	if errors.Is(err, ErrNoSuchKey) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	r, _, err := s.loadWait(ctx, string(raw))
	return r, err
}

// loadWait loads a request another process indexed a moment ago and may
// not have written yet.
func (s *Service) loadWait(ctx context.Context, id string) (*Request, uint64, error) {
	for i := 0; ; i++ {
		r, rev, err := s.load(ctx, id)
		if !errors.Is(err, ErrNotFound) || i >= 50 {
			return r, rev, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Request returns the request for h's exact action, creating it (pending,
// approval.request recorded) when there is none or the last one finished
// (settled or reconciled: a new instance of the action asks again).
// created reports whether this call made it.
func (s *Service) Request(ctx context.Context, h Hold) (r *Request, created bool, err error) {
	dk := digKey(h.Run, h.ActionDigest)
	now := s.now().UTC()
	nr := &Request{
		ID: newID(now), Run: h.Run, Effect: h.Effect, Tenant: h.Tenant, Person: h.Person, Agent: h.Agent,
		Sink: h.Sink, Action: h.Action, ActionDigest: h.ActionDigest, Arguments: h.Arguments, Checks: h.Checks,
		Rule: h.Need.Rule, Roles: h.Need.Roles, Assurance: h.Need.Assurance, Destructive: h.Need.Destructive,
		Requested: now, Updated: now, State: StatePending,
	}
	for range 8 {
		raw, rev, err := s.store.Get(ctx, dk)
		switch {
		case errors.Is(err, ErrNoSuchKey):
			if _, err := s.store.Create(ctx, dk, []byte(nr.ID)); errors.Is(err, ErrKeyExists) {
				continue
			} else if err != nil {
				return nil, false, err
			}
		case err != nil:
			return nil, false, err
		default:
			cur, _, err := s.loadWait(ctx, string(raw))
			if err != nil {
				return nil, false, err
			}
			if cur.State != StateSettled && cur.State != StateReconciled {
				return cur, false, nil
			}
			if _, err := s.store.Update(ctx, dk, []byte(nr.ID), rev); errors.Is(err, ErrRevisionChanged) {
				continue
			} else if err != nil {
				return nil, false, err
			}
		}
		body, err := json.Marshal(nr)
		if err != nil {
			return nil, false, err
		}
		if _, err := s.store.Create(ctx, reqKey(nr.ID), body); err != nil {
			return nil, false, err
		}
		names := make([]string, len(h.Arguments))
		for i, a := range h.Arguments {
			names[i] = a.Name
		}
		if err := s.record(ctx, nr, eventID(nr, 0), journal.TypeApprovalRequest, journal.ApprovalRequest{
			Approval: nr.ID, ActionDigest: nr.ActionDigest, Sink: policy.Sink(nr.Sink), Action: nr.Action, Arguments: names,
			Rule: nr.Rule, Roles: nonNil(nr.Roles), Assurance: nr.Assurance, Destructive: nr.Destructive, Checks: len(nr.Checks),
		}); err != nil {
			return nr, true, err
		}
		s.log.Info("approval requested", "approval", nr.ID, "run", nr.Run, "rule", nr.Rule)
		return nr, true, nil
	}
	return nil, false, fmt.Errorf("%w: index for %s kept changing", ErrStore, h.ActionDigest)
}

// Get returns one request.
func (s *Service) Get(ctx context.Context, id string) (*Request, error) {
	r, _, err := s.load(ctx, id)
	return r, err
}

// List returns requests matching f, newest first. It reads the stored
// requests through the store's Lister when it has one (both stores do),
// and otherwise lists the keys and gets them listGets at a time; either
// way each request is listed once, as stored at some moment during the
// call (as Get would have returned it then), not as one snapshot.
func (s *Service) List(ctx context.Context, f Filter) ([]Request, error) {
	entries, err := s.entries(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Request, 0, len(entries))
	for _, e := range entries {
		id := strings.TrimPrefix(e.Key, reqPrefix)
		if !ValidID(id) {
			continue
		}
		var r Request
		if err := json.Unmarshal(e.Value, &r); err != nil {
			return nil, fmt.Errorf("%w: request %s: %v", ErrStore, id, err)
		}
		if f.Tenant != "" && r.Tenant != f.Tenant {
			continue
		}
		if len(f.States) > 0 && !slices.Contains(f.States, r.State) {
			continue
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Requested.Equal(out[j].Requested) {
			return out[i].Requested.After(out[j].Requested)
		}
		return out[i].ID > out[j].ID
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// listGets bounds the concurrent Gets of List on a store that is not a
// Lister.
const listGets = 16

// entries reads every stored request: in one pass from a Lister, else
// key by key, listGets at a time.
func (s *Service) entries(ctx context.Context) ([]Entry, error) {
	if l, ok := s.store.(Lister); ok {
		return l.Entries(ctx, reqPrefix)
	}
	keys, err := s.store.Keys(ctx, reqPrefix)
	if err != nil {
		return nil, err
	}
	return getConcurrently(ctx, s.store, keys, listGets)
}

// Watch delivers every request as it changes, until ctx ends.
func (s *Service) Watch(ctx context.Context) (<-chan Request, error) {
	in, err := s.store.Watch(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan Request, 64)
	go func() {
		defer close(out)
		for raw := range in {
			var r Request
			if json.Unmarshal(raw, &r) != nil {
				continue
			}
			select {
			case out <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// Standing is whether someone may decide (or reconcile) a request, and
// if not, why: the same check Decide and Reconcile make, for a page that
// offers only what its user may do and says why not.
type Standing struct {
	// OK: they may.
	OK bool
	// Requester: they asked for the action (its agent, or the person the
	// work is for), and nobody approves their own request.
	Requester bool
	// NeedRoles lists the rule's roles when they hold none of them.
	NeedRoles []string
	// NeedAssurance is the rule's least assurance when theirs is less.
	NeedAssurance string
	// Unnamed: no approver was named.
	Unnamed bool
}

// StandingOf checks approver, holding roles at assurance, against r: not
// the requester, one of the rule's roles, at least its assurance.
func StandingOf(r *Request, approver string, roles []string, assurance string) Standing {
	switch {
	case strings.TrimSpace(approver) == "":
		return Standing{Unnamed: true}
	case approver == r.Agent || approver == r.Person:
		return Standing{Requester: true}
	}
	var st Standing
	g := &policy.ApprovalGrant{Roles: roles, Assurance: assurance}
	if !g.Satisfies(policy.ApprovalNeed{Roles: r.Roles}) {
		st.NeedRoles = r.Roles
	}
	if !policy.AssuranceAtLeast(assurance, r.Assurance) {
		st.NeedAssurance = r.Assurance
	}
	st.OK = st.NeedRoles == nil && st.NeedAssurance == ""
	return st
}

// Err is the standing as an error: nil when OK, else ErrNotAllowed with
// the reason.
func (st Standing) Err(approver string) error {
	switch {
	case st.OK:
		return nil
	case st.Unnamed:
		return fmt.Errorf("%w: no approver named", ErrNotAllowed)
	case st.Requester:
		return fmt.Errorf("%w: %s asked for this action and cannot approve it", ErrNotAllowed, approver)
	case st.NeedRoles != nil:
		return fmt.Errorf("%w: %s holds none of the roles %s", ErrNotAllowed, approver, strings.Join(st.NeedRoles, ", "))
	}
	return fmt.Errorf("%w: %s's assurance is less than the %q this rule asks", ErrNotAllowed, approver, st.NeedAssurance)
}

// allowed checks d's approver against r (StandingOf). A refusal needs the
// same standing as an approval.
func allowed(r *Request, d Decision) error {
	return StandingOf(r, d.Approver, d.Roles, d.Assurance).Err(d.Approver)
}

// MaxReason is the longest reason, in characters, a decision or a
// reconciliation may carry (ErrBadInput beyond): it is journaled and
// shown with every update of the queue.
const MaxReason = 500

// ErrBadInput: a decision or reconciliation whose fields cannot be taken
// as they are (a reason over MaxReason characters).
var ErrBadInput = errors.New("approval: decision input refused")

func checkReason(reason string) error {
	if n := utf8.RuneCountInString(reason); n > MaxReason {
		return fmt.Errorf("%w: the reason is %d characters; at most %d", ErrBadInput, n, MaxReason)
	}
	return nil
}

// Decide records a person's decision on a pending (or reopened) request.
// The first decision stands: a later one, or one made while another is
// being recorded, gets ErrAlreadyDecided. ErrNotAllowed: the approver is
// the requester, holds none of the rule's roles, or has too little
// assurance. approval.decision (or approval.refused) is durable in the
// run's journal before the store says approved or refused; a journal
// failure is returned and the request stays as it was.
func (s *Service) Decide(ctx context.Context, id string, d Decision) (*Request, error) {
	if err := checkReason(d.Reason); err != nil {
		return nil, err
	}
	if d.Time.IsZero() {
		d.Time = s.now().UTC()
	}
	if d.Authenticated == "" {
		d.Authenticated = "dashboard-session"
	}
	typ := journal.TypeApprovalDecision
	if !d.Approved {
		typ = journal.TypeApprovalRefused
	}
	r, err := s.writeAhead(ctx, id, typ, ErrAlreadyDecided, func(r *Request) (string, any, error) {
		if r.State != StatePending && r.State != StateReopened {
			return "", nil, fmt.Errorf("%w: %s is %s", ErrAlreadyDecided, r.ID, r.State)
		}
		if err := allowed(r, d); err != nil {
			return "", nil, err
		}
		dd := d
		r.Decision = &dd
		r.State = StateRefused
		if d.Approved {
			r.State = StateApproved
		}
		return r.Effect, journal.ApprovalDecision{Approval: r.ID, ActionDigest: r.ActionDigest, Approved: d.Approved, Approver: d.Approver,
			Roles: nonNil(d.Roles), Assurance: d.Assurance, Authenticated: d.Authenticated, Verified: d.Authenticated == "signed-assertion", Reason: d.Reason}, nil
	})
	if err != nil {
		return r, err
	}
	s.log.Info("approval decided", "approval", r.ID, "approved", d.Approved, "approver", d.Approver, "authenticated", d.Authenticated)
	return r, nil
}

// Claim marks the approved request as started by effect: exactly one
// caller wins, every other gets ErrAlreadyClaimed. The store's
// compare-and-swap picks the winner first; approval.claim is then durable
// before Claim returns nil, and the caller performs the action only when
// it does. A claim that cannot be recorded is taken back (the action did
// not start) and the journal's error returned.
func (s *Service) Claim(ctx context.Context, id, effect string) (*Request, error) {
	if err := s.finishStale(ctx, id); err != nil {
		return nil, err
	}
	step := 0
	r, err := s.change(ctx, id, func(r *Request) error {
		if r.State != StateApproved || r.Intent != nil {
			return fmt.Errorf("%w: %s is %s", ErrAlreadyClaimed, r.ID, r.State)
		}
		r.State = StateClaimed
		r.Claim = &Claim{Effect: effect, Time: s.now().UTC()}
		r.Step++
		step = r.Step
		return nil
	})
	if err != nil {
		return r, err
	}
	cr := *r
	cr.Effect = effect
	if err := s.record(ctx, &cr, eventID(r, step), journal.TypeApprovalClaim, journal.ApprovalClaim{Approval: r.ID, ActionDigest: r.ActionDigest}); err != nil {
		back, berr := s.change(ctx, id, func(r *Request) error {
			if r.State != StateClaimed || r.Claim == nil || r.Claim.Effect != effect || r.Intent != nil {
				return errGone
			}
			r.State, r.Claim = StateApproved, nil
			return nil
		})
		if berr != nil && !errors.Is(berr, errGone) {
			s.log.Error("approval claim not recorded and not taken back; it will become outcome_unknown", "approval", id, "err", berr)
		}
		if back == nil {
			back = r
		}
		return back, err
	}
	return r, nil
}

// Settle records how a claimed action finished: approval.settle is
// durable before the store says settled. ErrWrongState: the request is
// not claimed by effect (Sweep may have marked it outcome_unknown after a
// slow action; a person then reconciles it, and the journal shows both).
func (s *Service) Settle(ctx context.Context, id, effect, status string) (*Request, error) {
	return s.writeAhead(ctx, id, journal.TypeApprovalSettle, ErrWrongState, func(r *Request) (string, any, error) {
		if r.State != StateClaimed || r.Claim == nil || r.Claim.Effect != effect {
			return "", nil, fmt.Errorf("%w: %s is %s", ErrWrongState, r.ID, r.State)
		}
		r.State = StateSettled
		r.Settled = &Settlement{Effect: effect, Status: status, Time: s.now().UTC()}
		return effect, journal.ApprovalSettle{Approval: r.ID, Status: status}, nil
	})
}

// Reopen sends an approved request back to a person because the policy
// in force when the action runs no longer accepts the approval: need is
// what it asks now. approval.reopened is durable before the store says
// reopened; until then the request stays approved, which is safe because
// the broker re-decides an approved action under the policy in force
// every time before claiming it.
func (s *Service) Reopen(ctx context.Context, id string, need policy.ApprovalNeed, why string) (*Request, error) {
	return s.writeAhead(ctx, id, journal.TypeApprovalReopened, ErrWrongState, func(r *Request) (string, any, error) {
		if r.State != StateApproved {
			return "", nil, fmt.Errorf("%w: %s is %s", ErrWrongState, r.ID, r.State)
		}
		r.State = StateReopened
		r.Rule, r.Roles, r.Assurance, r.Destructive = need.Rule, need.Roles, need.Assurance, need.Destructive
		if r.Decision != nil {
			r.Previous = append(slices.Clone(r.Previous), *r.Decision)
		}
		r.Decision = nil
		return r.Effect, journal.ApprovalReopened{Approval: r.ID, ActionDigest: r.ActionDigest,
			Rule: r.Rule, Roles: nonNil(r.Roles), Assurance: r.Assurance, Why: why}, nil
	})
}

// Sweep finishes changes left half done (see Intent) and marks every
// claim older than the claim timeout outcome_unknown: the broker that
// claimed it died before settling, and only a person can say whether the
// action took effect. It returns how many claims it marked. Marking is a
// store change only; the journal already shows the claim with no settle.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	all, err := s.List(ctx, Filter{})
	if err != nil {
		return 0, err
	}
	for i := range all {
		if all[i].Intent != nil {
			if err := s.finishIntent(ctx, &all[i]); err != nil {
				s.log.Error("half-done approval change not finished", "approval", all[i].ID, "err", err)
			}
		}
	}
	n := 0
	cutoff := s.now().Add(-s.timeout)
	for _, r := range all {
		if r.State != StateClaimed || r.Claim == nil || r.Claim.Time.After(cutoff) {
			continue
		}
		_, err := s.change(ctx, r.ID, func(r *Request) error {
			if r.State != StateClaimed || r.Claim == nil || r.Claim.Time.After(cutoff) || r.Intent != nil {
				return ErrWrongState
			}
			r.State = StateOutcomeUnknown
			return nil
		})
		if errors.Is(err, ErrWrongState) {
			continue
		}
		if err != nil {
			return n, err
		}
		s.log.Warn("approved action claimed and never settled; outcome unknown until a person reconciles it", "approval", r.ID, "run", r.Run)
		n++
	}
	return n, nil
}

// Run sweeps at start and then every half claim timeout until ctx ends.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(max(min(s.timeout, s.intentTimeout)/2, 100*time.Millisecond))
	defer t.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("approval sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Reconcile records a person's finding about an action whose outcome is
// unknown (ErrWrongState for any other state, and for a second finding
// while the first is being recorded). Who reconciles needs the standing an
// approval of the request needs (StandingOf: one of the rule's roles, its
// least assurance, not the requester), else ErrNotAllowed: a finding that
// the action did not happen lets the agent ask for it again.
// approval.reconciled is durable before the store says reconciled.
func (s *Service) Reconcile(ctx context.Context, id string, rc Reconciliation) (*Request, error) {
	if strings.TrimSpace(rc.By) == "" {
		return nil, fmt.Errorf("%w: no one named as reconciling", ErrNotAllowed)
	}
	if err := checkReason(rc.Reason); err != nil {
		return nil, err
	}
	if rc.Time.IsZero() {
		rc.Time = s.now().UTC()
	}
	return s.writeAhead(ctx, id, journal.TypeApprovalReconciled, ErrWrongState, func(r *Request) (string, any, error) {
		if r.State != StateOutcomeUnknown {
			return "", nil, fmt.Errorf("%w: %s is %s, only outcome_unknown is reconciled", ErrWrongState, r.ID, r.State)
		}
		if err := StandingOf(r, rc.By, rc.Roles, rc.Assurance).Err(rc.By); err != nil {
			return "", nil, err
		}
		r.State = StateReconciled
		c := rc
		r.Reconciled = &c
		return r.Effect, journal.ApprovalReconciled{Approval: r.ID, Happened: rc.Happened, By: rc.By, Reason: rc.Reason}, nil
	})
}

// Preview records a policy.preview for a held action.
func (s *Service) Preview(ctx context.Context, run, effect string, p journal.PolicyPreview) error {
	return s.record(ctx, &Request{Run: run, Effect: effect}, "", journal.TypePolicyPreview, p)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
