// Package replay decides every recorded effect of a run again, from its
// recorded inputs, and says whether the decisions come out the same.
//
// For each policy.decision in a run file, replay takes the request the
// decision names by digest (request_digest) from the content store (the
// effect as its sink described it and the decision time), the run's
// authority from its run.open (person, mandate, scopes, agent), and the
// policy the decision names by digest (policy_digest; the rules file's
// source kept in the content store, the built-in rules for the digest of
// an empty file), and calls policy.Decide in the mode recorded with the
// decision. Nothing is called and nothing acts: no NATS, no sink, no
// network; it reads files only.
//
// A provider call a grounding rule applied to is checked again first:
// grounding.Check under the rules kept by the digest the request records
// (or a candidate, Options.Grounding), given the call, caller input and
// time recorded, with every Lookup, WrittenAt and Reread answered from the
// recorded answers and the record bodies kept in the content store. A
// different rule, failure or citation diverges ("grounding ..." in the
// detail); the replayed result is what policy.Decide then sees. A cited
// record whose body is erased or not kept makes the run not replayable
// ("record erased (...)"); one whose body no longer matches its digest is
// changed.
//
// An effect decided under an approval (the decision names the approval
// and action digest) replays the broker's gate from the approval events
// recorded earlier in the run: approved (not reopened) decides again with
// that approval as the grant, refused or already claimed refuses as the
// gate did, anything else holds. So a held-then-approved run reproduces.
//
// A decision reproduces when outcome, refusal, rule, enforcement, allow
// rule, verified flag, scopes checked and every reason are identical to
// the record. A request blob whose bytes do not match its digest is
// reported as changed; a decision whose request or policy is not kept
// (capture off or digests, erased) makes the run not replayable, with why.
//
// Under a candidate policy (Options.Policy) replay is a what-if: it
// reports the decisions the candidate would decide differently (outcome,
// refusal, rule or enforcement), grouped by rule.
//
// Replay does not check the journal's integrity; `gatehouse verify` does.
package replay

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
)

var (
	// ErrNoJournal: the directory is not a journal (no runs/ folder).
	ErrNoJournal = errors.New("replay: not a journal directory")
	// ErrNoRun: the run has no file in the journal.
	ErrNoRun = errors.New("replay: no such run")
)

// Status is a run's replay outcome. The names are a contract.
type Status string

const (
	StatusReproduced    Status = "reproduced"     // every decision identical
	StatusDiverged      Status = "diverged"       // a decision came out differently
	StatusChanged       Status = "changed"        // recorded content does not match its digest
	StatusNotReplayable Status = "not-replayable" // content not kept: capture off or digests, or erased
)

// Options tune a replay. The zero value replays under the recorded
// policies with no content store (so only runs without captured requests
// can be checked, and none reproduces).
type Options struct {
	// Content is the store the broker captured into.
	Content *content.Store
	// Policy, when set, is a candidate to decide under instead of the
	// recorded policies (a what-if).
	Policy *policy.Policy
	// Mode, when set, decides in this mode instead of the recorded one.
	Mode policy.Mode
	// Grounding, when set, is a candidate grounding rules file to check
	// recorded provider calls under instead of the recorded rules (a
	// what-if).
	Grounding *grounding.Rules
}

// Verdict is what a decision came to.
type Verdict struct {
	Outcome  journal.Outcome `json:"outcome"`
	Refusal  policy.Refusal  `json:"refusal,omitempty"`
	Rule     string          `json:"rule,omitempty"`
	Enforced bool            `json:"enforced"`
	Allowed  string          `json:"allowed_by,omitempty"`
}

func (v Verdict) String() string {
	s := string(v.Outcome)
	if v.Rule != "" {
		s += " (" + v.Rule
		if v.Refusal != "" && string(v.Refusal) != v.Rule {
			s += ", " + string(v.Refusal)
		}
		if v.Outcome == journal.OutcomeAllowed {
			s += ", strict would refuse"
		}
		s += ")"
	}
	return s
}

