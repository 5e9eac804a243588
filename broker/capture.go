package broker

import (
	"context"
	"time"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/policy"
)

// ContentSink keeps, beside the journal, what a decision depended on, and
// returns the digest the decision records (request_digest). Capture is
// called once per decided effect, after Decide and before the decision is
// recorded, so the content is stored before the chain names it. A
// returned error leaves the decision recorded without a digest (it cannot
// be replayed); the effect is not refused for it. Implementations:
// *content.Capturer. Must be safe for concurrent use.
type ContentSink interface {
	Capture(ctx context.Context, r *content.Request) (string, error)
}

// GroundingSource is implemented by a Proposal's State whose sink ran a
// grounding check in Describe (the provider sink): capture keeps what the
// check was given and what the record store answered inside the request
// blob, so replay can run the check again. A nil result keeps nothing.
type GroundingSource interface {
	GroundingInput() *content.Grounding
}

// capture hands the request to the content sink, if any, and returns the
// digest to record ("" for none).
func (b *Broker) capture(ctx context.Context, run *Run, req *EffectRequest, p *Proposal, pol *policy.Policy, now time.Time) string {
	if b.content == nil || b.mode == policy.ModeOff {
		return ""
	}
	cr := &content.Request{
		Run: run.ID, Effect: p.ID, ActingFor: run.For, Sink: p.Effect.Sink, Action: req.Action, Origin: req.Origin,
		Tool: req.Tool, Params: req.Params, Described: content.FromEffect(p.Effect), PolicyDigest: pol.Digest(),
		Mode: b.mode, DecidedAt: now,
	}
	if gs, ok := p.State.(GroundingSource); ok {
		cr.Grounding = gs.GroundingInput()
	}
	d, err := b.content.Capture(ctx, cr)
	if err != nil {
		b.log.Error("request content not captured: the decision is recorded without it and cannot be replayed",
			"run", run.ID, "effect", p.ID, "err", err)
		return ""
	}
	return d
}
