package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/journal"
)

// The approvals rule of the flows: bank payments go to a reviewer signed
// in with a password. tighterPayments is the same rule after an operator
// tightened it: only a treasurer may approve.
const (
	reviewerPayments = runnerCard + `
approvals:
  - name: payments
    match: {provider: bank, method: POST, path: /payments}
    roles: [reviewer]
    assurance: password
`
	tighterPayments = runnerCard + `
approvals:
  - name: payments
    match: {provider: bank, method: POST, path: /payments}
    roles: [treasurer]
    assurance: password
`
)

// flows is one `gatehouse serve` (restarted where a case needs it) with a
// bank behind the provider sink, one agent run for acme/ada, and two
// reviewers watching the live queue: rita in a desktop Chromium, ruth (a
// reviewer and a treasurer) in a phone-sized one.
type flows struct {
	root   *testing.T
	t      *testing.T // the case running
	data   string
	flags  []string
	rules  string // the --policy file
	srv    *server
	bank   *bank
	run    string
	rita   *viewer
	ruth   *viewer
	viewrs []*viewer
}

// use makes t the test that f and its viewers report to.
func (f *flows) use(t *testing.T) {
	f.t = t
	for _, v := range f.viewrs {
		v.t = t
	}
}

func (f *flows) pay(amount string) (broker.EffectReply, int) {
	f.t.Helper()
	return callProvider(f.t, f.run, bankPayment(amount), "--data-dir", f.data)
}

// held proposes a payment the rule gates and returns its approval id.
func (f *flows) held(amount string) string {
	f.t.Helper()
	r, code := f.pay(amount)
	if code != 3 || r.Error == nil || r.Error.Code != broker.CodeApprovalRequired || r.Decision == nil || r.Decision.Approval == "" {
		f.t.Fatalf("payment of %s not held: exit %d %+v %+v", amount, code, r.Decision, r.Error)
	}
	return r.Decision.Approval
}

// queuePage is where the flows' viewers watch: every state, newest first.
const queuePage = "/approvals?state=all&sort=newest"

// card is the request's pane on v's page, in state st; it selects the
// request in the list first when the pane shows another one.
func card(v *viewer, id string, st approval.State) playwright.Locator {
	if n, _ := v.page.Locator("#detail[data-id=" + id + "]").Count(); n == 0 {
		row := v.page.Locator("[data-testid=request-row][data-id=" + id + "] a")
		if row.WaitFor() == nil {
			_ = row.Click()
		}
	}
	return v.page.Locator("#detail[data-id=" + id + "][data-state=" + string(st) + "]")
}

// recent is the request's row in the live list, in state st.
func recent(v *viewer, id string, st approval.State) playwright.Locator {
	return v.page.Locator("[data-testid=request-row][data-id=" + id + "][data-state=" + string(st) + "]")
}

// waitAll waits until loc(v) is on every viewer's page, without a reload:
// the live queue brought it.
func (f *flows) waitAll(what string, loc func(*viewer) playwright.Locator) {
	f.t.Helper()
	for _, v := range f.viewrs {
		if err := loc(v).WaitFor(); err != nil {
			v.shot("failed")
			html, _ := v.page.Content()
			f.t.Fatalf("%s: not on %s's %s page: %v\n%s", what, v.user, v.size, err, html)
		}
	}
}

func (f *flows) shots(name string) {
	f.t.Helper()
	for _, v := range f.viewrs {
		v.shot(name)
	}
}

// notice waits for the page's notice about request id, of kind "ok" or
// "error", and returns its text.
func notice(t *testing.T, v *viewer, id, kind string) string {
	t.Helper()
	n := v.page.Locator("#notice [data-id=" + id + "][data-kind=" + kind + "]")
	if err := n.WaitFor(); err != nil {
		v.shot("failed")
		html, _ := v.page.Locator("#notice").InnerHTML()
		t.Fatalf("no %s notice about %s on %s's page: %v (notice: %s)", kind, id, v.user, err, html)
	}
	s, err := n.InnerText()
	must(t, err)
	return s
}

