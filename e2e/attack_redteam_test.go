package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// The red team's cases (after issue 12 landed): what the NATS server
// itself, not the broker, publishes when a credential asks it something.
// JetStream answers an API request, an acknowledgement and a fetch on the
// reply subject the requester named, and NATS micro answers discovery the
// same way; NATS checks only the subject a client publishes to. So any
// $JS or $SRV permission an agent or an application held let it aim the
// server's answer at a stream, a bucket or another identity's inbox. Each
// case checks the stores themselves.

// storeMarks is what the attacks below must not change.
type storeMarks struct {
	aliceRun, bobRun uint64 // revisions of the run records
	health           uint64 // of the writer health key
	journalAlice     uint64 // alice's journal: messages on its subject and decisions (journalMark)
	outputAlice      uint64 // on the output subject of alice's run
	peerAlice        uint64 // on alice's peer subject
}

func (a *identityAttack) marks(t *testing.T) storeMarks {
	t.Helper()
	runs, err := a.js.KeyValue(a.ctx(), subject.RunsBucket)
	must(t, err)
	rev := func(kv jetstream.KeyValue, key string) uint64 {
		e, err := kv.Get(a.ctx(), key)
		must(t, err)
		return e.Revision()
	}
	health, err := a.js.KeyValue(a.ctx(), broker.WriterHealthBucket)
	must(t, err)
	return storeMarks{
		aliceRun: rev(runs, a.runs["alice"]), bobRun: rev(runs, a.runs["bob"]), health: rev(health, broker.WriterHealthKey),
		journalAlice: a.journalMark(a.runs["alice"]),
		outputAlice:  a.onSubject(subject.OutputStream, subject.Output(subject.Shared, a.runs["alice"])),
		peerAlice:    a.onSubject(subject.PeerStream, subject.Peer("alice", a.runs["alice"])),
	}
}

// serverReplyTargets are the subjects an answer must never land on: the
// stores of another tenant's run and the broker's own.
func (a *identityAttack) serverReplyTargets() map[string]string {
	return map[string]string{
		"alice's run record":             "$KV." + subject.RunsBucket + "." + a.runs["alice"],
		"bob's own run record":           "$KV." + subject.RunsBucket + "." + a.runs["bob"],
		"the writer health key":          "$KV." + broker.WriterHealthBucket + "." + broker.WriterHealthKey,
		"alice's journal subject":        subject.Journal(a.runs["alice"]),
		"the output of alice's run":      subject.Output(subject.Shared, a.runs["alice"]),
		"alice's peer queue":             subject.Peer("alice", a.runs["alice"]),
		"a memory of another tenant":     "$KV." + subject.MemoryBucket + ".cmVkdGVhbQ",
		"the shared application's inbox": subject.AppInboxOf(subject.Shared) + ".redteam",
	}
}