// Divergence is one decision that came out differently, or whose recorded
// content failed its digest.
type Divergence struct {
	Run      string  `json:"run"`
	Seq      uint64  `json:"seq"`
	Event    string  `json:"event"`
	Effect   string  `json:"effect"`
	Sink     string  `json:"sink"`
	Action   string  `json:"action"`
	Target   string  `json:"target,omitempty"`
	Recorded Verdict `json:"recorded"`
	Replayed Verdict `json:"replayed"`
	// Changed is set when recorded content does not match its digest;
	// Replayed is then empty.
	Changed bool `json:"changed,omitempty"`
	// Detail says what differs.
	Detail string `json:"detail"`
}

// Missing is a decision that could not be replayed.
type Missing struct {
	Seq    uint64 `json:"seq"`
	Effect string `json:"effect"`
	// What is missing: "request", "policy", "record" (a provider
	// response a grounding rule read) or "grounding rules".
	What   string `json:"what"`
	Digest string `json:"digest,omitempty"`
	// Why: "not captured", "erased: <reason>", "not kept", "unreadable".
	Why string `json:"why"`
}

// RunReport is one run's replay.
type RunReport struct {
	Run         string       `json:"run"`
	Status      Status       `json:"status"`
	Decisions   int          `json:"decisions"` // policy.decision events in the run
	Identical   int          `json:"identical"` // replayed and identical
	Divergences []Divergence `json:"divergences,omitempty"`
	Missing     []Missing    `json:"missing,omitempty"`
}

// String is the one-line summary for a person.
func (r *RunReport) String() string {
	switch r.Status {
	case StatusReproduced:
		return fmt.Sprintf("%s: reproduced (%d decision(s) identical)", r.Run, r.Identical)
	case StatusChanged, StatusDiverged:
		d := r.Divergences[0]
		if d.Changed {
			return fmt.Sprintf("%s: changed at event %d (%s): %s", r.Run, d.Seq, d.Effect, d.Detail)
		}
		return fmt.Sprintf("%s: diverged at event %d (%s %s.%s): recorded %s, replayed %s: %s",
			r.Run, d.Seq, d.Effect, d.Sink, d.Action, d.Recorded, d.Replayed, d.Detail)
	}
	why := map[string]bool{}
	var whys []string
	for _, m := range r.Missing {
		w := m.What + " " + m.Why
		if !why[w] {
			why[w] = true
			whys = append(whys, w)
		}
	}
	return fmt.Sprintf("%s: not replayable: %s (%d of %d decision(s) replayed, identical)", r.Run, strings.Join(whys, "; "), r.Identical, r.Decisions)
}

// Group is the what-if's decisions that one rule decides differently.
type Group struct {
	Rule      string         `json:"rule"`
	Refusal   policy.Refusal `json:"refusal,omitempty"`
	Decisions []Divergence   `json:"decisions"`
	Runs      []string       `json:"runs"`
}

// Report is a replay of several runs.
type Report struct {
	// OK: every run reproduced.
	OK   bool         `json:"ok"`
	Runs []*RunReport `json:"runs"`
	// Candidate is the candidate policy's digest in a what-if.
	Candidate string `json:"candidate,omitempty"`
	// CandidateGrounding is the candidate grounding rules' digest.
	CandidateGrounding string `json:"candidate_grounding,omitempty"`
	// Groups are, in a what-if, the differing decisions by rule.
	Groups []Group `json:"groups,omitempty"`
}

// All replays every run of the journal in dir, in run id order.
func All(dir string, opts Options) (*Report, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "runs"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoJournal, err)
	}
	var runs []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".jsonl"); ok && journal.ValidRunID(id) && e.Type().IsRegular() {
			runs = append(runs, id)
		}
	}
	return Runs(dir, runs, opts)
}

// Runs replays the named runs of the journal in dir.
func Runs(dir string, runs []string, opts Options) (*Report, error) {
	r := newReplayer(opts)
	rep := &Report{OK: true, Runs: []*RunReport{}}
	if opts.Policy != nil {
		rep.Candidate = opts.Policy.Digest()
	}
	if opts.Grounding != nil {
		rep.CandidateGrounding = opts.Grounding.Digest()
	}
	for _, run := range runs {
		rr, err := r.run(dir, run)
		if err != nil {
			return nil, err
		}
		rep.Runs = append(rep.Runs, rr)
		if rr.Status != StatusReproduced {
			rep.OK = false
		}
	}
	if r.whatIf() {
		rep.Groups = group(rep.Runs)
	}
	return rep, nil
}

// Run replays one run of the journal in dir.
func Run(dir, run string, opts Options) (*RunReport, error) {
	return newReplayer(opts).run(dir, run)
}

