package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// readmeSection returns the README's section under heading, up to the next
// "## " heading.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README has no %q section", heading)
	}
	s = s[i+len(heading)+2:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	return s
}

// fencedBlocks returns the section's fenced code blocks of one language,
// in order.
func fencedBlocks(section, lang string) []string {
	var out []string
	for rest := section; ; {
		i := strings.Index(rest, "```"+lang+"\n")
		if i < 0 {
			return out
		}
		rest = rest[i+len(lang)+4:]
		j := strings.Index(rest, "```")
		if j < 0 {
			return out
		}
		out = append(out, rest[:j])
		rest = rest[j+3:]
	}
}

// ghAt runs the binary in dir, as a user in that folder would.
func ghAt(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	return runBin(t, cmd)
}

// runBin runs cmd (the binary, its Dir and Stdin set) to completion with
// the environment cleaned, and returns its output and exit status.
func runBin(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = cleanEnv()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// shellWords splits a command line as sh would for the README's commands:
// spaces separate words, single quotes quote, $run is the run.
func shellWords(line, run string) []string {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	for i, w := range words {
		words[i] = strings.ReplaceAll(w, "$run", run)
	}
	return words
}

// TestReadmeProviderSection runs the README's "Provider calls and
// grounding" section as written: its files, copied into a folder (the ERP's
// address swapped for a loopback ERP standing for erp.example.com), pass
// gatehouse policy check with exactly the output shown; serve runs them;
// every command of the console block gives the first line shown. Then
// every attack payment of provider_spelling_test.go is tried on the same
// run: the attacker's IBAN is never paid, the honest payment once.
func TestReadmeProviderSection(t *testing.T) {
	sec := readmeSection(t, "## Provider calls and grounding")
	erp := &lenientERP{}
	srv := httptest.NewServer(erp)
	defer srv.Close()
	dir := t.TempDir()
	files := map[string]bool{}
	for _, b := range fencedBlocks(sec, "yaml") {
		first, _, _ := strings.Cut(b, "\n")
		name, ok := strings.CutPrefix(first, "# ")
		if !ok || !strings.HasSuffix(name, ".yaml") {
			t.Fatalf("a yaml block of the section does not name its file on its first line: %q", first)
		}
		text := strings.ReplaceAll(b, "https://erp.example.com", srv.URL)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		files[name] = true
	}
	for _, f := range []string{"providers.yaml", "grounding.yaml", "credentials.yaml", "policy.yaml"} {
		if !files[f] {
			t.Fatalf("the section has no %s block", f)
		}
	}
	consoles := fencedBlocks(sec, "console")
	if len(consoles) != 1 {
		t.Fatalf("%d console blocks, want 1", len(consoles))
	}

	// Commands and the output each shows.
	type step struct {
		line string
		want []string
	}
	var steps []step
	sc := bufio.NewScanner(strings.NewReader(consoles[0]))
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), "$ "); ok {
			steps = append(steps, step{line: l})
		} else if len(steps) > 0 {
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, sc.Text())
		}
	}
	var run string
	for _, st := range steps {
		switch {
		case strings.HasPrefix(st.line, "gatehouse serve "):
			args := shellWords(st.line, "")[2:]
			for i := range args {
				if i > 0 && strings.HasSuffix(args[i], ".yaml") {
					args[i] = filepath.Join(dir, args[i])
				}
			}
			serve(t, filepath.Join(dir, ".gatehouse"), args...)
		case strings.HasPrefix(st.line, "run=$(") && strings.HasSuffix(st.line, ")"):
			r := ghAt(t, dir, shellWords(strings.TrimSuffix(strings.TrimPrefix(st.line, "run=$("), ")"), "")[1:]...)
			if r.code != 0 {
				t.Fatalf("%s: exit %d: %s%s", st.line, r.code, r.stdout, r.stderr)
			}
			run = strings.TrimSpace(r.stdout)
		case strings.HasPrefix(st.line, "gatehouse policy check"):
			r := ghAt(t, dir, shellWords(st.line, "")[1:]...)
			if got := strings.TrimRight(r.stdout, "\n"); r.code != 0 || got != strings.Join(st.want, "\n") {
				t.Fatalf("%s: exit %d, printed\n%s\nthe README shows\n%s\n%s", st.line, r.code, got, strings.Join(st.want, "\n"), r.stderr)
			}
		case strings.HasPrefix(st.line, "gatehouse "):
			r := ghAt(t, dir, shellWords(st.line, run)[1:]...)
			first, _, _ := strings.Cut(r.stdout, "\n")
			if len(st.want) == 0 || first != st.want[0] {
				t.Fatalf("%s: printed %q, the README shows %q\n%s%s", st.line, first, st.want, r.stdout, r.stderr)
			}
		default:
			t.Fatalf("the console block has a command this test does not know: %s", st.line)
		}
	}
	if run == "" {
		t.Fatal("the console block opened no work")
	}
	if got := erp.paid(); len(got) != 1 || got[0] != supplierIBAN+" 1200.00" {
		t.Fatalf("the ERP was paid %q, want the supplier once", got)
	}
	// The allowed payment cites both records it was grounded on.
	cited := false
	for _, line := range strings.Split(strings.TrimSpace(readRun(t, filepath.Join(dir, ".gatehouse"), run)), "\n") {
		ev, err := journal.ParseLine([]byte(line))
		if err != nil || ev.Type != journal.TypeDecision {
			continue
		}
		var d journal.Decision
		if json.Unmarshal(ev.Data, &d) == nil && d.Method == "POST" && d.Outcome == journal.OutcomeAllowed {
			cited = len(d.Citations) == 2 && d.Path == "/api/payments" &&
				strings.HasPrefix(d.Citations[0].Path, "erp:/api/invoices/INV-7") && d.Citations[1].Path == "erp:/api/suppliers/S-1"
		}
	}
	if !cited {
		t.Fatalf("the allowed payment does not cite the invoice and the supplier:\n%s", readRun(t, filepath.Join(dir, ".gatehouse"), run))
	}

	t.Run("attacks", func(t *testing.T) { runSpellingAttacks(t, dir, run, erp) })

	t.Run("work input with a key twice", func(t *testing.T) {
		for _, in := range []string{`{"invoice":"INV-7","invoice":"INV-9"}`, `{"invoice":"INV-7","Invoice":"INV-9"}`} {
			r := ghAt(t, dir, "work", "open", "--tenant", "acme", "--person", "ada", "--input", in)
			if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "twice") {
				t.Fatalf("--input %s: exit %d: %s%s", in, r.code, r.stdout, r.stderr)
			}
		}
	})

	t.Run("policy check finds the mistakes", func(t *testing.T) {
		g, err := os.ReadFile(filepath.Join(dir, "grounding.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		bad := strings.ReplaceAll(strings.ReplaceAll(string(g), "path: /api/payments", "path: /payments"), `"/api/suppliers/{id}"`, `"/api/vendors/{id}"`)
		if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		r := ghAt(t, dir, "policy", "check", "--providers", "providers.yaml", "--grounding", "bad.yaml", "--json")
		var rep struct {
			OK       bool
			Problems []struct{ File, Rule, Part, Problem, Fix string }
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 1 || rep.OK || len(rep.Problems) != 2 {
			t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
		}
		if p := rep.Problems[0]; p.File != "bad.yaml" || p.Rule != `rule[0] "supplier-payment"` || p.Part != "match.path" || !strings.Contains(p.Fix, "write /api/payments") {
			t.Fatalf("problem %+v", p)
		}
		if p := rep.Problems[1]; !strings.HasPrefix(p.Part, "bind[1] supplier") || !strings.Contains(p.Problem, "no integration of erp declares GET /api/vendors/{id}") {
			t.Fatalf("problem %+v", p)
		}
		for _, usage := range [][]string{{"policy", "check"}, {"policy", "check", "--grounding", "grounding.yaml"}, {"policy", "check", "x.yaml"}} {
			if r := ghAt(t, dir, usage...); r.code != 2 {
				t.Fatalf("%v: exit %d", usage, r.code)
			}
		}
	})
}
