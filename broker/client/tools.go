package client

import (
	"github.com/nats-io/nats.go"

	"context"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/subject"
)

// Tools returns the tools the run's policy could allow this agent
// (broker.Broker.Tools): what Gatehouse's MCP server lists.
func (c *Client) Tools(ctx context.Context, run string) ([]broker.ToolInfo, error) {
	var r broker.ToolsReply
	if err := c.request(ctx, subject.AgentOp(c.id, subject.ToolsListOp), broker.ToolsRequest{Run: run}, &r); err != nil {
		return nil, err
	}
	if r.Error != nil {
		return nil, r.Error
	}
	return r.Tools, nil
}

// WaitApproval waits up to d (at most broker.MaxApprovalWait) for a person
// to decide the approval request id an effect of run is held in. A reply
// with Decided false means nobody decided yet: ask again. ctx must outlast
// d, or the request times out (TIMEOUT) first.
func (c *Client) WaitApproval(ctx context.Context, run, id string, d time.Duration) (*broker.WaitReply, error) {
	var r broker.WaitReply
	if err := c.request(ctx, subject.AgentOp(c.id, subject.ToolsWaitOp), broker.WaitRequest{Run: run, Approval: id, TimeoutMS: d.Milliseconds()}, &r); err != nil {
		return nil, err
	}
	if r.Error != nil {
		return &r, r.Error
	}
	return &r, nil
}

// Own wraps a connection like New, but Close closes it.
func Own(nc *nats.Conn, role Role, id string) *Client {
	c := New(nc, role, id)
	c.own = true
	return c
}
