package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
)

type rulesResult struct {
	r       *grounding.Rules
	missing *Missing
	changed bool
}

// groundingRules loads the grounding rules kept under digest.
func (r *replayer) groundingRules(digest string) rulesResult {
	if rr, ok := r.rules[digest]; ok {
		return rr
	}
	var rr rulesResult
	b, why := r.get(digest)
	switch {
	case why == "changed":
		rr.changed = true
	case why != "":
		rr.missing = &Missing{What: "grounding rules", Digest: digest, Why: why}
	default:
		name := r.names[digest]
		if name == "" {
			name = "grounding.yaml"
		}
		g, err := grounding.Parse(name, b)
		if err != nil {
			rr.missing = &Missing{What: "grounding rules", Digest: digest, Why: "unreadable by this version: " + err.Error()}
		} else {
			rr.r = g
		}
	}
	r.rules[digest] = rr
	return rr
}

// played answers a grounding check from what was recorded when the effect
// was decided: the store's answers (Lookup, WrittenAt, SpentThrough) and
// rereads, with
// the records' bodies from the content store. A question that was not
// asked then (a candidate rule reading another path) gets no record.
type played struct {
	g       *content.Grounding
	bodies  map[string][]byte
	rereads int
}

func (p *played) records(rr content.RecordsRead) ([]grounding.Record, error) {
	out := make([]grounding.Record, 0, len(rr.Records))
	for _, m := range rr.Records {
		cited := m.Digest
		if m.CitedDigest != "" {
			cited = m.CitedDigest
		}
		out = append(out, grounding.Record{Provider: m.Provider, Path: m.Path, Body: p.bodies[m.Digest], ReadAt: m.ReadAt,
			Citation: grounding.Citation{Run: m.Run, Effect: m.Effect, Digest: cited, Path: m.CitedPath}})
	}
	if rr.Error != "" {
		return out, errors.New(rr.Error)
	}
	return out, nil
}

func (p *played) Lookup(_ context.Context, workflow, provider, path string) ([]grounding.Record, error) {
	if workflow != p.g.Workflow {
		return nil, nil
	}
	for _, rr := range p.g.Lookups {
		if rr.Provider == provider && rr.Path == path {
			return p.records(rr)
		}
	}
	return nil, nil
}

func (p *played) WrittenAt(_ context.Context, workflow, provider, path string) (time.Time, error) {
	return p.mark(p.g.Writes, workflow, provider, path)
}

func (p *played) SpentThrough(_ context.Context, workflow, provider, path string) (time.Time, error) {
	return p.mark(p.g.Spends, workflow, provider, path)
}

// mark answers WrittenAt or SpentThrough from the answers recorded.
func (p *played) mark(marks []content.WriteMark, workflow, provider, path string) (time.Time, error) {
	for _, w := range marks {
		scope := w.Workflow
		if scope == "" {
			scope = p.g.Workflow
		}
		if scope == workflow && w.Provider == provider && w.Path == path {
			if w.Error != "" {
				return time.Time{}, errors.New(w.Error)
			}
			return w.At, nil
		}
	}
	return time.Time{}, nil
}

func (p *played) reread(_ context.Context, provider, path string) (grounding.Record, error) {
	for i := p.rereads; i < len(p.g.Rereads); i++ {
		rr := p.g.Rereads[i]
		if rr.Provider == provider && rr.Path == path {
			p.rereads = i + 1
			recs, err := p.records(rr)
			if err != nil || len(recs) == 0 {
				return grounding.Record{}, cmpErr(err, "no record")
			}
			return recs[0], nil
		}
	}
	return grounding.Record{}, fmt.Errorf("reread of %s:%s was not made when the effect was decided", provider, path)
}

func cmpErr(err error, s string) error {
	if err != nil {
		return err
	}
	return errors.New(s)
}

// callerInput decodes the run's input as the provider sink does: numbers
// exact; anything but an object gives nothing.
func callerInput(raw json.RawMessage) map[string]any {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var in map[string]any
	if dec.Decode(&in) != nil {
		return nil
	}
	return in
}

// groundingOutcome is a grounding check run again.
type groundingOutcome struct {
	effect *policy.Grounding // for the effect: nil when no rule applied
	diff   string            // how it differs from the record, "" when identical
}

