package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// Version is the service version announced to NATS micro.
const Version = "0.1.0"

// Service serves a Broker over NATS as the micro service "gatehouse", in
// the brokers' queue group, so any number of brokers share the load. Each
// request is handled on its own goroutine, bounded by MaxInFlight.
//
// Who asks is read from the request's subject (subject.Requester), which
// the NATS server let only that identity's credential publish on; a reply
// goes only to a reply subject inside that identity's own inbox space
// (subject.InboxOf). A request whose reply subject is anywhere else is not
// handled at all (nothing is decided), gets no reply, is logged and
// counted (gatehouse_replies_refused_total). The connection Serve is given
// should be one the server lets publish only into inbox spaces
// (embedded.RoleReplies; see ProbeReplies), so that even a bug here could
// not aim a reply at a stream, a bucket or another run's subjects; the
// broker's streams and buckets are written on another connection.
type Service struct {
	b      *Broker
	svc    micro.Service
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{}
	// waiters bounds each agent's waiting PeerNext requests; waits ends
	// their waiting when the service closes.
	waiters peerWaiters
	// approvalWaits bounds each agent's waiting tools.wait requests
	// (maxApprovalWaiters); tools.go.
	approvalWaits peerWaiters
	waits         context.Context
	cancelWaits   context.CancelFunc
}

// ServiceConfig configures Serve. Zero values are useful.
type ServiceConfig struct {
	// MaxInFlight bounds concurrently handled requests (default 1024);
	// past it requests are answered UNAVAILABLE.
	MaxInFlight int
	// Status, when set, adds what the process knows beyond the broker to
	// the status this instance reports in its micro stats (InstanceStatus).
	// It is called on every stats request; it must be quick and safe for
	// concurrent use.
	Status func(*InstanceStatus)
}

// effectEndpoint is the micro endpoint every effect is requested on.
const effectEndpoint = "effect"

// handler handles one admitted request from a caller.
type handler func(ctx context.Context, from Caller, r micro.Request)