type replayer struct {
	opts     Options
	policies map[string]policyResult
	erasures map[string]content.Erasure
	names    map[string]string // policy or grounding rules digest -> file name, from the index
	rules    map[string]rulesResult
}

type policyResult struct {
	p       *policy.Policy
	missing *Missing
	changed bool
}

func newReplayer(opts Options) *replayer {
	r := &replayer{opts: opts, policies: map[string]policyResult{}, names: map[string]string{}, rules: map[string]rulesResult{}}
	if opts.Content != nil {
		r.erasures, _ = opts.Content.Erasures()
		refs, _ := opts.Content.Refs()
		for _, ref := range refs {
			if (ref.Kind == content.KindPolicy || ref.Kind == content.KindGrounding) && ref.Name != "" {
				r.names[ref.Digest] = ref.Name
			}
		}
	}
	return r
}

var emptyDigest = content.DigestOf(nil)

func (r *replayer) policy(digest string) policyResult {
	if pr, ok := r.policies[digest]; ok {
		return pr
	}
	var pr policyResult
	switch {
	case digest == "":
		pr.p = policy.Unreadable("the recorded policy", errors.New("it could not be read when the effect was decided"))
	case digest == emptyDigest:
		pr.p = policy.Default()
	default:
		b, why := r.get(digest)
		switch {
		case why == "changed":
			pr.changed = true
		case why != "":
			pr.missing = &Missing{What: "policy", Digest: digest, Why: why}
		default:
			name := r.names[digest]
			if name == "" {
				name = "policy.yaml"
			}
			p, err := policy.Parse(name, b)
			if err != nil {
				pr.missing = &Missing{What: "policy", Digest: digest, Why: "unreadable by this version: " + err.Error()}
			} else {
				pr.p = p
			}
		}
	}
	r.policies[digest] = pr
	return pr
}

// get reads a blob; why is "" when it was read, "changed" when it does not
// match its digest, or why it is not there.
func (r *replayer) get(digest string) ([]byte, string) {
	if r.opts.Content == nil {
		return nil, "not kept (no content store)"
	}
	b, err := r.opts.Content.Get(digest)
	switch {
	case err == nil:
		return b, ""
	case errors.Is(err, content.ErrChanged):
		return nil, "changed"
	case errors.Is(err, content.ErrNotFound):
		if e, ok := r.erasures[digest]; ok {
			return nil, "erased (" + e.Reason + ", " + e.Time.Format(time.DateOnly) + ")"
		}
		return nil, "not kept (captured as digests only, or lost)"
	}
	return nil, "unreadable: " + err.Error()
}

func (r *replayer) run(dir, run string) (*RunReport, error) {
	if !journal.ValidRunID(run) {
		return nil, fmt.Errorf("%w: %q is not a run id", ErrNoRun, run)
	}
	f, err := os.Open(filepath.Join(dir, "runs", run+".jsonl"))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoRun, run, err)
	}
	defer f.Close()
	rep := &RunReport{Run: run}
	var (
		auth   *policy.Authority
		sc     = bufio.NewScanner(f)
		failed bool
		gs     = gates{}
	)
	sc.Buffer(make([]byte, 64<<10), journal.MaxLineBytes+1)
	for sc.Scan() {
		ev, err := journal.ParseLine(sc.Bytes())
		if err != nil {
			continue // verify reports malformed lines
		}
		switch ev.Type {
		case journal.TypeApprovalDecision, journal.TypeApprovalRefused, journal.TypeApprovalClaim, journal.TypeApprovalReopened:
			gs.event(ev)
		case journal.TypeRunOpen:
			var o journal.RunOpen
			if json.Unmarshal(ev.Data, &o) == nil {
				auth = &policy.Authority{For: o.ActingFor, Mandate: o.Mandate, Scopes: o.Scopes, Agent: o.Agent}
				if o.MandateDigest != "" && o.Mandate.Digest() != o.MandateDigest {
					auth.MandateUnreadable = true
				}
			}
		case journal.TypeDecision:
			rep.Decisions++
			if failed {
				continue
			}
			var d journal.Decision
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				rep.Missing = append(rep.Missing, Missing{Seq: ev.Seq, Effect: ev.Effect, What: "decision", Why: "unreadable"})
				continue
			}
			div, miss := r.decision(run, ev, &d, auth, gs)
			switch {
			case len(miss) > 0:
				rep.Missing = append(rep.Missing, miss...)
			case div != nil:
				rep.Divergences = append(rep.Divergences, *div)
				// The recorded run replays up to its first divergence; a
				// what-if looks at every decision.
				failed = !r.whatIf()
			default:
				rep.Identical++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("replay: %s: %w", run, err)
	}
	switch {
	case slices.ContainsFunc(rep.Divergences, func(d Divergence) bool { return d.Changed }):
		rep.Status = StatusChanged
		i := slices.IndexFunc(rep.Divergences, func(d Divergence) bool { return d.Changed })
		rep.Divergences[0], rep.Divergences[i] = rep.Divergences[i], rep.Divergences[0]
	case len(rep.Divergences) > 0:
		rep.Status = StatusDiverged
	case len(rep.Missing) > 0:
		rep.Status = StatusNotReplayable
	default:
		rep.Status = StatusReproduced
	}
	return rep, nil
}

