// Package client lets applications and agents talk to Gatehouse over NATS
// in a few lines. Each agent and application normally has a credential of
// its own (`gatehouse agents add bob`, `gatehouse apps add crm`):
//
//	app, _ := client.DialApp(url, "crm", "/path/.gatehouse/nats/creds/app-crm.nk")
//	run, _ := app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "ada", Agent: "bob"})
//
//	bob, _ := client.DialAgent(url, "bob", "/path/.gatehouse/nats/creds/agent-bob.nk")
//	reply, _ := bob.Output(ctx, run, "ok", map[string]any{"total": 42})
//	if reply.Decision.Outcome != "allowed" { ... }
//
// A client speaks as one identity: its requests go on that identity's
// subjects (subject.Effect, subject.WorkOpen) and its replies come to that
// identity's inbox space, the only ones its credential may use. A run
// accepts effects only from the agent it was opened for. The shared
// credentials of the quick start (Dial with client.App or client.Agent)
// are the identity subject.Shared; the shared agent acts only on runs
// opened without an agent.
//
// Agents message each other through the peer sink, and read what was sent
// to them through a broker, from their own queue on the peer stream
// (agents hold no JetStream permission; see PeerInbox):
//
//	child, reply, _ := bob.Delegate(ctx, run, "worker", task) // child: the sub-run
//	in, _ := worker.Peer("worker")
//	msg, _ := in.Next(ctx) // msg.Run == child, msg.Task == task; worker acts in child
//
// A refusal is a decision, not an error: Effect returns it in the reply.
// Errors are for requests Gatehouse could not take (a bad request, an
// unknown run, no broker answering) and are *broker.ErrorBody with a
// stable code: the broker's, or one the client sets when no broker
// answered: NO_BROKER (nobody was listening: nothing was decided) or
// TIMEOUT (no reply before the context's deadline: the effect may or may
// not have been decided). errors.Is matches broker.ErrNoBroker,
// broker.ErrNoReply and the underlying NATS or context error.
//
// An effect request with a RequestID is safe to send again: a broker that
// has decided it answers with the recorded reply (EffectReply.Replayed).
// Effect does so itself once: with a RequestID and a context deadline,
// the first attempt gets half the remaining time and, when it times out
// (a broker died holding it), the request goes again, to whichever broker
// answers, for the rest.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// Role picks the inbox space a client uses; it must match its credentials.
type Role int

const (
	App   Role = iota // opens and closes work
	Agent             // proposes effects
)

// ErrNoBroker is returned (wrapped, as code NO_BROKER) when no broker is
// there to take a request.
var ErrNoBroker = broker.ErrNoBroker

// Client is a connection to Gatehouse as one identity. Safe for
// concurrent use.
type Client struct {
	nc    *nats.Conn
	own   bool
	class subject.Class
	id    string

	// Requests in flight, each ended at once with ErrCredentialRefused
	// when the server refuses the credential its subject or the reply
	// inbox (refused): a publish the server drops would otherwise wait for
	// its deadline and read as a TIMEOUT, the effect "maybe decided".
	mu       sync.Mutex
	inflight map[*inflightRequest]struct{}
}

type inflightRequest struct {
	subj   string
	cancel context.CancelCauseFunc
}

// Dial connects to NATS at url as the shared credential of role (identity
// subject.Shared), with the nkey seed file creds ("" for none).
func Dial(url string, role Role, creds string, opts ...nats.Option) (*Client, error) {
	return dial(url, classOf(role), subject.Shared, creds, opts)
}

func classOf(r Role) subject.Class {
	if r == Agent {
		return subject.ClassAgent
	}
	return subject.ClassApp
}

// DialAgent connects as the named agent with its own credential (see
// package broker/embedded: AgentCredsPath), using that agent's own
// subjects and inbox space, the only ones its credential may use.
func DialAgent(url, agent, creds string, opts ...nats.Option) (*Client, error) {
	if !subject.ValidName(agent) {
		return nil, fmt.Errorf("agent %q: a name must be 1 to %d letters, digits, '-' or '_', starting with a letter or digit", agent, subject.MaxAgentLen)
	}
	return dial(url, subject.ClassAgent, agent, creds, opts)
}

// DialApp connects as the named application with its own credential
// (embedded.AppCredsPath).
func DialApp(url, app, creds string, opts ...nats.Option) (*Client, error) {
	if !subject.ValidName(app) {
		return nil, fmt.Errorf("app %q: a name must be 1 to %d letters, digits, '-' or '_', starting with a letter or digit", app, subject.MaxAgentLen)
	}
	return dial(url, subject.ClassApp, app, creds, opts)
}

func dial(url string, class subject.Class, id, creds string, opts []nats.Option) (*Client, error) {
	opts = append(opts, nats.CustomInboxPrefix(subject.InboxOf(class, id)), nats.Name("gatehouse-client"))
	if creds != "" {
		o, err := nats.NkeyOptionFromSeed(creds)
		if err != nil {
			return nil, fmt.Errorf("credentials %s: %w", creds, err)
		}
		opts = append(opts, o)
	}
	c := &Client{own: true, class: class, id: id}
	// The caller's error handler, if opts set one, still gets every error;
	// without one, errors other than a refused request go to stderr, as
	// nats.go's default does.
	o := nats.GetDefaultOptions()
	for _, opt := range opts {
		_ = opt(&o)
	}
	prev := o.AsyncErrorCB
	opts = append(opts, nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
		handled := c.refused(err)
		switch {
		case prev != nil:
			prev(nc, sub, err)
		case !handled:
			fmt.Fprintf(os.Stderr, "%v\n", err)
		}
	}))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	c.nc = nc
	return c, nil
}

