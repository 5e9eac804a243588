package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
//   - What is kept. After a plain GET (no query, no body, no header of the
//     agent's) answered 200, whose provider and path (as sent, base path
//     included) Rules.Keeps, Perform stores the body as received with
//     ReadAt (when the answer arrived) and a citation of the effect (run,
//     effect id, sha256 of the body, "provider:path"), which the effect's
//     outcome records too, so gatehouse verify can check it. Any other
//     read is never kept: a query, a body (which servers merge into a
//     GET's parameters) or a header (Accept, a version, a preference) can
//     change what a path answers (an old version, a filtered view, a
//     pending change), and another 2xx is not the whole resource (206
//     Partial Content is a slice the agent chose). A response that cannot
//     be kept is still answered; it only grounds nothing, and the outcome
//     says kept "false".
//   - What the run changed. Before a POST, PUT, PATCH or DELETE is sent,
//     Perform marks the path and every parent path Keeps names as written
//     by the workflow (the first write is kept); when no rule grounded the
//     call (none applied, or it had failures and the mode let it through)
//     it also marks every provider of the same server that rules read
//     records of as written as a whole (grounding.AnyPath), since the
//     change may show in any record: a supplier's bank account added
//     through /bank-accounts, or changed at /suppliers/s-1 when the ERP
//     reads ids without regard to case. A record read after such a mark
//     grounds nothing in the workflow, and the same mark is made for the
//     run's agent (grounding.AgentScope), so a record read after the
//     agent's own ungrounded change, in any later run, grounds nothing
//     either, until DefaultRecordAge after its last such change: an
//     agent that edits the supplier master in one run does not pay from
//     it in the next. Give master-data changes and payments to two
//     agents, or ground the change with a rule of its own. A mark that
//     cannot be stored stops the call (error record-store), since a read
//     after an unrecorded write could otherwise ground.
//   - Spent records. A record a money or number requirement compared
//     against (the invoice whose amount_due bounds the payment) grounds one
//     carried-out call: before a grounded call is sent, Perform marks each
//     of its Result.Spends spent (RecordStore.Spend, a compare-and-set
//     across brokers), and the check refuses a record read at or before
//     the newest spent one. Paying the invoice twice, in two halves, as a
//     payment and a transfer, or four times at once, pays it once; the
//     agent reads the invoice again (seeing the payment's effect) to pay
//     more. Two calls decided on one record before either was sent: the
//     second fails record-spent, unsent. A record is spent once the call is
//     sent, whatever the provider answers.
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
		Agent:    run.Agent,
		Call:     grounding.Call{Method: c.method, Query: c.query, Body: c.body, ContentType: c.contentType},
		Caller:   callerInput(run),
		Now:      s.now(),
		Records:  s.records,
	}
	in.Call.Provider, in.Call.Path = s.groundAs(rules, c)
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
	c.grounded, c.spends = len(res.Failures) == 0, res.Spends
	prop.Effect.Grounding = &policy.Grounding{Rule: res.Rule, Failures: res.Failures}
	for _, ci := range res.Citations {
		prop.Citations = append(prop.Citations, journal.Citation{Run: ci.Run, Effect: ci.Effect, Digest: ci.Digest, Path: ci.Path})
	}
	return nil
}

// groundAs is the provider and path a call is grounded as: its own when a
// rule applies to it there, else the first provider of the same server
// (Catalogue.SameServer) whose rule fits the same method and the path as
// sent or as that provider spells it (Provider.pathAs: a provider whose
// paths ignore case reads /Payments as its /payments). The path sent is
// the whole path on the server (base path included), so a second
// catalogue entry for the ERP (another credential, another name, another
// path_case) is another spelling of the same operation, and a payment
// sent through it is grounded by the rule written for the first.
func (s *Sink) groundAs(rules *grounding.Rules, c *call) (provider, path string) {
	call := grounding.Call{Provider: c.prov.Name, Method: c.method, Path: c.path}
	if rules.Applies(call) {
		return c.prov.Name, c.path
	}
	for _, q := range s.cat.SameServer(c.prov) {
		if q == c.prov.Name {
			continue
		}
		qp, _ := s.cat.Provider(q)
		for _, p := range []string{c.path, qp.pathAs(c.path)} {
			call.Provider, call.Path = q, p
			if p != "" && rules.Applies(call) {
				return q, p
			}
		}
	}
	return c.prov.Name, c.path
}

