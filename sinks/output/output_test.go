package output_test

import (
	"encoding/json"
	"errors"
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
			m, err := st.GetLastMsgForSubject(sinktest.Ctx(t), subject.Output(run))
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
