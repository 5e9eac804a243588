package mcp

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/grounding"
)

// noter is the provider sink as the mcp sink sees it: it records each
// note, knows the providers erp and bank, and fails when fail is set.
type noter struct {
	notes []string
	fail  bool
}

func (n *noter) GroundingRules() *grounding.Rules                              { return nil }
func (n *noter) GroundingRecords() grounding.Records                           { return nil }
func (n *noter) HasProvider(name string) bool                                  { return name == "erp" || name == "bank" }
func (n *noter) SpendRecords(context.Context, string, []grounding.Spend) error { return nil }

func (n *noter) note(s string) error {
	n.notes = append(n.notes, s)
	if n.fail {
		return errors.New("store down")
	}
	return nil
}

func (n *noter) NoteWriteTo(_ context.Context, run *broker.Run, u *url.URL) error {
	return n.note(run.ID + " to " + u.Host)
}

func (n *noter) NoteWriteToProviders(_ context.Context, run *broker.Run, names []string) error {
	return n.note(run.ID + " providers " + strings.Join(names, ","))
}

func (n *noter) NoteWriteAnywhere(_ context.Context, run *broker.Run) error {
	return n.note(run.ID + " anywhere")
}

// TestNoteWrite: what a tools/call marks before it is forwarded is what
// the catalogue says the server reaches (never its annotations): every
// provider without reaches, the named ones and an HTTP server's own host
// with them, none with reaches: []; a tool the catalogue declares read
// marks nothing; a note that fails stops the call.
func TestNoteWrite(t *testing.T) {
	cat, err := ParseCatalogue("c.yaml", []byte(`servers:
  - {name: any, url: "http://erp.example:8080/mcp"}
  - {name: some, url: "http://erp.example:8080/mcp", reaches: [erp, bank]}
  - {name: none, command: [./none], reaches: []}
  - {name: stdio, command: [./stdio], reaches: [bank]}
  - {name: reader, url: "http://h/mcp", tools: {lookup: {effect: read}, change: {effect: write}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	n := &noter{}
	k := &Sink{cat: cat, grd: n}
	if err := k.checkReaches(); err != nil {
		t.Fatal(err)
	}
	run := &broker.Run{ID: "r"}
	for _, tc := range []struct {
		server, tool string
		want         []string
	}{
		{"any", "t", []string{"r anywhere"}},
		{"some", "t", []string{"r providers erp,bank", "r to erp.example:8080"}},
		{"none", "t", []string{"r providers "}},
		{"stdio", "t", []string{"r providers bank"}},
		{"reader", "lookup", nil},
		{"reader", "change", []string{"r anywhere"}},
	} {
		n.notes = nil
		srv, _ := cat.Server(tc.server)
		if err := k.noteWrite(context.Background(), run, srv, tc.tool); err != nil {
			t.Fatalf("%s/%s: %v", tc.server, tc.tool, err)
		}
		if !slices.Equal(n.notes, tc.want) {
			t.Errorf("%s/%s noted %q, want %q", tc.server, tc.tool, n.notes, tc.want)
		}
	}
	n.fail = true
	srv, _ := cat.Server("some")
	var ce *CallError
	if err := k.noteWrite(context.Background(), run, srv, "t"); !errors.As(err, &ce) || ce.Type != "record-store" {
		t.Fatalf("a failed note: %v, want a record-store CallError", err)
	}
	// Without the provider sink's grounding there is nothing to note.
	if err := (&Sink{cat: cat}).noteWrite(context.Background(), run, srv, "t"); err != nil {
		t.Fatal(err)
	}
}

// TestCheckReaches: a reaches that names a provider the provider
// catalogue lacks, or any provider when there is no provider catalogue,
// is refused at start.
func TestCheckReaches(t *testing.T) {
	cat, err := ParseCatalogue("c.yaml", []byte("servers:\n  - {name: a, url: \"http://h/mcp\", reaches: [erp, ledger]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Sink{cat: cat, grd: &noter{}}).checkReaches(); !errors.Is(err, ErrCatalogue) || !strings.Contains(err.Error(), `"ledger"`) {
		t.Fatalf("an unknown provider: %v", err)
	}
	if err := (&Sink{cat: cat}).checkReaches(); !errors.Is(err, ErrCatalogue) {
		t.Fatalf("no provider catalogue: %v", err)
	}
	empty, err := ParseCatalogue("c.yaml", []byte("servers:\n  - {name: a, url: \"http://h/mcp\", reaches: []}\n  - {name: b, url: \"http://h/mcp\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Sink{cat: empty}).checkReaches(); err != nil {
		t.Fatalf("reaches [] and none given need no provider: %v", err)
	}
}
