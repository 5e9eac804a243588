package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/dashboard"
)

// The approvals pages. GET /approvals lists the requests the user may see
// (their tenant's, when bound to one) through a Filter read from the query
// (state tab, tenant, rule, agent, person, age, search, sort, page) and
// shows the selected one (?sel=ID) in a pane; GET /approvals/ID is the same
// page with ID selected, and /approvals/ID/pane the pane alone (htmx).
// /approvals/events streams the list for the same filter, re-rendered after
// every change (event "queue"), and the id of every changed request (event
// "changed"), so the page refreshes an open pane. Decisions answer with
// the pane in its new state and a notice.

func (a *app) tenantOf(c echo.Context) string { return a.session(c).User.Tenant }

// filterOf reads the list's filter from the query; values over the
// limits are refused (ok false, with the message).
func filterOf(c echo.Context) (dashboard.Filter, string) {
	q := c.QueryParams()
	f := dashboard.Filter{State: q.Get("state"), Tenant: q.Get("tenant"), Rule: q.Get("rule"), Agent: q.Get("agent"),
		Person: q.Get("person"), Age: q.Get("age"), Q: strings.TrimSpace(q.Get("q")), Sort: q.Get("sort")}
	switch f.State {
	case "waiting", "unknown", "decided", "all":
	default:
		f.State = "waiting"
	}
	switch f.Sort {
	case "oldest", "newest", "rule", "tenant":
	default:
		f.Sort = "oldest"
	}
	if _, ok := ages[f.Age]; !ok {
		f.Age = ""
	}
	f.Page, _ = strconv.Atoi(q.Get("page"))
	if f.Page < 1 || f.Page > 1_000_000 {
		f.Page = 1
	}
	msg := ""
	if tooLong(f.Q, MaxSearch) {
		f.Q, msg = "", fmt.Sprintf("A search may be at most %d characters; it was not applied.", MaxSearch)
	}
	for _, v := range []*string{&f.Tenant, &f.Rule, &f.Agent, &f.Person} {
		if tooLong(*v, MaxFilter) {
			*v, msg = "", fmt.Sprintf("A filter value may be at most %d characters; it was not applied.", MaxFilter)
		}
	}
	return f, msg
}

var ages = map[string]time.Duration{"": 0, "1h": time.Hour, "4h": 4 * time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}

func stateTab(s approval.State) string {
	switch s {
	case approval.StatePending, approval.StateReopened:
		return "waiting"
	case approval.StateOutcomeUnknown:
		return "unknown"
	}
	return "decided"
}

// holder is the signed-in user as a decision names them.
func (a *app) holder(ss *Session) dashboard.Holder {
	return dashboard.Holder{Name: ss.User.Name, Roles: roleNames(ss.User.Roles), Assurance: ss.Assurance, TOTP: ss.User.TOTPEnrolled}
}

func standing(r *approval.Request, h dashboard.Holder) approval.Standing {
	return approval.StandingOf(r, h.Name, h.Roles, h.Assurance)
}

// matches reports whether r passes f's filters (not its state tab).
func matches(r *approval.Request, f dashboard.Filter, now time.Time) bool {
	if f.Tenant != "" && r.Tenant != f.Tenant || f.Rule != "" && r.Rule != f.Rule || f.Agent != "" && r.Agent != f.Agent ||
		f.Person != "" && r.Person != f.Person {
		return false
	}
	if d := ages[f.Age]; d > 0 && now.Sub(r.Requested) < d {
		return false
	}
	if f.Q != "" && !searchHit(r, strings.ToLower(f.Q)) {
		return false
	}
	return true
}

// searchHit looks for q (lower case) in the request's ids, run, rule,
// people and every argument, case-insensitively.
func searchHit(r *approval.Request, q string) bool {
	fields := []string{r.Rule, r.Tenant, r.Person, r.Agent, r.Sink + "." + r.Action}
	if len(q) >= 8 { // ids and digests are random hex: a short query would hit them by chance
		fields = append(fields, strings.ToLower(r.ID), strings.ToLower(r.Run), r.ActionDigest)
	}
	for _, s := range fields {
		if strings.Contains(strings.ToLower(s), q) {
			return true
		}
	}
	for _, arg := range r.Arguments {
		if strings.Contains(strings.ToLower(arg.Name), q) || strings.Contains(strings.ToLower(arg.Value), q) {
			return true
		}
	}
	return false
}