// keep stores a GET's response for grounding when a rule could use it.
func (s *Sink) keep(ctx context.Context, run *broker.Run, prop *broker.Proposal, c *call, resp *response, dg string) error {
	if !c.plainRead() || !s.rules.Load().Keeps(c.prov.Name, c.path) {
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

// plainRead reports whether the call is a GET of its path and nothing
// else: no query, no body and no header of the agent's. A query, a body
// (servers that merge body parameters into a GET's) or a header (Accept,
// a version, a preference) can each change what a path answers: a
// filtered view, an old version, a pending change.
func (c *call) plainRead() bool {
	return c.method == http.MethodGet && c.rawQuery == "" && c.body == nil && len(c.headers) == 0
}

// markWritten notes, before a mutation is sent, that the workflow wrote to
// the path and to each parent path a rule keeps (for every provider of the
// same server, as sent and as that provider spells it, Provider.pathAs), and, when no rule
// grounded the call, to the provider as a whole (grounding.AnyPath), and
// to every provider of the same server (Catalogue.SameServer), for the
// workflow and for the run's agent in every workflow
// (grounding.AgentScope): a change nothing checked may show in any of the
// server's records, under any path and through any base path, and in a
// later run of the same agent.
func (s *Sink) markWritten(ctx context.Context, run *broker.Run, c *call) error {
	at := s.now()
	rules := s.rules.Load()
	mark := func(scope, provider, p string) error {
		return s.wrote(ctx, c.prov.Name, scope, provider, p, at)
	}
	if !c.grounded {
		if err := s.markAnyPath(ctx, rules, run, c.prov.Name, s.cat.SameServer(c.prov), at); err != nil {
			return err
		}
	}
	for _, q := range s.cat.SameServer(c.prov) {
		spellings := []string{c.path}
		if qp, _ := s.cat.Provider(q); q != c.prov.Name {
			if a := qp.pathAs(c.path); a != "" && a != c.path {
				spellings = append(spellings, a)
			}
		}
		for _, sp := range spellings {
			for p := sp; ; p = path.Dir(p) {
				p = strings.TrimSuffix(p, "/")
				if p == "" {
					p = "/"
				}
				if rules.Keeps(q, p) {
					if err := mark(workflow(run), q, p); err != nil {
						return err
					}
				}
				if p == "/" {
					break
				}
			}
		}
	}
	return nil
}

// spend marks, before a grounded call is sent, each record its amounts
// were bounded by as spent (grounding.Spend), so it grounds no later call
// of the workflow. A record another call spent since this one was decided
// (two payments relying on one invoice at once) stops the call
// (record-spent); one that cannot be marked stops it too (record-store).
// A call that then fails at the provider has still spent its records: the
// agent reads them again.
func (s *Sink) spend(ctx context.Context, run *broker.Run, c *call) error {
	err := s.SpendRecords(ctx, workflow(run), c.spends)
	switch {
	case errors.Is(err, ErrSpent):
		return &CallError{Provider: c.prov.Name, Type: "record-spent", Err: err,
			Detail: "a record that bounds this call's amount was spent by another call of this workflow since it was decided, so this one was not sent; read the record again"}
	case err != nil:
		return &CallError{Provider: c.prov.Name, Type: "record-store", Err: err,
			Detail: "the records this call's amount is bounded by could not be marked spent, so the call was not sent. Operator: make the grounding record store reachable"}
	}
	return nil
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
