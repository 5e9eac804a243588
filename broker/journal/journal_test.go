package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden")

const runA, runB = "r_aaaaaaaaaaaaaaaaaaaaaaaaaa", "r_bbbbbbbbbbbbbbbbbbbbbbbbbb"

func TestGolden(t *testing.T) {
	dir := t.TempDir()
	writeJournal(t, dir, fixedEvents(t), 3)
	golden := filepath.Join("testdata", "golden")
	for _, name := range []string{headFile, runsDir + "/" + runA + runExt, runsDir + "/" + runB + runExt} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(golden, name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from golden:\n got: %s\nwant: %s", name, got, want)
		}
	}
	// The golden journal itself verifies.
	rep := verify(t, golden)
	if !rep.OK || rep.Events != 8 || rep.Runs != 2 {
		t.Fatalf("golden journal: %s", dump(rep))
	}
}

// Each line is canonical, and its hash is Hash of the parsed event.
func TestLineIsCanonicalAndHashes(t *testing.T) {
	dir := t.TempDir()
	writeJournal(t, dir, fixedEvents(t), 8)
	for _, line := range readLines(t, runPath(dir, runA)) {
		e, err := ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		h, err := Hash(e)
		if err != nil {
			t.Fatal(err)
		}
		if h != e.Hash {
			t.Errorf("seq %d: Hash %s, line says %s", e.Seq, h, e.Hash)
		}
		var generic map[string]any
		if err := json.Unmarshal(line, &generic); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(line), " ") && e.Type != TypeOutcome {
			t.Errorf("whitespace in canonical line: %s", line)
		}
	}
}

