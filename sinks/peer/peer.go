// Package peer is the peer sink: a message from one agent to another,
// delivered over NATS by Gatehouse after it is decided and recorded.
//
// # Actions
//
// The request's params are decoded strictly; any field not listed here is
// refused (BAD_REQUEST), and a field that would say whom work is for or
// within what (acting_for, tenant, person, mandate, mandate_digest, scopes,
// agent, parent, run) is refused by name (FORBIDDEN_FIELD).
//
//	send       {"to": "<agent>", "body": <any JSON>}
//	delegate   {"to": "<agent>", "task": <any JSON>}
//	broadcast  {"body": <any JSON>}
//
// send delivers body to the agent, naming the sender's run; a run accepts
// effects only from its own agent (broker.RunAgent), so the recipient
// cannot act in the sender's run: to hand work over, delegate. delegate
// opens a sub-run for the recipient
// (broker.Broker.OpenChild: same person, mandate and scopes, Agent the
// recipient, Parent the delegating run; its run.open names the parent) and
// delivers the task with the sub-run's id; the delegating agent's reply
// carries that id ({"run": ...}). broadcast delivers a step result to every
// other run of the same work: the first run, if it has an agent, and every
// sub-run delegated within it, each addressed to that run's agent.
//
// Every message carries the registration of its recipient it is for
// (broker.PeerMessage.Incarnation), set here, never by the sender: for a
// send, the recipient's registration in force (Incarnations); for a
// delegation, the one the sub-run was opened for; for a broadcast, the
// one each recipient run was opened for (kept with the run in the
// gatehouse_peers bucket). The broker hands a message only to that
// registration, so an agent removed and registered again under the same
// name never reads what was sent to the one before (broker/peernext.go).
//
// Each is one effect: Sink peer, Action the action, Recipient and Target the
// recipient ("*" for broadcast), Class notify, Origin the request's or
// runtime. So agent cards' allowed_delegations apply to delegate, a
// mandate's systems must include "peer", and effects rules match on
// action, agent and target (the recipient), e.g. {sink: peer, action:
// broadcast}. The journal records the recipient, the size and the SHA-256
// digest of the body or task, and for delegate the sub-run's id; never the
// content.
//
// # Delivery
//
// Every message goes to the recipient agent's own subject,
// gatehouse.v1.peer.<agent>.<run> (subject.Peer), where <run> is the run the
// recipient acts in. Agent names must be subject-safe tokens
// (subject.ValidAgent). Messages are published through JetStream into the
// GATEHOUSE_PEER stream and the effect counts as done once the stream has
// acknowledged it, so a recipient that was not listening gets it later. The
// stream has work-queue retention: a message stays (up to MaxAge) until its
// recipient acknowledges it, then it is gone. Each agent has one durable
// pull consumer, peer_<agent>, filtered to its subject; the sink creates it
// at the agent's first read, never for a send (any agent may name any
// recipient, and a durable consumer per name would be the sender's to
// multiply), so messages sent before wait in the stream, which keeps
// them with or without a consumer. Core NATS alone was not enough: a
// message to an agent that is not subscribed at that instant would be
// lost while the journal says it was delivered.
//
// # Reading
//
// Agents never touch JetStream: an agent asks a broker for its next
// message (subject.PeerNext, broker.PeerNextRequest; client.PeerInbox), and
// the broker fetches it with Next on its own connection, acknowledges it
// and answers in the agent's own inbox. (JetStream answers a fetch or an
// acknowledgement on any reply subject the requester names, so an agent
// allowed even its own consumer could have the server write into any
// stream or bucket; see package broker/embedded.) Who reads what is the
// subject the NATS server lets each credential publish: a named agent
// asks only for its own messages; the shared "agent" credential may ask
// for none, so messages are only ever delivered to, and read by, named
// agents. No agent can read the journal or outputs.
//
// The runs of a piece of work are listed in the KV bucket gatehouse_peers,
// keyed "<root run>.<run>.<agent>", the value the registration of the
// agent the run was opened for (empty in entries written before
// registrations were told apart), written when a delegation opens a
// sub-run; broadcast reads it. Work that never delegated has no peers, and
// its broadcast reaches nobody (the outcome says "recipients": "0").
//
// # Construction
//
// The broker is built with its sinks, and delegation needs the broker, so
// the sink is made first and bound after:
//
//	ps, _ := peer.New(ctx, js, 1)
//	b, _ := broker.New(cfg, runs, journal, pol, ps, ...)
//	ps.Bind(b)
//
// Until Bind, send and broadcast work and delegate is refused before it is
// decided, with ErrNotBound (the INTERNAL code): a wiring mistake, not the
// agent's.
package peer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// MaxContentBytes bounds a body or task, leaving room for the envelope
// within NATS's default 1 MiB message.
const MaxContentBytes = 512 << 10

