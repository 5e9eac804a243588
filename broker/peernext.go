package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/broker/subject"
)

// Peer messages are read through Gatehouse.
//
// An agent asks a broker for its next peer message on
// gatehouse.v1.agent.<agent>.peer.next (subject.PeerNext) and gets it in
// its own inbox, like any reply. Agents hold no JetStream permission at
// all: JetStream answers a fetch, an acknowledgement or an API request on
// whatever reply subject the requester names (the server checks only the
// subject published to), so an agent allowed to fetch from its own
// consumer could have the server write into any stream or bucket. The
// broker fetches on its own connection and answers on the replies
// connection, after the same reply check as every request (Service).

// PeerQueue is implemented by the sink that keeps agents' peer messages
// (sinks/peer). Implementations must be safe for concurrent use.
type PeerQueue interface {
	// Next fetches the next message to agent (a name, never
	// subject.Shared), waiting up to wait for one (0: not at all), and asks
	// judge what to do with it before acknowledging anything: PeerTake, it
	// is acknowledged and returned, so a message is handed out at most
	// once; PeerDrop, it is acknowledged and handed to nobody; PeerLeave,
	// it is given back to the queue (negatively acknowledged) for a later
	// request. It returns the message (taken, dropped or left) with what
	// was done, or nil when none came.
	Next(ctx context.Context, agent string, wait time.Duration, judge func(*PeerMessage) PeerVerdict) (*PeerMessage, PeerVerdict, error)
}

// PeerVerdict is what becomes of a peer message PeerQueue.Next fetched.
type PeerVerdict int

const (
	// PeerTake: the message is handed to the requester.
	PeerTake PeerVerdict = iota
	// PeerDrop: the message is for no registration there is; it is taken
	// off the queue and handed to nobody.
	PeerDrop
	// PeerLeave: the requester is no longer the registration in force;
	// the message stays queued for the one that is.
	PeerLeave
)

// PeerNextRequest asks for the agent's next peer message.
type PeerNextRequest struct {
	// WaitMS is how long the broker may wait for a message, in
	// milliseconds, at most MaxPeerWait; 0 answers at once.
	WaitMS int64 `json:"wait_ms,omitempty"`
}

// MaxPeerWait bounds PeerNextRequest.WaitMS.
const MaxPeerWait = 10 * time.Second

// maxPeerWaiters bounds, per agent identity and broker, the PeerNext
// requests waiting at once, so one agent cannot hold the broker's
// in-flight slots with waiting fetches; past it the request is answered
// UNAVAILABLE (ErrTooManyInFlight) at once.
const maxPeerWaiters = 4

// PeerNextReply answers PeerNextRequest: Message is nil when none came
// within the wait.
type PeerNextReply struct {
	Message *PeerMessage `json:"message,omitempty"`
	Error   *ErrorBody   `json:"error,omitempty"`
}

// DecodePeerNext decodes a PeerNextRequest strictly; an empty body is
// one that does not wait. Errors wrap ErrBadRequest.
func DecodePeerNext(data []byte) (*PeerNextRequest, error) {
	var r PeerNextRequest
	if len(data) > 0 {
		if err := decodeStrict(data, &r); err != nil {
			return nil, err
		}
	}
	if r.WaitMS < 0 || r.WaitMS > MaxPeerWait.Milliseconds() {
		return nil, fmt.Errorf("%w: wait_ms must be 0 to %d", ErrBadRequest, MaxPeerWait.Milliseconds())
	}
	return &r, nil
}

// peerQueue is the broker's sink that implements PeerQueue, if any.
func (b *Broker) peerQueue() PeerQueue {
	for _, s := range b.sinks {
		if q, ok := s.(PeerQueue); ok {
			return q
		}
	}
	return nil
}

// peerWaiters counts the requests each agent identity has waiting
// (PeerNext; tools.wait with its own count), at most max each (0:
// maxPeerWaiters).
type peerWaiters struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func (w *peerWaiters) acquire(agent string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	limit := w.max
	if limit <= 0 {
		limit = maxPeerWaiters
	}
	if w.n[agent] >= limit {
		return false
	}
	if w.n == nil {
		w.n = map[string]int{}
	}
	w.n[agent]++
	return true
}

