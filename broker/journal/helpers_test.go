package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gatehouse/gatehouse/policy"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock returns a deterministic clock advancing one second per call.
func clock() func() time.Time {
	t := epoch
	return func() time.Time { t = t.Add(time.Second); return t }
}

func mustJSON(t tb, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ev makes an event of run with id and seconds after epoch.
func ev(t tb, run, id string, typ Type, effect string, sec int, data any) Event {
	return Event{ID: id, Run: run, Type: typ, Effect: effect, Time: epoch.Add(time.Duration(sec) * time.Second), Data: mustJSON(t, data)}
}

func decision(out Outcome) Decision {
	return Decision{
		ActingFor: policy.Principal{Tenant: "acme", Person: "u_123"}, ScopesChecked: []string{"invoices:read"},
		PolicyDigest: "sha256:00", Mode: "strict", Sink: "provider", Action: "call", Provider: "billing",
		Method: "GET", Host: "api.example.com", Path: "/invoices/{id}", Size: 0, Outcome: out, Enforced: true,
	}
}

// fixedEvents is the golden journal: two runs, one closed.
func fixedEvents(t tb) []Event {
	const a, b = "r_aaaaaaaaaaaaaaaaaaaaaaaaaa", "r_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	open := RunOpen{ActingFor: policy.Principal{Tenant: "acme", Person: "u_123"}, Scopes: []string{"invoices:read"}, Agent: "clerk"}
	return []Event{
		ev(t, a, "e_a1", TypeRunOpen, "", 1, open),
		ev(t, b, "e_b1", TypeRunOpen, "", 2, open),
		ev(t, a, "e_a2", TypeDecision, "x_1", 3, decision(OutcomeAllowed)),
		ev(t, a, "e_a3", TypeAttempt, "x_1", 4, Attempt{Sink: "provider", Action: "call"}),
		ev(t, b, "e_b2", TypeDecision, "x_2", 5, decision(OutcomeRefused)),
		ev(t, a, "e_a4", TypeOutcome, "x_1", 6, Result{Status: "ok", Size: 120, Digest: "sha256:ab", Detail: map[string]string{"status_code": "200"}}),
		ev(t, a, "e_a5", TypeRunClose, "", 7, RunClose{Status: "done"}),
		ev(t, b, "e_b3", TypeDecision, "x_3", 8, decision(OutcomeHeld)),
	}
}

// writeJournal writes events into dir in batches of size n with a fixed clock.
func writeJournal(t tb, dir string, events []Event, n int) {
	t.Helper()
	w, err := Open(dir, WriterOptions{Now: clock()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := 0; i < len(events); i += n {
		if _, err := w.Append(events[i:min(i+n, len(events))]); err != nil {
			t.Fatal(err)
		}
	}
}

func runPath(dir, run string) string { return filepath.Join(dir, runsDir, run+runExt) }

func readLines(t tb, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(b, []byte{'\n'})[:bytes.Count(b, []byte{'\n'})]
}

func writeLines(t tb, path string, lines [][]byte) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o640); err != nil {
		t.Fatal(err)
	}
}

func verify(t tb, dir string) *Report {
	t.Helper()
	rep, err := Verify(dir, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// hasFinding reports whether rep has a finding of kind for run (and seq,
// when seq is not 0).
func hasFinding(rep *Report, kind FindingKind, run string, seq uint64) bool {
	for _, f := range rep.Findings {
		if f.Kind == kind && (run == "" || f.Run == run) && (seq == 0 || f.Seq == seq) {
			return true
		}
	}
	return false
}

func hasNote(rep *Report, kind NoteKind, run string) bool {
	for _, n := range rep.Notes {
		if n.Kind == kind && n.Run == run {
			return true
		}
	}
	return false
}

func dump(rep *Report) string {
	b, _ := json.MarshalIndent(rep, "", "  ")
	return fmt.Sprint(string(b))
}

// tb is what the helpers need of *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}