// MaxAge is how long an unfetched message is kept.
const MaxAge = 7 * 24 * time.Hour

// consumerRecheck is how long the sink trusts that an agent's consumer
// exists before making sure again.
const consumerRecheck = time.Hour

// ErrNotBound is returned for a delegation when Bind was never called.
var ErrNotBound = errors.New("peer sink: not bound to a broker, so it cannot open sub-runs")

// RunOpener opens delegated sub-runs. *broker.Broker implements it.
type RunOpener interface {
	OpenChild(ctx context.Context, parent, agent string) (*broker.Run, error)
}

// Incarnations tells which registration of an agent name is in force
// (broker.Broker.AgentIncarnation); *broker.Broker implements it. A sink
// bound to one tags each message with its recipient's registration; an
// unbound sink, or one bound to an opener without it, tags none ("").
type Incarnations interface {
	AgentIncarnation(name string) string
}

// Params are the peer sink's arguments. Which are allowed depends on the
// action (see the package doc).
type Params struct {
	To   string          `json:"to,omitempty"`
	Body json.RawMessage `json:"body,omitempty"`
	Task json.RawMessage `json:"task,omitempty"`

	// Whom work is for, and within what, comes only from the run's record.
	// These are declared so a request naming one is refused by name.
	ActingFor     json.RawMessage `json:"acting_for,omitempty"`
	Tenant        json.RawMessage `json:"tenant,omitempty"`
	Person        json.RawMessage `json:"person,omitempty"`
	Mandate       json.RawMessage `json:"mandate,omitempty"`
	MandateDigest json.RawMessage `json:"mandate_digest,omitempty"`
	Scopes        json.RawMessage `json:"scopes,omitempty"`
	Agent         json.RawMessage `json:"agent,omitempty"`
	Parent        json.RawMessage `json:"parent,omitempty"`
	Run           json.RawMessage `json:"run,omitempty"`
}

// state is a described request, handed from Describe to Perform.
type state struct {
	action  string
	to      string // "" for broadcast
	content json.RawMessage
}

// Sink delivers peer messages through JetStream. Safe for concurrent use.
type Sink struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	now    func() time.Time
	lim    broker.StreamLimits
	opener atomic.Pointer[boundOpener]
	// ensured records each agent's consumer and when it was last made
	// sure of.
	ensured sync.Map // agent -> ensured
}

type ensured struct {
	at   time.Time
	cons jetstream.Consumer
}

type boundOpener struct{ RunOpener }

var (
	_ broker.Sink      = (*Sink)(nil)
	_ broker.PeerQueue = (*Sink)(nil)
)

// New ensures the peer stream and bucket (replicas copies each), with
// broker.DefaultStreamLimits, and returns the sink. Call Bind before
// serving delegations.
func New(ctx context.Context, js jetstream.JetStream, replicas int) (*Sink, error) {
	return NewWithLimits(ctx, js, replicas, broker.DefaultStreamLimits)
}

