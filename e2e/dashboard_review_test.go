package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An operator reads the policy review of a report-mode deployment whose
// approvals rule needs finance and mfa: the summary counts report-mode
// decisions, the findings are rolled up under their rule, the advice
// names finance and mfa (not the reviewer role, not
// require_approval_for), and an example run opens its timeline. A tenant
// auditor is told how to verify the download, and it verifies from the
// folder it was unpacked into; another tenant's page is an error page.
func TestReviewAndEvidenceInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gatehouse serve and Chromium")
	}
	data := t.TempDir()
	pol := filepath.Join(data, "policy.yaml")
	must(t, os.WriteFile(pol, []byte("approvals:\n  - name: payouts\n    match: {sink: output}\n    roles: [finance]\n    assurance: mfa\n"), 0o600))
	for _, u := range [][]string{{"olga", "--role", "operator"}, {"aud", "--role", "auditor", "--tenant", "acme"}} {
		if r := ghIn(t, dashPassword+"\n", append([]string{"users", "add", "--data-dir", data, "--password-stdin"}, u...)...); r.code != 0 {
			t.Fatalf("users add %v: %+v", u, r)
		}
	}
	srv := serve(t, data, "--mode", "report", "--policy", pol)
	defer srv.stop(t)
	run := runID.FindString(gh(t, "work", "open", "--tenant", "acme", "--person", "alice", "--data-dir", data).stdout)
	for _, amount := range []string{"10.00", "20.00"} {
		if r := gh(t, "effect", "output", "--run", run, "--status", "ok", "--result", `{"amount":"`+amount+`"}`, "--data-dir", data); r.code != 0 {
			t.Fatalf("report mode effect: %+v", r)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(readRunIfAny(data, run), `"policy.decision"`) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the decisions were never written")
		}
		time.Sleep(50 * time.Millisecond)
	}
	shots := artifactsDir(t, "screenshots")
	for _, size := range []string{"desktop", "phone"} {
		t.Run(size, func(t *testing.T) {
			op := newViewer(t, srv.ep.HTTP, shots, size)
			op.login("olga")
			op.goTo("/review")
			if got := text(t, op, "[data-testid=report-mode]"); got != "2" {
				t.Errorf("report-mode decisions: %q, want 2", got)
			}
			if n := count(t, op, "[data-testid=rule-group]"); n != 1 {
				t.Errorf("%d rule groups, want 1", n)
			}
			advice := text(t, op, "[data-testid=advice]")
			for _, want := range []string{"finance", "mfa", `"payouts"`} {
				if !strings.Contains(advice, want) {
					t.Errorf("the advice lacks %q: %s", want, advice)
				}
			}
			if strings.Contains(advice, "require_approval_for") || strings.Contains(advice, "--role reviewer'") {
				t.Errorf("the advice names the wrong rule: %s", advice)
			}
			if page, _ := op.page.Content(); strings.Contains(page, `at least &#34;&#34;`) || strings.Contains(page, `at least ""`) {
				t.Error(`the review reads assurance at least ""`)
			}
			if got := text(t, op, "[data-testid=asks]"); !strings.Contains(got, "finance") || !strings.Contains(got, "mfa") {
				t.Errorf("what the rule asks: %q", got)
			}
			op.shot("review-approvals-rule")
			must(t, op.page.Locator("[data-testid=example]").First().Click())
			must(t, op.page.WaitForURL(func(u string) bool { return strings.Contains(u, "/runs/"+run) }))
			if n := count(t, op, "[data-testid=run]"); n != 1 {
				t.Errorf("the example run's timeline: %d runs shown", n)
			}
			op.shot("run-timeline")
			op.noErrors()

			aud := newViewer(t, srv.ep.HTTP, shots, size)
			aud.login("aud")
			aud.goTo("/evidence")
			howto := text(t, aud, "[data-testid=verify-howto]")
			if !strings.Contains(howto, "tar -xzf") || !strings.Contains(howto, "gatehouse verify --export acme-export") {
				t.Errorf("how to verify: %s", howto)
			}
			aud.shot("evidence-howto")
			if size == "desktop" {
				dl, err := aud.page.ExpectDownload(func() error { return aud.page.Locator("[data-testid=export]").Click() })
				must(t, err)
				archive := filepath.Join(t.TempDir(), "acme.tar.gz")
				must(t, dl.SaveAs(archive))
				inner := untar(t, archive)
				if filepath.Base(inner) != "acme-evidence" {
					t.Errorf("the archive unpacks into %s", filepath.Base(inner))
				}
				for _, dir := range []string{filepath.Dir(inner), inner} {
					if r := gh(t, "verify", "--export", dir); r.code != 0 {
						t.Errorf("verify --export %s: %+v", dir, r)
					}
				}
				if r := gh(t, "verify", "--export", t.TempDir()); r.code != 2 || !strings.Contains(r.stderr, "tar -xzf") {
					t.Errorf("verify --export of an empty folder: %+v", r)
				}
			}
			resp := aud.goTo("/evidence/globex/carl")
			if resp.Status() != 404 || count(t, aud, "[data-testid=error]") != 1 {
				t.Errorf("another tenant's page: %d, not an error page", resp.Status())
			}
			aud.shot("error-page")
			aud.errors = nil // the 404 just asked for
			aud.noErrors()
		})
	}
}

func readRunIfAny(data, run string) string {
	b, _ := os.ReadFile(filepath.Join(data, "journal", "runs", run+".jsonl"))
	return string(b)
}
