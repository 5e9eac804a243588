package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/code"
)

// The red team's second pass (after issue 12's fixes): trust laundered
// through the registry, unbounded waits, streams without limits, refusal
// floods, names reused after removal and policy files anyone could
// write. Each case attacks the built binary in strict mode with agent
// credentials and checks the stores.

// runDecisions waits until run's journal file holds n events and returns
// its policy.decision events.
func runDecisions(t *testing.T, data, run string, n int) []journal.Decision {
	t.Helper()
	var out []journal.Decision
	for _, ev := range waitJournal(t, data, run, n) {
		if ev.Type == journal.TypeDecision {
			var d journal.Decision
			must(t, json.Unmarshal(ev.Data, &d))
			out = append(out, d)
		}
	}
	return out
}

// registryRules refuse model code outright, and let every other code run
// here whether or not the sandbox confines it.
const registryRules = `effects:
  - name: no-model-code
    decision: deny
    match: {sink: code, action: run, origin: model}
  - name: code-here
    decision: allow
    match: {sink: code}
`

// TestRedteamRegistryLaundering: a model agent stores its own code as an
// integration, then runs it by name, hoping to be decided as registry
// code. It runs as model code, which the deployment refuses.
func TestRedteamRegistryLaundering(t *testing.T) {
	a := startAttackWith(t, registryRules)
	bob := a.agent("bob")
	run := a.runs["bob"]
	params, _ := json.Marshal(code.RegisterParams{Name: "laundered", Program: "python3", Source: "print('as registry')\n", Effect: policy.EffectRead})
	if r, err := bob.Effect(a.ctx(), policy.SinkCode, broker.EffectRequest{Run: run, Action: "register", Params: params}); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("register: %+v %v", r, err)
	}
	kv, err := a.js.KeyValue(a.ctx(), subject.IntegrationsBucket)
	must(t, err)
	e, err := kv.Get(a.ctx(), "laundered")
	must(t, err)
	var in code.Integration
	must(t, json.Unmarshal(e.Value(), &in))
	if in.StoredBy.Origin != policy.OriginModel || in.StoredBy.Agent != "bob" {
		t.Fatalf("the registrar's origin is not kept: %+v", in.StoredBy)
	}
	p, _ := json.Marshal(code.Params{Integration: "laundered"})
	r, err := bob.Effect(a.ctx(), policy.SinkCode, broker.EffectRequest{Run: run, Action: "run", Params: p})
	if r == nil || r.Decision == nil || r.Decision.Outcome != journal.OutcomeRefused || r.Decision.Rule != "no-model-code" || r.Result != nil {
		t.Fatalf("model code stored as an integration ran: %+v %v", r, err)
	}
	ds := runDecisions(t, a.data, run, 5) // open, register decision+attempt+outcome, run decision
	last := ds[len(ds)-1]
	if last.Action != "run" || last.Origin != policy.OriginModel || last.Outcome != journal.OutcomeRefused || last.Rule != "no-model-code" {
		t.Fatalf("the run of the stored code was decided %+v", last)
	}
}