// NewWithLimits is New with the peer stream's bounds (broker.StreamLimits:
// the whole stream, one message, one recipient's queue from one run;
// discard-new, so a full stream or queue refuses new messages and never
// deletes unread ones). Content that would not fit in one message is
// refused before it is decided (TOO_LARGE); a message the full stream
// refuses fails with outcome error stream-full.
func NewWithLimits(ctx context.Context, js jetstream.JetStream, replicas int, lim broker.StreamLimits) (*Sink, error) {
	if replicas < 1 {
		replicas = 1
	}
	cfg := jetstream.StreamConfig{
		Name:        subject.PeerStream,
		Description: "Gatehouse peer messages, kept until their recipient agent fetches them",
		Subjects:    []string{subject.PeerAll},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		MaxAge:      MaxAge,
	}
	lim = lim.OrDefault()
	lim.Apply(&cfg)
	got, err := broker.CreateLimitedStream(ctx, js, cfg) // a smaller bound on a small disk
	if err != nil {
		return nil, fmt.Errorf("peer stream: %w", err)
	}
	lim.MaxBytes = got
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      subject.PeerBucket,
		Description: "Gatehouse: the runs and agents of each piece of work, for broadcasts",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("peers bucket: %w", err)
	}
	return &Sink{js: js, kv: kv, now: time.Now, lim: lim}, nil
}

// Bind gives the sink the broker it opens sub-runs through. It may be
// called once the broker exists, before or while serving; Bind(nil)
// unbinds.
func (s *Sink) Bind(o RunOpener) {
	if o == nil {
		s.opener.Store(nil)
		return
	}
	s.opener.Store(&boundOpener{o})
}

// incarnation is the registration of agent in force, as the bound
// broker knows it; "" unbound.
func (s *Sink) incarnation(agent string) string {
	o := s.opener.Load()
	if o == nil {
		return ""
	}
	if r, ok := o.RunOpener.(Incarnations); ok {
		return r.AgentIncarnation(agent)
	}
	return ""
}

// SetClock sets the clock that stamps PeerMessage.Time (nil: time.Now),
// the clock of the broker's machine; no decision reads that time (whom a
// message is for is its Incarnation). Call it before serving.
func (s *Sink) SetClock(now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	s.now = now
}

// Name implements broker.Sink.
func (s *Sink) Name() policy.Sink { return policy.SinkPeer }

// Describe implements broker.Sink: it decodes params for the action and
// returns the effect. Errors wrap broker.ErrBadRequest or
// broker.ErrForbiddenField, or are ErrNotBound.
func (s *Sink) Describe(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	st, err := decode(req.Action, req.Params)
	if err != nil {
		return nil, err
	}
	if st.action == broker.PeerDelegate {
		if s.opener.Load() == nil {
			return nil, ErrNotBound
		}
		if run.Depth >= broker.MaxDelegationDepth {
			return nil, fmt.Errorf("%w: this run is %d delegations deep, the limit; do the work here", broker.ErrBadRequest, run.Depth)
		}
	}
	if err := s.lim.CheckSize(contentName(st.action), len(st.content)); err != nil {
		return nil, err
	}
	origin := req.Origin
	if origin == "" {
		origin = policy.OriginRuntime
	}
	recipient := st.to
	if recipient == "" {
		recipient = "*"
	}
	sum := sha256.Sum256(st.content)
	return &broker.Proposal{
		Effect: policy.Effect{Sink: policy.SinkPeer, Action: st.action, Origin: origin, Tool: req.Tool,
			Target: recipient, Recipient: recipient, Class: policy.EffectNotify},
		Size:   int64(len(st.content)),
		Digest: "sha256:" + hex.EncodeToString(sum[:]),
		State:  st,
	}, nil
}

