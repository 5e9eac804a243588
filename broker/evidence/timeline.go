package evidence

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// TimelineReport is what agents did for one person (or every person of a
// tenant): their runs, oldest first, each decision with its reasons and
// outcome and each approval answer with who gave it and how they signed
// in, decisions per day, and the journal's verify status. It is the one
// reader of a person's evidence: `gatehouse evidence TENANT/PERSON` prints
// it and the dashboard's person page renders it.
//
// A run opened for the person that also worked for someone else (a
// decision in it acts for another principal or cannot be read, or a run
// it was delegated from acts for another principal) is not shown: it is
// named in LeftOut with the reason, exactly as Export leaves it out, so a
// tenant's auditor sees on the dashboard the runs its export holds and
// never another principal's decisions. Runs of other tenants or persons
// are never named.
type TimelineReport struct {
	Tenant string     `json:"tenant"`
	Person string     `json:"person,omitempty"`
	Runs   []RunEntry `json:"runs"`
	// LeftOut names the selected runs not shown, and why.
	LeftOut []LeftOut `json:"left_out,omitempty"`
	// Days counts the shown runs' decisions per UTC day, oldest first;
	// days without any are left out. Totals sums them.
	Days   []Day `json:"days"`
	Totals Day   `json:"totals"`
	// Skipped counts the lines of the selected runs that could not be read.
	Skipped int `json:"skipped_lines,omitempty"`
	// Verify is the whole journal's verify report; each run's own
	// findings are also in RunEntry.Findings.
	Verify *journal.Report `json:"verify"`
	// VerifyError is set when the journal could not be verified at all.
	VerifyError string `json:"verify_error,omitempty"`
}

// Decisions counts the timeline's decisions by outcome.
func (t *TimelineReport) Decisions() map[journal.Outcome]int {
	out := map[journal.Outcome]int{}
	for _, r := range t.Runs {
		for _, d := range r.Decisions {
			out[d.Outcome]++
		}
	}
	return out
}

// RunEntry is one run of a timeline.
type RunEntry struct {
	Run           string            `json:"run"`
	For           policy.Principal  `json:"acting_for"`
	Agent         string            `json:"agent,omitempty"`
	Parent        string            `json:"parent,omitempty"`
	Scopes        []string          `json:"scopes"`
	MandateDigest string            `json:"mandate_digest,omitempty"`
	Opened        time.Time         `json:"opened"`
	Closed        *time.Time        `json:"closed,omitempty"`
	Status        string            `json:"status,omitempty"` // run.close status
	Decisions     []DecisionEntry   `json:"decisions"`
	Approvals     []ApprovalEntry   `json:"approvals,omitempty"`
	Findings      []journal.Finding `json:"findings,omitempty"`
}

// DecisionEntry is one decision and what became of it.
type DecisionEntry struct {
	Seq    uint64      `json:"seq"`
	Effect string      `json:"effect"`
	Time   time.Time   `json:"time"`
	Sink   policy.Sink `json:"sink"`
	Action string      `json:"action"`
	Target string      `json:"target,omitempty"`
	// Label names what the decision touched for a reader (TargetOf).
	Label         string          `json:"label,omitempty"`
	Mode          policy.Mode     `json:"mode"`
	Outcome       journal.Outcome `json:"outcome"`
	Refusal       policy.Refusal  `json:"refusal,omitempty"`
	Rule          string          `json:"rule,omitempty"`
	Enforced      bool            `json:"enforced"`
	AllowedBy     string          `json:"allowed_by,omitempty"`
	Reasons       []policy.Reason `json:"reasons,omitempty"`
	RequestDigest string          `json:"request_digest,omitempty"`
	// Result is the effect's recorded outcome; nil when it did not happen
	// (refused, held) or its outcome was never recorded.
	Result *journal.Result `json:"result,omitempty"`
}

// Approval outcomes of an ApprovalEntry.
const (
	ApprovalApproved   = "approved"
	ApprovalRefused    = "refused"
	ApprovalReconciled = "reconciled"
)