// whatIf reports whether a candidate policy or grounding rules are
// replayed instead of the recorded ones.
func (r *replayer) whatIf() bool { return r.opts.Policy != nil || r.opts.Grounding != nil }

// decision replays one recorded decision: the grounding check first (a
// provider call with a rule), then the policy, then the approval gate.
func (r *replayer) decision(run string, ev journal.Event, d *journal.Decision, auth *policy.Authority, gs gates) (*Divergence, []Missing) {
	div := &Divergence{Run: run, Seq: ev.Seq, Event: ev.ID, Effect: ev.Effect, Sink: string(d.Sink), Action: d.Action, Target: d.Target,
		Recorded: Verdict{Outcome: d.Outcome, Refusal: d.Refusal, Rule: d.Rule, Enforced: d.Enforced, Allowed: d.Allowed}}
	if d.RequestDigest == "" {
		return nil, []Missing{{Seq: ev.Seq, Effect: ev.Effect, What: "request", Why: "not captured"}}
	}
	if auth == nil {
		return nil, []Missing{{Seq: ev.Seq, Effect: ev.Effect, What: "authority", Why: "the run has no readable run.open"}}
	}
	b, why := r.get(d.RequestDigest)
	switch why {
	case "":
	case "changed":
		div.Changed, div.Detail = true, "the recorded request does not match its digest "+d.RequestDigest
		return div, nil
	default:
		// Say whether the records it cited are gone too (one person's
		// erasure removes both).
		return nil, append([]Missing{{Seq: ev.Seq, Effect: ev.Effect, What: "request", Digest: d.RequestDigest, Why: why}}, r.missingRecords(ev, d)...)
	}
	req, err := content.DecodeRequest(b)
	if err != nil {
		return nil, []Missing{{Seq: ev.Seq, Effect: ev.Effect, What: "request", Digest: d.RequestDigest, Why: "unreadable: " + err.Error()}}
	}
	if req.Run != run || req.Effect != ev.Effect {
		div.Changed, div.Detail = true, fmt.Sprintf("the recorded request is for %s %s, not this effect", req.Run, req.Effect)
		return div, nil
	}
	pol := r.opts.Policy
	if pol == nil {
		pr := r.policy(d.PolicyDigest)
		switch {
		case pr.changed:
			div.Changed, div.Detail = true, "the recorded policy does not match its digest "+d.PolicyDigest
			return div, nil
		case pr.missing != nil:
			m := *pr.missing
			m.Seq, m.Effect = ev.Seq, ev.Effect
			return nil, []Missing{m}
		}
		pol = pr.p
	}
	eff := req.Described.Effect()
	var groundDiff string
	if req.Grounding != nil {
		gr, cdiv, miss := r.ground(ev, d, req, div)
		switch {
		case cdiv != nil:
			return cdiv, nil
		case miss != nil:
			return nil, []Missing{*miss}
		}
		eff.Grounding, groundDiff = gr.effect, gr.diff
	}
	mode := d.Mode
	if r.opts.Mode != "" {
		mode = r.opts.Mode
	}
	now := req.DecidedAt
	if now.IsZero() {
		now = ev.Time
	}
	in := policy.Input{Mode: mode, Authority: *auth, Effect: eff, Now: now}
	got := pol.Decide(in)
	if d.Approval != "" && mode == policy.ModeStrict && got.Approval != nil {
		got = gs.gate(pol, in, got, d.Approval, d.ActionDigest)
	}
	div.Replayed = Verdict{Outcome: outcomeOf(got.Verdict), Refusal: got.Refusal, Rule: got.Rule, Enforced: got.Enforced, Allowed: got.Allowed}
	if r.whatIf() || r.opts.Mode != "" {
		// A what-if compares what was decided, not how it was explained.
		r, w := div.Recorded, div.Replayed
		if r.Outcome == w.Outcome && r.Refusal == w.Refusal && r.Rule == w.Rule && r.Enforced == w.Enforced {
			return nil, nil
		}
		div.Detail = "decided differently"
		if groundDiff != "" {
			div.Detail += ": " + groundDiff
		}
		return div, nil
	}
	if groundDiff != "" {
		div.Detail = groundDiff
		return div, nil
	}
	if diff := compare(d, got); diff != "" {
		div.Detail = diff
		return div, nil
	}
	return nil, nil
}