// TestRedteamStreamsAreBounded: an agent tries to fill JetStream through
// the peer queue and outputs. A message larger than one message's bound
// is refused before it is decided (TOO_LARGE); one run can pile at most
// its per-subject bound on a recipient; the whole stream stops at its
// bound, and what another tenant's agent stored before is still there
// for its recipient: a full stream refuses new messages, it deletes none.
func TestRedteamStreamsAreBounded(t *testing.T) {
	a := startAttackWith(t, "", "--peer-max-mb", "1", "--output-max-mb", "1", "--stream-max-message-kb", "64", "--stream-max-per-subject", "20")
	bob, alice := a.agent("bob"), a.agent("alice")
	bobRun := a.runs["bob"]
	for _, name := range []string{subject.PeerStream, subject.OutputStream} {
		st, err := a.js.Stream(a.ctx(), name)
		must(t, err)
		info, err := st.Info(a.ctx())
		must(t, err)
		c := info.Config
		if c.MaxBytes != 1<<20 || c.MaxMsgSize != 64<<10 || c.MaxMsgsPerSubject != 20 || c.Discard != jetstream.DiscardNew || !c.DiscardNewPerSubject {
			t.Fatalf("stream %s is not bounded: %+v", name, c)
		}
	}

	big := strings.Repeat("x", 70<<10)
	if _, err := bob.Output(a.ctx(), bobRun, "ok", big); codeOf(err) != broker.CodeTooLarge {
		t.Fatalf("an oversize output: %v", err)
	}
	if _, err := bob.Send(a.ctx(), bobRun, "alice", big); codeOf(err) != broker.CodeTooLarge {
		t.Fatalf("an oversize peer message: %v", err)
	}
	if n := a.onSubject(subject.OutputStream, subject.Output(subject.Shared, bobRun)) + a.onSubject(subject.PeerStream, subject.Peer("alice", bobRun)); n != 0 {
		t.Fatalf("oversize content was stored: %d messages", n)
	}

	// Another tenant's agent leaves bob a message.
	aliceRun := a.runs["alice"]
	if r, err := alice.Send(a.ctx(), aliceRun, "bob", "from alice"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("alice to bob: %+v %v", r, err)
	}

	// bob's run piles messages on builder: the twenty-first is refused.
	for i := 0; i < 20; i++ {
		if _, err := bob.Send(a.ctx(), bobRun, "builder", i); err != nil {
			t.Fatalf("bob's message %d: %v", i, err)
		}
	}
	r, err := bob.Send(a.ctx(), bobRun, "builder", "one more")
	if codeOf(err) != broker.CodeEffectFailed || r == nil || r.Outcome == nil || r.Outcome.Error != "stream-full" {
		t.Fatalf("past the per-subject bound: %+v %v", r, err)
	}
	if n := a.onSubject(subject.PeerStream, subject.Peer("builder", bobRun)); n != 20 {
		t.Fatalf("bob's run has %d messages on builder's queue, the bound is 20", n)
	}
	// bob fills the whole stream with large messages to others.
	body := strings.Repeat("y", 60<<10)
	full := false
	for i := 0; i < 40 && !full; i++ {
		to := []string{"dave", "carol"}[i%2]
		r, err := bob.Send(a.ctx(), bobRun, to, body)
		if err != nil {
			if r == nil || r.Outcome == nil || r.Outcome.Error != "stream-full" {
				t.Fatalf("filling the stream: %+v %v", r, err)
			}
			full = true
		}
	}
	if !full {
		t.Fatal("the peer stream took 40 messages of 60 KiB under a 1 MiB bound")
	}
	st, err := a.js.Stream(a.ctx(), subject.PeerStream)
	must(t, err)
	info, err := st.Info(a.ctx())
	must(t, err)
	if info.State.Bytes > 1<<20 {
		t.Fatalf("the peer stream holds %d bytes, over its bound", info.State.Bytes)
	}
	// alice's message was not pushed out: bob reads it.
	if n := a.onSubject(subject.PeerStream, subject.Peer("bob", aliceRun)); n != 1 {
		t.Fatalf("alice's message to bob: %d on the stream", n)
	}
	in, err := bob.Peer("bob")
	must(t, err)
	m, err := in.Next(a.ctx())
	if err != nil || m == nil || string(m.Body) != `"from alice"` || m.FromRun != aliceRun {
		t.Fatalf("bob's message from alice: %+v %v", m, err)
	}
	// The refused effect is recorded: decided, attempted, failed.
	found := false
	for _, ev := range waitJournal(t, a.data, bobRun, 3) {
		if ev.Type == journal.TypeOutcome && strings.Contains(string(ev.Data), `"stream-full"`) {
			found = true
		}
	}
	if !found {
		t.Fatal("no outcome stream-full in bob's run's journal")
	}
}

