package broker

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gatehouse/gatehouse/broker/subject"
)

// A Fence lets the broker that closes a run wait for the decisions every
// other broker is making for it, so that the run.close follows all of
// them in the journal however the brokers' queue group shared out the
// requests: the application's close and an agent's last effect often
// reach different brokers, and a decision whose record is in doubt (a
// stream leader being replaced) may take seconds to be acknowledged.
//
// Brokers know each other by a heartbeat on subject.BrokersHello: each
// says it is here every fenceHeartbeat, asks the others to say so when it
// starts, and says it is gone when it stops. A close sends
// subject.RunQuiesce to all of them; each marks the run closed in its
// own deciding (an effect it takes up from then on is refused, whatever
// its copy of the run says), waits for those under way to be recorded,
// and answers, at once that it is waiting and again when none is under
// way. The closing broker waits until every broker it has heard from
// lately has answered that it is done, asking again each second (a
// broker reconnecting to NATS would miss a first ask), at most
// closeWaitsForDecisions plus a margin. A broker that has not said it is
// waiting within fenceAckWait, and has not sent a heartbeat since the ask,
// is given up (killed, or cut off from NATS, where it records nothing
// either); one still heard is only slow, and is waited for. One silent for
// fencePeerLife no longer counts at all.
//
// Both subjects are the brokers' alone: agents and applications have no
// permission on them. A fence is started on the broker's own connection
// (streams and buckets), not the one it answers requests on. Safe for
// concurrent use.
type Fence struct {
	b   *Broker
	nc  *nats.Conn
	id  string
	log *slog.Logger

	mu      sync.Mutex
	peers   map[string]time.Time // broker id: last heard
	waiting map[string][]string  // run: reply subjects of asks being answered
	subs    []*nats.Subscription
	stop    chan struct{}
	wg      sync.WaitGroup
	closed  bool
}

const (
	fenceHeartbeat = 2 * time.Second
	// fencePeerLife is how long a broker counts after it was last heard.
	fencePeerLife = 4 * fenceHeartbeat
	// fenceAskAgain is the pause before a close asks the brokers that
	// have not answered again; one that has not said it is waiting after
	// fenceAckWait is given up.
	fenceAskAgain = time.Second
	fenceAckWait  = 1500 * time.Millisecond
)

// fenceHello is a heartbeat. Ask: the sender has just started and wants
// every broker to say it is here; Gone: the sender stops.
type fenceHello struct {
	ID   string `json:"id"`
	Ask  bool   `json:"ask,omitempty"`
	Gone bool   `json:"gone,omitempty"`
}

// fenceAsk asks every broker to quiesce Run; fenceReply is one's answer:
// first that it is waiting (at once), then how the wait ended.
type fenceAsk struct {
	Run  string `json:"run"`
	From string `json:"from"`
}

type fenceReply struct {
	Run   string     `json:"run"`
	ID    string     `json:"id"`
	State fenceState `json:"state"`
}

type fenceState string

const (
	fenceWaiting fenceState = "waiting"
	fenceDrained fenceState = "drained"
	// fenceUndrained: a decision was still under way after
	// closeWaitsForDecisions.
	fenceUndrained fenceState = "undrained"
)

// StartFence starts b's fence on nc, the broker's own connection, and
// makes b's closes wait on it. Close stops it.
func StartFence(nc *nats.Conn, b *Broker) (*Fence, error) {
	f := &Fence{b: b, nc: nc, id: newID("b_", time.Now()), log: b.log,
		peers: map[string]time.Time{}, waiting: map[string][]string{}, stop: make(chan struct{})}
	hello, err := nc.Subscribe(subject.BrokersHello, f.onHello)
	if err != nil {
		return nil, err
	}
	f.subs = append(f.subs, hello)
	ask, err := nc.Subscribe(subject.RunQuiesce, f.onAsk)
	if err != nil {
		f.unsubscribe()
		return nil, err
	}
	f.subs = append(f.subs, ask)
	if err := nc.Flush(); err != nil { // both subscriptions held by the server
		f.unsubscribe()
		return nil, err
	}
	f.say(fenceHello{ID: f.id, Ask: true})
	f.wg.Go(f.beat)
	b.fence.Store(f)
	return f, nil
}

// Close says this broker is gone and stops the fence. Its broker's closes
// wait for its own decisions only from then on.
func (f *Fence) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	f.mu.Unlock()
	f.b.fence.CompareAndSwap(f, nil)
	close(f.stop)
	f.wg.Wait()
	f.say(fenceHello{ID: f.id, Gone: true})
	_ = f.nc.Flush()
	f.unsubscribe()
}

func (f *Fence) unsubscribe() {
	for _, s := range f.subs {
		_ = s.Unsubscribe()
	}
}

func (f *Fence) beat() {
	t := time.NewTicker(fenceHeartbeat)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			f.say(fenceHello{ID: f.id})
		}
	}
}

func (f *Fence) say(h fenceHello) {
	b, _ := json.Marshal(h)
	if err := f.nc.Publish(subject.BrokersHello, b); err != nil {
		f.log.Debug("fence: heartbeat not sent", "err", err)
	}
}

func (f *Fence) onHello(m *nats.Msg) {
	var h fenceHello
	if json.Unmarshal(m.Data, &h) != nil || h.ID == "" || h.ID == f.id {
		return
	}
	f.mu.Lock()
	if h.Gone {
		delete(f.peers, h.ID)
	} else {
		f.peers[h.ID] = time.Now()
	}
	f.mu.Unlock()
	if h.Ask {
		f.say(fenceHello{ID: f.id})
	}
}