func TestRedteamJetStreamAnswersNoAgent(t *testing.T) {
	a := startAttack(t)
	alice, bob := a.agent("alice"), a.agent("bob")
	// bob has read a message (so his consumer exists) and another waits
	// (so a fetch would have something to deliver).
	for _, body := range []string{"first", "for bob"} {
		if r, err := alice.Send(a.ctx(), a.runs["alice"], "bob", body); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Fatalf("alice to bob: %+v %v", r, err)
		}
	}
	in, err := bob.Peer("bob")
	must(t, err)
	if m, err := in.Next(a.ctx()); err != nil || string(m.Body) != `"first"` {
		t.Fatalf("bob's first message: %+v %v", m, err)
	}
	watch, err := a.app.Conn().SubscribeSync(subject.AppInboxOf(subject.Shared) + ".redteam")
	must(t, err)
	must(t, a.app.Conn().Flush())
	before := a.marks(t)

	stream, consumer := subject.PeerStream, subject.PeerConsumer("bob")
	asks := map[string]struct {
		subj string
		body []byte
	}{
		"consumer info":      {"$JS.API.CONSUMER.INFO." + stream + "." + consumer, nil},
		"fetch":              {"$JS.API.CONSUMER.MSG.NEXT." + stream + "." + consumer, []byte(`{"batch":1,"no_wait":true}`)},
		"ack":                {"$JS.ACK." + stream + "." + consumer + ".1.1.1.0.0", nil},
		"ack and fetch next": {"$JS.ACK." + stream + "." + consumer + ".1.1.1.0.0", []byte(`+NXT {"batch":1}`)},
		"account info":       {"$JS.API.INFO", nil},
		"stream names":       {"$JS.API.STREAM.NAMES", nil},
	}
	for _, id := range []string{"bob", subject.Shared} {
		for ask, q := range asks {
			for what, reply := range a.serverReplyTargets() {
				if !a.violates(t, a.seed(id), subject.AgentInboxOf(id), func(nc *nats.Conn) error {
					return nc.PublishRequest(q.subj, reply, q.body)
				}) {
					t.Errorf("agent %s: the server took %s (%s) answered on %s", id, ask, q.subj, what)
				}
			}
		}
	}
	// Whatever the server took has been answered by now: a round trip
	// through the broker (which the journal writer follows) comes after.
	if r, err := bob.Output(a.ctx(), a.runs["bob"], "ok", "sync"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("bob's own output: %+v %v", r, err)
	}
	after := a.marks(t)
	if after.aliceRun != before.aliceRun || after.bobRun != before.bobRun {
		t.Errorf("run records were written: alice %d -> %d, bob %d -> %d", before.aliceRun, after.aliceRun, before.bobRun, after.bobRun)
	}
	if after.health != before.health {
		t.Errorf("the writer health key was written: %d -> %d", before.health, after.health)
	}
	if after.journalAlice != before.journalAlice || after.outputAlice != before.outputAlice || after.peerAlice != before.peerAlice {
		t.Errorf("alice's subjects gained messages: journal %d -> %d, output %d -> %d, peer %d -> %d",
			before.journalAlice, after.journalAlice, before.outputAlice, after.outputAlice, before.peerAlice, after.peerAlice)
	}
	mem, err := a.js.KeyValue(a.ctx(), subject.MemoryBucket)
	must(t, err)
	if e, err := mem.Get(a.ctx(), "cmVkdGVhbQ"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("a memory was written: %v %v", e, err)
	}
	must(t, a.app.Conn().Flush())
	if m, err := watch.NextMsg(0); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("the shared application's inbox received %s", m.Data)
	}
	// bob still gets his message, through Gatehouse, exactly once.
	m, err := in.Next(a.ctx())
	if err != nil || m.From != "alice" || string(m.Body) != `"for bob"` || m.FromRun != a.runs["alice"] {
		t.Fatalf("bob's message: %+v %v", m, err)
	}
	if n := a.onSubject(subject.PeerStream, subject.Peer("bob", a.runs["alice"])); n != 0 {
		t.Fatalf("bob's message is still queued after he received it: %d", n)
	}
}

func TestRedteamDiscoveryAnswersNoApplication(t *testing.T) {
	a := startAttack(t)
	bob := a.agent("bob")
	watchBob, err := bob.Conn().SubscribeSync(subject.AgentInboxOf("bob") + ".>")
	must(t, err)
	watchApp, err := a.app.Conn().SubscribeSync(subject.AppInboxOf(subject.Shared) + ".>")
	must(t, err)
	must(t, bob.Conn().Flush())
	must(t, a.app.Conn().Flush())
	for who, c := range map[string]struct{ seed, inbox string }{
		"crm":            {embedded.AppCredsPath(a.nats, "crm"), subject.AppInboxOf("crm")},
		"the shared app": {a.s.ep.AppCreds, subject.AppInboxOf(subject.Shared)},
	} {
		for _, subj := range []string{"$SRV.PING", "$SRV.PING." + subject.ServiceName, "$SRV.INFO", "$SRV.INFO." + subject.ServiceName, "$SRV.STATS", "$SRV.STATS." + subject.ServiceName} {
			for _, reply := range []string{subject.AgentInboxOf("bob") + ".redteam", subject.AppInboxOf(subject.Shared) + ".redteam", subject.OpsInbox + ".redteam"} {
				if c.inbox == subject.AppInboxOf(subject.Shared) && strings.HasPrefix(reply, c.inbox+".") {
					continue // its own inbox
				}
				if !a.violates(t, c.seed, c.inbox, func(nc *nats.Conn) error { return nc.PublishRequest(subj, reply, nil) }) {
					t.Errorf("%s could ask %s, answered on %s", who, subj, reply)
				}
			}
		}
	}
	// Anything the service took has been answered once an effect of bob's
	// is: the service answers on one connection, in order.
	if r, err := bob.Output(a.ctx(), a.runs["bob"], "ok", "sync"); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("bob's own output: %+v %v", r, err)
	}
	must(t, bob.Conn().Flush())
	must(t, a.app.Conn().Flush())
	for {
		m, err := watchBob.NextMsg(0)
		if err != nil {
			break
		}
		if strings.HasSuffix(m.Subject, ".redteam") {
			t.Errorf("bob's inbox received %s: %.100s", m.Subject, m.Data)
		}
	}
	if m, err := watchApp.NextMsg(0); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("the shared application's inbox received %s: %.100s", m.Subject, m.Data)
	}
	// Operators still find the brokers, with the broker credential.
	op, err := nats.Connect(a.s.ep.NATSURL, seedOpt(t, embedded.CredsPath(a.nats, embedded.RoleBroker)), nats.CustomInboxPrefix(subject.OpsInbox))
	must(t, err)
	defer op.Close()
	m, err := op.Request("$SRV.PING."+subject.ServiceName, nil, 10*time.Second)
	if err != nil {
		t.Fatalf("an operator's discovery: %v", err)
	}
	var ping struct{ Name string }
	if err := json.Unmarshal(m.Data, &ping); err != nil || ping.Name != subject.ServiceName {
		t.Fatalf("an operator's discovery: %s %v", m.Data, err)
	}
}

