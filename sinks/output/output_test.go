package output_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

func TestConformance(t *testing.T) {
	sinktest.Conformance(t, sinktest.Case{
		Sink: policy.SinkOutput,
		Request: func(run string) broker.EffectRequest {
			return broker.EffectRequest{Run: run, Action: "deliver", Params: json.RawMessage(`{"status":"ok","result":{"secret":"s3cr3t-result"}}`)}
		},
		Deny:   "{sink: output}",
		Secret: "s3cr3t-result",
		Sinks: func(t testing.TB, env *sinktest.Env) []broker.Sink {
			s, err := output.New(sinktest.Ctx(t), env.JS, 1)
			if err != nil {
				t.Fatal(err)
			}
			return []broker.Sink{s}
		},
		Happened: func(t testing.TB, env *sinktest.Env, run string, _ *broker.EffectReply) bool {
			// The output stream keeps every delivery: read the run's subject.
			st, err := env.JS.Stream(sinktest.Ctx(t), subject.OutputStream)
			if err != nil {
				t.Fatal(err)
			}
			m, err := st.GetLastMsgForSubject(sinktest.Ctx(t), subject.Output(subject.Shared, run))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return false
			}
			if err != nil {
				t.Fatal(err)
			}
			var d output.Delivery
			if err := json.Unmarshal(m.Data, &d); err != nil || d.Run != run {
				t.Fatalf("delivery %s: %v", m.Data, err)
			}
			return true
		},
	})
}

func FuzzDescribe(f *testing.F) {
	f.Add([]byte(`{"status":"ok","result":{"rows":3}}`))
	f.Add([]byte(`{"status":"` + strings.Repeat("x", 80) + `"}`))
	f.Add([]byte(`{"result":null,"extra":1}`))
	s := &output.Sink{}
	run := &broker.Run{ID: "r_00000000000000000000000000"}
	f.Fuzz(func(t *testing.T, params []byte) {
		p, err := s.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: output.ActionDeliver, Params: params})
		if err != nil {
			return
		}
		if p.Effect.Sink != policy.SinkOutput || len(p.Effect.Target) > 64 || !strings.HasPrefix(p.Digest, "sha256:") {
			t.Fatalf("accepted params gave %+v", p)
		}
	})
}
