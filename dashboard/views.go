package dashboard

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/review"
)

// Static asset paths; the files are vendored in package web (see its
// static/VERSIONS).
const (
	HtmxJS = "/static/htmx-2.0.11.min.js"
	SseJS  = "/static/htmx-ext-sse-2.2.4.min.js"
	AppCSS = "/static/gatehouse.css"
)

// Nav is who is signed in and which pages they may open.
type Nav struct {
	User      string
	Tenant    string // a tenant auditor's tenant
	Assurance string
	CSRF      string
	Active    string // approvals, review, evidence, status
	Approvals bool
	Review    bool
	Evidence  bool
	Reload    bool // may reload the policy from the status page
}

func (n Nav) csrfHeaders() string {
	b, _ := json.Marshal(map[string]string{"X-CSRF-Token": n.CSRF})
	return string(b)
}

// LoginView is the sign-in form.
type LoginView struct {
	CSRF  string
	Next  string
	Error string
	// Pending, when set, asks for the TOTP code of a sign-in whose
	// password was right; it is the token of that half-done sign-in.
	Pending string
}

// SetupView is the first-run form that creates the first admin.
type SetupView struct {
	CSRF  string
	Token string
	Error string
}

// ApprovalsView is the reviewer's queue.
type ApprovalsView struct {
	Nav     Nav
	Queue   QueueView
	Message string
}

// QueueView is what the live part of the queue shows; it is re-rendered
// and pushed over server-sent events on every change.
type QueueView struct {
	Pending []approval.Request // pending and reopened, oldest first
	Unknown []approval.Request // outcome_unknown: to reconcile
	Recent  []approval.Request // decided lately, newest first
	Total   int                // pending before Limit cut the list
	CSRF    string
}

// CardView is one request with, after an attempt, what came of it.
type CardView struct {
	Req   approval.Request
	CSRF  string
	Error string
}

// ReviewView is the operators' policy review.
type ReviewView struct {
	Nav    Nav
	Report *review.Report
	Error  string
}

// TenantPeople is one tenant and its people, for the evidence index.
type TenantPeople struct {
	Tenant string
	People []evidence.Person
}

// EvidenceIndexView lists the tenants and people the user may see.
type EvidenceIndexView struct {
	Nav     Nav
	Tenants []TenantPeople
	Error   string
}

// VerifyStatus is the outcome of verifying the whole journal.
type VerifyStatus struct {
	Checked  bool
	OK       bool
	Runs     int
	Events   int
	Findings int
	Error    string
	At       time.Time
}

// PersonView is the evidence of one person: evidence.Timeline, the same
// report `gatehouse evidence TENANT/PERSON` prints. Runs it leaves out
// (they also worked for someone else) are listed by id and reason only.
type PersonView struct {
	Nav      Nav
	Timeline *evidence.TimelineReport
	Verify   VerifyStatus
}

// VerifyStatusOf turns a timeline's verify report into the badge's status,
// checked at at.
func VerifyStatusOf(tl *evidence.TimelineReport, at time.Time) VerifyStatus {
	st := VerifyStatus{Checked: true, At: at}
	switch {
	case tl.VerifyError != "":
		st.Error = tl.VerifyError
	case tl.Verify != nil:
		st.OK, st.Runs, st.Events, st.Findings = tl.Verify.OK, tl.Verify.Runs, tl.Verify.Events, len(tl.Verify.Findings)
	default:
		st.Checked = false
	}
	return st
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func itoa(n int) string { return strconv.Itoa(n) }

func joinStrings(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

func assuranceNote(a string) string {
	if a == "" {
		return ""
	}
	return " · at least " + a
}
