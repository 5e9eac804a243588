package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

func world(t *testing.T) *sinktest.Env {
	return sinktest.Start(t, policy.ModeStrict, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
		out, err := output.New(context.Background(), env.JS, 1)
		if err != nil {
			t.Fatal(err)
		}
		return []broker.Sink{out}
	})
}

// dying answers effects of sink like a broker killed while holding them:
// it takes the first `drop` requests and never replies, then replies to
// the rest with reply. It returns how many requests it saw, and the last.
func dying(t *testing.T, nc *nats.Conn, sink policy.Sink, drop int32, reply string) (*atomic.Int32, *atomic.Value) {
	t.Helper()
	var n atomic.Int32
	var last atomic.Value
	sub, err := nc.Subscribe(subject.Effect(subject.Shared, sink), func(m *nats.Msg) {
		last.Store(string(m.Data))
		if n.Add(1) > drop {
			_ = m.Respond([]byte(reply))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &n, &last
}

func code(err error) broker.Code {
	var eb *broker.ErrorBody
	if errors.As(err, &eb) {
		return eb.Code
	}
	return ""
}

func TestNoBrokerAndTimeoutHaveCodes(t *testing.T) {
	env := world(t)
	req := broker.EffectRequest{Run: "r_01m8n75ye327hsa7apgb8fqfxn", Action: "put"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// A broker answers for a sink it does not serve, naming those it does.
	_, err := env.Agent.Effect(ctx, policy.SinkMemory, req)
	if code(err) != broker.CodeUnknownSink || !strings.Contains(err.Error(), "serves output") {
		t.Fatalf("a broker not serving memory: %v (code %q)", err, code(err))
	}
	env.Replies.Close() // the broker's service goes away: nobody answers
	waitNoBroker(t, env)
	_, err = env.Agent.Effect(ctx, policy.SinkMemory, req)
	if code(err) != broker.CodeNoBroker || !errors.Is(err, client.ErrNoBroker) || !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("no broker: %v (code %q)", err, code(err))
	}

	n, _ := dying(t, env.NC, policy.SinkMemory, 1<<30, "")
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = env.Agent.Effect(ctx, policy.SinkMemory, req)
	if code(err) != broker.CodeTimeout || !errors.Is(err, broker.ErrNoReply) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a broker that never answers: %v (code %q)", err, code(err))
	}
	if n.Load() != 1 {
		t.Fatalf("without a request_id the request went %d times, want once", n.Load())
	}
	t.Logf("%v", err)
}

// With a request_id, a request whose broker died goes once more, with the
// same id, and the second answer is returned.
func TestRetryOnceWithRequestID(t *testing.T) {
	env := world(t)
	env.Replies.Close() // only the dying brokers below answer
	waitNoBroker(t, env)
	n, last := dying(t, env.NC, policy.SinkMemory, 1, `{"run":"r_01m8n75ye327hsa7apgb8fqfxn","effect":"e_1","replayed":true,"decision":{"outcome":"allowed","mode":"strict","enforced":true,"recorded":true}}`)
	req := broker.EffectRequest{Run: "r_01m8n75ye327hsa7apgb8fqfxn", Action: "put", RequestID: "req-7"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rep, err := env.Agent.Effect(ctx, policy.SinkMemory, req)
	if err != nil || rep.Effect != "e_1" || !rep.Replayed {
		t.Fatalf("retried request: %+v %v", rep, err)
	}
	var sent broker.EffectRequest
	if err := json.Unmarshal([]byte(last.Load().(string)), &sent); err != nil || sent.RequestID != "req-7" || n.Load() != 2 {
		t.Fatalf("sent %d times, last %+v", n.Load(), sent)
	}

	// Two timeouts: TIMEOUT, after exactly one retry.
	n2, _ := dying(t, env.NC, policy.SinkPeer, 1<<30, "")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel2()
	_, err = env.Agent.Effect(ctx2, policy.SinkPeer, broker.EffectRequest{Run: req.Run, Action: "put", RequestID: "req-8"})
	if code(err) != broker.CodeTimeout {
		t.Fatalf("two timeouts: %v", err)
	}
	if got := n2.Load(); got != 2 {
		t.Fatalf("request went %d times, want 2 (one retry)", got)
	}
}

// waitNoBroker waits until the server has seen the broker's connection go:
// a request then finds no responder.
func waitNoBroker(t *testing.T, env *sinktest.Env) {
	t.Helper()
	req := broker.EffectRequest{Run: "r_01m8n75ye327hsa7apgb8fqfxn", Action: "put"}
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := env.Agent.Effect(ctx, policy.SinkOutput, req)
		cancel()
		if code(err) == broker.CodeNoBroker {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker still answers after its connection closed: %v", err)
		}
	}
}

// TestCredentialRefusedAtOnce: a named agent's credential used as the
// shared agent (the CLI's --creds without --agent) is refused by the NATS
// server on the shared subjects. The request ends at once with
// CREDENTIAL_REFUSED, saying what to do, not at its deadline as a
// TIMEOUT whose effect "may have been decided"; a handler the caller set
// still sees the error.
func TestCredentialRefusedAtOnce(t *testing.T) {
	env := world(t)
	env.NamedAgent(t, "bob", "")
	var seen atomic.Int32
	wrong, err := client.Dial(env.NS.URL, client.Agent, embedded.AgentCredsPath(filepath.Join(env.Dir, "nats"), "bob"),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) { seen.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	run, err := env.App.OpenWork(context.Background(), broker.OpenWork{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	// A deadline far beyond what the test waits for: the refusal must end
	// the request, not the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := wrong.Output(ctx, run, "ok", 1); done <- err }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("a request on a refused credential waited for its deadline")
	}
	if code(err) != broker.CodeCredentialRefused || !errors.Is(err, broker.ErrCredentialRefused) || !strings.Contains(err.Error(), "--agent NAME") {
		t.Fatalf("refused credential: %v (code %q)", err, code(err))
	}
	if seen.Load() == 0 {
		t.Fatal("the caller's error handler was not called")
	}
	// The same credential as its own identity works.
	if _, err := env.NamedAgent(t, "bob", "").Output(context.Background(), run, "ok", 1); code(err) != broker.CodeNotRunAgent {
		t.Fatalf("bob on a run opened without an agent: %v, want %s", err, broker.CodeNotRunAgent)
	}
}
