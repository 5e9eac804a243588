package evidence

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// TimelineReport is what agents did for one person (or every person of a
// tenant): their runs, oldest first, each decision with its reasons and
// outcome, and the journal's verify status.
type TimelineReport struct {
	Tenant string     `json:"tenant"`
	Person string     `json:"person,omitempty"`
	Runs   []RunEntry `json:"runs"`
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
	Findings      []journal.Finding `json:"findings,omitempty"`
}

// DecisionEntry is one decision and what became of it.
type DecisionEntry struct {
	Seq           uint64          `json:"seq"`
	Effect        string          `json:"effect"`
	Time          time.Time       `json:"time"`
	Sink          policy.Sink     `json:"sink"`
	Action        string          `json:"action"`
	Target        string          `json:"target,omitempty"`
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

// Timeline reads the journal in journalDir for what agents did for
// person of tenant ("" for every person of the tenant). It verifies the
// whole journal too. It returns ErrNoJournal or ErrBadSelector; a journal
// that verifies badly is reported in Verify, not as an error.
func Timeline(journalDir, tenant, person string) (*TimelineReport, error) {
	sel := Selector{Tenant: tenant, Person: person}
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	ids, err := listRuns(journalDir)
	if err != nil {
		return nil, err
	}
	tl := &TimelineReport{Tenant: tenant, Person: person, Runs: []RunEntry{}}
	rep, verr := journal.Verify(journalDir, journal.VerifyOptions{})
	if verr != nil {
		tl.VerifyError = verr.Error()
	} else {
		tl.Verify = rep
	}
	for _, id := range ids {
		rd := readRun(journalDir, id)
		if rd.open == nil || !sel.matches(rd.open.ActingFor) {
			continue
		}
		tl.Runs = append(tl.Runs, entry(rd, rep))
	}
	slices.SortStableFunc(tl.Runs, func(a, b RunEntry) int {
		return cmp.Or(a.Opened.Compare(b.Opened), cmp.Compare(a.Run, b.Run))
	})
	return tl, nil
}

func entry(rd *runData, rep *journal.Report) RunEntry {
	e := RunEntry{Run: rd.id, For: rd.open.ActingFor, Agent: rd.open.Agent, Parent: rd.open.Parent, Scopes: rd.open.Scopes,
		MandateDigest: rd.open.MandateDigest, Opened: rd.opened, Closed: rd.closed, Status: rd.status, Decisions: []DecisionEntry{}}
	results := map[string]*journal.Result{}
	for _, ev := range rd.events {
		if ev.Type == journal.TypeOutcome {
			var r journal.Result
			if json.Unmarshal(ev.Data, &r) == nil {
				results[ev.Effect] = &r
			}
		}
	}
	for _, ev := range rd.events {
		if ev.Type != journal.TypeDecision {
			continue
		}
		var d journal.Decision
		if json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		e.Decisions = append(e.Decisions, DecisionEntry{
			Seq: ev.Seq, Effect: ev.Effect, Time: ev.Time, Sink: d.Sink, Action: d.Action, Target: d.Target, Mode: d.Mode,
			Outcome: d.Outcome, Refusal: d.Refusal, Rule: d.Rule, Enforced: d.Enforced, AllowedBy: d.Allowed,
			Reasons: d.Reasons, RequestDigest: d.RequestDigest, Result: results[ev.Effect],
		})
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
