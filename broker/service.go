package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/gatehouse/gatehouse/broker/subject"
)

// Version is the service version announced to NATS micro.
const Version = "0.1.0"

// Service serves a Broker over NATS as the micro service "gatehouse", in
// the brokers' queue group, so any number of brokers share the load. Each
// request is handled on its own goroutine, bounded by MaxInFlight.
type Service struct {
	b      *Broker
	svc    micro.Service
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{}
}

// ServiceConfig configures Serve. Zero values are useful.
type ServiceConfig struct {
	// MaxInFlight bounds concurrently handled requests (default 1024);
	// past it requests are answered UNAVAILABLE.
	MaxInFlight int
}

// Serve registers the broker's endpoints on nc and returns once the NATS
// server has them. Close stops it.
func Serve(nc *nats.Conn, b *Broker, cfg ServiceConfig) (*Service, error) {
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 1024
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{b: b, ctx: ctx, cancel: cancel, sem: make(chan struct{}, cfg.MaxInFlight)}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        subject.ServiceName,
		Version:     Version,
		Description: "Gatehouse effect broker: decides, records and carries out agents' effects",
		QueueGroup:  subject.QueueGroup,
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("register service: %w", err)
	}
	s.svc = svc
	add := func(name, subj string, h func(context.Context, micro.Request)) error {
		return svc.AddEndpoint(name, micro.HandlerFunc(func(r micro.Request) { s.dispatch(r, h) }), micro.WithEndpointSubject(subj))
	}
	if err := add("work-open", subject.WorkOpen, s.open); err != nil {
		return nil, s.fail(err)
	}
	if err := add("work-close", subject.WorkClose, s.close); err != nil {
		return nil, s.fail(err)
	}
	if err := s.addApprovals(add); err != nil {
		return nil, s.fail(err)
	}
	if err := s.addTools(add); err != nil { // tools.go
		return nil, s.fail(err)
	}
	for _, sink := range b.Sinks() {
		sink := sink
		if err := add("effect-"+string(sink), subject.Effect(sink), func(ctx context.Context, r micro.Request) {
			respond(r, b.Propose(ctx, sink, r.Data()))
		}); err != nil {
			return nil, s.fail(err)
		}
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
	s.cancel()
	return fmt.Errorf("register endpoint: %w", err)
}

// dispatch runs h on its own goroutine, so a slow effect never holds up
// others, and refuses past the in-flight bound.
func (s *Service) dispatch(r micro.Request, h func(context.Context, micro.Request)) {
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
		h(s.ctx, r)
	}()
}

func (s *Service) open(ctx context.Context, r micro.Request) {
	w, err := DecodeOpenWork(r.Data())
	if err != nil {
		respond(r, &OpenWorkReply{Error: errorBody(err)})
		return
	}
	run, err := s.b.Open(ctx, w)
	if err != nil {
		s.b.log.Error("open work failed", "err", err)
		respond(r, &OpenWorkReply{Error: errorBody(err)})
		return
	}
	respond(r, &OpenWorkReply{Run: run.ID, MandateDigest: run.MandateDigest})
}

func (s *Service) close(ctx context.Context, r micro.Request) {
	c, err := DecodeCloseWork(r.Data())
	if err != nil {
		respond(r, &CloseWorkReply{Error: errorBody(err)})
		return
	}
	if err := s.b.CloseRun(ctx, c); err != nil {
		respond(r, &CloseWorkReply{Run: c.Run, Error: errorBody(err)})
		return
	}
	respond(r, &CloseWorkReply{Run: c.Run})
}

// Close stops taking requests and waits for those in flight.
func (s *Service) Close() error {
	err := s.svc.Stop()
	s.wg.Wait()
	s.cancel()
	return err
}

// respond answers with v as JSON; a reply carrying an error also sets the
// NATS micro error headers, so `nats req` and micro clients see the code.
func respond(r micro.Request, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		_ = r.Error(string(CodeInternal), "encode reply: "+err.Error(), nil)
		return
	}
	if e := replyError(v); e != nil {
		_ = r.Error(string(e.Code), firstLine(e.Message), b)
		return
	}
	_ = r.Respond(b)
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
