package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync/atomic"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
)

// Grounding, as this sink does it:
//
//   - Workflow. Records belong to the workflow: the run's root (Run.Root,
//     or the run itself for work an application opened), so a sub-run's
//     read grounds its parent's payment and no other work's.
//   - What is kept. After a GET answered 2xx, without a query string, whose
//     provider and path (as sent, base path included) Rules.Keeps, Perform
//     stores the body as received with ReadAt (when the answer arrived) and
//     a citation of the effect (run, effect id, sha256 of the body,
//     "provider:path"), which the effect's outcome records too, so
//     gatehouse verify can check it. A GET with a query is never kept: a
//     query can change what a path answers (an old version, a filtered
//     view). A response that cannot be kept is still answered; it only
//     grounds nothing, and the outcome says kept "false".
//   - What the run changed. Before a POST, PUT, PATCH or DELETE is sent,
//     Perform marks the path and every parent path Keeps names as written
//     by the workflow (the first write is kept); a mark that cannot be
//     stored stops the call (error record-store), since a read after an
//     unrecorded write could otherwise ground.
//   - The check. Describe runs Rules.Check on the call as it will be sent
//     and puts the result on Effect.Grounding (Decide refuses failures as
//     ungrounded) and the citations on the Proposal.
//   - Rereads (fresh: reread). Only when RouteRereads was given the
//     broker: a reread is then a GET proposed through the broker in the
//     same run (origin runtime), so it is decided, journaled and kept like
//     any read, and its citation verifies. Without it rules that need a
//     reread get no Reread and refuse.
//   - Caller input (selectors_from: [input]) is the run's Input, given by
//     the application when it opened the work (sub-runs share it), never
//     taken from the agent's params. A run without input gives rules that
//     need it nothing, and they refuse.
//
//   - Evidence. Each check notes what it was given and every answer the
//     record store and rereads gave (content.Grounding, through
//     broker.GroundingSource), which the broker keeps in the request blob;
//     with KeepContent (JOURNAL_CAPTURE=full) each kept record's body is
//     also kept in the content store under its digest, so replay can run
//     the check again.
//
// Records are in the RecordStore shared by every broker (JetStream KV by
// default, Redis when configured), so a read decided in one broker process
// grounds a call decided in another.

// Proposer is what rereads are routed through: the broker.
type Proposer interface {
	Propose(ctx context.Context, from broker.Caller, sink policy.Sink, data []byte) *broker.EffectReply
}

type rereader struct{ p atomic.Pointer[Proposer] }

// RouteRereads sends the rereads of fresh: reread rules through p (the
// broker serving this sink), so each is decided and journaled. Call it
// once the broker exists.
func (s *Sink) RouteRereads(p Proposer) { s.rereads.p.Store(&p) }

type rereadKey struct{}

// workflow is the workflow a run's records belong to: its root run.
func workflow(run *broker.Run) string {
	if run.Root != "" {
		return run.Root
	}
	return run.ID
}

// callerInput decodes the run's input with numbers kept exact; an input
// that cannot be decoded gives nothing (rules that need it refuse).
func callerInput(run *broker.Run) map[string]any {
	if len(run.Input) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(run.Input))
	dec.UseNumber()
	var in map[string]any
	if dec.Decode(&in) != nil {
		return nil
	}
	return in
}

func (s *Sink) ground(ctx context.Context, run *broker.Run, c *call, prop *broker.Proposal) error {
	rules := s.rules.Load() // one set of rules for the whole check, even across a reload
	in := grounding.Input{
		Workflow: workflow(run),
		Call: grounding.Call{Provider: c.prov.Name, Method: c.method, Path: c.path, Query: c.query,
			Body: c.body, ContentType: c.contentType},
		Caller:  callerInput(run),
		Now:     s.now(),
		Records: s.records,
	}
	if ctx.Value(rereadKey{}) == nil {
		if p := s.rereads.p.Load(); p != nil {
			in.Reread = s.reread(run, *p)
		}
	}
	// Every answer the check gets is noted, for replay (content store).
	rec := &recorder{recs: in.Records, reread: in.Reread, g: recordInput(rules, &in, run)}
	if in.Records != nil {
		in.Records = rec
	}
	if in.Reread != nil {
		in.Reread = rec.rereadFn
	}
	res := rules.Check(ctx, in)
	if !res.Applied {
		return nil
	}
	c.ground = rec.g
	prop.Effect.Grounding = &policy.Grounding{Rule: res.Rule, Failures: res.Failures}
	for _, ci := range res.Citations {
		prop.Citations = append(prop.Citations, journal.Citation{Run: ci.Run, Effect: ci.Effect, Digest: ci.Digest, Path: ci.Path})
	}
	return nil
}

