package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/identity"
)

// Sessions of the streamable HTTP transport live longer than one request:
// a session is authenticated once, to the agent its bearer token named,
// and bound to a run. The registration of that agent may end while the
// session lives (gatehouse agents remove NAME, or remove and add again: a
// new identity under the same name, see package broker/identity). The
// broker refuses such a session's effects, but the session itself must
// end too, so that nothing keeps speaking for an identity that is gone.
// A Guard does that:
//
//   - a session records the registration (Identity) its agent had when it
//     opened; before every request of the session the Guard compares it
//     with the registration in force, and if it is not that one the
//     request is refused (a JSON-RPC error whose message starts with
//     NOT_RUN_AGENT and says what to do) and the session closed;
//   - whenever the identities in force change, every live session is
//     checked the same way and closed if its registration is gone, so an
//     idle session (an open event stream, no requests) ends too;
//   - a session the Guard ended is remembered (Ended), so the transport
//     answers a later request on it with why, not just "not found".

// Registrations is what a Guard asks about agents: which registration
// of a name is in force, and when that may have changed. *broker.Broker
// implements it.
type Registrations interface {
	AgentRegistration(name string) identity.Registration
	// IdentitiesChanged returns a channel closed at the next change, or
	// nil when identities never change.
	IdentitiesChanged() <-chan struct{}
}

// Identity is the registration of an agent a session was authenticated
// to (Guard.Current).
type Identity struct {
	Agent       string
	State       identity.State
	Incarnation string
}

// maxEnded bounds the ended sessions a Guard remembers; past it the
// oldest are forgotten (and answered "session not found" by the SDK).
const maxEnded = 4096

// Guard ends sessions whose agent registration is no longer in force.
// Safe for concurrent use; Close stops it.
type Guard struct {
	reg  Registrations
	log  *slog.Logger
	stop chan struct{}
	done chan struct{}

	mu        sync.Mutex
	live      map[*mcp.ServerSession]Identity
	closing   map[string]refused // sessions a request refused, not closed yet
	ended     map[string]string  // session id -> why it ended
	endedList []string           // in the order they ended
}

// NewGuard returns a guard asking reg, watching it for changes until
// Close.
func NewGuard(reg Registrations, log *slog.Logger) *Guard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Guard{reg: reg, log: log, stop: make(chan struct{}), done: make(chan struct{}),
		live: map[*mcp.ServerSession]Identity{}, closing: map[string]refused{}, ended: map[string]string{}}
	go g.watch()
	return g
}

// Close stops watching and closes every live session.
func (g *Guard) Close() {
	select {
	case <-g.stop:
		return
	default:
	}
	close(g.stop)
	<-g.done
	g.mu.Lock()
	live, closing := g.live, g.closing
	g.live, g.closing = map[*mcp.ServerSession]Identity{}, map[string]refused{}
	g.mu.Unlock()
	for ss := range live {
		_ = ss.Close()
	}
	for _, c := range closing {
		c.timer.Stop()
		_ = c.ss.Close()
	}
}

func (g *Guard) watch() {
	defer close(g.done)
	for {
		changed := g.reg.IdentitiesChanged() // taken before the sweep: no change is missed
		if changed == nil {
			return
		}
		g.sweep()
		select {
		case <-changed:
		case <-g.stop:
			return
		}
	}
}

// sweep closes the live sessions whose registration is gone, and those
// refused and not closed yet.
func (g *Guard) sweep() {
	g.mu.Lock()
	var gone []*mcp.ServerSession
	for id, c := range g.closing {
		c.timer.Stop()
		gone = append(gone, c.ss)
		delete(g.closing, id)
	}
	for ss, id := range g.live {
		if why := g.why(id); why != "" {
			gone = append(gone, ss)
			g.remember(ss.ID(), why)
			delete(g.live, ss)
		}
	}
	g.mu.Unlock()
	for _, ss := range gone {
		g.log.Warn("mcp session ended: its agent's registration is no longer in force", "session", ss.ID())
		_ = ss.Close()
	}
}

// Current is the registration of agent in force, for a session opening
// now; an error wrapping broker.ErrNotRunAgent when the name was removed
// and is not registered again.
func (g *Guard) Current(agent string) (Identity, error) {
	r := g.reg.AgentRegistration(agent)
	if r.State == identity.Removed {
		return Identity{}, fmt.Errorf("%w: agent %s was removed and is not registered again; register it (gatehouse agents add %s) and give its MCP client the new token", broker.ErrNotRunAgent, agent, agent)
	}
	return Identity{Agent: agent, State: r.State, Incarnation: r.Incarnation}, nil
}

// OwnsRun returns nil when run was opened for the registration of agent
// in force (identity.Registration.Owns of the run's stamp), else an error
// wrapping broker.ErrNotRunAgent that says what to do.
func (g *Guard) OwnsRun(agent string, run *broker.Run) error {
	r := g.reg.AgentRegistration(agent)
	if broker.RunAgent(run) == agent && r.Owns(run.Incarnation) {
		return nil
	}
	if r.State == identity.Removed {
		return fmt.Errorf("%w: agent %s was removed and is not registered again", broker.ErrNotRunAgent, agent)
	}
	return fmt.Errorf("%w: run %s was opened for an earlier agent named %s, removed since; the agent registered as %s now is another identity and may open sessions only on runs opened for it: have the application open new work for it",
		broker.ErrNotRunAgent, run.ID, agent, agent)
}