func TestParseLineRejects(t *testing.T) {
	dir := t.TempDir()
	writeJournal(t, dir, fixedEvents(t), 8)
	good := string(bytes.TrimSuffix(readLines(t, runPath(dir, runA))[0], []byte{'\n'}))
	for name, line := range map[string]string{
		"empty":          "",
		"array":          "[]",
		"unknown member": strings.Replace(good, `"v":1`, `"v":1,"x":2`, 1),
		"duplicate":      strings.Replace(good, `"v":1`, `"v":1,"v":1`, 1),
		"escaped name":   strings.Replace(good, `"v":1`, `"\u0076":1`, 1),
		"version":        strings.Replace(good, `"v":1`, `"v":2`, 1),
		"seq 0":          strings.Replace(good, `"seq":1`, `"seq":0`, 1),
		"bad type":       strings.Replace(good, `"run.open"`, `"run.opened"`, 1),
		"upper hash":     strings.Replace(good, `"hash":"`, `"hash":"A`, 1)[:len(good)],
		"trailing":       good + "x",
		"missing hash":   good[:strings.Index(good, `"hash"`)] + good[strings.Index(good, `"id"`):],
	} {
		if _, err := ParseLine([]byte(line)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
	if _, err := ParseLine([]byte(good + "\n")); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyUntampered(t *testing.T) {
	dir := t.TempDir()
	writeJournal(t, dir, fixedEvents(t), 1)
	rep := verify(t, dir)
	if !rep.OK || len(rep.Findings) != 0 || rep.Events != 8 || rep.HeadEntries != 8 {
		t.Fatalf("untampered: %s", dump(rep))
	}
	if !hasNote(rep, NoteRunOpen, runB) || hasNote(rep, NoteRunOpen, runA) {
		t.Errorf("run-open notes: %s", dump(rep))
	}
}

func TestVerifyRefusesNonJournal(t *testing.T) {
	if _, err := Verify(filepath.Join(t.TempDir(), "nope"), VerifyOptions{}); !errors.Is(err, ErrNotJournal) {
		t.Errorf("missing dir: %v", err)
	}
	if _, err := Verify(t.TempDir(), VerifyOptions{}); !errors.Is(err, ErrNotJournal) {
		t.Errorf("empty dir: %v", err)
	}
}

// tamper is one way of changing a journal behind the writer's back, with
// what Verify must say about it.
type tamper struct {
	name string
	do   func(t tb, dir string)
	kind FindingKind
	run  string
	seq  uint64
}

func editLine(run string, i int, from, to string) func(tb, string) {
	return func(t tb, dir string) {
		lines := readLines(t, runPath(dir, run))
		if !bytes.Contains(lines[i], []byte(from)) {
			t.Fatalf("line %d has no %q: %s", i, from, lines[i])
		}
		lines[i] = bytes.Replace(lines[i], []byte(from), []byte(to), 1)
		writeLines(t, runPath(dir, run), lines)
	}
}

func tamperTable() []tamper {
	return []tamper{
		{"edit a field", editLine(runA, 3, `"status":"ok"`, `"status":"no"`), FindingEditedEvent, runA, 4},
		{"remove a line", func(t tb, dir string) {
			lines := readLines(t, runPath(dir, runA))
			writeLines(t, runPath(dir, runA), append(lines[:1:1], lines[2:]...))
		}, FindingSequenceGap, runA, 2},
		{"swap two lines", func(t tb, dir string) {
			lines := readLines(t, runPath(dir, runA))
			lines[1], lines[2] = lines[2], lines[1]
			writeLines(t, runPath(dir, runA), lines)
		}, FindingReordered, runA, 2},
		{"cut a run short", func(t tb, dir string) {
			lines := readLines(t, runPath(dir, runA))
			writeLines(t, runPath(dir, runA), lines[:3])
		}, FindingRunCutShort, runA, 5},
		{"delete a run file", func(t tb, dir string) {
			if err := os.Remove(runPath(dir, runB)); err != nil {
				t.Fatal(err)
			}
		}, FindingRunRemoved, runB, 3},
		{"add a run file", func(t tb, dir string) {
			b, err := os.ReadFile(runPath(dir, runB))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(runPath(dir, "r_added"), b, 0o640); err != nil {
				t.Fatal(err)
			}
		}, FindingUnregisteredRun, "r_added", 0},
		{"edit the head log", func(t tb, dir string) {
			lines := readLines(t, filepath.Join(dir, headFile))
			lines[2] = bytes.Replace(lines[2], []byte(`"run_seq":`), []byte(`"run_seq":1`), 1)
			writeLines(t, filepath.Join(dir, headFile), lines)
		}, FindingHeadLogEdited, "", 0},
		{"remove a head entry", func(t tb, dir string) {
			lines := readLines(t, filepath.Join(dir, headFile))
			writeLines(t, filepath.Join(dir, headFile), append(lines[:2:2], lines[3:]...))
		}, FindingHeadLogEdited, "", 0},
		{"rewrite an event and its hash", func(t tb, dir string) {
			lines := readLines(t, runPath(dir, runA))
			e, err := ParseLine(lines[1])
			if err != nil {
				t.Fatal(err)
			}
			e.Data = json.RawMessage(`{"outcome":"allowed","sink":"provider","note":"forged"}`)
			line, _, err := encodeEvent(e)
			if err != nil {
				t.Fatal(err)
			}
			lines[1] = append(line, '\n')
			writeLines(t, runPath(dir, runA), lines)
		}, FindingBrokenChain, runA, 3},
		{"malformed line", editLine(runB, 1, `{`, `[`), FindingMalformedLine, runB, 0},
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	for _, tc := range tamperTable() {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeJournal(t, dir, fixedEvents(t), 1)
			tc.do(t, dir)
			rep := verify(t, dir)
			if rep.OK || !hasFinding(rep, tc.kind, tc.run, tc.seq) {
				t.Fatalf("want %s run %q seq %d; got %s", tc.kind, tc.run, tc.seq, dump(rep))
			}
		})
	}
}

func TestVerifyPolicyBreaches(t *testing.T) {
	const r = "r_policy"
	events := []Event{
		ev(t, r, "1", TypeRunOpen, "", 1, RunOpen{}),
		ev(t, r, "2", TypeAttempt, "x_none", 2, Attempt{Sink: "provider"}),
		ev(t, r, "3", TypeDecision, "x_no", 3, decision(OutcomeRefused)),
		ev(t, r, "4", TypeAttempt, "x_no", 4, Attempt{Sink: "provider"}),
		ev(t, r, "5", TypeDecision, "x_held", 5, decision(OutcomeHeld)),
		ev(t, r, "6", TypeAttempt, "x_held", 6, Attempt{Sink: "provider"}),
		ev(t, r, "7", TypeDecision, "x_held", 7, decision(OutcomeAllowed)), // approved later
		ev(t, r, "8", TypeAttempt, "x_held", 8, Attempt{Sink: "provider"}),
		ev(t, r, "9", TypeAttempt, "", 9, Attempt{Sink: "provider"}),
	}
	dir := t.TempDir()
	writeJournal(t, dir, events, 4)
	rep := verify(t, dir)
	for _, want := range []struct {
		kind FindingKind
		seq  uint64
	}{
		{FindingAttemptWithoutDecision, 2}, {FindingAttemptAfterRefusal, 4},
		{FindingAttemptAfterRefusal, 6}, {FindingAttemptWithoutDecision, 9},
	} {
		if !hasFinding(rep, want.kind, r, want.seq) {
			t.Errorf("missing %s at %d", want.kind, want.seq)
		}
	}
	if len(rep.Findings) != 4 {
		t.Errorf("want exactly 4 findings: %s", dump(rep))
	}
}

func TestVerifyPartialLineIsANote(t *testing.T) {
	dir := t.TempDir()
	writeJournal(t, dir, fixedEvents(t), 2)
	f, err := os.OpenFile(runPath(dir, runB), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"v":1,"id":"half`)
	f.Close()
	rep := verify(t, dir)
	if !rep.OK || !hasNote(rep, NotePartialLine, runB) {
		t.Fatalf("want OK with a partial-line note: %s", dump(rep))
	}
}

func TestVerifyEventsAfterHeadAreANote(t *testing.T) {
	dir := t.TempDir()
	events := fixedEvents(t)
	writeJournal(t, dir, events, 6)
	// Simulate a crash between the run fsync and the head fsync: drop the
	// last head entry.
	lines := readLines(t, filepath.Join(dir, headFile))
	writeLines(t, filepath.Join(dir, headFile), lines[:len(lines)-1])
	rep := verify(t, dir)
	if !rep.OK || !hasNote(rep, NoteAfterHead, runB) {
		t.Fatalf("want OK with an after-head note: %s", dump(rep))
	}
	// The redelivered batch is deduped and the run gets registered.
	w, err := Open(dir, WriterOptions{Now: clock()})
	if err != nil {
		t.Fatal(err)
	}
	written, err := w.Append(events)
	if err != nil || len(written) != 0 {
		t.Fatalf("redelivery: %d written, %v", len(written), err)
	}
	w.Close()
	rep = verify(t, dir)
	if !rep.OK || hasNote(rep, NoteAfterHead, runB) {
		t.Fatalf("after redelivery: %s", dump(rep))
	}
}

func TestWriterDedupeAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	events := fixedEvents(t)
	writeJournal(t, dir, events[:5], 2)
	more := append(append([]Event{}, events...), ev(t, runB, "e_b4", TypeRunClose, "", 9, RunClose{}))
	w, err := Open(dir, WriterOptions{Now: clock(), MaxOpenRuns: 1})
	if err != nil {
		t.Fatal(err)
	}
	written, err := w.Append(more)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 4 {
		t.Errorf("wrote %d events, want 4 new ones", len(written))
	}
	// Again, with the same writer and a batch repeating itself.
	if written, err = w.Append(append(more, more...)); err != nil || len(written) != 0 {
		t.Errorf("repeat: %d written, %v", len(written), err)
	}
	w.Close()
	ids := map[string]int{}
	for _, run := range []string{runA, runB} {
		for _, line := range readLines(t, runPath(dir, run)) {
			e, err := ParseLine(line)
			if err != nil {
				t.Fatal(err)
			}
			ids[e.ID]++
		}
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s written %d times", id, n)
		}
	}
	if len(ids) != 9 {
		t.Errorf("%d distinct events, want 9", len(ids))
	}
	if rep := verify(t, dir); !rep.OK {
		t.Fatal(dump(rep))
	}
}

func TestWriterRecoversPartialLines(t *testing.T) {
	dir := t.TempDir()
	events := fixedEvents(t)
	writeJournal(t, dir, events[:6], 6)
	for _, p := range []string{runPath(dir, runA), filepath.Join(dir, headFile)} {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(`{"seq":99,"partial`)
		f.Close()
	}
	w, err := Open(dir, WriterOptions{Now: clock()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(events[6:]); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rep := verify(t, dir)
	if !rep.OK || hasNote(rep, NotePartialLine, runA) || rep.Events != 8 {
		t.Fatalf("after recovery: %s", dump(rep))
	}
}

func TestWriterLocksDirectory(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, WriterOptions{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	w.Close()
	w2, err := Open(dir, WriterOptions{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	w2.Close()
	if _, err := w2.Append(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v", err)
	}
}

func TestWriterRejectsInvalidEvents(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, WriterOptions{Now: clock()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	good := ev(t, "r_ok", "1", TypeRunOpen, "", 1, RunOpen{})
	bad := []Event{
		ev(t, "../../etc", "2", TypeRunOpen, "", 1, nil),
		ev(t, "r_ok", "", TypeRunOpen, "", 1, nil),
		ev(t, "r_ok", "3", "run.exploded", "", 1, nil),
		{ID: "4", Run: "r_ok", Type: TypeRunOpen, Data: json.RawMessage(`{}`)}, // no time
		{ID: "5", Run: "r_ok", Type: TypeRunOpen, Time: epoch, Data: json.RawMessage(`{bad`)},
		ev(t, strings.Repeat("r", 65), "6", TypeRunOpen, "", 1, nil),
	}
	written, err := w.Append(append([]Event{good}, bad...))
	if len(written) != 1 || written[0].Seq != 1 {
		t.Fatalf("written: %+v", written)
	}
	es, ok := errors.AsType[EventErrors](err)
	if !ok || len(es) != len(bad) || !errors.Is(err, ErrInvalidEvent) || !errors.Is(err, ErrBadRunID) {
		t.Fatalf("err: %v", err)
	}
	for i, e := range es {
		if e.Index != i+1 || !errors.Is(e, ErrInvalidEvent) {
			t.Errorf("event error %d: %+v", i, e)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, runsDir))
	if len(entries) != 1 {
		t.Errorf("runs/ holds %d files", len(entries))
	}
	if _, err := os.Stat(filepath.Join(dir, "..", "etc.jsonl")); err == nil {
		t.Error("a hostile run id escaped the directory")
	}
}

func TestWriterRefusesCorruptRun(t *testing.T) {
	dir := t.TempDir()
	events := fixedEvents(t)
	writeJournal(t, dir, events[:3], 3)
	editLine(runA, 0, `{`, `[`)(t, dir)
	w, err := Open(dir, WriterOptions{Now: clock()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	written, err := w.Append(events[3:])
	if !errors.Is(err, ErrCorruptRun) || errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("err %v", err)
	}
	for _, e := range written {
		if e.Run == runA {
			t.Errorf("wrote %s into a corrupt run", e.ID)
		}
	}
}
