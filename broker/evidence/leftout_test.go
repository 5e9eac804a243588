package evidence_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// A run of acme delegated from a run of globex is left out of acme's
// evidence, and the reason must not name globex's run: the manifest, the
// timeline (the auditor's person page) and the CLI name no run of another
// tenant.
func TestLeftOutReasonNamesNoOtherTenantsRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	w, err := journal.Open(dir, journal.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	data := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	const globexRun, acmeChild, acmeSibling = "r_globex_parent_secret", "r_acme_child", "r_acme_sibling"
	globex := policy.Principal{Tenant: "globex", Person: "carl"}
	ada, bob := policy.Principal{Tenant: "acme", Person: "ada"}, policy.Principal{Tenant: "acme", Person: "bob"}
	const bobRun = "r_acme_bob_parent"
	if _, err := w.Append([]journal.Event{
		{ID: "g1", Run: globexRun, Type: journal.TypeRunOpen, Time: at, Data: data(journal.RunOpen{ActingFor: globex, Scopes: []string{}})},
		{ID: "b1", Run: bobRun, Type: journal.TypeRunOpen, Time: at, Data: data(journal.RunOpen{ActingFor: bob, Scopes: []string{}})},
		{ID: "a1", Run: acmeChild, Type: journal.TypeRunOpen, Time: at.Add(time.Minute), Data: data(journal.RunOpen{ActingFor: ada, Parent: globexRun, Scopes: []string{}})},
		{ID: "s1", Run: acmeSibling, Type: journal.TypeRunOpen, Time: at.Add(time.Minute), Data: data(journal.RunOpen{ActingFor: ada, Parent: bobRun, Scopes: []string{}})},
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "acme")
	sum, err := evidence.Export(dst, dir, evidence.Selector{Tenant: "acme", Person: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Manifest.LeftOut) != 2 {
		t.Fatalf("left out: %+v", sum.Manifest.LeftOut)
	}
	m, _ := os.ReadFile(filepath.Join(dst, journal.ExportManifestFile))
	if !strings.Contains(string(m), acmeChild) || strings.Contains(string(m), globexRun) {
		t.Errorf("acme's manifest names globex's run (or misses the child):\n%s", m)
	}
	// A parent of the same tenant (another person) may be named: the
	// tenant's auditor sees that run anyway.
	if !strings.Contains(string(m), bobRun) {
		t.Errorf("the same tenant's parent is not named:\n%s", m)
	}
	tl, err := evidence.Timeline(dir, "acme", "ada")
	if err != nil {
		t.Fatal(err)
	}
	// (tl.Verify is the whole journal's report, for the CLI's reader of
	// the whole folder; the dashboard shows none of its runs.)
	if b, _ := json.Marshal(tl.LeftOut); len(tl.LeftOut) != 2 || strings.Contains(string(b), globexRun) {
		t.Errorf("acme/ada's timeline names globex's run: %s", b)
	}
	if rep, err := evidence.VerifyExport(dst); err != nil || !rep.OK {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// Events appended to an exported run past its head log entry (a forged
// approval here, chained correctly: the chain is unkeyed SHA-256) with the
// manifest's size and SHA-256 rewritten to match: verify took them for an
// interrupted write (a note) and passed. An export holds registered
// events only, so they are a finding now.
func TestEventsAppendedToAnExportedRunAreCaught(t *testing.T) {
	env, _ := twoTenants(t)
	run := env.Open(t, "acme", "cy", "reports") // still open: a close would flag what follows it
	env.Output(t, run, "ok", map[string]string{"for": "acme/cy"})
	env.Verify(t)
	dst := filepath.Join(t.TempDir(), "acme")
	if _, err := evidence.Export(dst, env.JournalDir, evidence.Selector{Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	if rep, err := evidence.VerifyExport(dst); err != nil || !rep.OK {
		t.Fatalf("verify as made: %+v %v", rep, err)
	}
	// The forger's copy of the journal, where the run gets one more event.
	forged := filepath.Join(t.TempDir(), "journal")
	if err := os.CopyFS(forged, os.DirFS(env.JournalDir)); err != nil {
		t.Fatal(err)
	}
	w, err := journal.Open(forged, journal.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(journal.ApprovalDecision{Approved: true, Approver: "rita", Reason: "looks fine"})
	if _, err := w.Append([]journal.Event{{ID: "forged-1", Run: run, Type: journal.TypeApprovalDecision, Time: time.Now().UTC(), Effect: "e_forged", Data: b}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	longer, err := os.ReadFile(filepath.Join(forged, "runs", run+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dst, "runs", run+".jsonl"), longer, 0o600))
	mp := filepath.Join(dst, journal.ExportManifestFile)
	raw, _ := os.ReadFile(mp)
	m, err := evidence.ParseManifest(raw)
	must(err)
	for i := range m.Runs {
		if m.Runs[i].Run == run {
			sum := sha256.Sum256(longer)
			m.Runs[i].Size, m.Runs[i].SHA256, m.Runs[i].Events = int64(len(longer)), hex.EncodeToString(sum[:]), m.Runs[i].Events+1
		}
	}
	nb, _ := json.MarshalIndent(m, "", "  ")
	must(os.WriteFile(mp, nb, 0o600))

	rep, err := evidence.VerifyExport(dst)
	must(err)
	found := false
	for _, f := range rep.Findings {
		found = found || f.Kind == evidence.FindingAfterHead && f.Run == run
	}
	if rep.OK || !found {
		t.Fatalf("an export with a forged event appended verifies: OK=%v findings %+v notes %+v", rep.OK, rep.Findings, rep.Notes)
	}
}
