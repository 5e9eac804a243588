// Package output is the output sink: a step's result delivered to the
// caller and the steps after it. Delivery is a publish on
// gatehouse.v1.output.<app>.<run> (subject.Output; <app> the application
// identity that opened the work, broker.RunApp), stored in the
// GATEHOUSE_OUTPUTS stream, so a live subscriber gets it at once and a
// later reader can still fetch it; only that application may read it.
//
// The request's params are {"status": "ok", "result": <any JSON>}. The
// journal records the status, the size and the SHA-256 digest of the result,
// never the result itself.
package output

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// ActionDeliver is the output sink's one action.
const ActionDeliver = "deliver"

// Params are the output sink's arguments.
type Params struct {
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
}

// Delivery is the message published on a run's output subject.
type Delivery struct {
	Run    string          `json:"run"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
	Time   time.Time       `json:"time"`
}

// Sink delivers outputs through JetStream. Safe for concurrent use.
type Sink struct {
	js  jetstream.JetStream
	now func() time.Time
	lim broker.StreamLimits
}

var _ broker.Sink = (*Sink)(nil)

// New ensures the outputs stream (replicas copies) with
// broker.DefaultStreamLimits and returns the sink.
func New(ctx context.Context, js jetstream.JetStream, replicas int) (*Sink, error) {
	return NewWithLimits(ctx, js, replicas, broker.DefaultStreamLimits)
}

// NewWithLimits is New with the stream's bounds (broker.StreamLimits: the
// whole stream, one message, one run's subject; discard-new, so a full
// stream refuses new outputs and never deletes stored ones). A result
// that would not fit in one message is refused before it is decided
// (TOO_LARGE); one the full stream refuses fails with outcome error
// stream-full.
func NewWithLimits(ctx context.Context, js jetstream.JetStream, replicas int, lim broker.StreamLimits) (*Sink, error) {
	if replicas < 1 {
		replicas = 1
	}
	cfg := jetstream.StreamConfig{
		Name:        subject.OutputStream,
		Description: "Gatehouse outputs delivered to callers",
		Subjects:    []string{subject.OutputPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		MaxAge:      7 * 24 * time.Hour,
	}
	lim = lim.OrDefault()
	lim.Apply(&cfg)
	got, err := broker.CreateLimitedStream(ctx, js, cfg) // a smaller bound on a small disk
	if err != nil {
		return nil, fmt.Errorf("outputs stream: %w", err)
	}
	lim.MaxBytes = got
	return &Sink{js: js, now: time.Now, lim: lim}, nil
}

// Name implements broker.Sink.
func (s *Sink) Name() policy.Sink { return policy.SinkOutput }

// Describe implements broker.Sink.
func (s *Sink) Describe(ctx context.Context, run *broker.Run, req *broker.EffectRequest) (*broker.Proposal, error) {
	if req.Action != ActionDeliver {
		return nil, fmt.Errorf("%w: the output sink's only action is %q", broker.ErrBadRequest, ActionDeliver)
	}
	var p Params
	if err := broker.DecodeParams(req.Params, &p); err != nil {
		return nil, err
	}
	if p.Status == "" {
		p.Status = "ok"
	}
	if len(p.Status) > 64 {
		return nil, fmt.Errorf("%w: status is longer than 64 bytes", broker.ErrBadRequest)
	}
	if p.Result == nil {
		p.Result = json.RawMessage("null")
	}
	if err := s.lim.CheckSize("result", len(p.Result)+len(p.Status)); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(p.Result)
	origin := req.Origin
	if origin == "" {
		origin = policy.OriginRuntime
	}
	return &broker.Proposal{
		Effect: policy.Effect{Sink: policy.SinkOutput, Action: ActionDeliver, Origin: origin, Tool: req.Tool, Target: p.Status},
		Size:   int64(len(p.Result)),
		Digest: "sha256:" + hex.EncodeToString(sum[:]),
		State:  &p,
	}, nil
}

// Perform implements broker.Sink.
func (s *Sink) Perform(ctx context.Context, run *broker.Run, req *broker.EffectRequest, prop *broker.Proposal) (*broker.Performed, error) {
	p := prop.State.(*Params)
	b, err := json.Marshal(Delivery{Run: run.ID, Status: p.Status, Result: p.Result, Time: s.now().UTC()})
	if err != nil {
		return nil, err
	}
	subj := subject.Output(broker.RunApp(run), run.ID)
	ack, err := s.js.Publish(ctx, subj, b)
	if err != nil {
		return nil, fmt.Errorf("deliver output: %w", broker.StreamFull(err))
	}
	reply, _ := json.Marshal(map[string]any{"subject": subj, "seq": ack.Sequence})
	return &broker.Performed{
		Result: journal.Result{Status: "ok", Size: prop.Size, Digest: prop.Digest, Detail: map[string]string{"status": p.Status}},
		Reply:  reply,
	}, nil
}

// Limits are the bounds its stream has (MaxBytes smaller than asked on a
// disk too small to reserve it: broker.CreateLimitedStream).
func (s *Sink) Limits() broker.StreamLimits { return s.lim }
