package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/natstest"
	"github.com/gatehouse/gatehouse/dashboard"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/web"
)

// memJournal keeps the approval events of the in-process queue tests: the
// journal is not what they check.
type memJournal struct {
	mu sync.Mutex
	n  int
}

func (j *memJournal) Record(context.Context, *journal.Event) error {
	j.mu.Lock()
	j.n++
	j.mu.Unlock()
	return nil
}

// queueFixture is a real approval.Service on JetStream KV with 200
// pending requests over three tenants, three rules and four agents (every
// tenth needs finance), one whose arguments try to deceive, and the
// dashboard over it with a reviewer, a finance reviewer and an admin.
type queueFixture struct {
	srv            *httptest.Server
	svc            *approval.Service
	spoof, finance string
}

func newQueueFixture(t *testing.T) *queueFixture {
	t.Helper()
	js := natstest.JetStream(t)
	st, err := approval.NewKVStore(context.Background(), js, "approvals_queue_e2e", 1)
	must(t, err)
	f := &queueFixture{svc: approval.New(st, &memJournal{}, approval.Config{})}
	hold := func(i int, params string, need policy.ApprovalNeed) string {
		tenant := []string{"acme", "globex", "initech"}[i%3]
		run := fmt.Sprintf("r_%026d", i)
		d, args, err := approval.Action{Sink: "provider", Action: "call", Run: run, Params: json.RawMessage(params)}.Digest()
		must(t, err)
		r, _, err := f.svc.Request(context.Background(), approval.Hold{Run: run, Effect: fmt.Sprintf("e_%d", i), Tenant: tenant,
			Person: fmt.Sprintf("person%02d", i%17), Agent: []string{"invoice-bot", "refund-bot", "payroll-bot", "travel-bot"}[i%4],
			Sink: "provider", Action: "call", ActionDigest: d, Arguments: args, Need: need,
			Checks: []approval.Check{{Change: fmt.Sprintf("pay %d.00 EUR", 100+i), Outcome: "allow", Rule: "grounding:invoices", Records: []string{"r_x/e_read sha256:9f2c"}}}})
		must(t, err)
		return r.ID
	}
	reviewer := policy.ApprovalNeed{Rule: "approval:refunds", Roles: []string{"reviewer"}, Assurance: "password"}
	finance := policy.ApprovalNeed{Rule: "approval:payments", Roles: []string{"finance"}, Assurance: "password"}
	for i := range 198 {
		need := reviewer
		if i%10 == 0 {
			need = finance
		}
		id := hold(i, fmt.Sprintf(`{"amount":"%d.00","iban":"DE89370400440532%06d","memo":"invoice INV-%04d"}`, 100+i, i, 8000+i), need)
		if i == 10 {
			f.finance = id
		}
	}
	f.spoof = hold(198, `{"status":"pay\u202eexe.txt","file":"\u202egnp.exe","to":"p\u0430ypal","note":"`+strings.Repeat("very long note ", 1400)+`"}`, reviewer)
	hold(199, `{"amount":"8812.00","memo":"refund order 8812"}`, reviewer)

	dir := t.TempDir()
	users := web.OpenUsers(filepath.Join(dir, "users.json"))
	for _, u := range []web.User{{Name: "rita", Roles: []web.Role{web.RoleReviewer}}, {Name: "fin", Roles: []web.Role{web.RoleReviewer, "finance"}},
		{Name: "ada", Roles: []web.Role{web.RoleAdmin}}} {
		must(t, users.Add(u, dashPassword))
	}
	f.srv = httptest.NewServer(web.New(web.Config{Status: func() dashboard.Status { return dashboard.Status{Mode: "strict"} },
		Users: users, Approvals: f.svc, JournalDir: dir}))
	t.Cleanup(f.srv.Close)
	return f
}

func count(t *testing.T, v *viewer, sel string) int {
	t.Helper()
	n, err := v.page.Locator(sel).Count()
	must(t, err)
	return n
}

func text(t *testing.T, v *viewer, sel string) string {
	t.Helper()
	s, err := v.page.Locator(sel).First().InnerText()
	must(t, err)
	return s
}

