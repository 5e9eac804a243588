package broker_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/memory"
	"github.com/gatehouse/gatehouse/sinks/output"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

const toolsRules = `
agents:
  - name: writer
    allowed_tools: ["output.*", "memory.*"]
    blocked_tools: ["memory.delete"]
  - name: reader
    allowed_tools: ["memory.get"]
approvals:
  - name: releases
    match: {sink: output, target: "release*"}
    roles: [reviewer]
`

func toolsWorld(t *testing.T) *sinktest.Env {
	return sinktest.Start(t, policy.ModeStrict, toolsRules, func(t testing.TB, env *sinktest.Env) []broker.Sink {
		out, err := output.New(context.Background(), env.JS, 1)
		if err != nil {
			t.Fatal(err)
		}
		mem, err := memory.OpenKV(context.Background(), env.JS, memory.KVConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return []broker.Sink{out, memory.New(mem, memory.Config{})}
	})
}

// tools/list offers only what the run's policy could allow, whatever the
// arguments: agent cards and the mandate's systems, classes and expiry.
func TestToolsAreWhatTheRunCouldBeAllowed(t *testing.T) {
	env := toolsWorld(t)
	all := []string{"memory.delete", "memory.get", "memory.put", "output.deliver"}
	for _, tc := range []struct {
		name string
		work broker.OpenWork
		want []string
	}{
		{"no agent, no mandate", broker.OpenWork{}, all},
		{"card allows and blocks", broker.OpenWork{Agent: "writer"}, []string{"memory.get", "memory.put", "output.deliver"}},
		{"card allows one", broker.OpenWork{Agent: "reader"}, []string{"memory.get"}},
		{"agent without a card", broker.OpenWork{Agent: "stranger"}, nil},
		{"mandate systems", broker.OpenWork{Mandate: &policy.Mandate{Systems: []string{"memory"}}}, []string{"memory.delete", "memory.get", "memory.put"}},
		{"mandate effects", broker.OpenWork{Mandate: &policy.Mandate{Effects: []policy.EffectClass{policy.EffectRead, policy.EffectNotify}}}, []string{"memory.get", "output.deliver"}},
		{"expired mandate", broker.OpenWork{Mandate: &policy.Mandate{ExpiresAt: time.Now().Add(-time.Minute)}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.work.Tenant, tc.work.Person = "acme", "ada"
			run := env.Open(t, tc.work)
			agent := env.Agent
			if tc.work.Agent != "" {
				agent = env.NamedAgent(t, tc.work.Agent, "")
			}
			tools, err := agent.Tools(sinktest.Ctx(t), run)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ti := range tools {
				got = append(got, ti.Tool)
				if len(ti.InputSchema) == 0 || ti.Description == "" {
					t.Errorf("%s: no schema or description", ti.Tool)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("tools %v, want %v", got, tc.want)
			}
		})
	}
	// Only the run's own agent may ask.
	writers := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada", Agent: "writer"})
	if _, err := env.Agent.Tools(sinktest.Ctx(t), writers); errCode(err) != broker.CodeNotRunAgent {
		t.Fatalf("the shared agent asked about writer's run: %v", err)
	}
	if _, err := env.NamedAgent(t, "reader", "").Tools(sinktest.Ctx(t), writers); errCode(err) != broker.CodeNotRunAgent {
		t.Fatalf("reader asked about writer's run: %v", err)
	}
	if _, err := env.Agent.Tools(sinktest.Ctx(t), "r_01m8n75ye327hsa7apgb8fqfxn"); !errors.Is(err, broker.ErrUnknownRun) && errCode(err) != broker.CodeUnknownRun {
		t.Fatalf("unknown run: %v", err)
	}
}

// A wait on an approval answers only for the run's own requests, says
// when nobody decided yet, returns once a person decided, and decides and
// records nothing itself.
func TestWaitApprovalIsTheRunsOwn(t *testing.T) {
	w := startApprovals(t, policy.ModeStrict, approveOutputs)
	run := w.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	other := w.Open(t, broker.OpenWork{Tenant: "acme", Person: "bob"})
	rep, _ := w.Agent.Output(sinktest.Ctx(t), run, "ok", "notes")
	if rep == nil || rep.Decision == nil || rep.Decision.Outcome != "held" || rep.Decision.Approval == "" {
		t.Fatalf("held output: %+v", rep)
	}
	id := rep.Decision.Approval
	wr, err := w.Agent.WaitApproval(sinktest.Ctx(t), run, id, 300*time.Millisecond)
	if err != nil || wr.Decided || wr.State != "pending" {
		t.Fatalf("undecided wait: %+v %v", wr, err)
	}
	if _, err := w.Agent.WaitApproval(sinktest.Ctx(t), other, id, 100*time.Millisecond); errCode(err) != broker.CodeApprovalNotFound {
		t.Fatalf("another run's approval: %v", err)
	}
	if _, err := w.Agent.WaitApproval(sinktest.Ctx(t), run, "../x", 0); errCode(err) != broker.CodeBadRequest {
		t.Fatalf("a malformed id: %v", err)
	}
	wd := &world{js: w.JS}
	before := len(wd.journalEvents(t, run))
	done := make(chan *broker.WaitReply, 1)
	go func() {
		r, _ := w.Agent.WaitApproval(context.Background(), run, id, 10*time.Second)
		done <- r
	}()
	if _, err := w.svc.Decide(sinktest.Ctx(t), id, rita); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r == nil || !r.Decided || !r.Approved || r.State != "approved" {
		t.Fatalf("decided wait: %+v", r)
	}
	if evs := wd.journalEvents(t, run); len(evs) != before+1 || evs[len(evs)-1].Type != journal.TypeApprovalDecision {
		t.Fatalf("the waits recorded something: %d events before, %d after", before, len(evs))
	}
}