// A refusal of another agent is recorded against the run it named, but
// never after the run's close: verify would report that as tampering, so
// any agent knowing a closed run's id could break the tenant's evidence.
func TestRedteamClosedRunJournalStaysIntact(t *testing.T) {
	a := startAttack(t)
	alice, bob := a.agent("alice"), a.agent("bob")
	if r, err := alice.Output(a.ctx(), a.runs["alice"], "ok", 1); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("alice: %+v %v", r, err)
	}
	must(t, a.app.CloseWork(a.ctx(), a.runs["alice"], "done"))
	closed := a.journalMark(a.runs["alice"])
	for i := 0; i < 3; i++ {
		if r, err := bob.Output(a.ctx(), a.runs["alice"], "ok", "after close"); codeOf(err) != broker.CodeNotRunAgent || r.Decision.Recorded {
			t.Fatalf("bob on alice's closed run: %+v %v", r, err)
		}
	}
	if n := a.journalMark(a.runs["alice"]); n != closed {
		t.Fatalf("alice's closed run gained %d journal events", n-closed)
	}
	a.s.stop(t)
	if v := gh(t, "verify", a.data+"/journal"); v.code != 0 {
		t.Fatalf("verify: %s", v.stdout)
	}
}

// Host commands of two runs, of two tenants, that hold the same uid one
// after the other (a range's uids come round again; --sandbox-uid N gives
// every run the same one) share nothing: what one leaves in /tmp, /var/tmp,
// /dev/shm or System V shared memory, the next cannot read, and none of it
// is left on the host once the first run ended.
func TestRedteamHostCommandsShareNoTemp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("host commands switch uids only when serve is root")
	}
	data := t.TempDir()
	if r := gh(t, "agents", "add", "runner", "--origin", "shipped", "--data-dir", data); r.code != 0 {
		t.Fatalf("agents add: %+v", r)
	}
	pol := filepath.Join(data, "cards.yaml")
	must(t, os.WriteFile(pol, []byte("agents:\n  - name: runner\n"), 0o600))
	const uid = "2100000300" // outside the default range other tests lease
	s := serve(t, data, "--mode", "strict", "--policy", pol, "--sandbox-uid", uid)
	app, err := client.Dial(s.ep.NATSURL, client.App, s.ep.AppCreds)
	must(t, err)
	defer app.Close()
	runner, err := client.DialAgent(s.ep.NATSURL, "runner", embedded.AgentCredsPath(filepath.Join(data, "nats"), "runner"))
	must(t, err)
	defer runner.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mark := fmt.Sprintf("gatehouse-redteam-%d", time.Now().UnixNano())
	exec := func(tenant, script string) string {
		t.Helper()
		run, err := app.OpenWork(ctx, broker.OpenWork{Tenant: tenant, Person: "p", Agent: "runner"})
		must(t, err)
		p, _ := json.Marshal(map[string]any{"argv": []string{"/bin/sh", "-c", script}})
		r, err := runner.Effect(ctx, policy.SinkProcess, broker.EffectRequest{Run: run, Action: "exec", Params: p})
		if err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
			t.Fatalf("exec for %s: %+v %v", tenant, r, err)
		}
		var res struct{ Stdout, Stderr string }
		must(t, json.Unmarshal(r.Result, &res))
		return res.Stdout + res.Stderr
	}
	left := exec("acme", fmt.Sprintf(`id -u
for d in /tmp /var/tmp /dev/shm; do echo acme-secret > $d/%[1]s && chmod 0644 $d/%[1]s && echo wrote $d; done
ipcmk -M 4096 -p 0644 >/dev/null && echo shm`, mark))
	if !strings.Contains(left, uid) || strings.Count(left, "wrote") != 3 {
		t.Fatalf("the first run: %s", left)
	}
	got := exec("globex", fmt.Sprintf(`id -u; cat /tmp/%[1]s /var/tmp/%[1]s /dev/shm/%[1]s 2>&1; ipcs -m -c | grep -c %[2]s`, mark, uid))
	if !strings.Contains(got, uid) || strings.Contains(got, "acme-secret") {
		t.Fatalf("the second run, as the same uid, read the first one's files: %s", got)
	}
	if lines := strings.Fields(got); lines[len(lines)-1] != "0" {
		t.Fatalf("the second run sees the first one's shared memory: %s", got)
	}
	for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
		if _, err := os.Stat(filepath.Join(d, mark)); !os.IsNotExist(err) {
			_ = os.Remove(filepath.Join(d, mark))
			t.Errorf("a host command's file is left in the host's %s", d)
		}
	}
}