// queueOf makes the list f shows of all (the requests the user may see).
func queueOf(all []approval.Request, f dashboard.Filter, h dashboard.Holder, sel, csrf string, now time.Time) dashboard.QueueView {
	q := dashboard.QueueView{Filter: f, CSRF: csrf, Selected: sel, Now: now, PerPage: PerPage, Counts: map[string]int{}}
	opts := map[string]map[string]bool{"t": {}, "r": {}, "a": {}, "p": {}}
	var hit []approval.Request
	for i := range all {
		r := &all[i]
		opts["t"][r.Tenant], opts["r"][r.Rule], opts["p"][r.Person] = true, true, true
		if r.Agent != "" {
			opts["a"][r.Agent] = true
		}
		if !matches(r, f, now) {
			continue
		}
		tab := stateTab(r.State)
		q.Counts[tab]++
		q.Counts["all"]++
		if f.State == "all" || f.State == tab {
			hit = append(hit, *r)
		}
	}
	keys := func(m map[string]bool) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	q.Options = dashboard.FilterOptions{Tenants: keys(opts["t"]), Rules: keys(opts["r"]), Agents: keys(opts["a"]), Persons: keys(opts["p"])}
	less := func(x, y *approval.Request) int {
		c := x.Requested.Compare(y.Requested)
		if f.State == "decided" {
			c = y.Updated.Compare(x.Updated) // the latest decided first
		}
		switch f.Sort {
		case "newest":
			c = -c
		case "rule":
			if x.Rule != y.Rule {
				return strings.Compare(x.Rule, y.Rule)
			}
		case "tenant":
			if x.Tenant != y.Tenant {
				return strings.Compare(x.Tenant, y.Tenant)
			}
			if x.Person != y.Person {
				return strings.Compare(x.Person, y.Person)
			}
		}
		if c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	}
	slices.SortFunc(hit, func(x, y approval.Request) int { return less(&x, &y) })
	q.Matching = len(hit)
	q.Pages = max(1, (len(hit)+PerPage-1)/PerPage)
	q.Page = min(f.Page, q.Pages)
	q.Filter.Page = q.Page
	lo := (q.Page - 1) * PerPage
	for _, r := range hit[lo:min(lo+PerPage, len(hit))] {
		q.Items = append(q.Items, dashboard.QueueItem{Req: r, Standing: standing(&r, h)})
	}
	return q
}

var errNoApprovals = errors.New("web: no approvals engine in this process")

func (a *app) list(ctx context.Context, tenant string) ([]approval.Request, error) {
	if a.cfg.Approvals == nil {
		return nil, errNoApprovals
	}
	return a.cfg.Approvals.List(ctx, approval.Filter{Tenant: tenant})
}

func (a *app) approvalsPage(c echo.Context) error {
	return a.approvals(c, c.QueryParam("sel"))
}

func (a *app) approvalPage(c echo.Context) error { return a.approvals(c, c.Param("id")) }

func (a *app) approvals(c echo.Context, sel string) error {
	n := a.nav(c, "approvals")
	ss := a.session(c)
	f, msg := filterOf(c)
	all, err := a.list(c.Request().Context(), ss.User.Tenant)
	v := dashboard.ApprovalsView{Nav: n, Message: msg}
	if err != nil {
		a.log().Error("approvals queue", "err", err)
		v.Message = "The approvals queue could not be read; see the server log."
	}
	now := a.now()
	v.Queue = queueOf(all, f, a.holder(ss), sel, n.CSRF, now)
	if sel != "" {
		if r := find(all, sel); r != nil {
			d := a.detail(c, r, f)
			v.Detail = &d
		} else if c.Param("id") != "" {
			return echo.NewHTTPError(http.StatusNotFound, "There is no such request, or it is not yours to see.")
		}
	}
	return render(c, http.StatusOK, dashboard.ApprovalsPage(v))
}

func find(all []approval.Request, id string) *approval.Request {
	for i := range all {
		if all[i].ID == id {
			return &all[i]
		}
	}
	return nil
}