// decode validates an action and its params. It is the parser of untrusted
// input this package fuzzes.
func decode(action string, raw json.RawMessage) (*state, error) {
	switch action {
	case broker.PeerSend, broker.PeerDelegate, broker.PeerBroadcast:
	default:
		return nil, fmt.Errorf("%w: the peer sink's actions are send, delegate and broadcast, not %q", broker.ErrBadRequest, clip(action))
	}
	var p Params
	if err := broker.DecodeParams(raw, &p); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{
		{"acting_for", p.ActingFor}, {"tenant", p.Tenant}, {"person", p.Person}, {"mandate", p.Mandate},
		{"mandate_digest", p.MandateDigest}, {"scopes", p.Scopes}, {"agent", p.Agent}, {"parent", p.Parent}, {"run", p.Run},
	} {
		if f.v != nil {
			return nil, fmt.Errorf("%w: params.%s: work delegated or messaged runs for the sender's person, mandate and scopes; an agent cannot name them", broker.ErrForbiddenField, f.name)
		}
	}
	st := &state{action: action, to: p.To, content: p.Body}
	switch action {
	case broker.PeerSend, broker.PeerDelegate:
		if !subject.ValidAgent(p.To) {
			return nil, fmt.Errorf("%w: params.to %q must be an agent name: 1 to %d letters, digits, '-' or '_'", broker.ErrBadRequest, clip(p.To), subject.MaxAgentLen)
		}
		if action == broker.PeerSend && p.Task != nil {
			return nil, fmt.Errorf("%w: params.task belongs to delegate; send takes body", broker.ErrBadRequest)
		}
		if action == broker.PeerDelegate {
			if p.Body != nil {
				return nil, fmt.Errorf("%w: params.body belongs to send and broadcast; delegate takes task", broker.ErrBadRequest)
			}
			st.content = p.Task
		}
	case broker.PeerBroadcast:
		if p.To != "" || p.Task != nil {
			return nil, fmt.Errorf("%w: broadcast takes only params.body; it goes to every other run of the work", broker.ErrBadRequest)
		}
	}
	if st.content == nil {
		st.content = json.RawMessage("null")
	}
	if len(st.content) > MaxContentBytes {
		return nil, fmt.Errorf("%w: the %s is %d bytes, the limit is %d", broker.ErrBadRequest, contentName(action), len(st.content), MaxContentBytes)
	}
	return st, nil
}

func contentName(action string) string {
	if action == broker.PeerDelegate {
		return "task"
	}
	return "body"
}

// Perform implements broker.Sink.
func (s *Sink) Perform(ctx context.Context, run *broker.Run, req *broker.EffectRequest, prop *broker.Proposal) (*broker.Performed, error) {
	st := prop.State.(*state)
	switch st.action {
	case broker.PeerSend:
		seq, err := s.deliver(ctx, st.to, &broker.PeerMessage{Kind: broker.PeerSend, Run: run.ID, Body: st.content,
			Incarnation: s.incarnation(st.to)}, run)
		if err != nil {
			return nil, err
		}
		return done(prop, map[string]string{"recipient": st.to},
			map[string]any{"recipient": st.to, "subject": subject.Peer(st.to, run.ID), "seq": seq})
	case broker.PeerDelegate:
		return s.delegate(ctx, run, st, prop)
	default:
		return s.broadcast(ctx, run, st, prop)
	}
}

func (s *Sink) delegate(ctx context.Context, run *broker.Run, st *state, prop *broker.Proposal) (*broker.Performed, error) {
	o := s.opener.Load()
	if o == nil {
		return nil, ErrNotBound
	}
	child, err := o.OpenChild(ctx, run.ID, st.to)
	if err != nil {
		return nil, fmt.Errorf("open sub-run: %w", err)
	}
	// The first delegation of a piece of work is made from its first run,
	// so that is when the first run joins the list of its peers.
	if run.Parent == "" && subject.ValidAgent(run.Agent) {
		if err := s.join(ctx, run.ID, run.ID, run.Agent, run.Incarnation); err != nil {
			return nil, err
		}
	}
	if err := s.join(ctx, child.Root, child.ID, child.Agent, child.Incarnation); err != nil {
		return nil, err
	}
	seq, err := s.deliver(ctx, st.to, &broker.PeerMessage{Kind: broker.PeerDelegate, Run: child.ID, Task: st.content,
		Incarnation: child.Incarnation}, run)
	if err != nil {
		return nil, err
	}
	return done(prop, map[string]string{"recipient": st.to, "run": child.ID},
		map[string]any{"run": child.ID, "recipient": st.to, "subject": subject.Peer(st.to, child.ID), "seq": seq})
}