// live lists the brokers heard from within fencePeerLife, forgetting the
// others.
func (f *Fence) live() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id, at := range f.peers {
		if time.Since(at) > fencePeerLife {
			delete(f.peers, id)
			continue
		}
		ids = append(ids, id)
	}
	return ids
}

// heardSince reports whether broker id's heartbeat came after t.
func (f *Fence) heardSince(id string, t time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peers[id].After(t)
}

// onAsk quiesces a run another broker is closing: it answers at once
// that it is waiting, then once no decision is under way. An ask for a
// run already being waited for (asked again) adds its reply to that wait.
func (f *Fence) onAsk(m *nats.Msg) {
	var a fenceAsk
	if json.Unmarshal(m.Data, &a) != nil || a.Run == "" || a.From == f.id || m.Reply == "" {
		return
	}
	f.b.deciding.markClosed(a.Run, time.Now())
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return // stopping: the asker stops counting this broker once it hears so
	}
	f.answer(m.Reply, a.Run, fenceWaiting)
	replies, busy := f.waiting[a.Run]
	f.waiting[a.Run] = append(replies, m.Reply)
	if busy {
		return
	}
	f.wg.Go(func() { // under f.mu, so never after Close's Wait began
		ctx, cancel := context.WithTimeout(context.Background(), closeWaitsForDecisions)
		err := f.b.deciding.wait(ctx, a.Run)
		cancel()
		f.mu.Lock()
		replies := f.waiting[a.Run]
		delete(f.waiting, a.Run)
		f.mu.Unlock()
		state := fenceDrained
		if err != nil {
			state = fenceUndrained
		}
		for _, r := range replies {
			f.answer(r, a.Run, state)
		}
	})
}

func (f *Fence) answer(reply, run string, state fenceState) {
	b, _ := json.Marshal(fenceReply{Run: run, ID: f.id, State: state})
	if err := f.nc.Publish(reply, b); err != nil {
		f.log.Debug("fence: answer not sent", "run", run, "err", err)
	}
}

// quiesce asks every other live broker to quiesce run and waits, within
// ctx, for each to answer that it is done. A broker that has not said it
// is waiting within fenceAckWait (asked twice), and whose heartbeat has
// not come since the ask, is given up: it is gone, or cut off from NATS
// and so not recording either. It returns the
// brokers given up on or still deciding.
func (f *Fence) quiesce(ctx context.Context, run string) (undrained []string) {
	if len(f.live()) == 0 {
		return nil
	}
	inbox := nats.NewInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := f.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return f.live()
	}
	defer func() { _ = sub.Unsubscribe() }()
	ask, _ := json.Marshal(fenceAsk{Run: run, From: f.id})
	start := time.Now()
	state := map[string]fenceState{} // what each broker said last
	gaveUp := map[string]bool{}
	again := time.NewTimer(0)
	defer again.Stop()
	for {
		var pending []string
		for _, id := range f.live() {
			switch {
			case state[id] == fenceDrained || state[id] == fenceUndrained || gaveUp[id]:
			case state[id] == "" && time.Since(start) > fenceAckWait && !f.heardSince(id, start):
				// Neither an answer nor a heartbeat since the ask: gone, or
				// cut off. One still heard is alive and connected, only
				// slow (a starved machine): it is waited for.
				gaveUp[id] = true
			default:
				pending = append(pending, id)
			}
		}
		if len(pending) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return pending
		case <-again.C:
			if err := f.nc.PublishRequest(subject.RunQuiesce, inbox, ask); err != nil {
				f.log.Debug("fence: ask not sent", "run", run, "err", err)
			}
			again.Reset(fenceAskAgain)
		case m := <-ch:
			var r fenceReply
			if json.Unmarshal(m.Data, &r) != nil || r.Run != run || r.ID == "" {
				continue
			}
			if state[r.ID] != fenceDrained && state[r.ID] != fenceUndrained {
				state[r.ID] = r.State
			}
		}
	}
	for id, st := range state {
		if st == fenceUndrained {
			undrained = append(undrained, id)
		}
	}
	for id := range gaveUp {
		undrained = append(undrained, id)
	}
	return undrained
}

// Peers lists the other brokers this fence has heard from lately.
func (f *Fence) Peers() []string { return f.live() }

// quiesce waits, within closeWaitsForDecisions (and a margin for the
// other brokers' answers), for every decision under way for run, this
// broker's and, through its fence, every other broker's. A run's close
// calls it after marking the run closed in the store.
func (b *Broker) quiesce(ctx context.Context, run string) {
	b.deciding.markClosed(run, time.Now())
	var wg sync.WaitGroup
	var undrained []string
	if f := b.fence.Load(); f != nil {
		wg.Go(func() {
			fctx, cancel := context.WithTimeout(ctx, closeWaitsForDecisions+5*time.Second)
			defer cancel()
			undrained = f.quiesce(fctx, run)
		})
	}
	wctx, cancel := context.WithTimeout(ctx, closeWaitsForDecisions)
	err := b.deciding.wait(wctx, run)
	cancel()
	wg.Wait()
	if err != nil {
		b.log.Warn("closing a run while this broker is still recording a decision for it: that decision may follow the run.close", "run", run)
	}
	if len(undrained) > 0 {
		b.log.Warn("closing a run while other brokers may still be recording a decision for it: such a decision may follow the run.close", "run", run, "brokers", undrained)
	}
}
