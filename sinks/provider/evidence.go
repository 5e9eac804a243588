package provider

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
)

// ContentKeeper keeps, beside the journal, the body of each response the
// sink keeps as a grounding record, under the digest the reading effect's
// outcome records (JOURNAL_CAPTURE=full: *content.Capturer). KeepRecord
// must return once the body is kept; an error is logged and the record
// still grounds (only its replay is lost). Safe for concurrent use.
type ContentKeeper interface {
	KeepRecord(ctx context.Context, run, effect string, forWhom policy.Principal, body []byte) error
}

type keeper struct{ p atomic.Pointer[ContentKeeper] }

// KeepContent makes the sink keep each grounding record's body with k, so
// replay can run grounding checks again. Call it before serving.
func (s *Sink) KeepContent(k ContentKeeper) {
	if k != nil {
		s.content.p.Store(&k)
	}
}

// keepContent hands a kept record's body to the content keeper, if any.
func (s *Sink) keepContent(ctx context.Context, run *broker.Run, effect string, body []byte) {
	k := s.content.p.Load()
	if k == nil {
		return
	}
	if err := (*k).KeepRecord(ctx, run.ID, effect, run.For, body); err != nil {
		s.log.Error("grounding record not kept beside the journal: decisions citing it cannot be replayed",
			"run", run.ID, "effect", effect, "err", err)
	}
}

var _ broker.GroundingSource = (*call)(nil)

// GroundingInput implements broker.GroundingSource: what the grounding
// check of this call was given, for the content store.
func (c *call) GroundingInput() *content.Grounding { return c.ground }

// recorder is the Records and Reread one Check sees: it answers from the
// sink's store and notes every answer for the content store.
type recorder struct {
	recs   grounding.Records
	reread grounding.Reread

	mu sync.Mutex
	g  *content.Grounding
}

func (r *recorder) Lookup(ctx context.Context, workflow, provider, path string) ([]grounding.Record, error) {
	got, err := r.recs.Lookup(ctx, workflow, provider, path)
	r.mu.Lock()
	r.g.Lookups = append(r.g.Lookups, readOf(provider, path, got, err))
	r.mu.Unlock()
	return got, err
}

func (r *recorder) WrittenAt(ctx context.Context, workflow, provider, path string) (time.Time, error) {
	at, err := r.recs.WrittenAt(ctx, workflow, provider, path)
	m := markOf(provider, path, at, err)
	if workflow != r.g.Workflow {
		m.Workflow = workflow // the agent's scope
	}
	r.mu.Lock()
	r.g.Writes = append(r.g.Writes, m)
	r.mu.Unlock()
	return at, err
}

func (r *recorder) SpentThrough(ctx context.Context, workflow, provider, path string) (time.Time, error) {
	at, err := r.recs.SpentThrough(ctx, workflow, provider, path)
	m := markOf(provider, path, at, err)
	r.mu.Lock()
	r.g.Spends = append(r.g.Spends, m)
	r.mu.Unlock()
	return at, err
}

func markOf(provider, path string, at time.Time, err error) content.WriteMark {
	m := content.WriteMark{Provider: provider, Path: path, At: at.UTC()} // the zero time stays zero
	if err != nil {
		m.Error = err.Error()
	}
	return m
}

func (r *recorder) rereadFn(ctx context.Context, provider, path string) (grounding.Record, error) {
	rec, err := r.reread(ctx, provider, path)
	var recs []grounding.Record
	if err == nil {
		recs = []grounding.Record{rec}
	}
	r.mu.Lock()
	r.g.Rereads = append(r.g.Rereads, readOf(provider, path, recs, err))
	r.mu.Unlock()
	return rec, err
}

func readOf(provider, path string, recs []grounding.Record, err error) content.RecordsRead {
	rr := content.RecordsRead{Provider: provider, Path: path}
	if err != nil {
		rr.Error = err.Error()
	}
	for _, x := range recs {
		rr.Records = append(rr.Records, content.RecordMeta{Provider: x.Provider, Path: x.Path, ReadAt: x.ReadAt.UTC(),
			Run: x.Citation.Run, Effect: x.Citation.Effect, Digest: content.DigestOf(x.Body), CitedPath: x.Citation.Path})
		if m := &rr.Records[len(rr.Records)-1]; x.Citation.Digest != "" && x.Citation.Digest != m.Digest {
			m.CitedDigest = x.Citation.Digest // the store's record does not match its citation
		}
	}
	return rr
}

// recordInput starts the Grounding of one check: everything but the
// store's answers, which the recorder adds.
func recordInput(rules *grounding.Rules, in *grounding.Input, run *broker.Run) *content.Grounding {
	c := in.Call
	return &content.Grounding{
		RulesDigest: rules.Digest(), Workflow: in.Workflow, Agent: in.Agent, Now: in.Now.UTC(), Caller: slices.Clone(run.Input),
		Call: content.GroundingCall{Provider: c.Provider, Method: c.Method, Path: c.Path, Query: c.Query,
			Body: slices.Clone(c.Body), ContentType: c.ContentType},
	}
}