// events waits until the run's journal holds every type in want for the
// approval id, then returns the types of all its events about id, in
// order.
func (f *flows) events(id string, want ...journal.Type) []journal.Type {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got []journal.Type
		sc := bufio.NewScanner(strings.NewReader(readRun(f.t, f.data, f.run)))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !strings.Contains(sc.Text(), `"`+id+`"`) {
				continue
			}
			var ev struct {
				Type journal.Type `json:"type"`
			}
			must(f.t, json.Unmarshal(sc.Bytes(), &ev))
			got = append(got, ev.Type)
		}
		missing := false
		for _, w := range want {
			if !containsType(got, w) {
				missing = true
			}
		}
		if !missing {
			return got
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("journal events of %s: %v, want %v among them", id, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func containsType(ts []journal.Type, t journal.Type) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

func countType(ts []journal.Type, t journal.Type) int {
	n := 0
	for _, x := range ts {
		if x == t {
			n++
		}
	}
	return n
}

// verify runs `gatehouse verify` over the journal as it stands.
func (f *flows) verify(after string) {
	f.t.Helper()
	if r := gh(f.t, "verify", "--json", filepath.Join(f.data, "journal")); r.code != 0 {
		f.t.Fatalf("verify after %s: exit %d\n%s%s", after, r.code, r.stdout, r.stderr)
	}
}

// leave takes every viewer off the dashboard (closing its live stream)
// before serve goes away.
func (f *flows) leave() {
	f.t.Helper()
	for _, v := range f.viewrs {
		if _, err := v.page.Goto("about:blank"); err != nil {
			f.t.Fatal(err)
		}
	}
}

// restart starts serve again on the same data dir (new ports); the
// reviewers' sessions are in JetStream KV in that data dir, so they go on
// signed in.
func (f *flows) restart() {
	f.t.Helper()
	if err := os.Remove(filepath.Join(f.data, "endpoints.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		f.t.Fatal(err)
	}
	f.srv = serve(f.root, f.data, f.flags...) // outlives the case that restarts it
	for _, v := range f.viewrs {
		v.base = f.srv.ep.HTTP
		v.goTo(queuePage)
		if strings.Contains(v.page.URL(), "/login") {
			f.t.Fatalf("%s was signed out by a restart of serve", v.user)
		}
		must(f.t, v.page.Locator("[data-testid=tab-all]").WaitFor())
	}
}

// Approval flows end to end: an agent's payments over NATS (the CLI's
// `effect provider`), held by an approvals rule of a strict `gatehouse
// serve`, decided by reviewers in Chromium on the live queue. Each case
// checks what the agent gets, what the dashboard shows (saved as
// screenshots at desktop and phone width), the journal's approval events,
// and that `gatehouse verify` passes.
func TestApprovalFlowsInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gatehouse serve and Chromium")
	}
	bk := newBank()
	bankSrv := httptest.NewServer(bk)
	defer bankSrv.Close()
	data := t.TempDir()
	flags, _ := approvalFiles(t, data, bankSrv.URL)
	flags = append(flags, "--approval-claim-timeout", "4s") // the last one wins
	f := &flows{root: t, t: t, data: data, flags: flags, rules: filepath.Join(data, "rules.yaml"), bank: bk}
	must(t, os.WriteFile(f.rules, []byte(reviewerPayments), 0o600))
	for _, u := range [][]string{{"rita", "--role", "reviewer"}, {"ruth", "--role", "reviewer,treasurer"}} {
		if r := ghIn(t, dashPassword+"\n", append([]string{"users", "add", "--data-dir", data, "--password-stdin"}, u...)...); r.code != 0 {
			t.Fatalf("users add %v: %d %s", u, r.code, r.stderr)
		}
	}
	f.srv = serve(t, data, flags...)
	f.run = strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--agent", erpRunner).stdout)
	if !broker.ValidRunID(f.run) {
		t.Fatalf("work open printed %q", f.run)
	}
	shots := artifactsDir(t, "screenshots")
	t.Logf("screenshots in %s", shots)
	f.rita = newViewer(t, f.srv.ep.HTTP, shots, "desktop")
	f.ruth = newViewer(t, f.srv.ep.HTTP, shots, "phone")
	f.rita.user, f.ruth.user = "rita", "ruth"
	f.viewrs = []*viewer{f.rita, f.ruth}
	for _, v := range f.viewrs {
		v.login(v.user)
		v.goTo(queuePage)
		must(t, v.page.Locator("[data-testid=tab-all]").WaitFor())
	}

	// The cases share serve, the run and the queue, in this order; after a
	// failed case the state the next expects is not there.
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"refuse", f.refuse},
		{"changed-argument-asks-again", f.changedArgument},
		{"double-approval-race", f.race},
		{"killed-between-claim-and-settle", f.killed},
		{"tightened-policy", f.tightened},
	} {
		if !t.Run(c.name, func(t *testing.T) { f.use(t); c.run() }) {
			return
		}
	}
	f.use(t)

	f.leave()
	f.srv.stop(t)
	f.verify("the last case")
	if j := readRun(t, data, f.run); strings.Contains(j, "tok-ada") || strings.Contains(j, "GB82WEST") {
		t.Error("a credential or an argument reached the journal")
	}
	for _, v := range f.viewrs {
		v.noErrors()
	}
}