// TestRedteamRefusalFlood: the shared agent, knowing bob's run id, sends
// sixty requests the run refuses (run-of-another-agent). Each is
// answered NOT_RUN_AGENT; bob's journal records the first ones one by one
// and the rest in summarising records with their count, so it does not
// grow by sixty and no refusal is unaccounted for.
func TestRedteamRefusalFlood(t *testing.T) {
	a := startAttack(t)
	shared := a.agent(subject.Shared)
	run := a.runs["bob"]
	const flood = 60
	for i := 0; i < flood; i++ {
		if _, err := shared.Output(a.ctx(), run, "ok", i); codeOf(err) != broker.CodeNotRunAgent {
			t.Fatalf("refusal %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		single, summarised, summaries := 0, 0, 0
		for _, d := range runDecisions(t, a.data, run, 2) {
			switch d.Refusal {
			case broker.RefuseRunOfAnotherAgent:
				single++
			case broker.RefuseRepeatedRefusals: // stands for its count alone
			default:
				t.Fatalf("bob's run has another decision: %+v", d)
			}
			for _, r := range d.Reasons {
				var n int
				if r.Refusal == broker.RefuseRepeatedRefusals {
					if _, err := fmt.Sscanf(r.Detail, "%d more", &n); err != nil || n <= 0 {
						t.Fatalf("summary reason %+v", r)
					}
					summarised += n
					summaries++
				}
			}
		}
		if single+summarised == flood {
			if single >= flood/2 || summaries == 0 {
				t.Fatalf("%d refusals recorded one by one, %d summaries", single, summaries)
			}
			break
		}
		if single+summarised > flood || time.Now().After(deadline) {
			t.Fatalf("%d refusals recorded and %d summarised, want %d in all", single, summarised, flood)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v := metric(t, a.s.ep.HTTP, broker.RefusalsSuppressedMetric, `refusal="run-of-another-agent"`); v == 0 {
		t.Errorf("%s not counted", broker.RefusalsSuppressedMetric)
	}
}

// TestRedteamNameReuse: bob is removed and an agent is registered as bob
// again. The new bob is a new identity: bob's old run refuses it
// (NOT_RUN_AGENT, recorded in that run), the messages sent to the old bob
// are never handed to it, and it works in runs opened since.
func TestRedteamNameReuse(t *testing.T) {
	a := startAttack(t)
	oldRun, aliceRun := a.runs["bob"], a.runs["alice"]
	alice := a.agent("alice")
	if r, err := alice.Send(a.ctx(), aliceRun, "bob", "for the old bob"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("alice to bob: %+v %v", r, err)
	}
	oldSeed, err := os.ReadFile(embedded.AgentCredsPath(a.nats, "bob"))
	must(t, err)
	for _, args := range [][]string{{"agents", "remove", "bob"}, {"agents", "add", "bob"}} {
		if r := gh(t, append(args, "--data-dir", a.data)...); r.code != 0 {
			t.Fatalf("%v: %d %s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	reg, err := identity.Load(identity.Path(a.data))
	must(t, err)
	if _, ok := reg.AgentRemovedAt("bob"); !ok {
		t.Fatalf("the register does not remember bob's removal: %+v", reg)
	}
	newSeed, err := os.ReadFile(embedded.AgentCredsPath(a.nats, "bob"))
	must(t, err)
	if string(newSeed) == string(oldSeed) {
		t.Fatal("the new bob got the old bob's seed")
	}
	bob := a.waitAgent(t, "bob")

	before := a.onSubject(subject.OutputStream, subject.Output(subject.Shared, oldRun))
	r, err := bob.Output(a.ctx(), oldRun, "ok", "the old bob's work")
	if codeOf(err) != broker.CodeNotRunAgent || r == nil || r.Decision.Refusal != broker.RefuseRunOfAnotherAgent {
		t.Fatalf("the new bob in the old bob's run: %+v %v", r, err)
	}
	if n := a.onSubject(subject.OutputStream, subject.Output(subject.Shared, oldRun)); n != before {
		t.Fatal("the new bob delivered into the old bob's run")
	}
	ds := runDecisions(t, a.data, oldRun, 2)
	if last := ds[len(ds)-1]; last.Refusal != broker.RefuseRunOfAnotherAgent || !strings.Contains(last.Reasons[0].Detail, "earlier agent named bob") {
		t.Fatalf("the refusal is not on the old run's record: %+v", last)
	}
	if _, err := bob.Tools(a.ctx(), oldRun); codeOf(err) != broker.CodeNotRunAgent {
		t.Fatalf("the new bob listed the old bob's tools: %v", err)
	}
	// One peer.next that does not wait: the old bob's message is there,
	// and is not handed over.
	msg, err := bob.Conn().Request(subject.PeerNext("bob"), []byte(`{}`), 10*time.Second)
	must(t, err)
	var next broker.PeerNextReply
	if err := json.Unmarshal(msg.Data, &next); err != nil || next.Error != nil || next.Message != nil {
		t.Fatalf("the new bob read the old bob's message: %s %v", msg.Data, err)
	}
	in, err := bob.Peer("bob")
	must(t, err)
	if n := a.onSubject(subject.PeerStream, subject.Peer("bob", aliceRun)); n != 0 {
		t.Fatalf("the old bob's message is still queued for the name: %d", n)
	}
	// Work opened since, and messages sent since, are the new bob's.
	newRun, err := a.app.OpenWork(a.ctx(), broker.OpenWork{Tenant: "acme", Person: "ada", Agent: "bob"})
	must(t, err)
	if r, err := bob.Output(a.ctx(), newRun, "ok", "mine"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("the new bob in its own run: %+v %v", r, err)
	}
	if _, err := alice.Send(a.ctx(), aliceRun, "bob", "for the new bob"); err != nil {
		t.Fatal(err)
	}
	if m, err := in.Next(a.ctx()); err != nil || m == nil || string(m.Body) != `"for the new bob"` {
		t.Fatalf("the new bob's own message: %+v %v", m, err)
	}
}

// TestRedteamPolicyFileOwnership: the policy file decides what Gatehouse
// allows, so serve reads it only as the identity register: its own (or
// root's) regular file that no one else may write, a symbolic link's
// target included, in folders no one else may write. A file others could
// write is unreadable, at start or at a reload: strict mode refuses every effect (policy-unreadable) and
// the log names the file and the fix. The grounding rules the same.
func TestRedteamPolicyFileOwnership(t *testing.T) {
	a := startAttackWith(t, "")
	pol := filepath.Join(a.data, "cards.yaml")
	shared := a.agent(subject.Shared)
	run := a.runs["shared"]
	n := 0
	until := func(what string, ok func(*broker.EffectReply) bool) {
		t.Helper()
		must(t, a.s.cmd.Process.Signal(syscall.SIGHUP))
		deadline := time.Now().Add(20 * time.Second)
		for {
			n++
			r, _ := shared.Output(a.ctx(), run, "ok", n)
			if r != nil && r.Decision != nil && ok(r) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: last reply %+v", what, r)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	allowed := func(r *broker.EffectReply) bool { return r.Decision.Outcome == journal.OutcomeAllowed }
	unreadable := func(r *broker.EffectReply) bool {
		return r.Decision.Refusal == policy.RefusePolicyUnreadable && r.Decision.Enforced && r.Result == nil
	}
	until("the policy in force", allowed)

	must(t, os.Chmod(pol, 0o666))
	until("a policy file others may write", unreadable)
	if log := a.s.out.String(); !strings.Contains(log, pol) || !strings.Contains(log, "chmod 600") {
		t.Fatalf("serve's log does not name the file and the fix:\n%s", log)
	}
	// policy check reads it as serve does, so it does not call it fine.
	if r := gh(t, "policy", "check", "--policy", pol); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "chmod 600") {
		t.Fatalf("policy check of a file others may write: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	must(t, os.Chmod(pol, 0o600))
	until("the file made private again", allowed)
	if r := gh(t, "policy", "check", "--policy", pol); r.code != 0 {
		t.Fatalf("policy check of the private file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	if os.Geteuid() == 0 {
		must(t, os.Chown(pol, 65534, 65534))
		until("a policy file of another uid", unreadable)
		if !strings.Contains(a.s.out.String(), "belongs to uid 65534") {
			t.Fatalf("serve's log does not say whose file it is:\n%s", a.s.out.String())
		}
		must(t, os.Chown(pol, 0, 0))
		until("the file given back", allowed)
	}

	// A private link to a file others may write.
	target := filepath.Join(t.TempDir(), "rules.yaml")
	b, err := os.ReadFile(pol)
	must(t, err)
	must(t, os.WriteFile(target, b, 0o600))
	must(t, os.Chmod(target, 0o666))
	must(t, os.Remove(pol))
	must(t, os.Symlink(target, pol))
	until("a link to a file others may write", unreadable)
	must(t, os.Chmod(target, 0o600))
	until("the link's target made private", allowed)
	// A private file in a folder others may write, who could put another
	// file in its place (sshd's StrictModes).
	folder := filepath.Dir(target)
	must(t, os.Chmod(folder, 0o777))
	until("a policy file in a folder others may write", unreadable)
	if !strings.Contains(a.s.out.String(), "chmod go-w "+folder) {
		t.Fatalf("serve's log does not name the folder and the fix:\n%s", a.s.out.String())
	}
	must(t, os.Chmod(folder, 0o700))
	until("the folder made private", allowed)
	a.s.stop(t)

	// At start, the grounding rules: a file others may write is not read,
	// and every provider call is refused until it is fixed.
	dir := t.TempDir()
	flags := erpFiles(t, dir, "http://127.0.0.1:9", "tok")
	must(t, os.Chmod(filepath.Join(dir, "grounding.yaml"), 0o666))
	s := serve(t, t.TempDir(), append([]string{"--mode", "strict"}, flags...)...)
	log := s.out.String()
	if !strings.Contains(log, "grounding rules could not be read") || !strings.Contains(log, filepath.Join(dir, "grounding.yaml")) || !strings.Contains(log, "chmod 600") {
		t.Fatalf("serve read grounding rules others may write:\n%s", log)
	}
	s.stop(t)
}
