package evidence_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/review/reviewtest"
	"github.com/gatehouse/gatehouse/policy"
)

func event(t testing.TB, id, run string, typ journal.Type, at time.Time, effect string, data any) journal.Event {
	t.Helper()
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return journal.Event{ID: id, Run: run, Type: typ, Time: at, Effect: effect, Data: raw}
}

// fixture writes reviewtest's journal plus, for acme/alice: an approval
// answer and a reconciliation in her second run, a run that also decided
// for globex/bob, and a run delegated from globex's run.
func fixture(t *testing.T) string {
	t.Helper()
	evs := reviewtest.Events()
	at := evs[len(evs)-1].Time
	next := func() time.Time { at = at.Add(time.Minute); return at }
	alice := policy.Principal{Tenant: "acme", Person: "alice"}
	evs = append(evs,
		event(t, "x1", reviewtest.RunAcmeAlice2, journal.TypeApprovalDecision, next(), "f3",
			journal.ApprovalDecision{Approval: "ap_1", Approved: true, Approver: "rita", Roles: []string{"finance"}, Assurance: "password", Authenticated: "dashboard-session", Reason: "ticket 4411"}),
		event(t, "x2", reviewtest.RunAcmeAlice2, journal.TypeApprovalReconciled, next(), "f3",
			journal.ApprovalReconciled{Approval: "ap_1", Happened: true, By: "ops", Reason: "seen in stripe"}),
		event(t, "x3", "r_acme_alice_mixed", journal.TypeRunOpen, next(), "", journal.RunOpen{ActingFor: alice, Scopes: []string{}}),
		event(t, "x4", "r_acme_alice_mixed", journal.TypeDecision, next(), "f1",
			journal.Decision{ActingFor: policy.Principal{Tenant: "globex", Person: "bob"}, Sink: policy.SinkOutput, Action: "deliver", Target: "globex-secret", Outcome: journal.OutcomeAllowed, Mode: policy.ModeReport}),
		event(t, "x5", "r_acme_alice_child", journal.TypeRunOpen, next(), "", journal.RunOpen{ActingFor: alice, Scopes: []string{}, Parent: reviewtest.RunGlobexCarl}),
		event(t, "x6", "r_acme_alice_child", journal.TypeDecision, next(), "f1",
			journal.Decision{ActingFor: alice, Sink: policy.SinkOutput, Action: "deliver", Target: "from-globex", Outcome: journal.OutcomeAllowed, Mode: policy.ModeReport}),
	)
	dir := filepath.Join(t.TempDir(), "journal")
	w, err := journal.Open(dir, journal.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(evs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestTimelineIsOnePersons(t *testing.T) {
	dir := fixture(t)
	tl, err := evidence.Timeline(dir, "acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if tl.Verify == nil || !tl.Verify.OK {
		t.Fatalf("verify %+v %s", tl.Verify, tl.VerifyError)
	}
	if len(tl.Runs) != 2 || tl.Runs[0].Run != reviewtest.RunAcmeAlice1 || len(tl.Runs[0].Decisions) != 3 || tl.Runs[0].Closed == nil || tl.Runs[1].Closed != nil {
		t.Fatalf("runs: %+v", tl.Runs)
	}
	if d := tl.Runs[0].Decisions[0]; d.Result == nil || d.Result.Status != "ok" || d.Refusal != policy.RefuseMutationWithoutAtom ||
		len(d.Reasons) != 1 || d.Label != "stripe POST api.stripe.com/v1/refunds" {
		t.Errorf("decision: %+v", d)
	}
	if tl.Totals.Allowed != 5 || tl.Totals.Refused != 1 || tl.Totals.Would != 4 || len(tl.Days) != 2 || tl.Days[0].Allowed != 3 {
		t.Errorf("totals %+v days %+v", tl.Totals, tl.Days)
	}

	// Approvals: who answered, how they signed in, in journal order.
	es := tl.Runs[1].Entries()
	if len(es) != 5 || es[3].Kind != "approval" || es[3].Outcome != "approved" || es[3].Approver != "rita" ||
		es[3].How != "password via dashboard-session" || es[3].Reason != "ticket 4411" ||
		es[4].Outcome != "reconciled" || es[4].Approver != "ops" || es[4].Reason != "took effect: seen in stripe" {
		t.Fatalf("entries: %+v", es)
	}
	if es[2].Kind != "decision" || es[2].Outcome != journal.OutcomeRefused || es[2].Result != "" {
		t.Errorf("refused entry: %+v", es[2])
	}

	// Runs that also worked for someone else are named, never shown.
	if len(tl.LeftOut) != 2 || tl.LeftOut[0].Run != "r_acme_alice_child" || !strings.Contains(tl.LeftOut[0].Reason, "delegated from a run of another tenant") ||
		strings.Contains(tl.LeftOut[0].Reason, reviewtest.RunGlobexCarl) ||
		tl.LeftOut[1].Run != "r_acme_alice_mixed" || !strings.Contains(tl.LeftOut[1].Reason, "acts for another principal") {
		t.Fatalf("left out: %+v", tl.LeftOut)
	}
	b, _ := json.Marshal(tl)
	if strings.Contains(string(b), "globex-secret") || strings.Contains(string(b), "from-globex") {
		t.Fatalf("a left-out run's content is in the timeline: %s", b)
	}

	other, err := evidence.Timeline(dir, "globex", "alice")
	if err != nil || len(other.Runs) != 0 || len(other.LeftOut) != 0 {
		t.Errorf("another tenant's alice: %+v %v", other, err)
	}
	people, err := evidence.People(dir, "acme")
	if err != nil || len(people) != 2 || people[0].Person != "alice" || people[0].Runs != 2 || people[0].Decisions != 6 ||
		people[0].Refused != 1 || people[0].LeftOut != 2 || people[1].Person != "bob" || people[1].Runs != 1 {
		t.Errorf("people %+v %v", people, err)
	}
	tenants, err := evidence.Tenants(dir)
	if err != nil || strings.Join(tenants, ",") != "acme,globex" {
		t.Errorf("tenants %v %v", tenants, err)
	}
}

func TestTimelineOfAnEmptyJournal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "head.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ts, err := evidence.Tenants(dir); err != nil || len(ts) != 0 {
		t.Fatalf("tenants %v %v", ts, err)
	}
	tl, err := evidence.Timeline(dir, "acme", "alice")
	if err != nil || len(tl.Runs) != 0 || len(tl.Days) != 0 {
		t.Fatalf("timeline %+v %v", tl, err)
	}
	if _, err := evidence.People(filepath.Join(t.TempDir(), "nope"), "acme"); !errors.Is(err, evidence.ErrNoJournal) {
		t.Fatalf("not a journal: %v", err)
	}
}

// FuzzTimeline feeds arbitrary run files (untrusted: anyone who can write
// the journal directory controls them) to Timeline, People and Tenants,
// which must not panic, and must never show a run that does not act for
// the person asked about throughout.
func FuzzTimeline(f *testing.F) {
	f.Add([]byte(`{"v":1}` + "\n"))
	f.Add([]byte("not json\n{\n"))
	f.Fuzz(func(t *testing.T, run []byte) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o755); err != nil {
			t.Fatal(err)
		}
		id := "r_fuzz"
		first, _, _ := strings.Cut(string(run), "\n")
		if ev, err := journal.ParseLine([]byte(first)); err == nil && journal.ValidRunID(ev.Run) {
			id = ev.Run
		}
		if err := os.WriteFile(filepath.Join(dir, "runs", id+".jsonl"), run, 0o644); err != nil {
			t.Fatal(err)
		}
		tenants, err := evidence.Tenants(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, tenant := range tenants {
			people, err := evidence.People(dir, tenant)
			if err != nil {
				continue // a tenant name that is no selector
			}
			for _, p := range people {
				tl, err := evidence.Timeline(dir, tenant, p.Person)
				if err != nil {
					continue
				}
				for _, r := range tl.Runs {
					if r.For.Tenant != tenant || r.For.Person != p.Person {
						t.Fatalf("run %s acts for %v", r.Run, r.For)
					}
				}
				if len(tl.Runs) != p.Runs || len(tl.LeftOut) != p.LeftOut {
					t.Fatalf("people %+v, timeline %d runs %d left out", p, len(tl.Runs), len(tl.LeftOut))
				}
			}
		}
	})
}

// TestFuzzTimelineSeeds keeps the seed corpus: the fixture journal's run
// files (rewritten with GATEHOUSE_UPDATE_SEEDS=1).
func TestFuzzTimelineSeeds(t *testing.T) {
	if os.Getenv("GATEHOUSE_UPDATE_SEEDS") == "" {
		t.Skip("set GATEHOUSE_UPDATE_SEEDS=1 to rewrite testdata/fuzz/FuzzTimeline")
	}
	dir := fixture(t)
	files, _ := filepath.Glob(filepath.Join(dir, "runs", "*.jsonl"))
	out := filepath.Join("testdata", "fuzz", "FuzzTimeline")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		seed := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(out, "seed-"+strings.TrimSuffix(filepath.Base(p), ".jsonl")), []byte(seed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