// (a) A reviewer refuses with a reason; a refusal without one is sent
// back. The agent's retry of the same action is refused and nothing pays.
func (f *flows) refuse() {
	t := f.t
	id := f.held("110.00")
	f.waitAll("the held payment", func(v *viewer) playwright.Locator { return card(v, id, approval.StatePending) })
	text, err := card(f.rita, id, approval.StatePending).InnerText()
	must(t, err)
	if !strings.Contains(text, "110.00") || !strings.Contains(text, "GB82WEST12345698765432") || !strings.Contains(text, "approval:payments") {
		t.Errorf("the card does not show the exact action:\n%s", text)
	}
	f.shots("flow-pending")

	c := card(f.rita, id, approval.StatePending)
	must(t, c.Locator("[data-testid=refuse]").Click())
	if n := notice(t, f.rita, id, "error"); !strings.Contains(n, "needs a reason") {
		t.Errorf("refusing without a reason: notice %q", n)
	}
	must(t, card(f.rita, id, approval.StatePending).Locator("[data-testid=card-error]").WaitFor())
	f.rita.shot("flow-refuse-needs-reason")

	must(t, card(f.rita, id, approval.StatePending).Locator("textarea[name=reason]").Fill("no invoice matches this payment"))
	must(t, card(f.rita, id, approval.StatePending).Locator("[data-testid=refuse]").Click())
	f.waitAll("the refusal", func(v *viewer) playwright.Locator { return recent(v, id, approval.StateRefused) })
	if n := notice(t, f.rita, id, "ok"); !strings.Contains(n, "refused") {
		t.Errorf("after refusing: notice %q", n)
	}
	f.shots("flow-refused")

	r, code := f.pay("110.00")
	if code != 1 || r.Outcome != nil || r.Decision == nil || r.Decision.Outcome != journal.OutcomeRefused || r.Decision.Refusal != "approval-missing" {
		t.Fatalf("the agent's retry of a refused action: exit %d %+v %+v", code, r.Decision, r.Error)
	}
	if !strings.Contains(reasonsOf(r), "refused this exact action by rita") {
		t.Errorf("the retry's reasons do not say who refused: %s", reasonsOf(r))
	}
	if p := f.bank.paid(); len(p) != 0 {
		t.Fatalf("refused, yet paid: %v", p)
	}
	ts := f.events(id, journal.TypeApprovalRequest, journal.TypeApprovalRefused)
	if containsType(ts, journal.TypeApprovalClaim) {
		t.Errorf("a refused approval was claimed: %v", ts)
	}
	if !strings.Contains(readRun(t, f.data, f.run), "no invoice matches this payment") {
		t.Error("the refusal's reason is not in the journal")
	}
	f.verify("a refusal")
}

func reasonsOf(r broker.EffectReply) string {
	var b strings.Builder
	if r.Decision != nil {
		for _, x := range r.Decision.Reasons {
			b.WriteString(x.Detail + "; ")
		}
	}
	return b.String()
}

