package evidence_test

import (
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