func (s *Sink) broadcast(ctx context.Context, run *broker.Run, st *state, prop *broker.Proposal) (*broker.Performed, error) {
	root := run.Root
	if root == "" {
		root = run.ID
	}
	members, err := s.members(ctx, root)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, m := range members {
		if m.run == run.ID {
			continue
		}
		if _, err := s.deliver(ctx, m.agent, &broker.PeerMessage{Kind: broker.PeerBroadcast, Run: m.run, Body: st.content,
			Incarnation: m.incarnation}, run); err != nil {
			return nil, fmt.Errorf("broadcast delivered to %d of the work's other runs, then: %w", n, err)
		}
		n++
	}
	count := strconv.Itoa(n)
	return done(prop, map[string]string{"recipient": "*", "recipients": count}, map[string]any{"recipients": n})
}

type member struct{ run, agent, incarnation string }

// join lists run, worked by agent's registration incarnation, among the
// runs of the work root: the key names the run and agent, the value is
// the incarnation (empty in entries written before incarnations).
func (s *Sink) join(ctx context.Context, root, run, agent, incarnation string) error {
	if _, err := s.kv.Put(ctx, root+"."+run+"."+agent, []byte(incarnation)); err != nil {
		return fmt.Errorf("list %s among the runs of %s: %w", run, root, err)
	}
	return nil
}

// members returns the runs of the work root and their agents.
func (s *Sink) members(ctx context.Context, root string) ([]member, error) {
	kl, err := s.kv.ListKeysFiltered(ctx, root+".>")
	if err != nil {
		return nil, fmt.Errorf("list the runs of %s: %w", root, err)
	}
	defer func() { _ = kl.Stop() }()
	var out []member
	seen := map[string]bool{}
	for k := range kl.Keys() {
		parts := strings.Split(k, ".")
		if len(parts) != 3 || parts[0] != root || !broker.ValidRunID(parts[1]) || !subject.ValidAgent(parts[2]) || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, member{run: parts[1], agent: parts[2]})
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, m := range out {
		e, err := s.kv.Get(ctx, root+"."+m.run+"."+m.agent)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read run %s of %s: %w", m.run, root, err)
		}
		m.incarnation = string(e.Value())
		kept = append(kept, m)
	}
	return kept, nil
}

// deliver publishes m to agent, filling in the sender from the run's
// record, and returns the stream sequence once JetStream has stored it.
//
// It creates nothing for the recipient: the message waits in the work
// queue, kept whether or not a consumer exists, until the recipient's
// first read makes its consumer (Next). A send naming any agent it likes
// therefore costs the stream one message, never a durable consumer.
func (s *Sink) deliver(ctx context.Context, agent string, m *broker.PeerMessage, from *broker.Run) (uint64, error) {
	m.From, m.FromRun, m.Time = from.Agent, from.ID, s.now().UTC()
	b, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	ack, err := s.js.Publish(ctx, subject.Peer(agent, m.Run), b, jetstream.WithExpectStream(subject.PeerStream))
	if err != nil {
		return 0, fmt.Errorf("deliver to %s: %w", agent, broker.StreamFull(err))
	}
	return ack.Sequence, nil
}

