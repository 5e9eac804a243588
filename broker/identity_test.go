package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"pgregory.net/rapid"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
)

// replyWorld is a broker serving the output sink on an embedded NATS, its
// service deliberately on a connection the server does NOT confine (the
// broker's own), so the reply check in code is tested alone; a spy
// connection that may subscribe anywhere; named agents bob and alice.
type replyWorld struct {
	ns      *embedded.Server
	js      jetstream.JetStream
	spy     *nats.Conn
	app     *client.Client
	metrics *broker.Metrics
	reg     *prometheus.Registry
	raw     map[string]*nats.Conn // an agent identity's raw connection
	runs    map[string]string     // an agent identity's run
	b       *broker.Broker
}

func startReplyWorld(t *testing.T) *replyWorld {
	t.Helper()
	dir := t.TempDir()
	ns, err := embedded.Start(embedded.Config{Dir: dir, Port: -1, Agents: []string{"bob", "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	bnc, err := ns.Connect(embedded.RoleBroker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bnc.Close)
	js, _ := jetstream.New(bnc)
	ctx := context.Background()
	if _, err := journal.EnsureStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	runs, err := broker.OpenKVRuns(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	out, err := output.New(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	w := &replyWorld{ns: ns, js: js, reg: prometheus.NewRegistry(), raw: map[string]*nats.Conn{}, runs: map[string]string{}}
	w.metrics = broker.NewMetrics(w.reg)
	b, err := broker.New(broker.Config{Mode: policy.ModeStrict, Metrics: w.metrics}, runs, broker.NewRecorder(js, 5*time.Second),
		policyWithCards(t, dir, "bob", "alice"), out)
	if err != nil {
		t.Fatal(err)
	}
	w.b = b
	svc, err := broker.Serve(bnc, b, broker.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	if w.spy, err = ns.Connect(embedded.RoleBroker); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.spy.Close)
	if w.app, err = client.Dial(ns.URL, client.App, embedded.CredsPath(dir, embedded.RoleApp)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.app.Close)
	for id, conn := range map[string]func() (*nats.Conn, error){
		subject.Shared: func() (*nats.Conn, error) { return ns.Connect(embedded.RoleAgent) },
		"bob":          func() (*nats.Conn, error) { return ns.ConnectAgent("bob") },
		"alice":        func() (*nats.Conn, error) { return ns.ConnectAgent("alice") },
	} {
		nc, err := conn()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		w.raw[id] = nc
		agent := id
		if id == subject.Shared {
			agent = ""
		}
		if w.runs[id], err = w.app.OpenWork(ctxT(t), broker.OpenWork{Tenant: "acme", Person: "ada", Agent: agent}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// policyWithCards is the built-in rules with an agent card for each name.
func policyWithCards(t *testing.T, dir string, names ...string) *policy.Policy {
	t.Helper()
	text := "agents:\n"
	for _, n := range names {
		text += "  - name: " + n + "\n"
	}
	return loadRules(t, dir, text)
}

// request is a valid output effect of id in its own run.
func (w *replyWorld) request(id string) []byte {
	b, _ := json.Marshal(broker.EffectRequest{Run: w.runs[id], Action: "deliver", Params: json.RawMessage(`{"status":"ok","result":1}`)})
	return b
}

// sync sends id a valid request on the output endpoint and waits for its
// reply: every request id sent before it on that endpoint has been taken
// (a micro endpoint takes its messages in order).
func (w *replyWorld) sync(t *rapid.T, id string) {
	msg, err := w.raw[id].Request(subject.Effect(id, policy.SinkOutput), w.request(id), 10*time.Second)
	if err != nil {
		t.Fatalf("sync request of %s: %v", id, err)
	}
	var r broker.EffectReply
	if json.Unmarshal(msg.Data, &r) != nil || r.Decision == nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("sync request of %s: %s", id, msg.Data)
	}
	if err := w.b.Flush(context.Background()); err != nil { // its outcome, recorded after the reply
		t.Fatal(err)
	}
}

// replyTargets are the places an attacker would aim a reply at, for
// requester id; own says whether the target lies in id's inbox space.
func replyTargets(t *rapid.T, w *replyWorld, id string) (target string, own bool) {
	tok := rapid.StringMatching(`[a-zA-Z0-9_-]{1,12}`).Draw(t, "token")
	other := "alice"
	if id == "alice" {
		other = "bob"
	}
	inbox := subject.AgentInboxOf(id)
	switch rapid.IntRange(0, 15).Draw(t, "class") {
	case 0, 1:
		return inbox + "." + tok, true
	case 2:
		return inbox + "." + tok + "." + tok, true
	case 3:
		return subject.AgentInboxOf(other) + "." + tok, false
	case 4:
		if id == subject.Shared {
			return subject.AgentInboxOf("bob") + "." + tok, false
		}
		return subject.AgentInboxOf(subject.Shared) + "." + tok, false
	case 5:
		return subject.Output(subject.Shared, w.runs[other]), false
	case 6:
		return subject.Peer(other, w.runs[other]), false
	case 7:
		return "$KV." + subject.MemoryBucket + "." + tok, false
	case 8:
		return "$KV." + subject.RunsBucket + "." + w.runs[other], false
	case 9:
		return "$KV." + broker.WriterHealthBucket + "." + broker.WriterHealthKey, false
	case 10:
		return subject.Journal(w.runs[other]), false
	case 11:
		return subject.AppInboxOf(subject.Shared) + "." + tok, false
	case 12:
		return inbox + "x." + tok, false // a prefix of the inbox token, not the inbox
	case 13:
		return inbox, false // the prefix itself: no token after it
	case 14:
		return subject.AgentInbox + "." + tok + "." + tok, id == tok
	default:
		return "$JS.API.STREAM.PURGE." + subject.JournalStream, false
	}
}

// TestReplyGoesOnlyToTheRequestersInbox is the property: for random
// requesters and reply subjects, the broker publishes a reply on the reply
// subject exactly when it lies in the requester's own inbox space, and
// never anywhere else; every other request is dropped undecided and
// counted. The service runs on an unconfined connection, so this holds by
// the broker's check alone.
func TestReplyGoesOnlyToTheRequestersInbox(t *testing.T) {
	w := startReplyWorld(t)
	ids := []string{subject.Shared, "bob", "alice"}
	dropped := 0
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.SampledFrom(ids).Draw(t, "requester")
		target, own := replyTargets(t, w, id)
		sub, err := w.spy.SubscribeSync(target)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := w.spy.Flush(); err != nil {
			t.Fatal(err)
		}
		before := journalCount(t, w.js)
		if err := w.raw[id].PublishRequest(subject.Effect(id, policy.SinkOutput), target, w.request(id)); err != nil {
			t.Fatal(err)
		}
		if own {
			msg, err := sub.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("no reply on %s, the requester's own inbox: %v", target, err)
			}
			var r broker.EffectReply
			if json.Unmarshal(msg.Data, &r) != nil || r.Run != w.runs[id] {
				t.Fatalf("reply on %s: %s", target, msg.Data)
			}
			// Its outcome is recorded after the reply: in the journal
			// before the next case counts it.
			if err := w.b.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			return
		}
		dropped++
		w.sync(t, id)
		if err := w.spy.Flush(); err != nil {
			t.Fatal(err)
		}
		if msg, err := sub.NextMsg(0); !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("%s's request was answered on %s: %v %s", id, target, err, msgData(msg))
		}
		// Dropped means undecided: only the sync request was recorded
		// (its decision and attempt, one message, and its outcome).
		if n := journalCount(t, w.js); n != before+2 {
			t.Fatalf("a dropped request was recorded: %d journal messages, want %d", n, before+2)
		}
	})
	if got := counterValue(t, w.reg, broker.RepliesRefusedMetric, "agent"); int(got) != dropped {
		t.Fatalf("%s{class=agent} = %v, want %d", broker.RepliesRefusedMetric, got, dropped)
	}
}

func msgData(m *nats.Msg) string {
	if m == nil {
		return ""
	}
	return string(m.Data)
}

func journalCount(t interface{ Fatal(...any) }, js jetstream.JetStream) uint64 {
	st, err := js.Stream(context.Background(), subject.JournalStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// counterValue is the value of counter name with label class = class.
func counterValue(t *testing.T, reg *prometheus.Registry, name, class string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "class" && l.GetValue() == class {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// The replies connection embedded.RoleReplies gives is confined to inbox
// spaces, which ProbeReplies sees; the broker's own connection is not.
func TestProbeReplies(t *testing.T) {
	ns, err := embedded.Start(embedded.Config{Dir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	for role, want := range map[embedded.Role]error{embedded.RoleReplies: nil, embedded.RoleBroker: broker.ErrRepliesNotConfined} {
		nc, err := ns.Connect(role)
		if err != nil {
			t.Fatal(err)
		}
		if err := broker.ProbeReplies(nc); !errors.Is(err, want) && err != want {
			t.Errorf("%s: ProbeReplies = %v, want %v", role, err, want)
		}
		nc.Close()
	}
}

// The caller's facts: an origin or tool a request names other than the
// established one is refused and recorded; a declared origin is the one
// decided; a run accepts only its own agent; an application closes only
// its own runs and opens only for its tenants.
func TestCallerFacts(t *testing.T) {
	w := start(t, policy.ModeStrict, "agents:\n  - name: builder\n  - name: bob\n")
	ctx := ctxT(t)
	shared := w.agent
	run := w.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	for _, o := range []policy.Origin{policy.OriginShipped, policy.OriginRuntime, policy.OriginDirect, policy.OriginRegistry} {
		r, err := shared.Effect(ctx, policy.SinkOutput, broker.EffectRequest{Run: run, Action: "deliver", Origin: o, Params: json.RawMessage(`{"status":"ok"}`)})
		if errCode(err) != broker.CodeOriginNotEstablished || r.Decision.Refusal != broker.RefuseOriginNotEstablished || !r.Decision.Recorded || !r.Decision.Enforced {
			t.Fatalf("origin %s: %+v %v", o, r, err)
		}
	}
	r, err := shared.Effect(ctx, policy.SinkOutput, broker.EffectRequest{Run: run, Action: "deliver", Tool: "memory.get", Params: json.RawMessage(`{"status":"ok"}`)})
	if errCode(err) != broker.CodeToolNotEstablished || r.Decision.Refusal != broker.RefuseToolNotEstablished {
		t.Fatalf("tool: %+v %v", r, err)
	}
	// Naming the established origin and tool is accepted.
	if r, err := shared.Effect(ctx, policy.SinkOutput, broker.EffectRequest{Run: run, Action: "deliver", Origin: policy.OriginModel, Tool: "output.deliver",
		Params: json.RawMessage(`{"status":"ok"}`)}); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("established origin and tool: %+v %v", r, err)
	}
	var refusals []journal.Decision
	for _, ev := range w.journalEvents(t, run) {
		var d journal.Decision
		if ev.Type == journal.TypeDecision && json.Unmarshal(ev.Data, &d) == nil && d.Rule == journal.RuleIdentity {
			refusals = append(refusals, d)
		}
	}
	if len(refusals) != 5 || refusals[0].Origin != policy.OriginModel || refusals[0].Refusal != broker.RefuseOriginNotEstablished ||
		refusals[4].Refusal != broker.RefuseToolNotEstablished || !strings.Contains(refusals[0].Reasons[0].Detail, "shipped") {
		t.Fatalf("recorded refusals: %+v", refusals)
	}

	// A declared origin is decided as such, and the run is the agent's.
	builder := w.NamedAgent(t, "builder", policy.OriginShipped)
	brun := w.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada", Agent: "builder"})
	if r, err := builder.Output(ctx, brun, "ok", 1); err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("builder: %+v %v", r, err)
	}
	evs := w.journalEvents(t, brun)
	var d journal.Decision
	_ = json.Unmarshal(evs[1].Data, &d)
	if d.Origin != policy.OriginShipped || d.Agent != "builder" {
		t.Fatalf("builder's decision: %+v", d)
	}
	bob := w.NamedAgent(t, "bob", "")
	for who, c := range map[string]*client.Client{"bob": bob, "the shared agent": shared} {
		r, err := c.Output(ctx, brun, "ok", 1)
		if errCode(err) != broker.CodeNotRunAgent || r.Decision.Refusal != broker.RefuseRunOfAnotherAgent {
			t.Fatalf("%s on builder's run: %+v %v", who, r, err)
		}
	}
	if r, err := bob.Output(ctx, run, "ok", 1); errCode(err) != broker.CodeNotRunAgent {
		t.Fatalf("bob on a run opened without an agent: %+v %v", r, err)
	}
	if n := len(w.journalEvents(t, brun)); n != 6 { // run.open, builder's three, two refusals
		t.Fatalf("builder's run holds %d events", n)
	}

	// Applications.
	reg := *w.Identities.Load()
	reg.Apps = append(reg.Apps, identity.App{Name: "crm", Tenants: []string{"acme"}})
	if err := w.NS.Reload(&reg); err != nil {
		t.Fatal(err)
	}
	w.Identities.Store(&reg)
	crm, err := client.DialApp(w.NS.URL, "crm", embedded.AppCredsPath(filepath.Join(w.Dir, "nats"), "crm"))
	if err != nil {
		t.Fatal(err)
	}
	defer crm.Close()
	if _, err := crm.OpenWork(ctx, broker.OpenWork{Tenant: "globex", Person: "gus"}); errCode(err) != broker.CodeTenantNotAllowed {
		t.Fatalf("crm opening for another tenant: %v", err)
	}
	crmRun, err := crm.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.App.CloseWork(ctx, crmRun, "stolen"); errCode(err) != broker.CodeNotRunApp {
		t.Fatalf("the shared app closing crm's run: %v", err)
	}
	if err := crm.CloseWork(ctx, run, "stolen"); errCode(err) != broker.CodeNotRunApp {
		t.Fatalf("crm closing the shared app's run: %v", err)
	}
	kv, _ := w.js.KeyValue(ctx, subject.RunsBucket)
	for _, id := range []string{crmRun, run} {
		e, err := kv.Get(ctx, id)
		if err != nil || strings.Contains(string(e.Value()), `"closed":true`) {
			t.Fatalf("run %s closed by another application: %s %v", id, e.Value(), err)
		}
	}
	if err := crm.CloseWork(ctx, crmRun, "done"); err != nil {
		t.Fatal(err)
	}
}

func errCode(err error) broker.Code {
	var eb *broker.ErrorBody
	if errors.As(err, &eb) {
		return eb.Code
	}
	return ""
}