// (b) A reviewer approves; the agent's same action runs once; the agent
// then changes one argument, and a new request appears in the open queue.
func (f *flows) changedArgument() {
	t := f.t
	id := f.held("120.00")
	f.waitAll("the held payment", func(v *viewer) playwright.Locator { return card(v, id, approval.StatePending) })
	must(t, card(f.rita, id, approval.StatePending).Locator("textarea[name=reason]").Fill("invoice INV-120 checked"))
	must(t, card(f.rita, id, approval.StatePending).Locator("[data-testid=approve]").Click())
	f.waitAll("the approval", func(v *viewer) playwright.Locator { return recent(v, id, approval.StateApproved) })
	if n := notice(t, f.rita, id, "ok"); !strings.Contains(n, "approved") {
		t.Errorf("after approving: notice %q", n)
	}
	f.shots("flow-approved")

	ran, code := f.pay("120.00")
	if code != 0 || ran.Outcome == nil || ran.Outcome.Status != "ok" || ran.Decision.Approval != id {
		t.Fatalf("the approved payment: exit %d %+v %+v %+v", code, ran.Decision, ran.Outcome, ran.Error)
	}
	if p := f.bank.paid(); len(p) != 1 || p[id] != "120.00" {
		t.Fatalf("payments %v, want one of 120.00 keyed by %s", p, id)
	}
	f.waitAll("the settled approval", func(v *viewer) playwright.Locator { return recent(v, id, approval.StateSettled) })

	id2 := f.held("121.00")
	if id2 == id {
		t.Fatalf("a changed amount ran under the approval of another: %s", id)
	}
	f.waitAll("the changed payment, asking again", func(v *viewer) playwright.Locator { return card(v, id2, approval.StatePending) })
	text, err := card(f.ruth, id2, approval.StatePending).InnerText()
	must(t, err)
	if !strings.Contains(text, "121.00") {
		t.Errorf("the new request does not show the changed amount:\n%s", text)
	}
	f.shots("flow-asks-again")
	// Ruth starts typing a reason; the live queue must not wipe it when
	// other requests change (checked in the next case).
	must(t, card(f.ruth, id2, approval.StatePending).Locator("textarea[name=reason]").Fill("draft: ask finance"))

	ts := f.events(id, journal.TypeApprovalDecision, journal.TypeApprovalClaim, journal.TypeApprovalSettle)
	if countType(ts, journal.TypeApprovalClaim) != 1 {
		t.Errorf("events of the approved request: %v", ts)
	}
	f.events(id2, journal.TypeApprovalRequest)
	f.verify("an approval and a changed argument")
}

