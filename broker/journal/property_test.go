package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"
)

// genJournal draws runs of random, policy-correct event sequences,
// interleaved, and writes them in random batches. It returns each run's
// event count.
func genJournal(t *rapid.T, dir string) map[string]int {
	nRuns := rapid.IntRange(1, 5).Draw(t, "runs")
	var queues [][]Event
	counts := map[string]int{}
	for r := range nRuns {
		run := fmt.Sprintf("r_%026d", r)
		n := rapid.IntRange(1, 20).Draw(t, "events")
		q := []Event{ev(t, run, run+"-0", TypeRunOpen, "", 0, RunOpen{})}
		for i := 1; len(q) < n; i++ {
			effect := fmt.Sprintf("x_%d", i)
			switch rapid.IntRange(0, 3).Draw(t, "kind") {
			case 0: // allowed and carried out
				q = append(q,
					ev(t, run, fmt.Sprintf("%s-%d-d", run, i), TypeDecision, effect, i, decision(OutcomeAllowed)),
					ev(t, run, fmt.Sprintf("%s-%d-a", run, i), TypeAttempt, effect, i, Attempt{Sink: "provider"}),
					ev(t, run, fmt.Sprintf("%s-%d-o", run, i), TypeOutcome, effect, i, Result{Status: "ok"}))
			case 1: // refused
				q = append(q, ev(t, run, fmt.Sprintf("%s-%d-d", run, i), TypeDecision, effect, i, decision(OutcomeRefused)))
			case 2: // held
				q = append(q, ev(t, run, fmt.Sprintf("%s-%d-d", run, i), TypeDecision, effect, i, decision(OutcomeHeld)))
			case 3:
				q = append(q, ev(t, run, fmt.Sprintf("%s-%d-c", run, i), TypeRunClose, "", i, RunClose{}))
				i = n // nothing after a close
			}
			if q[len(q)-1].Type == TypeRunClose {
				break
			}
		}
		queues = append(queues, q)
		counts[run] = len(q)
	}
	var all []Event
	for {
		var live []int
		for i, q := range queues {
			if len(q) > 0 {
				live = append(live, i)
			}
		}
		if len(live) == 0 {
			break
		}
		i := live[rapid.IntRange(0, len(live)-1).Draw(t, "next")]
		all = append(all, queues[i][0])
		queues[i] = queues[i][1:]
	}
	writeJournal(t, dir, all, rapid.IntRange(1, 16).Draw(t, "batch"))
	return counts
}

func TestPropertyTamperIsDetected(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp("", "journal-prop")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		counts := genJournal(t, dir)
		rep := verify(t, dir)
		if !rep.OK {
			t.Fatalf("untampered journal has findings: %s", dump(rep))
		}
		var runs []string
		for r := range counts {
			runs = append(runs, r)
		}
		run := rapid.SampledFrom(sortedStrings(runs)).Draw(t, "victim")
		n := counts[run]
		path := runPath(dir, run)
		var kind FindingKind
		var seq uint64
		switch op := rapid.SampledFrom([]string{"edit", "remove", "swap", "truncate", "delete", "add", "head", "attempt", "refused"}).Draw(t, "tamper"); op {
		case "edit":
			i := rapid.IntRange(0, n-1).Draw(t, "line")
			editLine(run, i, `"id":"`, `"id":"X`)(t, dir)
			kind, seq = FindingEditedEvent, uint64(i+1)
		case "remove":
			if n < 2 {
				t.Skip("run too short")
			}
			i := rapid.IntRange(0, n-1).Draw(t, "line")
			lines := readLines(t, path)
			writeLines(t, path, append(lines[:i:i], lines[i+1:]...))
			kind, seq = FindingSequenceGap, uint64(i+1)
			if i == n-1 {
				kind, seq = FindingRunCutShort, uint64(n)
			}
		case "swap":
			if n < 2 {
				t.Skip("run too short")
			}
			i := rapid.IntRange(0, n-2).Draw(t, "line")
			lines := readLines(t, path)
			lines[i], lines[i+1] = lines[i+1], lines[i]
			writeLines(t, path, lines)
			kind, seq = FindingReordered, uint64(i+1)
		case "truncate":
			k := rapid.IntRange(0, n-1).Draw(t, "keep")
			writeLines(t, path, readLines(t, path)[:k])
			kind, seq = FindingRunCutShort, uint64(n)
		case "delete":
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			kind, seq = FindingRunRemoved, uint64(n)
		case "add":
			b, _ := os.ReadFile(path)
			run = "r_added"
			if err := os.WriteFile(runPath(dir, run), b, 0o640); err != nil {
				t.Fatal(err)
			}
			kind = FindingUnregisteredRun
		case "head":
			lines := readLines(t, filepath.Join(dir, headFile))
			i := rapid.IntRange(0, len(lines)-1).Draw(t, "entry")
			lines[i] = bytes.Replace(lines[i], []byte(`"time":"`), []byte(`"time":"1`), 1)
			writeLines(t, filepath.Join(dir, headFile), lines)
			kind, run = FindingHeadLogEdited, ""
		case "attempt", "refused":
			// A broker that skipped the gate: written through the writer,
			// so every hash holds.
			w, err := Open(dir, WriterOptions{Now: clock()})
			if err != nil {
				t.Fatal(err)
			}
			batch := []Event{ev(t, run, "rogue-a", TypeAttempt, "x_rogue", 99, Attempt{Sink: "provider"})}
			kind = FindingAttemptWithoutDecision
			if op == "refused" {
				out := rapid.SampledFrom([]Outcome{OutcomeRefused, OutcomeHeld}).Draw(t, "outcome")
				batch = append([]Event{ev(t, run, "rogue-d", TypeDecision, "x_rogue", 98, decision(out))}, batch...)
				kind = FindingAttemptAfterRefusal
			}
			_, err = w.Append(batch)
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			seq = uint64(n + len(batch))
		}
		rep = verify(t, dir)
		if rep.OK || !hasFinding(rep, kind, run, seq) {
			t.Fatalf("want %s run %q seq %d: %s", kind, run, seq, dump(rep))
		}
	})
}

func sortedStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}