// keep stores a GET's response for grounding when a rule could use it.
func (s *Sink) keep(ctx context.Context, run *broker.Run, prop *broker.Proposal, c *call, resp *response, dg string) error {
	if c.rawQuery != "" || !s.rules.Load().Keeps(c.prov.Name, c.path) {
		return nil
	}
	r := grounding.Record{
		Provider: c.prov.Name, Path: c.path, Body: resp.body, ReadAt: s.now(),
		Citation: grounding.Citation{Run: run.ID, Effect: prop.ID, Digest: dg, Path: c.prov.Name + ":" + c.path},
	}
	if err := s.records.Keep(ctx, workflow(run), r); err != nil {
		return err
	}
	s.keepContent(ctx, run, prop.ID, resp.body)
	return nil
}

// markWritten notes, before a mutation is sent, that the workflow wrote to
// the path and to each parent path a rule keeps.
func (s *Sink) markWritten(ctx context.Context, run *broker.Run, c *call) error {
	at := s.now()
	for p := c.path; ; p = path.Dir(p) {
		p = strings.TrimSuffix(p, "/")
		if p == "" {
			p = "/"
		}
		if s.rules.Load().Keeps(c.prov.Name, p) {
			if err := s.records.Wrote(ctx, workflow(run), c.prov.Name, p, at); err != nil {
				return &CallError{Provider: c.prov.Name, Type: "record-store", Err: err,
					Detail: "the write could not be noted for grounding, so it was not sent. Operator: make the grounding record store reachable"}
			}
		}
		if p == "/" || p == c.prov.basePath {
			return nil
		}
	}
}

// reread returns the Reread of one Describe: a GET of the path proposed
// through the broker in run, whose kept record it returns.
func (s *Sink) reread(run *broker.Run, p Proposer) grounding.Reread {
	return func(ctx context.Context, provider, full string) (grounding.Record, error) {
		prov, ok := s.cat.Provider(provider)
		if !ok {
			return grounding.Record{}, fmt.Errorf("reread: provider %q is not in the catalogue", provider)
		}
		rel := strings.TrimPrefix(full, prov.basePath)
		params, _ := json.Marshal(Params{Provider: provider, Method: "GET", Path: rel})
		data, err := json.Marshal(broker.EffectRequest{Run: run.ID, Action: ActionCall, Params: params})
		if err != nil {
			return grounding.Record{}, err
		}
		// Gatehouse's own read, origin runtime, passed in process.
		reply := p.Propose(context.WithValue(ctx, rereadKey{}, true), broker.Internal(policy.OriginRuntime), policy.SinkProvider, data)
		switch {
		case reply.Error != nil:
			return grounding.Record{}, fmt.Errorf("reread of %s:%s: %s", provider, full, reply.Error.Code)
		case reply.Decision == nil || reply.Decision.Outcome != journal.OutcomeAllowed:
			return grounding.Record{}, fmt.Errorf("reread of %s:%s was not allowed", provider, full)
		case reply.Outcome == nil || reply.Outcome.Status != "ok":
			return grounding.Record{}, fmt.Errorf("reread of %s:%s failed", provider, full)
		}
		recs, err := s.records.Lookup(ctx, workflow(run), provider, full)
		if err != nil {
			return grounding.Record{}, err
		}
		for _, r := range recs {
			if r.Citation.Effect == reply.Effect {
				return r, nil
			}
		}
		return grounding.Record{}, errors.New("reread of " + provider + ":" + full + " was not kept")
	}
}
