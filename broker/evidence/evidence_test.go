package evidence_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker/content"
	"github.com/gatehouse/gatehouse/broker/content/contenttest"
	"github.com/gatehouse/gatehouse/broker/evidence"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// twoTenants runs effects for acme (ada, bob) and globex (ada) and returns
// the runs by tenant/person.
func twoTenants(t *testing.T) (*contenttest.Env, map[string]string) {
	env := contenttest.Start(t, policy.ModeStrict, content.ModeFull, contenttest.Rules, nil)
	runs := map[string]string{}
	for _, who := range []string{"acme/ada", "acme/bob", "globex/ada"} {
		tenant, person, _ := strings.Cut(who, "/")
		run := env.Open(t, tenant, person, "reports")
		env.Output(t, run, "ok", map[string]string{"for": who})
		env.Output(t, run, "leak", 1)
		env.Close(t, run)
		runs[who] = run
	}
	env.Verify(t)
	return env, runs
}

func TestTimelineOfOnePerson(t *testing.T) {
	env, runs := twoTenants(t)
	tl, err := evidence.Timeline(env.JournalDir, "acme", "ada")
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Runs) != 1 || tl.Runs[0].Run != runs["acme/ada"] || tl.Verify == nil || !tl.Verify.OK {
		t.Fatalf("timeline = %+v", tl)
	}
	ds := tl.Runs[0].Decisions
	if len(ds) != 2 || ds[0].Outcome != journal.OutcomeAllowed || ds[0].Result == nil || ds[0].Result.Status != "ok" ||
		ds[1].Outcome != journal.OutcomeRefused || ds[1].Rule != "no-leaks" || len(ds[1].Reasons) == 0 || ds[1].Result != nil {
		t.Fatalf("decisions = %+v", ds)
	}
	if tl.Runs[0].Closed == nil {
		t.Fatal("closed run shown open")
	}
	all, err := evidence.Timeline(env.JournalDir, "acme", "")
	if err != nil || len(all.Runs) != 2 {
		t.Fatalf("tenant timeline: %d runs, %v", len(all.Runs), err)
	}
	if _, err := evidence.Timeline(env.JournalDir, "", "ada"); !errors.Is(err, evidence.ErrBadSelector) {
		t.Fatalf("empty tenant: %v", err)
	}
}

func TestExportVerifiesAndHoldsOnlyItsTenant(t *testing.T) {
	env, runs := twoTenants(t)
	dst := filepath.Join(t.TempDir(), "acme-evidence")
	sum, err := evidence.Export(dst, env.JournalDir, evidence.Selector{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Manifest.Runs) != 2 {
		t.Fatalf("manifest runs = %+v", sum.Manifest.Runs)
	}
	// Tenant isolation: nothing of globex's run is in the export, neither
	// its file nor its name in the manifest.
	if _, err := os.Stat(filepath.Join(dst, "runs", runs["globex/ada"]+".jsonl")); err == nil {
		t.Fatal("globex's run is in acme's export")
	}
	m, _ := os.ReadFile(filepath.Join(dst, journal.ExportManifestFile))
	if strings.Contains(string(m), runs["globex/ada"]) || strings.Contains(string(m), "globex") {
		t.Fatal("acme's manifest names globex's run")
	}
	// Byte for byte.
	for _, who := range []string{"acme/ada", "acme/bob"} {
		a, _ := os.ReadFile(filepath.Join(env.JournalDir, "runs", runs[who]+".jsonl"))
		b, _ := os.ReadFile(filepath.Join(dst, "runs", runs[who]+".jsonl"))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Fatalf("%s not copied exactly", who)
		}
	}

	rep, err := evidence.VerifyExport(dst)
	if err != nil || !rep.OK || rep.Runs != 2 {
		t.Fatalf("verify --export: %+v %v", rep, err)
	}
	// A plain verify refuses an export.
	if _, err := journal.Verify(dst, journal.VerifyOptions{}); !errors.Is(err, journal.ErrExport) {
		t.Fatalf("plain verify of an export: %v", err)
	}
	// And an export cannot be made over a non-empty folder.
	if _, err := evidence.Export(dst, env.JournalDir, evidence.Selector{Tenant: "acme"}); !errors.Is(err, evidence.ErrExists) {
		t.Fatalf("export over an export: %v", err)
	}

	// One person only.
	one := filepath.Join(t.TempDir(), "ada")
	if sum, err := evidence.Export(one, env.JournalDir, evidence.Selector{Tenant: "acme", Person: "ada"}); err != nil || len(sum.Manifest.Runs) != 1 {
		t.Fatalf("person export: %+v %v", sum, err)
	}
	if rep, err := evidence.VerifyExport(one); err != nil || !rep.OK {
		t.Fatalf("verify person export: %+v %v", rep, err)
	}
}

func TestEditedOrRemovedRunInAnExportIsCaught(t *testing.T) {
	env, runs := twoTenants(t)
	for name, tamper := range map[string]func(dir string){
		"edited": func(dir string) {
			p := filepath.Join(dir, "runs", runs["acme/ada"]+".jsonl")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(`"refused"`), []byte(`"allowed"`), 1), 0o600)
		},
		"cut-short": func(dir string) {
			p := filepath.Join(dir, "runs", runs["acme/ada"]+".jsonl")
			b, _ := os.ReadFile(p)
			lines := bytes.SplitAfter(b, []byte("\n"))
			os.WriteFile(p, bytes.Join(lines[:len(lines)-2], nil), 0o600)
		},
		"removed": func(dir string) {
			os.Remove(filepath.Join(dir, "runs", runs["acme/ada"]+".jsonl"))
		},
		"added": func(dir string) {
			b, _ := os.ReadFile(filepath.Join(env.JournalDir, "runs", runs["globex/ada"]+".jsonl"))
			os.WriteFile(filepath.Join(dir, "runs", runs["globex/ada"]+".jsonl"), b, 0o600)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "x")
			if _, err := evidence.Export(dst, env.JournalDir, evidence.Selector{Tenant: "acme"}); err != nil {
				t.Fatal(err)
			}
			tamper(dst)
			rep, err := evidence.VerifyExport(dst)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK {
				t.Fatalf("%s export verified", name)
			}
			t.Log(rep.Findings)
		})
	}
}

func TestArchiveUnpacksToAVerifiableExport(t *testing.T) {
	env, runs := twoTenants(t)
	var buf bytes.Buffer
	if err := evidence.WriteArchive(&buf, env.JournalDir, evidence.Selector{Tenant: "globex"}); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o700)
			continue
		}
		b, _ := io.ReadAll(tr)
		os.MkdirAll(filepath.Dir(p), 0o700)
		os.WriteFile(p, b, 0o600)
	}
	for _, n := range names {
		if strings.Contains(n, runs["acme/ada"]) || strings.Contains(n, runs["acme/bob"]) {
			t.Fatalf("globex's archive holds %s", n)
		}
	}
	rep, err := evidence.VerifyExport(filepath.Join(dir, "globex-evidence"))
	if err != nil || !rep.OK || rep.Runs != 1 {
		t.Fatalf("archive export: %+v %v (entries %v)", rep, err, names)
	}
}

func TestParseSelector(t *testing.T) {
	for in, ok := range map[string]bool{"acme/ada": true, "acme/": true, "acme": false, "/ada": false, "a/b/c": false} {
		if _, err := evidence.ParseSelector(in); (err == nil) != ok {
			t.Errorf("ParseSelector(%q): %v", in, err)
		}
	}
}