// Serve registers the broker's endpoints on nc and returns once the NATS
// server has them. Close stops it.
func Serve(nc *nats.Conn, b *Broker, cfg ServiceConfig) (*Service, error) {
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 1024
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{b: b, ctx: ctx, cancel: cancel, sem: make(chan struct{}, cfg.MaxInFlight), approvalWaits: peerWaiters{max: maxApprovalWaiters}}
	s.waits, s.cancelWaits = context.WithCancel(ctx)
	svc, err := micro.AddService(nc, micro.Config{
		Name:         subject.ServiceName,
		Version:      Version,
		Description:  "Gatehouse effect broker: decides, records and carries out agents' effects",
		QueueGroup:   subject.QueueGroup,
		StatsHandler: s.statsHandler(cfg.Status),
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("register service: %w", err)
	}
	s.svc = svc
	add := func(name, subj string, class subject.Class, h handler) error {
		return svc.AddEndpoint(name, micro.HandlerFunc(func(r micro.Request) { s.dispatch(r, class, h) }), micro.WithEndpointSubject(subj))
	}
	if err := add("work-open", subject.AppEndpoint(subject.WorkOpenOp), subject.ClassApp, s.open); err != nil {
		return nil, s.fail(err)
	}
	if err := add("work-close", subject.AppEndpoint(subject.WorkCloseOp), subject.ClassApp, s.close); err != nil {
		return nil, s.fail(err)
	}
	if err := s.addApprovals(add); err != nil {
		return nil, s.fail(err)
	}
	if err := s.addTools(add); err != nil { // tools.go
		return nil, s.fail(err)
	}
	if q := b.peerQueue(); q != nil {
		if err := add("peer-next", subject.PeerNextEndpoint, subject.ClassAgent, s.peerNext(q)); err != nil {
			return nil, s.fail(err)
		}
	}
	// One endpoint for every sink, the sink named by the subject's last
	// token, so a request for a sink this broker does not serve (a typo)
	// is answered UNKNOWN_SINK, naming the sinks it serves, instead of
	// finding no responder at all.
	if err := add(effectEndpoint, subject.EffectEndpoint("*"), subject.ClassAgent, func(ctx context.Context, from Caller, r micro.Request) {
		subj := r.Subject()
		respond(r, b.Propose(ctx, from, policy.Sink(subj[strings.LastIndexByte(subj, '.')+1:]), r.Data()))
	}); err != nil {
		return nil, s.fail(err)
	}
	// Return only once the server holds the subscriptions, so a request
	// made right after Serve finds the service.
	if err := nc.Flush(); err != nil {
		return nil, s.fail(err)
	}
	return s, nil
}

func (s *Service) fail(err error) error {
	_ = s.svc.Stop()
	s.cancelWaits()
	s.cancel()
	return fmt.Errorf("register endpoint: %w", err)
}

// callerOf reads who sent r from its subject and checks that its reply
// subject lies in that identity's own inbox space. ok is false, and the
// request has been logged and counted, when it does not: r must then get
// no reply.
func (s *Service) callerOf(r micro.Request, class subject.Class) (Caller, bool) {
	c, id, _, ok := subject.Requester(r.Subject())
	if !ok || c != class {
		s.dropped(r, class, "", "the subject names no identity")
		return Caller{}, false
	}
	if !subject.InInbox(r.Reply(), subject.InboxOf(c, id)) {
		s.dropped(r, c, id, "the reply subject is outside the requester's inbox "+subject.InboxOf(c, id)+".>")
		return Caller{}, false
	}
	if c == subject.ClassApp {
		return AppCaller(id), true
	}
	return AgentCaller(id), true
}

func (s *Service) dropped(r micro.Request, class subject.Class, id, why string) {
	s.b.metrics.observeReplyRefused(class)
	s.b.log.Warn("request dropped, not answered: "+why, "subject", clip(r.Subject()), "reply", clip(r.Reply()),
		"class", class, "identity", id)
}

// dispatch admits r (callerOf), then runs h on its own goroutine, so a slow
// effect never holds up others, and refuses past the in-flight bound.
func (s *Service) dispatch(r micro.Request, class subject.Class, h handler) {
	from, ok := s.callerOf(r, class)
	if !ok {
		return
	}
	r = s.guardRegistration(r, from)
	select {
	case s.sem <- struct{}{}:
	default:
		respond(r, &EffectReply{Error: errorBody(ErrTooManyInFlight)})
		return
	}
	s.wg.Add(1)
	go func() {
		defer func() { <-s.sem; s.wg.Done() }()
		defer func() {
			// A bug in a sink must not take the broker, and every other
			// agent's effects, down with it.
			if p := recover(); p != nil {
				s.b.log.Error("handler panicked", "subject", r.Subject(), "panic", p, "stack", string(debug.Stack()))
				respond(r, &EffectReply{Error: errorBody(fmt.Errorf("internal error handling %s", r.Subject()))})
			}
		}()
		h(s.ctx, from, r)
	}()
}

func (s *Service) open(ctx context.Context, from Caller, r micro.Request) {
	w, err := DecodeOpenWork(r.Data())
	if err != nil {
		respond(r, &OpenWorkReply{Error: errorBody(err)})
		return
	}
	run, err := s.b.Open(ctx, from, w)
	if err != nil {
		s.b.log.Warn("open work refused or failed", "caller", from, "err", err)
		respond(r, &OpenWorkReply{Error: errorBody(err)})
		return
	}
	respond(r, &OpenWorkReply{Run: run.ID, MandateDigest: run.MandateDigest})
}

func (s *Service) close(ctx context.Context, from Caller, r micro.Request) {
	c, err := DecodeCloseWork(r.Data())
	if err != nil {
		respond(r, &CloseWorkReply{Error: errorBody(err)})
		return
	}
	if err := s.b.CloseRun(ctx, from, c); err != nil {
		respond(r, &CloseWorkReply{Run: c.Run, Error: errorBody(err)})
		return
	}
	respond(r, &CloseWorkReply{Run: c.Run})
}

// Close stops taking requests and waits for those in flight; a request
// waiting for a peer message stops waiting and is answered with none.
func (s *Service) Close() error {
	err := s.svc.Stop()
	s.cancelWaits()
	s.wg.Wait()
	s.cancel()
	return err
}

// respond answers with v as JSON; a reply carrying an error also sets the
// NATS micro error headers, so `nats req` and micro clients see the code.
// The headers are set on Respond rather than through micro's Error:
// requests are answered from a goroutine of their own (dispatch), and
// Error records the error in the request, which micro's handler loop
// reads for its stats once the handler returns, unsynchronised (a data
// race; and for an answer given later it counted nothing anyway).
func respond(r micro.Request, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		_ = r.Respond(nil, errorHeaders(CodeInternal, "encode reply: "+err.Error()))
		return
	}
	if e := replyError(v); e != nil {
		_ = r.Respond(b, errorHeaders(e.Code, firstLine(e.Message)))
		return
	}
	_ = r.Respond(b)
}

// errorHeaders are NATS micro's error headers for code and description.
func errorHeaders(code Code, description string) micro.RespondOpt {
	return micro.WithHeaders(micro.Headers{micro.ErrorCodeHeader: {string(code)}, micro.ErrorHeader: {description}})
}

func replyError(v any) *ErrorBody {
	switch v := v.(type) {
	case *EffectReply:
		return v.Error
	case *OpenWorkReply:
		return v.Error
	case *CloseWorkReply:
		return v.Error
	case *ApprovalReply:
		return v.Error
	case *PeerNextReply:
		return v.Error
	case *ToolsReply:
		return v.Error
	case *WaitReply:
		return v.Error
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ErrRepliesNotConfined: the NATS server lets the connection the broker
// answers on publish outside inbox spaces, so a reply subject is kept to
// the requester's inbox only by the broker's own check.
var ErrRepliesNotConfined = errors.New("the replies connection may publish outside inbox spaces")

// ProbeReplies reports whether the server confines nc, the connection a
// Service answers on, to inbox spaces: it publishes an empty message on
// subject.ProbeSubject (which no stream keeps and nothing reads) and, one
// round trip later, expects the server's permissions violation for it. nil
// means confined; ErrRepliesNotConfined means the message was accepted
// (grant the connection only the publish permissions of
// embedded.RoleReplies).
func ProbeReplies(nc *nats.Conn) error {
	if err := nc.Publish(subject.ProbeSubject, nil); err != nil {
		return fmt.Errorf("probe the replies connection: %w", err)
	}
	// The server answers a PUB it refuses with -ERR before the PONG of
	// this flush, and the client records it as the last error.
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("probe the replies connection: %w", err)
	}
	if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject.ProbeSubject) {
		return nil
	}
	return ErrRepliesNotConfined
}