// detail is r's pane for the signed-in user: their standing, and the
// run's decisions before r was requested (read from the journal).
func (a *app) detail(c echo.Context, r *approval.Request, f dashboard.Filter) dashboard.DetailView {
	ss := a.session(c)
	h := a.holder(ss)
	d := dashboard.DetailView{Req: *r, Holder: h, Standing: standing(r, h), CSRF: a.csrfToken(c), Now: a.now(),
		Query: f.Query(), RunLink: a.cfg.JournalDir != ""}
	if a.cfg.JournalDir == "" {
		d.EarlierError = "This process has no journal to read the run from."
		return d
	}
	run, err := a.runFor(ss.User, r.Run)
	if err != nil {
		d.EarlierError = "The run's journal file is not readable here (yet): its decisions appear once the journal writer has written them."
		d.RunLink = false
		return d
	}
	for _, e := range run.Decisions {
		if e.Time.After(r.Requested) || e.Effect == r.Effect {
			continue
		}
		d.Earlier = append(d.Earlier, e)
	}
	if n := len(d.Earlier); n > 20 {
		d.Earlier = d.Earlier[n-20:]
	}
	return d
}

func (a *app) approvalPane(c echo.Context) error {
	r, err := a.request(c)
	if err != nil {
		code, text := errorText(err)
		return echo.NewHTTPError(code, text)
	}
	f, _ := filterOf(c)
	return render(c, http.StatusOK, dashboard.Pane(a.detail(c, r, f)))
}

// approvalEvents streams the list of the page's filter as the server-sent
// event "queue" after every change Watch reports (changes arriving
// together are sent once), "changed" with each changed request's id, and
// a comment every 25 s to keep proxies from closing it. It lists the
// store once, then keeps the requests up to date from Watch, so a change
// costs a render, not a store scan. The stream ends when the session does
// (checked every 5 s and at its expiry): the page's reconnect then gets
// 401 and says so.
func (a *app) approvalEvents(c echo.Context) error {
	ctx := c.Request().Context()
	ss := a.session(c)
	ch, err := a.cfg.Approvals.Watch(ctx) // before List: no change falls between
	if err != nil {
		return err
	}
	tenant, csrf := ss.User.Tenant, a.csrfToken(c)
	f, _ := filterOf(c)
	sel := c.QueryParam("sel")
	h := a.holder(ss)
	list, err := a.cfg.Approvals.List(ctx, approval.Filter{Tenant: tenant})
	if err != nil {
		return err
	}
	known := make(map[string]approval.Request, len(list))
	for _, r := range list {
		known[r.ID] = r
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set(echo.HeaderCacheControl, "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "retry: 2000\n: connected\n\n")
	w.Flush()
	ping := time.NewTicker(25 * time.Second)
	defer ping.Stop()
	check := time.NewTicker(5 * time.Second)
	defer check.Stop()
	expiry := time.NewTimer(time.Until(ss.Expires))
	defer expiry.Stop()
	apply := func(r approval.Request, changed map[string]bool) {
		if tenant != "" && r.Tenant != tenant {
			return
		}
		if old, ok := known[r.ID]; ok && !r.Updated.After(old.Updated) && r.State == old.State {
			return // a replay of what we have
		}
		known[r.ID] = r
		changed[r.ID] = true
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-expiry.C:
			return nil
		case <-check.C:
			if ck, err := c.Cookie(sessionCookie); err != nil || !a.stillSignedIn(ctx, ck.Value) {
				return nil
			}
		case <-ping.C:
			if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
				return nil
			}
			w.Flush()
		case r, ok := <-ch:
			if !ok {
				return nil
			}
			changed := map[string]bool{}
			apply(r, changed)
		drain:
			for {
				select {
				case r2, ok := <-ch:
					if !ok {
						break drain
					}
					apply(r2, changed)
				default:
					break drain
				}
			}
			if len(changed) == 0 {
				continue
			}
			all := make([]approval.Request, 0, len(known))
			for _, r := range known {
				all = append(all, r)
			}
			if err := writeSSE(w, "queue", dashboard.ApprovalQueue(queueOf(all, f, h, sel, csrf, a.now())), ctx); err != nil {
				return nil
			}
			ids := make([]string, 0, len(changed))
			for id := range changed {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				if _, err := io.WriteString(w, "event: changed\ndata: "+id+"\n\n"); err != nil {
					return nil
				}
			}
			w.Flush()
		}
	}
}