// why is "" while id is the registration in force, else why the session
// must end. g.mu may be held.
func (g *Guard) why(id Identity) string {
	r := g.reg.AgentRegistration(id.Agent)
	switch {
	case r.State == identity.Removed:
		return fmt.Sprintf("agent %s was removed; this session spoke for it and has ended. Register the agent again (gatehouse agents add %s) and have the application open new work for it.", id.Agent, id.Agent)
	case r.State != id.State || r.Incarnation != id.Incarnation:
		return fmt.Sprintf("agent %s was removed and registered again since this session opened: the agent registered now is another identity, and this session, which spoke for the one removed, has ended. Open a new session with the new agent's token on a run opened for it.", id.Agent)
	}
	return ""
}

// Ended says why the session with this id was ended by the guard, if it
// was.
func (g *Guard) Ended(sessionID string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	why, ok := g.ended[sessionID]
	return why, ok
}

// remember records why session id ended. g.mu is held.
func (g *Guard) remember(id, why string) {
	if id == "" {
		return
	}
	if _, ok := g.ended[id]; !ok {
		g.endedList = append(g.endedList, id)
	}
	g.ended[id] = why
	for len(g.endedList) > maxEnded {
		delete(g.ended, g.endedList[0])
		g.endedList = g.endedList[1:]
	}
}

// closeGrace is how long a session refused by a request stays open for
// the refusal to reach the client.
const closeGrace = 2 * time.Second

// codeNotRunAgent is the JSON-RPC error code of a request refused because
// its session's identity is gone (in the range JSON-RPC leaves to
// servers); its message starts with broker.CodeNotRunAgent.
const codeNotRunAgent = -32001

// middleware checks id before every request of a session: a request of
// a session whose registration is gone is refused and the session closed
// closeGrace later, or at its next request (Handler), the next sweep or
// Close, whichever comes first: closed at once, its event streams would
// end before the client has read the refusal, and clients then report the
// broken stream instead of why. The session of an accepted initialize is
// watched from then on.
func (g *Guard) middleware(id Identity) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			g.mu.Lock()
			why := g.why(id)
			if why != "" && ss != nil {
				delete(g.live, ss)
				g.remember(ss.ID(), why)
				sid := ss.ID()
				if _, ok := g.closing[sid]; !ok {
					g.closing[sid] = refused{ss: ss, timer: time.AfterFunc(closeGrace, func() { g.closeRefused(sid) })}
				}
			}
			g.mu.Unlock()
			if why != "" {
				if ss != nil {
					g.log.Warn("mcp session ended: its agent's registration is no longer in force", "session", ss.ID(), "agent", id.Agent)
				}
				data, _ := json.Marshal(map[string]string{"code": string(broker.CodeNotRunAgent)})
				return nil, &jsonrpc.Error{Code: codeNotRunAgent, Message: string(broker.CodeNotRunAgent) + ": " + why, Data: data}
			}
			res, err := next(ctx, method, req)
			if method == "initialize" && err == nil && ss != nil {
				g.watchSession(ss, id)
			}
			return res, err
		}
	}
}

// Handler serves next (the SDK's streamable HTTP handler) with the
// guard's part of it: a request on a session the guard ended is answered
// 404 (the session is gone, as the MCP transport says to answer) with a
// JSON error of code NOT_RUN_AGENT saying why, and the session, if a
// refusal left it open, is closed.
func (g *Guard) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get(sessionHeader)
		if why, ended := g.Ended(sid); sid != "" && ended {
			g.closeRefused(sid)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": broker.ErrorBody{Code: broker.CodeNotRunAgent, Message: why}})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refused is a session a request refused, and the timer that closes it.
type refused struct {
	ss    *mcp.ServerSession
	timer *time.Timer
}

// sessionHeader names a streamable HTTP request's session.
const sessionHeader = "Mcp-Session-Id"

// closeRefused closes the session sid if a request refused it.
func (g *Guard) closeRefused(sid string) {
	g.mu.Lock()
	c, ok := g.closing[sid]
	delete(g.closing, sid)
	g.mu.Unlock()
	if ok {
		c.timer.Stop()
		_ = c.ss.Close()
	}
}

// watchSession adds ss to the live sessions until it ends.
func (g *Guard) watchSession(ss *mcp.ServerSession, id Identity) {
	g.mu.Lock()
	select {
	case <-g.stop:
		g.mu.Unlock()
		go func() { _ = ss.Close() }()
		return
	default:
	}
	g.live[ss] = id
	g.mu.Unlock()
	go func() {
		_ = ss.Wait()
		g.mu.Lock()
		delete(g.live, ss)
		g.mu.Unlock()
	}()
	// A change between the session's check and now is not missed.
	if g.why(id) != "" {
		g.sweep()
	}
}