// ApprovalEntry is a person's answer to a held effect (approval.decision,
// approval.refused) or an operator's reconciliation of one whose outcome
// was unknown (approval.reconciled).
type ApprovalEntry struct {
	Seq     uint64    `json:"seq"`
	Effect  string    `json:"effect"`
	Time    time.Time `json:"time"`
	Outcome string    `json:"outcome"` // approved, refused, reconciled
	// Approver is who answered (or reconciled).
	Approver string `json:"approver"`
	// Assurance and Authenticated say how the approver signed in, e.g.
	// "password" via "dashboard-session"; empty for a reconciliation.
	Assurance     string `json:"assurance,omitempty"`
	Authenticated string `json:"authenticated,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// How is how the approver authenticated, e.g. "password via
// dashboard-session"; "" when not recorded.
func (a ApprovalEntry) How() string {
	if a.Assurance == "" && a.Authenticated == "" {
		return ""
	}
	return strings.TrimSpace(a.Assurance + " via " + a.Authenticated)
}

// Entry is one row of a run's timeline, in journal order: a decision
// (Kind "decision") or an approval answer (Kind "approval").
type Entry struct {
	Kind     string
	Seq      uint64
	Effect   string
	Time     time.Time
	Sink     policy.Sink
	Target   string // the decision's Label
	Mode     policy.Mode
	Outcome  journal.Outcome // allowed, refused, held; approved, refused, reconciled
	Refusal  policy.Refusal
	Enforced bool
	Reasons  []policy.Reason
	Result   string // the effect.outcome status: ok, failed; "" if it never ran
	Approver string
	How      string
	Reason   string
}

// Entries merges the run's decisions and approvals in journal order.
func (r RunEntry) Entries() []Entry {
	out := make([]Entry, 0, len(r.Decisions)+len(r.Approvals))
	for _, d := range r.Decisions {
		e := Entry{Kind: "decision", Seq: d.Seq, Effect: d.Effect, Time: d.Time, Sink: d.Sink, Target: d.Label, Mode: d.Mode,
			Outcome: d.Outcome, Refusal: d.Refusal, Enforced: d.Enforced, Reasons: d.Reasons}
		if d.Result != nil {
			e.Result = d.Result.Status
		}
		out = append(out, e)
	}
	for _, a := range r.Approvals {
		out = append(out, Entry{Kind: "approval", Seq: a.Seq, Effect: a.Effect, Time: a.Time, Outcome: journal.Outcome(a.Outcome),
			Approver: a.Approver, How: a.How(), Reason: a.Reason})
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// Day counts one day's decisions. Would counts allowed decisions that
// strict mode would have refused or held.
type Day struct {
	Day     time.Time `json:"day,omitzero"` // none in Totals
	Allowed int       `json:"allowed"`
	Refused int       `json:"refused"`
	Held    int       `json:"held"`
	Would   int       `json:"would_refuse"`
}

func (c *Day) count(d *DecisionEntry) {
	switch d.Outcome {
	case journal.OutcomeAllowed:
		c.Allowed++
		if d.Refusal != "" && !d.Enforced {
			c.Would++
		}
	case journal.OutcomeHeld:
		c.Held++
	default:
		c.Refused++
	}
}

// TimelineOptions tunes TimelineWith.
type TimelineOptions struct {
	// Verify is passed to journal.Verify (e.g. Workers: 1 on a server).
	Verify journal.VerifyOptions
}

// Timeline reads the journal in journalDir for what agents did for
// person of tenant ("" for every person of the tenant). It verifies the
// whole journal too. It returns ErrNoJournal or ErrBadSelector; a journal
// that verifies badly is reported in Verify, not as an error. A person
// with no runs gets an empty timeline.
func Timeline(journalDir, tenant, person string) (*TimelineReport, error) {
	return TimelineWith(journalDir, Selector{Tenant: tenant, Person: person}, TimelineOptions{})
}

// TimelineWith is Timeline with options.
func TimelineWith(journalDir string, sel Selector, opts TimelineOptions) (*TimelineReport, error) {
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	ids, err := listRuns(journalDir)
	if err != nil {
		return nil, err
	}
	tl := &TimelineReport{Tenant: sel.Tenant, Person: sel.Person, Runs: []RunEntry{}, Days: []Day{}}
	rep, verr := journal.Verify(journalDir, opts.Verify)
	if verr != nil {
		tl.VerifyError = verr.Error()
		rep = nil
	} else {
		tl.Verify = rep
	}
	jr := &journalRuns{dir: journalDir, cache: map[string]*runData{}}
	days := map[time.Time]*Day{}
	for _, id := range ids {
		rd := jr.get(id)
		if rd.open == nil || !sel.matches(rd.open.ActingFor) {
			continue // another tenant's or person's, or unreadable: never named
		}
		tl.Skipped += rd.skipped
		if why := jr.leftOut(rd); why != "" {
			tl.LeftOut = append(tl.LeftOut, LeftOut{Run: id, Reason: why})
			continue
		}
		e := entry(rd, rep)
		for i := range e.Decisions {
			d := &e.Decisions[i]
			day := d.Time.UTC().Truncate(24 * time.Hour)
			c := days[day]
			if c == nil {
				c = &Day{Day: day}
				days[day] = c
			}
			c.count(d)
			tl.Totals.count(d)
		}
		tl.Runs = append(tl.Runs, e)
	}
	slices.SortStableFunc(tl.Runs, func(a, b RunEntry) int {
		return cmp.Or(a.Opened.Compare(b.Opened), cmp.Compare(a.Run, b.Run))
	})
	for _, d := range days {
		tl.Days = append(tl.Days, *d)
	}
	slices.SortFunc(tl.Days, func(a, b Day) int { return a.Day.Compare(b.Day) })
	return tl, nil
}

func entry(rd *runData, rep *journal.Report) RunEntry {
	e := RunEntry{Run: rd.id, For: rd.open.ActingFor, Agent: rd.open.Agent, Parent: rd.open.Parent, Scopes: rd.open.Scopes,
		MandateDigest: rd.open.MandateDigest, Opened: rd.opened, Closed: rd.closed, Status: rd.status, Decisions: []DecisionEntry{}}
	results := map[string]*journal.Result{}
	for _, ev := range rd.events {
		if ev.Type == journal.TypeOutcome && ev.Run == rd.id {
			var r journal.Result
			if json.Unmarshal(ev.Data, &r) == nil {
				results[ev.Effect] = &r
			}
		}
	}
	for _, ev := range rd.events {
		if ev.Run != rd.id {
			continue
		}
		switch ev.Type {
		case journal.TypeDecision:
			var d journal.Decision
			if json.Unmarshal(ev.Data, &d) != nil {
				continue
			}
			e.Decisions = append(e.Decisions, DecisionEntry{
				Seq: ev.Seq, Effect: ev.Effect, Time: ev.Time, Sink: d.Sink, Action: d.Action, Target: d.Target, Label: TargetOf(&d),
				Mode: d.Mode, Outcome: d.Outcome, Refusal: d.Refusal, Rule: d.Rule, Enforced: d.Enforced, AllowedBy: d.Allowed,
				Reasons: d.Reasons, RequestDigest: d.RequestDigest, Result: results[ev.Effect],
			})
		case journal.TypeApprovalDecision, journal.TypeApprovalRefused:
			var a journal.ApprovalDecision
			if json.Unmarshal(ev.Data, &a) != nil {
				continue
			}
			ae := ApprovalEntry{Seq: ev.Seq, Effect: ev.Effect, Time: ev.Time, Outcome: ApprovalRefused, Approver: a.Approver,
				Assurance: a.Assurance, Authenticated: a.Authenticated, Reason: a.Reason}
			if a.Approved {
				ae.Outcome = ApprovalApproved
			}
			e.Approvals = append(e.Approvals, ae)
		case journal.TypeApprovalReconciled:
			var a journal.ApprovalReconciled
			if json.Unmarshal(ev.Data, &a) != nil {
				continue
			}
			ae := ApprovalEntry{Seq: ev.Seq, Effect: ev.Effect, Time: ev.Time, Outcome: ApprovalReconciled, Approver: a.By,
				Reason: "did not take effect: " + a.Reason}
			if a.Happened {
				ae.Reason = "took effect: " + a.Reason
			}
			e.Approvals = append(e.Approvals, ae)
		}
	}
	if rep != nil {
		for _, f := range rep.Findings {
			if f.Run == rd.id {
				e.Findings = append(e.Findings, f)
			}
		}
	}
	return e
}

// TargetOf names what a decision touched, for a reader and for grouping:
// "PROVIDER METHOD host/path" for provider calls, "send METHOD host/path"
// for browser sends, the action and target otherwise.
func TargetOf(d *journal.Decision) string {
	switch d.Sink {
	case policy.SinkProvider:
		p := d.Provider
		if p == "" {
			p = "provider"
		}
		return strings.TrimSpace(p + " " + strings.ToUpper(d.Method) + " " + d.Host + d.Path)
	case policy.SinkBrowser:
		return strings.TrimSpace(d.Action + " " + strings.ToUpper(d.Method) + " " + d.Target)
	}
	t := d.Action
	if d.Target != "" {
		t += " " + d.Target
	}
	return t
}

// Person is one person of a tenant with how much was done for them, over
// the runs their timeline shows.
type Person struct {
	Person    string    `json:"person"`
	Runs      int       `json:"runs"`
	Decisions int       `json:"decisions"`
	Refused   int       `json:"refused"`
	Last      time.Time `json:"last"`
	// LeftOut counts their runs the timeline leaves out.
	LeftOut int `json:"left_out,omitempty"`
}

// People lists the persons of tenant who have runs in the journal in dir,
// by name, counting what their timelines show. It returns ErrNoJournal or
// ErrBadSelector.
func People(dir, tenant string) ([]Person, error) {
	sel := Selector{Tenant: tenant}
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	ids, err := listRuns(dir)
	if err != nil {
		return nil, err
	}
	jr := &journalRuns{dir: dir, cache: map[string]*runData{}}
	by := map[string]*Person{}
	for _, id := range ids {
		rd := jr.get(id)
		if rd.open == nil || !sel.matches(rd.open.ActingFor) {
			continue
		}
		p := by[rd.open.ActingFor.Person]
		if p == nil {
			p = &Person{Person: rd.open.ActingFor.Person}
			by[p.Person] = p
		}
		if jr.leftOut(rd) != "" {
			p.LeftOut++
			continue
		}
		p.Runs++
		for _, ev := range rd.events {
			if ev.Run != rd.id {
				continue
			}
			if ev.Time.After(p.Last) {
				p.Last = ev.Time
			}
			if ev.Type != journal.TypeDecision {
				continue
			}
			var d journal.Decision
			if json.Unmarshal(ev.Data, &d) != nil {
				continue
			}
			p.Decisions++
			if d.Outcome == journal.OutcomeRefused {
				p.Refused++
			}
		}
	}
	out := make([]Person, 0, len(by))
	for _, p := range by {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Person) int { return cmp.Compare(a.Person, b.Person) })
	return out, nil
}

// Tenants lists the tenants that have runs in the journal in dir, by
// name. It returns ErrNoJournal.
func Tenants(dir string) ([]string, error) {
	ids, err := listRuns(dir)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if rd := readRun(dir, id); rd.open != nil && rd.open.ActingFor.Tenant != "" {
			seen[rd.open.ActingFor.Tenant] = true
		}
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	slices.Sort(out)
	return out, nil
}
