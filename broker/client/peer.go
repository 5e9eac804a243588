package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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

// PeerInbox receives one agent's peer messages, including those sent
// while it was not listening: it asks a broker for the next one
// (subject.PeerNext), which takes it from the agent's queue on the peer
// stream and answers in this client's inbox. Agents never read JetStream
// themselves. Safe for concurrent use; concurrent Next calls each get
// different messages.
type PeerInbox struct {
	c     *Client
	agent string
}

// Peer returns agent's inbox; agent is this client's own identity (the
// server lets a credential ask only for its own messages). It does not
// contact the server.
func (c *Client) Peer(agent string) (*PeerInbox, error) {
	if !subject.ValidAgent(agent) {
		return nil, fmt.Errorf("agent %q: a name must be 1 to %d letters, digits, '-' or '_'", agent, subject.MaxAgentLen)
	}
	return &PeerInbox{c: c, agent: agent}, nil
}

// nextWait bounds how long one request lets the broker wait for a
// message, so a cancelled context is noticed soon; replyMargin is the time
// the reply itself may take beyond it.
const (
	nextWait    = 5 * time.Second
	replyMargin = 5 * time.Second
	busyBackoff = 200 * time.Millisecond
)

// Next returns the next message, waiting until one arrives or ctx ends
// (then it returns ctx's error). The broker acknowledges the message, and
// so removes it from the stream, before it answers: a message is handed
// out at most once. Errors other than waiting are *broker.ErrorBody.
func (p *PeerInbox) Next(ctx context.Context) (*broker.PeerMessage, error) {
	for {
		wait := nextWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl)-time.Until(dl)/4)
		}
		if wait < time.Millisecond {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, context.DeadlineExceeded
		}
		rctx, cancel := context.WithTimeout(ctx, wait+replyMargin)
		var r broker.PeerNextReply
		err := p.c.request(rctx, subject.PeerNext(p.agent), broker.PeerNextRequest{WaitMS: wait.Milliseconds()}, &r)
		cancel()
		if err == nil && r.Error != nil {
			err = r.Error
		}
		var eb *broker.ErrorBody
		switch {
		case err == nil && r.Message != nil:
			return r.Message, nil
		case err == nil, errors.As(err, &eb) && (eb.Code == broker.CodeUnavailable || eb.Code == broker.CodeTimeout):
			// Nothing came within the wait, the broker asks to back off,
			// or its answer did not come in time: ask again.
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(busyBackoff):
				}
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		default:
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			return nil, fmt.Errorf("peer messages of %s: %w", p.agent, err)
		}
	}
}