// compare names the first field in which the replayed decision differs
// from the record, "" when identical.
func compare(d *journal.Decision, got policy.Decision) string {
	switch {
	case d.Outcome != outcomeOf(got.Verdict):
		return "outcome differs"
	case d.Refusal != got.Refusal:
		return fmt.Sprintf("refusal %q, replayed %q", d.Refusal, got.Refusal)
	case d.Rule != got.Rule:
		return fmt.Sprintf("rule %q, replayed %q", d.Rule, got.Rule)
	case d.Enforced != got.Enforced:
		return "enforcement differs"
	case d.Allowed != got.Allowed:
		return fmt.Sprintf("allowed by %q, replayed %q", d.Allowed, got.Allowed)
	case d.Verified != got.Verified:
		return "verified differs"
	case !slices.Equal(d.ScopesChecked, nonNil(got.ScopesChecked)):
		return fmt.Sprintf("scopes checked %v, replayed %v", d.ScopesChecked, got.ScopesChecked)
	case !reasonsEqual(d.Reasons, got.Reasons) && !(d.PolicyDigest == "" && unreadableAlike(d.Reasons, got.Reasons)):
		return "reasons differ"
	}
	return ""
}

// unreadableAlike reports whether a and b are the same policy-unreadable
// refusals but for their details. A decision made while the policy file
// could not be read records a reason naming the file and the read error of
// that moment (policy.Unreadable); replay cannot read that moment again,
// and has no file to name, so it compares what was decided: refusal, rule,
// enforcement.
func unreadableAlike(a, b []policy.Reason) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		if a[i].Refusal != policy.RefusePolicyUnreadable || a[i].Refusal != b[i].Refusal || a[i].Rule != b[i].Rule || a[i].Enforced != b[i].Enforced {
			return false
		}
	}
	return true
}

func reasonsEqual(a, b []policy.Reason) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func outcomeOf(v policy.Verdict) journal.Outcome {
	switch v {
	case policy.VerdictAllow:
		return journal.OutcomeAllowed
	case policy.VerdictHold:
		return journal.OutcomeHeld
	}
	return journal.OutcomeRefused
}

// group gathers a what-if's divergences by the rule that makes the
// difference: the candidate's deciding rule, or when the candidate no
// longer names one, the recorded rule it drops.
func group(runs []*RunReport) []Group {
	byRule := map[string]*Group{}
	for _, rr := range runs {
		for _, d := range rr.Divergences {
			if d.Changed {
				continue
			}
			rule, refusal := d.Replayed.Rule, d.Replayed.Refusal
			if rule == "" {
				rule, refusal = d.Recorded.Rule, d.Recorded.Refusal
			}
			g := byRule[rule]
			if g == nil {
				g = &Group{Rule: rule, Refusal: refusal}
				byRule[rule] = g
			}
			g.Decisions = append(g.Decisions, d)
			if !slices.Contains(g.Runs, d.Run) {
				g.Runs = append(g.Runs, d.Run)
			}
		}
	}
	out := make([]Group, 0, len(byRule))
	for _, g := range byRule {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b Group) int {
		return cmp.Or(cmp.Compare(len(b.Decisions), len(a.Decisions)), cmp.Compare(a.Rule, b.Rule))
	})
	return out
}
