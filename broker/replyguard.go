package broker

import (
	"github.com/nats-io/nats.go/micro"

	"github.com/gatehouse/gatehouse/broker/identity"
	"github.com/gatehouse/gatehouse/broker/subject"
)

// registrationGuard is a named agent's request that is answered only while
// the registration that sent it is the one in force. A reply goes into
// the name's inbox space (_INBOX_agent.<name>), which whoever holds the
// name's credential may read: once the agent is removed, or removed and
// registered again, the answer to what the old registration asked (a long
// effect's result, a tools.wait decision) would reach the new one. Such a
// reply is dropped, counted in gatehouse_replies_refused_total and logged,
// as a reply outside the requester's inbox is.
type registrationGuard struct {
	micro.Request
	s    *Service
	from Caller
	reg  registrationKey
}

type registrationKey struct {
	state       identity.State
	incarnation string
}

func (s *Service) registrationOf(from Caller) registrationKey {
	g := s.b.AgentRegistration(from.id)
	return registrationKey{state: g.State, incarnation: g.Incarnation}
}

// guardRegistration wraps r when from is a named agent; r as it is for
// anyone else.
func (s *Service) guardRegistration(r micro.Request, from Caller) micro.Request {
	if from.internal || from.class != subject.ClassAgent || from.id == subject.Shared {
		return r
	}
	return &registrationGuard{Request: r, s: s, from: from, reg: s.registrationOf(from)}
}

func (g *registrationGuard) current() bool {
	if g.s.registrationOf(g.from) == g.reg {
		return true
	}
	g.s.dropped(g.Request, g.from.class, g.from.id, "the agent that asked was removed or registered again before the answer")
	return false
}

func (g *registrationGuard) Respond(b []byte, opts ...micro.RespondOpt) error {
	if !g.current() {
		return nil
	}
	return g.Request.Respond(b, opts...)
}

func (g *registrationGuard) RespondJSON(v any, opts ...micro.RespondOpt) error {
	if !g.current() {
		return nil
	}
	return g.Request.RespondJSON(v, opts...)
}

func (g *registrationGuard) Error(code, description string, data []byte, opts ...micro.RespondOpt) error {
	if !g.current() {
		return nil
	}
	return g.Request.Error(code, description, data, opts...)
}