// ground runs the grounding check of a recorded provider call again, under
// the recorded rules (or the candidate), from the recorded answers and the
// kept record bodies. It returns a divergence with Changed set when a
// record's body or the rules fail their digest, and a Missing when they
// are not kept.
func (r *replayer) ground(ev journal.Event, d *journal.Decision, req *content.Request, div *Divergence) (*groundingOutcome, *Divergence, *Missing) {
	g := req.Grounding
	rules := r.opts.Grounding
	if rules == nil {
		if g.RulesDigest == "" {
			// The rules could not be read when decided (every call was
			// refused): nothing to run again, the recorded result stands.
			return &groundingOutcome{effect: req.Described.Effect().Grounding}, nil, nil
		}
		rr := r.groundingRules(g.RulesDigest)
		switch {
		case rr.changed:
			div.Changed, div.Detail = true, "the recorded grounding rules do not match their digest "+g.RulesDigest
			return nil, div, nil
		case rr.missing != nil:
			m := *rr.missing
			m.Seq, m.Effect = ev.Seq, ev.Effect
			return nil, nil, &m
		}
		rules = rr.r
	}
	p := &played{g: g, bodies: map[string][]byte{}}
	for _, dg := range g.Digests() {
		b, why := r.get(dg)
		switch why {
		case "":
			p.bodies[dg] = b
		case "changed":
			div.Changed, div.Detail = true, fmt.Sprintf("the recorded record %s does not match its digest %s", recordName(g, dg), dg)
			return nil, div, nil
		default:
			return nil, nil, &Missing{Seq: ev.Seq, Effect: ev.Effect, What: "record", Digest: dg, Why: why}
		}
	}
	in := grounding.Input{
		Workflow: g.Workflow,
		Agent:    g.Agent,
		Call: grounding.Call{Provider: g.Call.Provider, Method: g.Call.Method, Path: g.Call.Path, Query: g.Call.Query,
			Body: g.Call.Body, ContentType: g.Call.ContentType},
		Caller: callerInput(g.Caller), Now: g.Now, Records: p,
	}
	if len(g.Rereads) > 0 {
		in.Reread = p.reread
	}
	res := rules.Check(context.Background(), in)
	out := &groundingOutcome{}
	if res.Applied {
		out.effect = &policy.Grounding{Rule: res.Rule, Failures: res.Failures}
	}
	out.diff = groundingDiff(req.Described.Grounding, out.effect, d.Citations, res.Citations)
	return out, nil, nil
}

// recordName names a record blob by what it was read from.
func recordName(g *content.Grounding, dg string) string {
	for _, rs := range [][]content.RecordsRead{g.Lookups, g.Rereads} {
		for _, rr := range rs {
			for _, m := range rr.Records {
				if m.Digest == dg {
					return fmt.Sprintf("of %s:%s (read by %s)", m.Provider, m.Path, m.Effect)
				}
			}
		}
	}
	return ""
}

// groundingDiff says how a grounding result run again differs from the
// recorded one: rule, failures, then citations.
func groundingDiff(rec *content.GroundingRecord, got *policy.Grounding, recCites []journal.Citation, gotCites []grounding.Citation) string {
	var rRule, gRule string
	var rFail, gFail []string
	if rec != nil {
		rRule, rFail = rec.Rule, rec.Failures
	}
	if got != nil {
		gRule, gFail = got.Rule, got.Failures
	}
	switch {
	case rRule != gRule:
		return fmt.Sprintf("grounding rule %q, replayed %q", rRule, gRule)
	case !slices.Equal(rFail, gFail):
		if len(gFail) > len(rFail) || (len(gFail) == len(rFail) && len(gFail) > 0) {
			for _, f := range gFail {
				if !slices.Contains(rFail, f) {
					return fmt.Sprintf("grounding rule %s: %d failure(s) recorded, %d replayed; new: %s", gRule, len(rFail), len(gFail), f)
				}
			}
		}
		for _, f := range rFail {
			if !slices.Contains(gFail, f) {
				return fmt.Sprintf("grounding rule %s: %d failure(s) recorded, %d replayed; gone: %s", gRule, len(rFail), len(gFail), f)
			}
		}
		return fmt.Sprintf("grounding rule %s: failures differ", gRule)
	}
	if rec != nil && len(recCites) != len(gotCites) {
		return fmt.Sprintf("grounding rule %s cites %d record(s), replayed %d", gRule, len(recCites), len(gotCites))
	}
	for i := range min(len(recCites), len(gotCites)) {
		a, b := recCites[i], gotCites[i]
		if a.Run != b.Run || a.Effect != b.Effect || a.Digest != b.Digest || a.Path != b.Path {
			return fmt.Sprintf("grounding rule %s cites %s (%s), replayed %s (%s)", gRule, a.Path, a.Effect, b.Path, b.Effect)
		}
	}
	return ""
}

// missingRecords lists the cited records of d no longer kept (erased or
// never kept), for a decision that cannot be replayed for another reason:
// so the report says the records are gone too.
func (r *replayer) missingRecords(ev journal.Event, d *journal.Decision) []Missing {
	var out []Missing
	for _, c := range d.Citations {
		if !content.ValidDigest(c.Digest) {
			continue
		}
		if _, why := r.get(c.Digest); why != "" && why != "changed" {
			out = append(out, Missing{Seq: ev.Seq, Effect: ev.Effect, What: "record", Digest: c.Digest, Why: why})
		}
	}
	return out
}