// The approvals page at volume, as a reviewer works it: 200 pending in
// pages of 50, filters, search, sort, keyboard navigation, relative times
// with the exact time on hover, requests they may not decide marked and
// explained, arguments that try to deceive shown by code point and folded,
// a reason over the limit refused, and the sign-in redirect kept on the
// site. Screenshots at both sizes; axe-core on every one.
func TestApprovalsQueueInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	f := newQueueFixture(t)
	shots := artifactsDir(t, "screenshots")
	for _, size := range []string{"desktop", "phone"} {
		t.Run(size, func(t *testing.T) {
			v := newViewer(t, f.srv.URL, shots, size)
			v.login("rita")
			v.goTo("/approvals")
			if got := text(t, v, "[data-testid=count-waiting]"); got != "200" {
				t.Fatalf("waiting count %s, want 200", got)
			}
			if n := count(t, v, "[data-testid=request-row]"); n != 50 {
				t.Fatalf("%d rows on the first page, want 50", n)
			}
			if title, _ := v.page.Locator("[data-testid=request-row] time").First().GetAttribute("title"); !strings.HasSuffix(title, "UTC") {
				t.Errorf("a relative time has no exact time on hover: %q", title)
			}
			v.shot("queue-200")
			v.shotTop("queue-200")

			// Keyboard: j opens the first request, j the next, k back; Enter
			// goes to the reason; ] is the next page.
			if size == "desktop" {
				must(t, v.page.Locator("body").Press("j"))
				first, _ := v.page.Locator("[data-testid=request-row]").Nth(0).GetAttribute("data-id")
				must(t, v.page.Locator("#detail[data-id="+first+"]").WaitFor())
				must(t, v.page.Keyboard().Press("j"))
				second, _ := v.page.Locator("[data-testid=request-row]").Nth(1).GetAttribute("data-id")
				must(t, v.page.Locator("#detail[data-id="+second+"]").WaitFor())
				must(t, v.page.Keyboard().Press("k"))
				must(t, v.page.Locator("#detail[data-id="+first+"]").WaitFor())
				if sel, _ := v.page.Locator("[data-testid=request-row].selected").GetAttribute("data-id"); sel != first {
					t.Errorf("the selected row is %s, want %s", sel, first)
				}
				must(t, v.page.Keyboard().Press("j")) // the second is not finance's: it has the form
				must(t, v.page.Locator("#detail[data-id="+second+"] textarea").WaitFor())
				_, _ = v.page.Evaluate(`() => document.activeElement && document.activeElement.blur()`)
				must(t, v.page.Keyboard().Press("Enter"))
				if focused, _ := v.page.Evaluate(`() => document.activeElement && document.activeElement.name`); focused != "reason" {
					t.Errorf("Enter focused %v, want the reason", focused)
				}
				must(t, v.page.Keyboard().Press("Escape"))
				v.shot("queue-keyboard")
				must(t, v.page.Keyboard().Press("]"))
				must(t, v.page.WaitForURL(func(u string) bool { return strings.Contains(u, "page=2") }))
				if got := text(t, v, "[data-testid=matching]"); !strings.Contains(got, "page 2 of 4") {
					t.Errorf("after ]: %q", got)
				}
			}

			// Filters: one tenant, then a search.
			v.goTo("/approvals")
			if size == "phone" { // the filters fold away on a phone
				must(t, v.page.Locator("details.more-filters > summary").Click())
			}
			_, err := v.page.Locator("[data-testid=filter-tenant]").SelectOption(playwright.SelectOptionValues{Values: &[]string{"globex"}})
			must(t, err)
			must(t, v.page.Locator("[data-testid=apply]").Click())
			must(t, v.page.WaitForURL(func(u string) bool { return strings.Contains(u, "tenant=globex") }))
			if got := text(t, v, "[data-testid=pending-count]"); got != "67" {
				t.Errorf("globex: %s matching, want 67", got)
			}
			for _, tn := range rowsText(t, v, ".r3") {
				if !strings.HasPrefix(tn, "globex") {
					t.Errorf("a row of another tenant under tenant=globex: %s", tn)
				}
			}
			v.shot("queue-filtered")
			v.goTo("/approvals?q=8812")
			if n := count(t, v, "[data-testid=request-row]"); n != 1 {
				t.Errorf("search 8812: %d rows", n)
			}
			v.goTo("/approvals?sort=newest")
			if first, _ := v.page.Locator("[data-testid=request-row] .r2").First().InnerText(); !strings.Contains(first, "8812") {
				t.Errorf("newest first starts with %q", first)
			}

			// A request only finance may decide: marked in the list, and the
			// pane says why instead of offering buttons.
			v.goTo("/approvals/" + f.finance)
			if n := count(t, v, "#detail [data-testid=approve]"); n != 0 {
				t.Error("rita is offered Approve on a finance request")
			}
			if why := text(t, v, "[data-testid=why-not]"); !strings.Contains(why, "finance") {
				t.Errorf("why not: %q", why)
			}
			if n := count(t, v, "[data-testid=request-row][data-id="+f.finance+"] [data-testid=lock]"); n != 1 {
				t.Error("the finance request is not marked in the list")
			}
			v.shot("pane-not-allowed")
			v.shotTop("pane-not-allowed")

			// Arguments that try to deceive.
			v.goTo("/approvals/" + f.spoof)
			args := text(t, v, "[data-testid=args]")
			for _, want := range []string{"pay⟨U+202E⟩exe.txt", "⟨U+202E⟩gnp.exe", "Show all"} {
				if !strings.Contains(args, want) {
					t.Errorf("the spoofing arguments lack %q:\n%s", want, args)
				}
			}
			if strings.ContainsRune(args, '\u202e') {
				t.Error("a bidi override reached the page as is")
			}
			if n := count(t, v, "[data-testid=spoof]"); n < 3 {
				t.Errorf("%d arguments flagged, want the status, the file and the mixed-script name", n)
			}
			box, err := v.page.Locator("[data-testid=args]").BoundingBox()
			must(t, err)
			if box.Height > 1400 {
				t.Errorf("the arguments are %.0f px tall: the long note is not folded", box.Height)
			}
			v.shot("pane-spoof")
			v.shotTop("pane-spoof")

			// A reason over the limit, sent past the form's maxlength.
			v.goTo("/approvals/" + f.spoof)
			_, err = v.page.Evaluate(`() => { const t = document.querySelector('#detail textarea[name=reason]'); t.removeAttribute('maxlength'); t.value = 'x'.repeat(100000); }`)
			must(t, err)
			must(t, v.page.Locator("#detail [data-testid=approve]").Click())
			if n := text(t, v, "#notice [data-kind=error]"); !strings.Contains(n, "at most 500 characters") {
				t.Errorf("a 100,000-character reason: %q", n)
			}
			if r, _ := f.svc.Get(context.Background(), f.spoof); r.State != approval.StatePending {
				t.Errorf("the over-long reason decided the request: %s", r.State)
			}
			v.shot("pane-reason-too-long")
			v.errors = nil // the 413 just asked for
			v.noErrors()

			// The admin holds no finance role either.
			ad := newViewer(t, f.srv.URL, shots, size)
			ad.login("ada")
			ad.goTo("/approvals/" + f.finance)
			if n := count(t, ad, "#detail [data-testid=approve]"); n != 0 || !strings.Contains(text(t, ad, "[data-testid=why-not]"), "finance") {
				t.Error("the admin is offered a finance decision, or not told why not")
			}
			fin := newViewer(t, f.srv.URL, shots, size)
			fin.login("fin")
			fin.goTo("/approvals/" + f.finance)
			must(t, fin.page.Locator("#detail [data-testid=approve]").WaitFor())
			fin.shot("pane-finance")
			ad.noErrors()
			fin.noErrors()
		})
	}

	// The sign-in redirect stays on the site, however next is spelt.
	for _, next := range []string{"%2F%09%2Fevil.example%2F", "%2F%2Fevil.example", "%2F%5Cevil.example", "https%3A%2F%2Fevil.example"} {
		v := newViewer(t, f.srv.URL, shots, "desktop")
		v.user = "rita"
		v.goTo("/login?next=" + next)
		must(t, v.page.Locator("input[name=name]").Fill("rita"))
		must(t, v.page.Locator("input[name=password]").Fill(dashPassword))
		must(t, v.page.Locator("button[type=submit]").Click())
		must(t, v.page.WaitForURL(func(u string) bool { return !strings.Contains(u, "/login") }))
		u, _ := url.Parse(v.page.URL())
		if base, _ := url.Parse(f.srv.URL); u.Host != base.Host || u.Path != "/approvals" {
			t.Errorf("next=%s signed in to %s", next, v.page.URL())
		}
	}
}

func rowsText(t *testing.T, v *viewer, sel string) []string {
	t.Helper()
	all, err := v.page.Locator("[data-testid=request-row] " + sel).AllInnerTexts()
	must(t, err)
	return all
}
