package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// Send proposes a message to the agent to, for run (the peer sink's send).
func (c *Client) Send(ctx context.Context, run, to string, body any) (*broker.EffectReply, error) {
	return c.peer(ctx, run, broker.PeerSend, map[string]any{"to": to, "body": body})
}

// Delegate proposes handing task to the agent to in a sub-run of run (the
// peer sink's delegate). When the delegation happened, child is the
// sub-run's id, which the recipient is told too; a refusal leaves it "".
func (c *Client) Delegate(ctx context.Context, run, to string, task any) (child string, reply *broker.EffectReply, err error) {
	reply, err = c.peer(ctx, run, broker.PeerDelegate, map[string]any{"to": to, "task": task})
	if err != nil || reply.Result == nil {
		return "", reply, err
	}
	var r struct {
		Run string `json:"run"`
	}
	if err := json.Unmarshal(reply.Result, &r); err != nil {
		return "", reply, fmt.Errorf("delegate reply: %w", err)
	}
	return r.Run, reply, nil
}

// Broadcast proposes sending body to every other run of run's work (the
// peer sink's broadcast).
func (c *Client) Broadcast(ctx context.Context, run string, body any) (*broker.EffectReply, error) {
	return c.peer(ctx, run, broker.PeerBroadcast, map[string]any{"body": body})
}

func (c *Client) peer(ctx context.Context, run, action string, params map[string]any) (*broker.EffectReply, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return c.Effect(ctx, policy.SinkPeer, broker.EffectRequest{Run: run, Action: action, Params: b})
}

// PeerInbox receives one agent's peer messages from its durable consumer
// on the peer stream, including those sent while it was not listening.
// The broker creates the consumer with the first message to the agent, so
// until then Next waits. Safe for concurrent use; concurrent Next calls
// each get different messages.
type PeerInbox struct {
	js    jetstream.JetStream
	agent string

	mu   sync.Mutex
	cons jetstream.Consumer
}

// Peer returns agent's inbox. It does not contact the server.
func (c *Client) Peer(agent string) (*PeerInbox, error) {
	if !subject.ValidAgent(agent) {
		return nil, fmt.Errorf("agent %q: a name must be 1 to %d letters, digits, '-' or '_'", agent, subject.MaxAgentLen)
	}
	js, err := jetstream.New(c.nc)
	if err != nil {
		return nil, err
	}
	return &PeerInbox{js: js, agent: agent}, nil
}

// nextWait bounds one fetch, so a cancelled context is noticed soon.
const nextWait = 5 * time.Second

// Next returns the next message, waiting until one arrives or ctx ends
// (then it returns ctx's error). The message is acknowledged, and so
// removed from the stream, before Next returns it.
func (p *PeerInbox) Next(ctx context.Context) (*broker.PeerMessage, error) {
	for {
		cons, err := p.consumer(ctx)
		if err != nil {
			return nil, err
		}
		wait := nextWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait < time.Millisecond {
			return nil, context.DeadlineExceeded
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(wait))
		if err != nil {
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
				p.reset()
				continue
			}
			return nil, fmt.Errorf("fetch peer messages of %s: %w", p.agent, err)
		}
		for m := range batch.Messages() {
			var pm broker.PeerMessage
			if err := json.Unmarshal(m.Data(), &pm); err != nil {
				_ = m.Term()
				return nil, fmt.Errorf("peer message on %s is not JSON: %w", m.Subject(), err)
			}
			if err := m.DoubleAck(ctx); err != nil {
				return nil, fmt.Errorf("acknowledge peer message: %w", err)
			}
			return &pm, nil
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("fetch peer messages of %s: %w", p.agent, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// consumer binds the agent's consumer, waiting for the broker to create it.
func (p *PeerInbox) consumer(ctx context.Context) (jetstream.Consumer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.cons == nil {
		cons, err := p.js.Consumer(ctx, subject.PeerStream, subject.PeerConsumer(p.agent))
		switch {
		case err == nil:
			p.cons = cons
		case errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound):
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		default:
			return nil, fmt.Errorf("peer inbox of %s: %w", p.agent, err)
		}
	}
	return p.cons, nil
}

func (p *PeerInbox) reset() {
	p.mu.Lock()
	p.cons = nil
	p.mu.Unlock()
}