// stillSignedIn reports whether the session id is still a live session of
// a user as stored. A store that cannot be read says no.
func (a *app) stillSignedIn(ctx context.Context, id string) bool {
	ss, err := a.sessions.get(ctx, id)
	return err == nil && ss != nil && a.cfg.Users.Current(ss.User)
}

// writeSSE writes one event whose data is the rendered component, one
// data: field per line.
func writeSSE(w io.Writer, event string, comp templ.Component, ctx context.Context) error {
	var b strings.Builder
	if err := comp.Render(ctx, &b); err != nil {
		return err
	}
	var out strings.Builder
	out.Grow(b.Len() + 64)
	out.WriteString("event: " + event + "\n")
	for _, line := range strings.Split(b.String(), "\n") {
		out.WriteString("data: ")
		out.WriteString(line)
		out.WriteByte('\n')
	}
	out.WriteByte('\n')
	_, err := io.WriteString(w, out.String())
	return err
}

// request loads a request the signed-in reviewer may see; another
// tenant's request is not found.
func (a *app) request(c echo.Context) (*approval.Request, error) {
	if a.cfg.Approvals == nil {
		return nil, approval.ErrNotFound
	}
	r, err := a.cfg.Approvals.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return nil, err
	}
	if t := a.tenantOf(c); t != "" && r.Tenant != t {
		return nil, approval.ErrNotFound
	}
	return r, nil
}

func roleNames(rs []Role) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func (a *app) decide(c echo.Context) error {
	r, err := a.request(c)
	if err != nil {
		return a.paneError(c, nil, err)
	}
	ss := a.session(c)
	var approved bool
	switch c.FormValue("decision") {
	case "approve":
		approved = true
	case "refuse":
	default:
		return echo.NewHTTPError(http.StatusBadRequest, "decision must be approve or refuse")
	}
	reason := strings.TrimSpace(c.FormValue("reason"))
	if !approved && reason == "" {
		return a.paneError(c, r, errReasonNeeded)
	}
	if tooLong(reason, MaxReason) {
		return a.paneError(c, r, errReasonLong)
	}
	h := a.holder(ss)
	d := approval.Decision{Approved: approved, Approver: h.Name, Roles: h.Roles, Assurance: h.Assurance,
		Authenticated: "dashboard-session", Reason: reason, Time: a.now().UTC()}
	got, err := a.cfg.Approvals.Decide(c.Request().Context(), r.ID, d)
	if err != nil {
		return a.paneError(c, r, err)
	}
	a.log().Info("approval decided", "id", r.ID, "approved", approved, "by", ss.User.Name)
	return a.paneDone(c, got)
}

var (
	errReasonNeeded = errors.New("web: a refusal needs a reason")
	errReasonLong   = errors.New("web: reason too long")
)

func (a *app) reconcile(c echo.Context) error {
	r, err := a.request(c)
	if err != nil {
		return a.paneError(c, nil, err)
	}
	reason := strings.TrimSpace(c.FormValue("reason"))
	if reason == "" {
		return a.paneError(c, r, errReasonNeeded)
	}
	if tooLong(reason, MaxReason) {
		return a.paneError(c, r, errReasonLong)
	}
	h := a.holder(a.session(c))
	rec := approval.Reconciliation{Happened: c.FormValue("happened") == "yes", By: h.Name, Roles: h.Roles, Assurance: h.Assurance,
		Reason: reason, Time: a.now().UTC()}
	got, err := a.cfg.Approvals.Reconcile(c.Request().Context(), r.ID, rec)
	if err != nil {
		return a.paneError(c, r, err)
	}
	a.log().Info("approval reconciled", "id", r.ID, "happened", rec.Happened, "by", h.Name)
	return a.paneDone(c, got)
}

func (a *app) paneDone(c echo.Context, r *approval.Request) error {
	if c.Request().Header.Get("HX-Request") == "" {
		return c.Redirect(http.StatusSeeOther, "/approvals/"+r.ID)
	}
	f, _ := filterOf(c)
	d := a.detail(c, r, f)
	d.Done = "Done: the request is now " + string(r.State) + "."
	return render(c, http.StatusOK, dashboard.DecisionReply(d))
}