// An agent's MCP bearer token is a credential of that agent identity like
// its nkey seed: rotating the agent makes a new one (a leaked token stops
// working, the new one works at once), and removing the agent removes it,
// so a name registered again later is not reached with a token of the one
// removed.
func TestRedteamMCPTokenFollowsTheAgent(t *testing.T) {
	data := t.TempDir()
	if r := gh(t, "agents", "add", "carol", "--data-dir", data); r.code != 0 {
		t.Fatalf("agents add: %+v", r)
	}
	tok := gh(t, "mcp", "token", "carol", "--data-dir", data)
	if tok.code != 0 {
		t.Fatalf("mcp token: %+v", tok)
	}
	first := strings.TrimSpace(tok.stdout)
	pol := filepath.Join(data, "cards.yaml")
	must(t, os.WriteFile(pol, []byte("agents:\n  - name: carol\n"), 0o600))
	s := serve(t, data, "--mode", "strict", "--policy", pol, "--mcp-http", "127.0.0.1:0")
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada", "--agent", "carol").stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opens := func(token string) bool {
		sess, err := httpSession(ctx, s.ep.MCP+"?run="+run, token)
		if err != nil {
			return false
		}
		defer sess.Close()
		_, err = sess.ListTools(ctx, nil)
		return err == nil
	}
	if !opens(first) {
		t.Fatal("carol's token opens no session")
	}
	if r := gh(t, "agents", "rotate", "carol", "--data-dir", data); r.code != 0 {
		t.Fatalf("agents rotate: %+v", r)
	}
	a := &identityAttack{t: t, s: s, nats: filepath.Join(data, "nats")}
	a.waitAgent(t, "carol")
	if opens(first) {
		t.Error("carol's token from before the rotation still opens a session")
	}
	second := agentToken(t, data, "carol")
	if second == first || !opens(second) {
		t.Fatalf("the token after the rotation (changed %v) opens no session\n%s", second != first, s.out)
	}
	if r := gh(t, "agents", "remove", "carol", "--data-dir", data); r.code != 0 {
		t.Fatalf("agents remove: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(data, "mcp", "tokens", "carol.token")); !os.IsNotExist(err) {
		t.Errorf("the removed agent's MCP token is still there: %v", err)
	}
	if r := gh(t, "agents", "add", "carol", "--data-dir", data); r.code != 0 {
		t.Fatalf("agents add again: %+v", r)
	}
	a.waitAgent(t, "carol")
	for _, old := range []string{first, second} {
		if opens(old) {
			t.Error("a token of the removed carol opens a session as the carol registered after")
		}
	}
}
