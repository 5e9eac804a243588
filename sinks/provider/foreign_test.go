package provider_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/grounding"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/provider"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// markedAt is the AnyPath mark of provider erp in scope, read from the
// record store itself.
func (s *setup) markedAt(t testing.TB, scope string) time.Time {
	t.Helper()
	at, err := s.sink.GroundingRecords().WrittenAt(ctxT(t), scope, "erp", grounding.AnyPath)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// TestNoteWriteElsewhere: a write another sink sends to the ERP's server,
// under any spelling of it, marks erp (the provider grounding reads)
// written as a whole in the workflow and for the agent, as an ungrounded
// provider write does; a write to another server marks nothing; a target
// that cannot be read, and a write of unknown reach, mark everything.
func TestNoteWriteElsewhere(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{grounding: groundingYAML})
	u, err := url.Parse(s.erp.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	for i, tc := range []struct {
		target string
		marked bool
	}{
		{"http://127.0.0.1:" + port + "/ui/suppliers/S-1", true},
		{"http://LOCALHOST.:" + port + "/form", true},
		{"ws://[::1]:" + port + "/socket", true},
		{"http://app.localhost:" + port + "/", true},
		{"http://127.0.0.1:1/", false},
		{"https://example.com/", false},
		{"https://127.0.0.1/", false},
		{"ftp://127.0.0.1:" + port + "/", true}, // unreadable: every provider
		{"http://%zz/", true},
	} {
		run := &broker.Run{ID: "wf-" + string(rune('a'+i)), Agent: "agent-" + string(rune('a'+i))}
		target, err := url.Parse(tc.target)
		if err != nil {
			target = &url.URL{Scheme: "http", Host: "%zz"}
		}
		if err := s.sink.NoteWriteTo(ctxT(t), run, target); err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		for _, scope := range []string{run.ID, grounding.AgentScope(run.Agent)} {
			if got := !s.markedAt(t, scope).IsZero(); got != tc.marked {
				t.Errorf("%s: %s marked %v, want %v", tc.target, scope, got, tc.marked)
			}
		}
	}

	byName := &broker.Run{ID: "wf-names", Agent: "names"}
	if err := s.sink.NoteWriteToProviders(ctxT(t), byName, []string{"erp-plain"}); err != nil {
		t.Fatal(err)
	}
	if s.markedAt(t, byName.ID).IsZero() || s.markedAt(t, grounding.AgentScope("names")).IsZero() {
		t.Error("a write reaching erp-plain (erp's server) did not mark erp")
	}
	unknown := &broker.Run{ID: "wf-unknown", Agent: "unknown"}
	if err := s.sink.NoteWriteToProviders(ctxT(t), unknown, []string{"erp", "bank"}); !errors.Is(err, provider.ErrUnknownProvider) {
		t.Fatalf("an unknown provider: %v", err)
	}
	if !s.markedAt(t, unknown.ID).IsZero() {
		t.Error("marked though a name was unknown")
	}
	none := &broker.Run{ID: "wf-none", Agent: "none"}
	if err := s.sink.NoteWriteToProviders(ctxT(t), none, nil); err != nil || !s.markedAt(t, none.ID).IsZero() {
		t.Errorf("a write reaching no provider: %v, marked %v", err, s.markedAt(t, none.ID))
	}
	anywhere := &broker.Run{ID: "wf-anywhere", Agent: "anywhere"}
	if err := s.sink.NoteWriteAnywhere(ctxT(t), anywhere); err != nil {
		t.Fatal(err)
	}
	if s.markedAt(t, anywhere.ID).IsZero() || s.markedAt(t, grounding.AgentScope("anywhere")).IsZero() {
		t.Error("a write of unknown reach did not mark erp")
	}
}

// TestNoteWriteElsewhereGrounds: the laundering the note stops, through
// the broker. A run reads the invoice and supplier, then another sink
// writes to the ERP's server: the payment decided on the reads made before
// the write is grounded (nothing over-blocked). The agent's next run
// writes to the ERP's server, then reads: the payment is refused as
// ungrounded and never sent.
func TestNoteWriteElsewhereGrounds(t *testing.T) {
	s := start(t, policy.ModeStrict, opts{grounding: groundingYAML})
	ui, err := url.Parse(s.erp.srv.URL + "/ui/suppliers/S-1/edit")
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(id string) *broker.Run {
		r, err := s.env.Broker.LookupRun(ctxT(t), id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := s.open(t, "ada")
	s.readBoth(t, before)
	if err := s.sink.NoteWriteTo(ctxT(t), lookup(before), ui); err != nil {
		t.Fatal(err)
	}
	mustAllow(t, s.call(t, before, policy.OriginShipped, pay(honest)))

	after := s.open(t, "ada")
	if err := s.sink.NoteWriteTo(ctxT(t), lookup(after), ui); err != nil {
		t.Fatal(err)
	}
	s.readBoth(t, after)
	r := s.call(t, after, policy.OriginShipped, pay(honest))
	mustRefuse(t, r, policy.RefuseUngrounded)
	if d := s.decision(t, after, r.Effect); !strings.Contains(d.Reasons[0].Detail, "was read after this workflow or its agent sent erp a change") {
		t.Fatalf("refused for another reason: %s", d.Reasons[0].Detail)
	}
	if n := s.erp.count("POST", "/payments"); n != 1 {
		t.Fatalf("%d payments reached the ERP, want the grounded one", n)
	}
}

// failingWrites is a record store whose write marks cannot be stored.
type failingWrites struct{ provider.RecordStore }

func (failingWrites) Wrote(context.Context, string, string, string, time.Time) error {
	return errors.New("store down")
}

// TestNoteWriteElsewhereFailsClosed: a mark that cannot be stored is the
// record-store CallError a provider write gets, so the caller does not
// send.
func TestNoteWriteElsewhereFailsClosed(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", nil)
	recs, err := provider.OpenKVRecords(ctxT(t), env.JS, provider.KVConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := provider.ParseCatalogue("catalogue.yaml", []byte(catalogue("http://127.0.0.1:9")))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := grounding.Parse("grounding.yaml", []byte(groundingYAML))
	if err != nil {
		t.Fatal(err)
	}
	sink, err := provider.New(ctxT(t), nil, provider.Config{Catalogue: cat, Grounding: rules, Records: failingWrites{recs}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Close)
	run := &broker.Run{ID: "wf"}
	target, _ := url.Parse("http://localhost:9/form")
	for name, note := range map[string]func() error{
		"to":        func() error { return sink.NoteWriteTo(ctxT(t), run, target) },
		"providers": func() error { return sink.NoteWriteToProviders(ctxT(t), run, []string{"erp"}) },
		"anywhere":  func() error { return sink.NoteWriteAnywhere(ctxT(t), run) },
	} {
		var ce *provider.CallError
		if err := note(); !errors.As(err, &ce) || ce.Type != "record-store" || ce.Provider != "erp" {
			t.Errorf("%s: %v, want a record-store CallError", name, err)
		}
	}
}

// BenchmarkNoteWriteTo is what a browser form post or an MCP tools/call
// to the ERP's server waits for before it leaves: the server comparison and
// two AnyPath marks (workflow and agent) stored in the JetStream KV record
// store of an embedded NATS server. The miss (another server) is the
// comparison alone.
func BenchmarkNoteWriteTo(b *testing.B) {
	s := start(b, policy.ModeStrict, opts{grounding: groundingYAML})
	hit, _ := url.Parse(s.erp.srv.URL + "/ui/suppliers/S-1")
	miss, _ := url.Parse("https://example.com/form")
	run := &broker.Run{ID: "wf-bench", Agent: "bench"}
	for _, tc := range []struct {
		name   string
		target *url.URL
	}{{"erp-server", hit}, {"other-server", miss}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := ctxT(b)
			for b.Loop() {
				if err := s.sink.NoteWriteTo(ctx, run, tc.target); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