// refused ends the requests in flight that a permissions violation the
// server reported is about: one on a request's subject, or on this
// client's inbox space, which every reply comes through. Other errors are
// left to the deadline, as before.
func (c *Client) refused(err error) (handled bool) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return false
	}
	msg := err.Error()
	inbox := strings.Contains(msg, `"`+subject.InboxOf(c.class, c.id)+`.`)
	c.mu.Lock()
	defer c.mu.Unlock()
	for r := range c.inflight {
		if inbox || strings.Contains(msg, `"`+r.subj+`"`) {
			r.cancel(fmt.Errorf("%w as %s %s: %v", broker.ErrCredentialRefused, c.class, c.id, err))
			handled = true
		}
	}
	return handled
}

// track registers a request in flight; the function it returns ends it.
func (c *Client) track(ctx context.Context, subj string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	r := &inflightRequest{subj: subj, cancel: cancel}
	c.mu.Lock()
	if c.inflight == nil {
		c.inflight = map[*inflightRequest]struct{}{}
	}
	c.inflight[r] = struct{}{}
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.inflight, r)
		c.mu.Unlock()
		cancel(nil)
	}
}

// New wraps an existing connection as identity id (a name or
// subject.Shared) of role; Close leaves it open. The connection must use
// that identity's inbox prefix (nats.CustomInboxPrefix(subject.InboxOf)).
func New(nc *nats.Conn, role Role, id string) *Client {
	return &Client{nc: nc, class: classOf(role), id: id}
}

// Identity is the identity token the client speaks as.
func (c *Client) Identity() string { return c.id }

// Outputs is the subject filter of the outputs of the runs this
// application client opened (subject.OutputsOf).
func (c *Client) Outputs() string { return subject.OutputsOf(c.id) }

// Conn returns the underlying connection.
func (c *Client) Conn() *nats.Conn { return c.nc }

// Close closes a connection Dial opened.
func (c *Client) Close() {
	if c.own {
		c.nc.Close()
	}
}

// OpenWork opens work for a person and returns the run id.
func (c *Client) OpenWork(ctx context.Context, w broker.OpenWork) (string, error) {
	var r broker.OpenWorkReply
	if err := c.request(ctx, subject.WorkOpen(c.id), w, &r); err != nil {
		return "", err
	}
	if r.Error != nil {
		return "", r.Error
	}
	return r.Run, nil
}

// CloseWork closes a run.
func (c *Client) CloseWork(ctx context.Context, run, status string) error {
	var r broker.CloseWorkReply
	if err := c.request(ctx, subject.WorkClose(c.id), broker.CloseWork{Run: run, Status: status}, &r); err != nil {
		return err
	}
	if r.Error != nil {
		return r.Error
	}
	return nil
}

// Effect proposes one effect of sink. The reply carries the decision and,
// when the effect happened, its outcome. err is set when the broker could
// not take the request; reply.Error then holds its code too.
func (c *Client) Effect(ctx context.Context, sink policy.Sink, req broker.EffectRequest) (*broker.EffectReply, error) {
	var r broker.EffectReply
	err := c.effectAttempt(ctx, sink, req, &r)
	if err != nil {
		return nil, err
	}
	if r.Error != nil {
		return &r, r.Error
	}
	return &r, nil
}

// Output delivers a step's result for run (the output sink).
func (c *Client) Output(ctx context.Context, run, status string, result any) (*broker.EffectReply, error) {
	res, err := json.Marshal(result)
	if err != nil {
		return nil, err
	}
	params, _ := json.Marshal(map[string]json.RawMessage{"status": mustJSON(status), "result": res})
	return c.Effect(ctx, policy.SinkOutput, broker.EffectRequest{Run: run, Action: "deliver", Params: params})
}

// effectAttempt sends req, and once more after a first attempt timed out
// when req has a RequestID and ctx a deadline (see the package doc).
func (c *Client) effectAttempt(ctx context.Context, sink policy.Sink, req broker.EffectRequest, r *broker.EffectReply) error {
	subj := subject.Effect(c.id, sink)
	dl, ok := ctx.Deadline()
	if req.RequestID == "" || !ok {
		return c.request(ctx, subj, req, r)
	}
	first, cancel := context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
	err := c.request(first, subj, req, r)
	cancel()
	if !errors.Is(err, broker.ErrNoReply) || ctx.Err() != nil {
		return err
	}
	*r = broker.EffectReply{}
	if err := c.request(ctx, subj, req, r); err != nil {
		return fmt.Errorf("retried once: %w", err)
	}
	return nil
}

// Approval makes an approval request (op: subject.ApprovalListOp,
// ApprovalGetOp or ApprovalDecideOp) as this application.
func (c *Client) Approval(ctx context.Context, op string, in any) (*broker.ApprovalReply, error) {
	var r broker.ApprovalReply
	if err := c.request(ctx, subject.App(c.id, op), in, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func (c *Client) request(ctx context.Context, subj string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	start := time.Now()
	rctx, done := c.track(ctx, subj)
	defer done()
	msg, err := c.nc.RequestWithContext(rctx, subj, b)
	if cause := context.Cause(rctx); err != nil && errors.Is(cause, broker.ErrCredentialRefused) {
		return broker.NewErrorBody(cause)
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return broker.NewErrorBody(fmt.Errorf("%w: nothing listens on %s: %w", ErrNoBroker, subj, err))
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return broker.NewErrorBody(fmt.Errorf("%w: no reply on %s within %s: %w",
			broker.ErrNoReply, subj, time.Since(start).Round(time.Millisecond), err))
	case err != nil:
		return fmt.Errorf("request %s: %w", subj, err)
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
			return &broker.ErrorBody{Code: broker.Code(code), Message: msg.Header.Get("Nats-Service-Error")}
		}
		return fmt.Errorf("reply on %s is not JSON: %w", subj, err)
	}
	return nil
}
