package dashboard

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/review"
	"github.com/gatehouse/gatehouse/dashboard/reveal"
)

// Static asset paths; the files are vendored in package web (see its
// static/VERSIONS).
const (
	HtmxJS = "/static/htmx-2.0.11.min.js"
	SseJS  = "/static/htmx-ext-sse-2.2.4.min.js"
	AppCSS = "/static/gatehouse-2.css"
	AppJS  = "/static/gatehouse-2.js"
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
	CSRF   string
	Next   string
	Name   string // refilled after a failed try
	Error  string
	Notice string // why the visitor is here (a session that ended)
	// Pending, when set, asks for the TOTP code of a sign-in whose
	// password was right; it is the token of that half-done sign-in.
	Pending string
}

// SetupView is the first-run page: with Token, the form that creates the
// first admin; without, where to find the setup link.
type SetupView struct {
	CSRF    string
	Token   string
	Error   string
	Enabled bool // serve printed a setup link (false: users come from the CLI only)
}

// ErrorView is an error as a page.
type ErrorView struct {
	Nav      Nav
	SignedIn bool
	Code     int
	Title    string
	Message  string
}

// ApprovalsView is the reviewer's queue: the list (Queue) and the
// selected request (Detail, nil when none is selected).
type ApprovalsView struct {
	Nav     Nav
	Queue   QueueView
	Detail  *DetailView
	Message string
}

// Filter is what the approvals list shows: one state tab, any of the
// filters, a search, a sort order and a page. Its zero value is the
// waiting requests, oldest first, page 1.
type Filter struct {
	State  string // waiting (pending, reopened), unknown (outcome_unknown), decided, all
	Tenant string
	Rule   string
	Agent  string
	Person string
	Age    string // "": any; 1h, 4h, 24h, 7d: waiting longer than that
	Q      string // search in ids, run, arguments, people, rule
	Sort   string // oldest (default), newest, rule, tenant
	Page   int    // from 1
}

// QueueView is what the live part of the queue shows; it is re-rendered
// and pushed over server-sent events on every change.
type QueueView struct {
	Items    []QueueItem // this page of the requests the filter matches
	Matching int         // requests the filter matches
	Page     int
	Pages    int
	PerPage  int
	Counts   map[string]int // requests per state tab, before the other filters
	Filter   Filter
	Options  FilterOptions
	Selected string // the request the detail pane shows
	CSRF     string
	Now      time.Time
}

// FilterOptions are the values the filters offer: what the requests the
// user may see hold.
type FilterOptions struct {
	Tenants, Rules, Agents, Persons []string
}

// QueueItem is one row of the list: the request, and whether the user may
// decide it.
type QueueItem struct {
	Req      approval.Request
	Standing approval.Standing
}

// DetailView is the selected request in full.
type DetailView struct {
	Req      approval.Request
	Standing approval.Standing
	Holder   Holder
	// Earlier is the run's decisions before this request's (from the
	// journal); EarlierError says why they could not be read.
	Earlier      []evidence.DecisionEntry
	EarlierError string
	RunLink      bool // the user may open the run's timeline (/runs/RUN)
	CSRF         string
	Error        string // what came of the last attempt, if it failed
	Done         string // what came of it, if it worked
	Now          time.Time
	Query        string // the list's filter, for links back
}

// Holder is the signed-in user as a decision names them.
type Holder struct {
	Name      string
	Roles     []string
	Assurance string
	TOTP      bool // has an authenticator enrolled
}

// CardView is kept for the recently-decided list and the CLI-less tests:
// one request with, after an attempt, what came of it.
type CardView struct {
	Req   approval.Request
	CSRF  string
	Error string
}

// RunView is one run's timeline, opened from the approvals pane, the
// policy review's examples and the evidence pages.
type RunView struct {
	Nav       Nav
	Run       *evidence.RunEntry
	Back      string // where "back" goes
	BackLabel string
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
	// Scoped is set for a reader bound to one tenant: the whole
	// journal's run and event counts (other tenants' activity) and the
	// read error (the server's paths) are not shown, only the verdict.
	Scoped bool
}

// ForTenant is s as a reader bound to one tenant sees it (Scoped).
func (s VerifyStatus) ForTenant() VerifyStatus {
	s.Scoped, s.Runs, s.Events = true, 0, 0
	if s.Error != "" {
		s.Error = "the journal could not be read (an operator finds why in the server log)"
	}
	return s
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

// exact is t for a title (hover): to the second, UTC.
func exact(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// iso is t for a <time datetime>.
func iso(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// ago is how long before now t was, for a person: "just now", "5 min ago",
// "3 h ago", "2 days ago", then the date.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 45*time.Second:
		return "just now"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes()+0.5)) + " min ago"
	case d < 24*time.Hour:
		return strconv.Itoa(int(d.Hours()+0.5)) + " h ago"
	case d < 14*24*time.Hour:
		n := int(d.Hours()/24 + 0.5)
		if n == 1 {
			return "1 day ago"
		}
		return strconv.Itoa(n) + " days ago"
	}
	return t.UTC().Format("2006-01-02")
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

func jsonUnquote(v string, s *string) error { return json.Unmarshal([]byte(v), s) }

// heldLabel names the held action an approval entry of r decided: the
// decision that held effect (sink, action and target), "" when the run
// has none of that effect.
func heldLabel(r evidence.RunEntry, effect string) string {
	for _, d := range r.Decisions {
		if d.Effect == effect && d.Outcome == journal.OutcomeHeld {
			return reveal.Short(string(d.Sink)+" "+d.Label, 100) + " (held " + d.Time.UTC().Format("15:04:05") + ")"
		}
	}
	for _, d := range r.Decisions {
		if d.Effect == effect {
			return reveal.Short(string(d.Sink)+" "+d.Label, 100)
		}
	}
	return ""
}

// safeID is s reduced to letters, digits, '-' and '_', for element ids
// and file names in instructions.
func safeID(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