func (w *peerWaiters) release(agent string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[agent]--; w.n[agent] <= 0 {
		delete(w.n, agent)
	}
}

// peerNext serves PeerNext from q for the agent the subject names.
func (s *Service) peerNext(q PeerQueue) handler {
	return func(ctx context.Context, from Caller, r micro.Request) {
		if from.id == subject.Shared {
			respond(r, &PeerNextReply{Error: errorBody(fmt.Errorf("%w: peer messages go to named agents only, each reading its own; the shared agent credential has none", ErrNotRunAgent))})
			return
		}
		// The registration the requester is: a wait outliving it (the name
		// removed, or removed and added again) takes nothing (nextOwn).
		asker := s.b.AgentRegistration(from.id)
		if asker.State == identity.Removed {
			respond(r, &PeerNextReply{Error: errorBody(fmt.Errorf("%w: agent %s was removed and is not registered again, so its credential reads nothing; register it (gatehouse agents add %s) to read what is sent to it from then on", ErrNotRunAgent, from.id, from.id))})
			return
		}
		req, err := DecodePeerNext(r.Data())
		if err != nil {
			respond(r, &PeerNextReply{Error: errorBody(err)})
			return
		}
		if !s.waiters.acquire(from.id) {
			respond(r, &PeerNextReply{Error: errorBody(fmt.Errorf("%w: agent %s already has %d peer requests waiting on this broker", ErrTooManyInFlight, from.id, maxPeerWaiters))})
			return
		}
		defer s.waiters.release(from.id)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(s.waits, cancel)
		defer stop()
		m, err := s.nextOwn(wctx, q, from, asker, time.Duration(req.WaitMS)*time.Millisecond)
		if errors.Is(err, context.Canceled) && s.waits.Err() != nil {
			m, err = nil, nil // the service is closing: none came
		}
		if err != nil {
			s.b.log.Warn("peer message not taken", "agent", from.id, "err", err)
			respond(r, &PeerNextReply{Error: errorBody(fmt.Errorf("%w: the peer queue could not be read: %v", ErrSinkUnavailable, err))})
			return
		}
		respond(r, &PeerNextReply{Message: m})
	}
}

// maxStaleSkipped bounds the messages of another registration of the
// name one PeerNext discards before it answers with none (the next request
// goes on).
const maxStaleSkipped = 256

// nextOwn is q.Next for from, which was registration asker when it asked,
// discarding the messages that were for another registration of from's
// name (the registration in force does not own PeerMessage.Incarnation,
// identity.Registration.Owns): they were a removed agent's, never this
// one's. Each is taken (acknowledged) and logged, so it is handed to
// nobody. Once the registration in force is no longer asker (the name
// removed, or removed and added again, while the request waited), the
// request takes nothing more: a message fetched then is left queued for
// the registration in force, and the request is answered with none; its
// requester, another identity of the name, never gets it, and the one in
// force still does.
func (s *Service) nextOwn(ctx context.Context, q PeerQueue, from Caller, asker identity.Registration, wait time.Duration) (*PeerMessage, error) {
	deadline := time.Now().Add(wait)
	judge := func(m *PeerMessage) PeerVerdict {
		// Looked up for each message: a reload between two must not hand
		// the next one to a registration it was not for.
		g := s.b.AgentRegistration(from.id)
		switch {
		case g != asker:
			return PeerLeave
		case g.Owns(m.Incarnation):
			return PeerTake
		}
		return PeerDrop
	}
	for range maxStaleSkipped {
		m, v, err := q.Next(ctx, from.id, max(time.Until(deadline), 0), judge)
		if err != nil || m == nil {
			return nil, err
		}
		switch v {
		case PeerTake:
			return m, nil
		case PeerLeave:
			s.b.log.Info("peer request outlived its agent registration: message left for the one in force", "agent", from.id, "from_run", m.FromRun)
			return nil, nil
		}
		s.b.log.Warn("peer message for another registration of this agent name discarded", "agent", from.id, "from_run", m.FromRun, "for", m.Incarnation)
	}
	return nil, nil
}
