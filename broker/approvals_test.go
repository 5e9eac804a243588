package broker_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// approvalWorld is a real Gatehouse with approvals: embedded NATS with
// JetStream, the approval service on a JetStream KV bucket, a broker
// serving the output sink, and the journal writer on a temporary journal.
type approvalWorld struct {
	*sinktest.Env
	svc  *approval.Service
	priv ed25519.PrivateKey
	dir  string
}

// startApprovals runs Gatehouse in mode with rules (sinktest.Start has no
// approvals, so this is its twin with them).
func startApprovals(t *testing.T, mode policy.Mode, rules string, tune ...func(*broker.Config)) *approvalWorld {
	t.Helper()
	dir := t.TempDir()
	w := &approvalWorld{Env: &sinktest.Env{Dir: dir, JournalDir: filepath.Join(dir, "journal")}, dir: dir}
	ns, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, "nats"), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	w.NS = ns
	if w.NC, err = ns.Connect(embedded.RoleBroker); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.NC.Close)
	if w.Replies, err = ns.Connect(embedded.RoleReplies); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Replies.Close)
	w.JS, _ = jetstream.New(w.NC)
	ctx := context.Background()
	if _, err := journal.EnsureStream(ctx, w.JS, 1); err != nil {
		t.Fatal(err)
	}
	runs, err := broker.OpenKVRuns(ctx, w.JS, 1)
	if err != nil {
		t.Fatal(err)
	}
	rec := broker.NewRecorder(w.JS, 5*time.Second)
	store, err := approval.NewKVStore(ctx, w.JS, subject.ApprovalsBucket, 1)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	w.priv = priv
	w.svc = approval.New(store, rec, approval.Config{Key: pub})
	out, err := output.New(ctx, w.JS, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := broker.Config{Mode: mode, Approvals: w.svc}
	for _, f := range tune {
		f(&cfg)
	}
	if w.Broker, err = broker.New(cfg, runs, rec, loadRules(t, dir, rules), out); err != nil {
		t.Fatal(err)
	}
	svc, err := broker.Serve(w.Replies, w.Broker, broker.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	jw, err := journal.Open(w.JournalDir, journal.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = journal.Consume(wctx, w.JS, jw, journal.ConsumeOptions{}) }()
	t.Cleanup(func() { stop(); <-done; _ = jw.Close() })
	creds := func(r embedded.Role) string { return embedded.CredsPath(filepath.Join(dir, "nats"), r) }
	if w.App, err = client.Dial(ns.URL, client.App, creds(embedded.RoleApp)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.App.Close)
	if w.Agent, err = client.Dial(ns.URL, client.Agent, creds(embedded.RoleAgent)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Agent.Close)
	return w
}

func loadRules(t *testing.T, dir, rules string) *policy.Policy {
	t.Helper()
	if rules == "" {
		return policy.Default()
	}
	path := filepath.Join(dir, "rules-"+time.Now().Format("150405.000000000")+".yaml")
	if err := os.WriteFile(path, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const approveOutputs = `
effects:
  - name: no-forbidden
    decision: deny
    match: {sink: output, target: forbidden}
approvals:
  - name: outputs
    match: {sink: output}
    roles: [finance]
    assurance: mfa
`

// tighter asks a role the first approver does not hold.
const tighterApprovals = `
approvals:
  - name: outputs
    match: {sink: output}
    roles: [cfo]
    assurance: webauthn
`

const denyAllOutputs = `
effects:
  - name: no-outputs
    decision: deny
    match: {sink: output}
approvals:
  - name: outputs
    match: {sink: output}
    roles: [finance]
`

var rita = approval.Decision{Approved: true, Approver: "rita", Roles: []string{"finance"}, Assurance: "mfa"}

// deliveries counts the outputs that reached run's subject.
func deliveries(t *testing.T, w *approvalWorld, sub *nats.Subscription) int {
	t.Helper()
	w.Drain(t)
	n, _, err := sub.Pending()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (w *approvalWorld) propose(t *testing.T, run, status string, result any) *broker.EffectReply {
	t.Helper()
	rep, err := w.Agent.Output(sinktest.Ctx(t), run, status, result)
	if rep == nil {
		t.Fatal(err) // the broker did not answer; a reply's own error is in rep.Error
	}
	return rep
}

func code(r *broker.EffectReply) broker.Code {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

// verifyAndFind verifies the whole journal and returns the run's event
// types.
func (w *approvalWorld) verifyAndFind(t *testing.T, run string) []journal.Type {
	t.Helper()
	w.Verify(t)
	return sinktest.Types(w.Events(t, run))
}

// heldAndApproved opens work for pat, proposes an output of amount 10
// (held by approveOutputs) and has rita approve it; it returns the run and
// the approval.
func (w *approvalWorld) heldAndApproved(t *testing.T) (run, id string) {
	t.Helper()
	run = w.Open(t, broker.OpenWork{Tenant: "acme", Person: "pat"})
	held := w.propose(t, run, "ok", map[string]int{"amount": 10})
	id = held.Decision.Approval
	if _, err := w.svc.Decide(sinktest.Ctx(t), id, rita); err != nil {
		t.Fatal(err)
	}
	return run, id
}

func count(ts []journal.Type, want journal.Type) int {
	n := 0
	for _, x := range ts {
		if x == want {
			n++
		}
	}
	return n
}

func TestApprovedActionRunsOnceAndSettles(t *testing.T) {
	w := startApprovals(t, policy.ModeStrict, approveOutputs)
	ctx := sinktest.Ctx(t)
	run := w.Open(t, broker.OpenWork{Tenant: "acme", Person: "pat"})
	sub := subscribe(t, w.App.Conn(), subject.Output(subject.Shared, run))

	held := w.propose(t, run, "ok", map[string]int{"amount": 10})
	if code(held) != broker.CodeApprovalRequired || held.Decision.Outcome != journal.OutcomeHeld || held.Decision.Approval == "" {
		t.Fatalf("first proposal: %+v %+v", held.Decision, held.Error)
	}
	id := held.Decision.Approval
	if again := w.propose(t, run, "ok", map[string]int{"amount": 10}); again.Decision.Approval != id || code(again) != broker.CodeApprovalRequired {
		t.Fatalf("the same action asked twice: %+v %+v", again.Decision, again.Error)
	}
	if n := deliveries(t, w, sub); n != 0 {
		t.Fatalf("%d outputs delivered before approval", n)
	}
	if _, err := w.svc.Decide(ctx, id, rita); err != nil {
		t.Fatal(err)
	}
	ran := w.propose(t, run, "ok", map[string]int{"amount": 10})
	if ran.Error != nil || ran.Decision.Outcome != journal.OutcomeAllowed || ran.Outcome == nil || ran.Outcome.Status != "ok" {
		t.Fatalf("approved action: %+v %+v", ran.Decision, ran.Error)
	}
	// Run once: the same approved action again after it ran asks again.
	next := w.propose(t, run, "ok", map[string]int{"amount": 10})
	if code(next) != broker.CodeApprovalRequired || next.Decision.Approval == id {
		t.Fatalf("a settled approval ran again: %+v %+v", next.Decision, next.Error)
	}
	if n := deliveries(t, w, sub); n != 1 {
		t.Fatalf("%d outputs delivered, want exactly 1", n)
	}
	got, err := w.svc.Get(ctx, id)
	if err != nil || got.State != approval.StateSettled || got.Settled.Effect != ran.Effect {
		t.Fatalf("request after the run: %+v %v", got, err)
	}
	ts := w.verifyAndFind(t, run)
	for _, want := range []journal.Type{journal.TypeApprovalRequest, journal.TypeApprovalDecision, journal.TypeApprovalClaim, journal.TypeApprovalSettle} {
		if count(ts, want) == 0 {
			t.Errorf("no %s in the run's chain: %v", want, ts)
		}
	}
	if count(ts, journal.TypeApprovalClaim) != 1 || count(ts, journal.TypeAttempt) != 1 {
		t.Errorf("claims %d attempts %d, want 1 and 1: %v", count(ts, journal.TypeApprovalClaim), count(ts, journal.TypeAttempt), ts)
	}
	// The decision precedes the claim, which precedes the attempt.
	dec, cl, at := slices.Index(ts, journal.TypeApprovalDecision), slices.Index(ts, journal.TypeApprovalClaim), slices.Index(ts, journal.TypeAttempt)
	if !(dec < cl && cl < at) {
		t.Errorf("order decision %d claim %d attempt %d: %v", dec, cl, at, ts)
	}
}

func TestChangedArgumentAsksAgain(t *testing.T) {
	w := startApprovals(t, policy.ModeStrict, approveOutputs)
	ctx := sinktest.Ctx(t)
	run := w.Open(t, broker.OpenWork{Tenant: "acme", Person: "pat"})
	held := w.propose(t, run, "ok", map[string]int{"amount": 10})
	if _, err := w.svc.Decide(ctx, held.Decision.Approval, rita); err != nil {
		t.Fatal(err)
	}
	changed := w.propose(t, run, "ok", map[string]int{"amount": 11})
	if code(changed) != broker.CodeApprovalRequired || changed.Decision.Approval == held.Decision.Approval || changed.Outcome != nil {
		t.Fatalf("a changed argument ran under the approval: %+v %+v", changed.Decision, changed.Error)
	}
	if r, _ := w.svc.Get(ctx, held.Decision.Approval); r.State != approval.StateApproved {
		t.Fatalf("the approved request changed: %s", r.State)
	}
	ts := w.verifyAndFind(t, run)
	if count(ts, journal.TypeApprovalRequest) != 2 || count(ts, journal.TypeAttempt) != 0 {
		t.Fatalf("want two requests and no attempt: %v", ts)
	}
}

func TestTightenedPolicyGoesBackToAPerson(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		outcome     journal.Outcome
		code        broker.Code
	}{
		{"stricter-rule", tighterApprovals, journal.OutcomeHeld, broker.CodeApprovalRequired},
		{"refused-now", denyAllOutputs, journal.OutcomeRefused, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := startApprovals(t, policy.ModeStrict, approveOutputs)
			ctx := sinktest.Ctx(t)
			run, id := w.heldAndApproved(t)
			w.Broker.SetPolicy(loadRules(t, w.dir, tc.rules))
			rep := w.propose(t, run, "ok", map[string]int{"amount": 10})
			if rep.Decision.Outcome != tc.outcome || code(rep) != tc.code || rep.Outcome != nil {
				t.Fatalf("after tightening: %+v %+v", rep.Decision, rep.Error)
			}
			r, _ := w.svc.Get(ctx, id)
			if r.State != approval.StateReopened || r.Decision != nil || len(r.Previous) != 1 {
				t.Fatalf("request: state %s decision %v previous %d", r.State, r.Decision, len(r.Previous))
			}
			if tc.name == "stricter-rule" {
				if _, err := w.svc.Decide(ctx, id, rita); err == nil {
					t.Fatal("the old approver's standing approved again")
				}
				if _, err := w.svc.Decide(ctx, id, approval.Decision{Approved: true, Approver: "carla", Roles: []string{"cfo"}, Assurance: "webauthn"}); err != nil {
					t.Fatal(err)
				}
				if ran := w.propose(t, run, "ok", map[string]int{"amount": 10}); ran.Error != nil || ran.Outcome == nil {
					t.Fatalf("approved again under the new rule: %+v %+v", ran.Decision, ran.Error)
				}
			}
			ts := w.verifyAndFind(t, run)
			if count(ts, journal.TypeApprovalReopened) != 1 {
				t.Fatalf("no approval.reopened: %v", ts)
			}
		})
	}
}

func TestStrictWithoutApprovalIsMissing(t *testing.T) {
	w := startApprovals(t, policy.ModeStrict, approveOutputs)
	ctx := sinktest.Ctx(t)
	run := w.Open(t, broker.OpenWork{Tenant: "acme", Person: "pat"})
	sub := subscribe(t, w.App.Conn(), subject.Output(subject.Shared, run))
	held := w.propose(t, run, "ok", map[string]int{"amount": 10})
	if held.Decision.Refusal != policy.RefuseApprovalMissing || held.Decision.Outcome == journal.OutcomeAllowed || held.Outcome != nil {
		t.Fatalf("gated action without approval: %+v", held.Decision)
	}
	// A refusal stands for this exact action.
	if _, err := w.svc.Decide(ctx, held.Decision.Approval, approval.Decision{Approver: "rita", Roles: []string{"finance"}, Assurance: "mfa", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	refused := w.propose(t, run, "ok", map[string]int{"amount": 10})
	if refused.Decision.Outcome != journal.OutcomeRefused || refused.Decision.Refusal != policy.RefuseApprovalMissing || refused.Outcome != nil {
		t.Fatalf("refused action: %+v", refused.Decision)
	}
	if n := deliveries(t, w, sub); n != 0 {
		t.Fatalf("%d outputs delivered without approval", n)
	}
	ts := w.verifyAndFind(t, run)
	if count(ts, journal.TypeApprovalRefused) != 1 || count(ts, journal.TypeAttempt) != 0 {
		t.Fatalf("journal: %v", ts)
	}
}

func TestReportRecordsApprovalMissingAndLetsThrough(t *testing.T) {
	w := startApprovals(t, policy.ModeReport, approveOutputs)
	run := w.Open(t, broker.OpenWork{Tenant: "acme", Person: "pat"})
	rep := w.propose(t, run, "ok", map[string]int{"amount": 10})
	if rep.Error != nil || rep.Decision.Outcome != journal.OutcomeAllowed || rep.Decision.Refusal != policy.RefuseApprovalMissing || rep.Outcome == nil {
		t.Fatalf("report mode: %+v %+v", rep.Decision, rep.Error)
	}
	if rs, _ := w.svc.List(sinktest.Ctx(t), approval.Filter{}); len(rs) != 0 {
		t.Fatalf("report mode asked a person: %d requests", len(rs))
	}
	evs := w.Events(t, run)
	w.Verify(t)
	var d journal.Decision
	for _, e := range evs {
		if e.Type == journal.TypeDecision {
			_ = json.Unmarshal(e.Data, &d)
		}
	}
	if d.Outcome != journal.OutcomeAllowed || d.Refusal != policy.RefuseApprovalMissing {
		t.Fatalf("recorded decision: %+v", d)
	}
}

func TestPolicyWouldRefuseAsksNobody(t *testing.T) {
	w := startApprovals(t, policy.ModeStrict, approveOutputs)
	run := w.Open(t, broker.OpenWork{Tenant: "acme", Person: "pat"})
	rep := w.propose(t, run, "forbidden", map[string]int{"amount": 10})
	if code(rep) != broker.CodePolicyWouldRefuse || rep.Decision.Outcome != journal.OutcomeRefused || rep.Outcome != nil {
		t.Fatalf("would-refuse: %+v %+v", rep.Decision, rep.Error)
	}
	if rs, _ := w.svc.List(sinktest.Ctx(t), approval.Filter{}); len(rs) != 0 {
		t.Fatalf("a person was asked about an action policy refuses: %d requests", len(rs))
	}
	ts := w.verifyAndFind(t, run)
	if count(ts, journal.TypePolicyPreview) != 1 || count(ts, journal.TypeApprovalRequest) != 0 {
		t.Fatalf("journal: %v", ts)
	}
}

// The backend's signed assertion over NATS decides; the double approval
// race leaves one decision and one run.
func TestSignedDecisionOverNATSAndRace(t *testing.T) {
	w := startApprovals(t, policy.ModeStrict, approveOutputs)
	run := w.Open(t, broker.OpenWork{Tenant: "acme", Person: "pat"})
	sub := subscribe(t, w.App.Conn(), subject.Output(subject.Shared, run))
	held := w.propose(t, run, "ok", map[string]int{"amount": 10})
	id := held.Decision.Approval
	r, err := w.svc.Get(sinktest.Ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	replies := make(chan broker.ApprovalReply, 2)
	for _, who := range []string{"rita", "ruth"} {
		sa, err := approval.Assertion{Kind: "decision", ID: id, ActionDigest: r.ActionDigest, Approved: true, Approver: who,
			Roles: []string{"finance"}, Assurance: "mfa", Time: time.Now()}.Sign(w.priv)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			b, _ := json.Marshal(sa)
			var rep broker.ApprovalReply
			msg, err := w.App.Conn().Request(subject.App(subject.Shared, subject.ApprovalDecideOp), b, 10*time.Second)
			if err == nil {
				_ = json.Unmarshal(msg.Data, &rep)
			} else {
				rep.Error = &broker.ErrorBody{Code: "TRANSPORT", Message: err.Error()}
			}
			replies <- rep
		}()
	}
	ok, lost := 0, 0
	for range 2 {
		rep := <-replies
		switch {
		case rep.Error == nil:
			ok++
		case rep.Error.Code == broker.CodeAlreadyDecided:
			lost++
		default:
			t.Fatalf("decide: %+v", rep.Error)
		}
	}
	if ok != 1 || lost != 1 {
		t.Fatalf("%d decisions stood, %d lost; want 1 and 1", ok, lost)
	}
	done := make(chan *broker.EffectReply, 2)
	for range 2 {
		go func() {
			rep, _ := w.Agent.Output(sinktest.Ctx(t), run, "ok", map[string]int{"amount": 10})
			if rep == nil {
				rep = &broker.EffectReply{} // no answer: counted as not run, and the count below fails
			}
			done <- rep
		}()
	}
	runs := 0
	for range 2 {
		if rep := <-done; rep.Outcome != nil {
			runs++
		}
	}
	if runs != 1 || deliveries(t, w, sub) != 1 {
		t.Fatalf("%d runs, want exactly 1", runs)
	}
	got, _ := w.svc.Get(sinktest.Ctx(t), id)
	if got.Decision.Authenticated != "signed-assertion" {
		t.Fatalf("decision authenticated %q", got.Decision.Authenticated)
	}
	ts := w.verifyAndFind(t, run)
	if count(ts, journal.TypeApprovalDecision) != 1 || count(ts, journal.TypeApprovalClaim) != 1 {
		t.Fatalf("journal: %v", ts)
	}
}

// An approval stands for the broker's ApprovalLife: the approved action
// proposed after that goes back to a person (reopened, recorded before
// the held decision, so replay reads the approval as waiting), and runs
// once approved again. Before that it runs as usual.
func TestExpiredApprovalGoesBackToAPerson(t *testing.T) {
	var skew atomic.Int64 // how far the broker's clock is ahead
	w := startApprovals(t, policy.ModeStrict, approveOutputs, func(c *broker.Config) {
		c.ApprovalLife = time.Hour
		c.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	ctx := sinktest.Ctx(t)
	run, id := w.heldAndApproved(t)
	skew.Store(int64(2 * time.Hour))
	late := w.propose(t, run, "ok", map[string]int{"amount": 10})
	if code(late) != broker.CodeApprovalRequired || late.Outcome != nil || !strings.Contains(late.Error.Message, "expired") {
		t.Fatalf("an approval two hours old, standing for one: %+v %+v", late.Decision, late.Error)
	}
	r, err := w.svc.Get(ctx, id)
	if err != nil || r.State != approval.StateReopened || r.Decision != nil {
		t.Fatalf("the expired request: %+v %v", r, err)
	}
	if _, err := w.svc.Decide(ctx, id, approval.Decision{Approved: true, Approver: "rita", Roles: rita.Roles, Assurance: rita.Assurance, Time: time.Now().Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if ran := w.propose(t, run, "ok", map[string]int{"amount": 10}); ran.Error != nil || ran.Outcome == nil {
		t.Fatalf("approved again: %+v %+v", ran.Decision, ran.Error)
	}
	ts := w.verifyAndFind(t, run)
	re, held2 := slices.Index(ts, journal.TypeApprovalReopened), -1
	for i, typ := range ts {
		if typ == journal.TypeDecision && i > re {
			held2 = i
			break
		}
	}
	if re < 0 || held2 < 0 || count(ts, journal.TypeAttempt) != 1 {
		t.Fatalf("want approval.reopened before the next decision, and one attempt: %v", ts)
	}
}