// consumer makes sure agent's durable consumer exists, at most once per
// consumerRecheck per agent in this process, and returns it. Creating it
// again with the same configuration is a no-op for JetStream, so brokers
// racing here agree.
func (s *Sink) consumer(ctx context.Context, agent string) (jetstream.Consumer, error) {
	now := s.now()
	if e, ok := s.ensured.Load(agent); ok && now.Sub(e.(ensured).at) < consumerRecheck {
		return e.(ensured).cons, nil
	}
	c, err := s.js.CreateOrUpdateConsumer(ctx, subject.PeerStream, jetstream.ConsumerConfig{
		Durable:       subject.PeerConsumer(agent),
		Description:   "peer messages to agent " + agent,
		FilterSubject: subject.PeerFilter(agent),
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer for agent %s: %w", agent, err)
	}
	s.ensured.Store(agent, ensured{at: now, cons: c})
	return c, nil
}

// Next implements broker.PeerQueue: it fetches the next message to agent
// from its consumer on the broker's own connection, waiting up to wait,
// and does what judge says with it: one taken or dropped is acknowledged,
// waiting for JetStream to confirm, before Next returns (at most once);
// one left is negatively acknowledged, so the consumer delivers it again
// to a later request. A message that is not a peer message (none should
// be: only brokers publish on peer subjects) is dropped, acknowledged
// without being handed out or judged, and Next returns nil for it.
func (s *Sink) Next(ctx context.Context, agent string, wait time.Duration, judge func(*broker.PeerMessage) broker.PeerVerdict) (*broker.PeerMessage, broker.PeerVerdict, error) {
	if !subject.ValidAgent(agent) {
		return nil, broker.PeerDrop, fmt.Errorf("%w: agent %q is not an agent name", broker.ErrBadRequest, clip(agent))
	}
	for attempt := 0; ; attempt++ {
		cons, err := s.consumer(ctx, agent)
		if err != nil {
			return nil, broker.PeerDrop, err
		}
		m, err := fetchOne(ctx, cons, wait)
		if (errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted)) && attempt == 0 {
			s.ensured.Delete(agent) // made again on the next attempt
			continue
		}
		if err != nil || m == nil {
			return nil, broker.PeerDrop, err
		}
		var pm broker.PeerMessage
		if err := json.Unmarshal(m.Data(), &pm); err != nil || !strings.HasPrefix(m.Subject(), subject.PeerPrefix+"."+agent+".") {
			// Acknowledged, waiting for JetStream, so it is gone from the
			// work queue before the next ask.
			if err := m.DoubleAck(ctx); err != nil {
				return nil, broker.PeerDrop, fmt.Errorf("drop a malformed peer message of %s: %w", agent, err)
			}
			return nil, broker.PeerDrop, nil
		}
		v := broker.PeerTake
		if judge != nil {
			v = judge(&pm)
		}
		if v == broker.PeerLeave {
			if err := m.Nak(); err != nil {
				return nil, v, fmt.Errorf("give back a peer message of %s: %w", agent, err)
			}
			return &pm, v, nil
		}
		if err := m.DoubleAck(ctx); err != nil {
			return nil, v, fmt.Errorf("acknowledge a peer message of %s: %w", agent, err)
		}
		return &pm, v, nil
	}
}

// fetchOne fetches at most one message from cons, waiting up to wait (0:
// not at all) or until ctx ends: nil, nil when none came in time, ctx's
// error when it ended.
func fetchOne(ctx context.Context, cons jetstream.Consumer, wait time.Duration) (jetstream.Msg, error) {
	var batch jetstream.MessageBatch
	var err error
	if wait <= 0 {
		batch, err = cons.FetchNoWait(1)
	} else {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		batch, err = cons.Fetch(1, jetstream.FetchContext(wctx))
	}
	if err == nil {
		for m := range batch.Messages() {
			return m, nil
		}
		err = batch.Error()
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, cerr
	}
	if err == nil || errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return nil, nil
	}
	return nil, fmt.Errorf("fetch peer messages: %w", err)
}

func done(prop *broker.Proposal, detail map[string]string, reply map[string]any) (*broker.Performed, error) {
	b, err := json.Marshal(reply)
	if err != nil {
		return nil, err
	}
	return &broker.Performed{
		Result: journal.Result{Status: "ok", Size: prop.Size, Digest: prop.Digest, Detail: detail},
		Reply:  b,
	}, nil
}

// clip shortens untrusted text before it goes into an error message.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// Limits are the bounds its stream has (MaxBytes smaller than asked on a
// disk too small to reserve it: broker.CreateLimitedStream).
func (s *Sink) Limits() broker.StreamLimits { return s.lim }