// errorCodes turns the approvals engine's sentinels into HTTP statuses and
// text for a person: the one table of this edge.
var errorCodes = []struct {
	err  error
	code int
	text string
}{
	{approval.ErrNotFound, http.StatusNotFound, "This request does not exist, or is not yours to see."},
	{approval.ErrAlreadyDecided, http.StatusConflict, "Someone decided this first; their decision stands."},
	{approval.ErrWrongState, http.StatusConflict, "This request has moved on (its state changed); the page shows where it is now."},
	{approval.ErrNotAllowed, http.StatusForbidden, "You may not decide this one: it needs another role or a stronger sign-in, or you asked for it yourself."},
	{approval.ErrBadInput, http.StatusBadRequest, fmt.Sprintf("A reason may be at most %d characters.", MaxReason)},
	{errReasonNeeded, http.StatusBadRequest, "Say why: a refusal or a reconciliation needs a reason."},
	{errReasonLong, http.StatusBadRequest, fmt.Sprintf("A reason may be at most %d characters.", MaxReason)},
}

func errorText(err error) (int, string) {
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.code, e.text
		}
	}
	return http.StatusInternalServerError, "Something went wrong; see the server log."
}

// paneError answers a failed decision: htmx gets the pane (status 200, so
// htmx swaps it, the typed reason kept) with the error and the request's
// current state; a plain form gets the status code as a page.
func (a *app) paneError(c echo.Context, r *approval.Request, err error) error {
	code, text := errorText(err)
	if code == http.StatusInternalServerError {
		a.log().Error("approval", "err", err)
	}
	if r != nil && a.cfg.Approvals != nil {
		if cur, gerr := a.cfg.Approvals.Get(c.Request().Context(), r.ID); gerr == nil {
			r = cur
		}
	}
	if r == nil || c.Request().Header.Get("HX-Request") == "" {
		return echo.NewHTTPError(code, text)
	}
	f, _ := filterOf(c)
	d := a.detail(c, r, f)
	d.Error = text
	return render(c, http.StatusOK, dashboard.DecisionReply(d))
}

// sessionJSON tells the page script whether its session still stands,
// and the CSRF token to send (it changes at a new sign-in): 200
// {"user","expires","csrf"}, or 401.
func (a *app) sessionJSON(c echo.Context) error {
	ss := a.session(c)
	if ss == nil {
		if err, _ := c.Get("sessionErr").(error); err != nil {
			return echo.NewHTTPError(http.StatusServiceUnavailable, "the session store cannot be reached")
		}
		return echo.NewHTTPError(http.StatusUnauthorized, "signed out")
	}
	return c.JSON(http.StatusOK, map[string]string{"user": ss.User.Name, "expires": ss.Expires.UTC().Format(time.RFC3339), "csrf": a.csrfToken(c)})
}

// runPage is one run's timeline: for reviewers (the approvals pane links
// it), operators (policy review's examples) and auditors; a user bound to
// a tenant sees only that tenant's runs (another's is not found).
//
// A tenant-bound user is shown a run by the rule of the tenant's export
// and timeline (evidence.RunOfTenant): a run of their tenant that also
// worked for someone else is not found either, or its page would show
// what it did for another tenant.
func (a *app) runPage(c echo.Context) error {
	u := a.session(c).User
	run, err := a.runFor(u, c.Param("run"))
	if err != nil {
		return echo.NewHTTPError(http.StatusNotFound, "There is no such run in the journal (it may not be written yet).")
	}
	back, label := "/approvals", "Back to approvals"
	switch {
	case c.QueryParam("from") == "review":
		back, label = "/review", "Back to policy review"
	case u.Has(RoleReviewer):
	case u.Has(RoleOperator):
		back, label = "/review", "Back to policy review"
	default:
		back, label = "/evidence", "Back to evidence"
	}
	active := "approvals"
	switch {
	case u.Has(RoleReviewer):
	case u.Has(RoleOperator):
		active = "review"
	default:
		active = "evidence"
	}
	return render(c, http.StatusOK, dashboard.RunPage(dashboard.RunView{Nav: a.nav(c, active), Run: run, Back: back, BackLabel: label}))
}

// runFor reads a run as u may see it: whole for a user of the whole
// deployment; for one bound to a tenant, only a run the tenant's export
// would hold (evidence.RunOfTenant), else evidence.ErrNoRun.
func (a *app) runFor(u User, id string) (*evidence.RunEntry, error) {
	if u.Tenant != "" {
		return evidence.RunOfTenant(a.cfg.JournalDir, id, u.Tenant)
	}
	return evidence.RunOf(a.cfg.JournalDir, id)
}