// (c) Two reviewers click approve at the same moment: both requests are
// in flight together (each browser holds its request until the other's is
// sent), exactly one decision stands, the other reviewer is told so, and
// the agent's payment runs once even when proposed twice at once.
func (f *flows) race() {
	t := f.t
	id := f.held("130.00")
	// The list was re-rendered for the new request while ruth's pane
	// still shows the previous one: her draft is still in its field.
	kept := false
	if inputs, err := f.ruth.page.Locator("#detail textarea[name=reason]").All(); err == nil {
		for _, in := range inputs {
			if v, _ := in.InputValue(); v == "draft: ask finance" {
				kept = true
			}
		}
	}
	if !kept {
		t.Error("the live queue wiped a reason the reviewer was typing")
	}
	f.waitAll("the held payment", func(v *viewer) playwright.Locator { return card(v, id, approval.StatePending) })

	var barrier sync.WaitGroup
	barrier.Add(2)
	both := make(chan struct{})
	go func() { barrier.Wait(); close(both) }()
	for _, v := range f.viewrs {
		must(t, v.page.Route("**/approvals/*/decide*", func(r playwright.Route) {
			barrier.Done()
			select {
			case <-both:
			case <-time.After(10 * time.Second):
			}
			_ = r.Continue()
		}))
		must(t, card(v, id, approval.StatePending).Locator("textarea[name=reason]").Fill("approved by "+v.user))
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, v := range f.viewrs {
		wg.Go(func() { errs[i] = card(v, id, approval.StatePending).Locator("[data-testid=approve]").Click() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s's click: %v", f.viewrs[i].user, err)
		}
	}
	select {
	case <-both:
	case <-time.After(10 * time.Second):
		t.Fatal("the two approvals were not in flight together")
	}
	for _, v := range f.viewrs {
		must(t, v.page.UnrouteAll())
	}
	f.waitAll("the one approval", func(v *viewer) playwright.Locator { return recent(v, id, approval.StateApproved) })
	got := approvalShow(t, f.data, id)
	if got.State != approval.StateApproved || got.Decision == nil {
		t.Fatalf("after the race: %+v", got)
	}
	winner := got.Decision.Approver
	if winner != "rita" && winner != "ruth" {
		t.Fatalf("the decision that stands is %s's", winner)
	}
	for _, v := range f.viewrs {
		if v.user == winner {
			if n := notice(t, v, id, "ok"); !strings.Contains(n, "is now approved") {
				t.Errorf("the winner %s was told %q", v.user, n)
			}
		} else if n := notice(t, v, id, "error"); !strings.Contains(n, "Someone decided this first; their decision stands.") {
			t.Errorf("%s, second after %s, was told %q", v.user, winner, n)
		}
	}
	f.shots("flow-race")

	outs := make(chan broker.EffectReply, 2)
	for range 2 {
		go func() {
			cmd := exec.Command(bin, "effect", "provider", "--data-dir", f.data, "--run", f.run, "--action", "call", "--agent", erpRunner, "--params", bankPayment("130.00"), "--json")
			cmd.Env = cleanEnv()
			out, _ := cmd.Output()
			var r broker.EffectReply
			_ = json.Unmarshal(out, &r)
			outs <- r
		}()
	}
	ranN := 0
	for range 2 {
		if r := <-outs; r.Outcome != nil {
			ranN++
		} else if r.Error == nil || r.Error.Code != broker.CodeApprovalUsed && r.Error.Code != broker.CodeApprovalRequired {
			// APPROVAL_USED while the first runs; APPROVAL_REQUIRED while
			// its settlement is recorded (propose again) or after it (a
			// new instance of the action asks again).
			t.Errorf("the second proposal: %+v %+v", r.Decision, r.Error)
		}
	}
	if p := f.bank.paid(); ranN != 1 || p[id] != "130.00" || len(p) != 2 {
		t.Fatalf("the approved payment ran %d times; payments %v", ranN, p)
	}
	ts := f.events(id, journal.TypeApprovalDecision, journal.TypeApprovalClaim, journal.TypeApprovalSettle)
	if countType(ts, journal.TypeApprovalDecision) != 1 || countType(ts, journal.TypeApprovalClaim) != 1 || countType(ts, journal.TypeApprovalSettle) != 1 {
		t.Errorf("after the race, events %v: want one decision, one claim, one settle", ts)
	}
	f.verify("the race")
}

// (d) The broker is killed (SIGKILL) while the approved payment is at the
// bank, between claim and settle. After a restart the request shows
// OUTCOME_UNKNOWN in the dashboard, nothing runs it again, and a reviewer
// reconciles it there.
func (f *flows) killed() {
	t := f.t
	id := f.held("140.00")
	f.waitAll("the held payment", func(v *viewer) playwright.Locator { return card(v, id, approval.StatePending) })
	must(t, card(f.rita, id, approval.StatePending).Locator("textarea[name=reason]").Fill("invoice INV-140 checked"))
	must(t, card(f.rita, id, approval.StatePending).Locator("[data-testid=approve]").Click())
	f.waitAll("the approval", func(v *viewer) playwright.Locator { return recent(v, id, approval.StateApproved) })

	f.bank.mu.Lock()
	f.bank.hang = true
	f.bank.mu.Unlock()
	agent := exec.Command(bin, "effect", "provider", "--data-dir", f.data, "--run", f.run, "--action", "call", "--agent", erpRunner, "--params", bankPayment("140.00"), "--json")
	agent.Env = cleanEnv()
	must(t, agent.Start())
	defer func() { _ = agent.Process.Kill(); _ = agent.Wait() }()
	select {
	case k := <-f.bank.started:
		if k != id {
			t.Fatalf("the payment carried idempotency key %q, want %s", k, id)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the approved payment never reached the bank:\n%s", f.srv.out)
	}
	// Claimed while the bank holds the payment (or, on a slow machine,
	// already past the claim timeout).
	f.waitAll("the claimed approval", func(v *viewer) playwright.Locator {
		return v.page.Locator("[data-testid=request-row][data-id=" + id + "][data-state=claimed], [data-testid=request-row][data-id=" + id + "][data-state=outcome_unknown]")
	})
	f.shots("flow-claimed")

	f.leave()
	must(t, f.srv.cmd.Process.Kill()) // SIGKILL
	_ = f.srv.cmd.Wait()
	f.bank.mu.Lock()
	f.bank.hang = false
	f.bank.mu.Unlock()
	f.restart()

	for _, v := range f.viewrs {
		if err := card(v, id, approval.StateOutcomeUnknown).WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(30000)}); err != nil {
			v.shot("failed")
			t.Fatalf("the interrupted payment is not outcome_unknown on %s's page: %v\n%s", v.user, err, f.srv.out)
		}
	}
	f.shots("flow-outcome-unknown")
	if r, code := f.pay("140.00"); code != 1 || r.Outcome != nil || r.Error == nil || r.Error.Code != broker.CodeApprovalUsed {
		t.Fatalf("an outcome_unknown action ran again: exit %d %+v %+v", code, r.Decision, r.Error)
	}

	c := card(f.rita, id, approval.StateOutcomeUnknown)
	must(t, c.Locator("textarea[name=reason]").Fill("the bank lists payment 140.00 under this key"))
	must(t, c.Locator("[data-testid=happened]").Click())
	f.waitAll("the reconciliation", func(v *viewer) playwright.Locator { return recent(v, id, approval.StateReconciled) })
	if n := notice(t, f.rita, id, "ok"); !strings.Contains(n, "reconciled") {
		t.Errorf("after reconciling: notice %q", n)
	}
	f.shots("flow-reconciled")
	if got := approvalShow(t, f.data, id); got.Reconciled == nil || !got.Reconciled.Happened || got.Reconciled.By != "rita" {
		t.Errorf("after reconcile: %+v", got.Reconciled)
	}
	f.events(id, journal.TypeApprovalClaim, journal.TypeApprovalReconciled)
	f.verify("a reconciliation")
}

// (e) An approved payment, not yet run, meets a tightened policy (serve
// restarted with a rule only treasurers satisfy): the agent's proposal is
// held again, the request is back in the queue as reopened, a reviewer
// who is no treasurer may not approve it, a treasurer does, and it runs.
func (f *flows) tightened() {
	t := f.t
	id := f.held("150.00")
	f.waitAll("the held payment", func(v *viewer) playwright.Locator { return card(v, id, approval.StatePending) })
	must(t, card(f.rita, id, approval.StatePending).Locator("textarea[name=reason]").Fill("invoice INV-150 checked"))
	must(t, card(f.rita, id, approval.StatePending).Locator("[data-testid=approve]").Click())
	f.waitAll("the approval", func(v *viewer) playwright.Locator { return recent(v, id, approval.StateApproved) })

	f.leave()
	f.srv.stop(t)
	must(t, os.WriteFile(f.rules, []byte(tighterPayments), 0o600))
	f.restart()

	r, code := f.pay("150.00")
	if code != 3 || r.Outcome != nil || r.Error == nil || r.Error.Code != broker.CodeApprovalRequired || r.Decision.Approval != id {
		t.Fatalf("the approved payment under the tightened policy: exit %d %+v %+v", code, r.Decision, r.Error)
	}
	f.waitAll("the reopened request", func(v *viewer) playwright.Locator { return card(v, id, approval.StateReopened) })
	text, err := card(f.rita, id, approval.StateReopened).InnerText()
	must(t, err)
	if !strings.Contains(text, "asked again: policy changed") || !strings.Contains(text, "treasurer") {
		t.Errorf("the reopened card does not say why or who may approve:\n%s", text)
	}
	f.shots("flow-reopened")

	// Rita is no treasurer: she is not offered the decision, and told why.
	c := card(f.rita, id, approval.StateReopened)
	why, err := c.Locator("[data-testid=why-not]").InnerText()
	must(t, err)
	if !strings.Contains(why, "treasurer") {
		t.Errorf("a reviewer who is no treasurer is told %q", why)
	}
	if n, _ := c.Locator("[data-testid=approve]").Count(); n != 0 {
		t.Error("a reviewer who is no treasurer is offered Approve")
	}
	f.rita.shot("flow-reopened-not-allowed")

	c = card(f.ruth, id, approval.StateReopened)
	must(t, c.Locator("textarea[name=reason]").Fill("treasury checked INV-150"))
	must(t, c.Locator("[data-testid=approve]").Click())
	f.waitAll("the treasurer's approval", func(v *viewer) playwright.Locator { return recent(v, id, approval.StateApproved) })
	ran, code := f.pay("150.00")
	if code != 0 || ran.Outcome == nil || ran.Decision.Approval != id {
		t.Fatalf("approved again under the tightened rule: exit %d %+v %+v", code, ran.Decision, ran.Error)
	}
	if p := f.bank.paid(); p[id] != "150.00" {
		t.Fatalf("payments %v", p)
	}
	ts := f.events(id, journal.TypeApprovalReopened, journal.TypeApprovalSettle)
	if countType(ts, journal.TypeApprovalDecision) != 2 || countType(ts, journal.TypeApprovalReopened) != 1 {
		t.Errorf("events %v: want two decisions around one reopening", ts)
	}
	if got := approvalShow(t, f.data, id); got.Decision == nil || got.Decision.Approver != "ruth" || len(got.Previous) != 1 {
		t.Errorf("after the treasurer's approval: %+v", got)
	}
	f.verify("a tightened policy")
}
