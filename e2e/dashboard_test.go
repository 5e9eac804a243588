package e2e

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/gatehouse/gatehouse/broker/review/reviewtest"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/dashboard"
	"github.com/gatehouse/gatehouse/web"
)

// Chromium for the dashboard tests: one driver and one browser for the
// whole test binary, started by the first test that needs it and closed by
// TestMain (closeChromium).
var chromium struct {
	once sync.Once
	pw   *playwright.Playwright
	br   playwright.Browser
	err  error
}

func launchChromium(t *testing.T) playwright.Browser {
	t.Helper()
	chromium.once.Do(func() {
		dir := os.Getenv("PLAYWRIGHT_DRIVER_PATH")
		if dir == "" {
			dir = browser.DefaultDriverDir
		}
		if _, err := os.Stat(browser.DefaultExecutable); err != nil {
			chromium.err = fmt.Errorf("no Chromium at %s (%s)", browser.DefaultExecutable, browser.FixCommand)
			return
		}
		chromium.pw, chromium.err = playwright.Run(&playwright.RunOptions{DriverDirectory: dir, SkipInstallBrowsers: true, Stdout: io.Discard, Stderr: io.Discard})
		if chromium.err != nil {
			return
		}
		chromium.br, chromium.err = chromium.pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
			ExecutablePath: playwright.String(browser.DefaultExecutable), Headless: playwright.Bool(true),
			Args: []string{"--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"}})
	})
	if chromium.err != nil {
		t.Fatalf("Chromium: %v", chromium.err)
	}
	return chromium.br
}

// closeChromium stops the shared browser, if a test started it.
func closeChromium() {
	if chromium.br != nil {
		_ = chromium.br.Close()
	}
	if chromium.pw != nil {
		_ = chromium.pw.Stop()
	}
}

// artifactsDir is where screenshots go: $GATEHOUSE_ARTIFACTS, else
// e2e/artifacts (ignored by git).
func artifactsDir(t *testing.T, sub string) string {
	dir := os.Getenv("GATEHOUSE_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	dir, _ = filepath.Abs(filepath.Join(dir, sub))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ghIn runs the binary with stdin.
func ghIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	return runBin(t, cmd)
}

// viewer is one signed-in Chromium context at one screen size.
type viewer struct {
	t      *testing.T
	ctx    playwright.BrowserContext
	page   playwright.Page
	base   string
	shots  string
	size   string
	user   string // who signed in, for messages
	errors []string
	mu     sync.Mutex
}

var sizes = map[string]playwright.Size{"desktop": {Width: 1366, Height: 900}, "phone": {Width: 390, Height: 844}}

func newViewer(t *testing.T, base, shots, size string) *viewer {
	t.Helper()
	sz := sizes[size]
	ctx, err := launchChromium(t).NewContext(playwright.BrowserNewContextOptions{Viewport: &sz, AcceptDownloads: playwright.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctx.Close() })
	page, err := ctx.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	page.SetDefaultTimeout(15000)
	v := &viewer{t: t, ctx: ctx, page: page, base: base, shots: shots, size: size}
	// Any console error (a CSP violation, a failed script) fails the test.
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if m.Type() == "error" {
			v.mu.Lock()
			v.errors = append(v.errors, m.Text())
			v.mu.Unlock()
		}
	})
	page.OnResponse(func(r playwright.Response) {
		if r.Status() >= 400 {
			v.mu.Lock()
			v.errors = append(v.errors, fmt.Sprintf("%d %s", r.Status(), r.URL()))
			v.mu.Unlock()
		}
	})
	page.OnPageError(func(err error) {
		v.mu.Lock()
		v.errors = append(v.errors, err.Error())
		v.mu.Unlock()
	})
	return v
}

func (v *viewer) goTo(path string) playwright.Response {
	v.t.Helper()
	resp, err := v.page.Goto(v.base + path)
	if err != nil {
		v.t.Fatalf("goto %s: %v", path, err)
	}
	return resp
}

// shot saves the page as NAME-SIZE.png and checks it with axe-core: every
// page a test shows is also an accessibility check.
func (v *viewer) shot(name string) {
	v.t.Helper()
	p := filepath.Join(v.shots, name+"-"+v.size+".png")
	if _, err := v.page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(p), FullPage: playwright.Bool(true)}); err != nil {
		v.t.Fatal(err)
	}
	if name != "failed" {
		v.axe(name)
	}
}

// shotTop saves what the screen shows (not the whole page) as
// NAME-SIZE-top.png: what a person sees first.
func (v *viewer) shotTop(name string) {
	v.t.Helper()
	p := filepath.Join(v.shots, name+"-"+v.size+"-top.png")
	if _, err := v.page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(p)}); err != nil {
		v.t.Fatal(err)
	}
}

// axeSource is axe-core's browser build: $AXE_CORE_JS, else where
// .ci/install-deps puts it.
var axeSource struct {
	once sync.Once
	src  string
	err  error
}

const axeDefault = "/var/cache/gatehouse/axe-core-4.14.1/package/axe.min.js"

// axe runs axe-core (WCAG 2.1 A and AA rules) over the page and fails the
// test on every serious or critical violation. It is evaluated through
// the DevTools protocol, which the page's CSP does not govern, so the CSP
// stays as it is in production.
func (v *viewer) axe(page string) {
	v.t.Helper()
	axeSource.once.Do(func() {
		p := os.Getenv("AXE_CORE_JS")
		if p == "" {
			p = axeDefault
		}
		b, err := os.ReadFile(p)
		axeSource.src, axeSource.err = string(b), err
	})
	if axeSource.err != nil {
		v.t.Fatalf("axe-core: %v (bash .ci/install-deps installs it)", axeSource.err)
	}
	if _, err := v.page.Evaluate("() => { if (!window.axe) { (0, eval)(" + jsString(axeSource.src) + ") } }"); err != nil {
		v.t.Fatalf("load axe-core into %s: %v", page, err)
	}
	res, err := v.page.Evaluate(`async () => {
		const r = await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}});
		return r.violations.filter(x => x.impact === 'serious' || x.impact === 'critical')
			.map(x => x.impact + ' ' + x.id + ': ' + x.help + ' — ' + x.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '));
	}`)
	if err != nil {
		v.t.Fatalf("axe-core on %s: %v", page, err)
	}
	if list, ok := res.([]any); ok && len(list) > 0 {
		var lines []string
		for _, l := range list {
			lines = append(lines, fmt.Sprint(l))
		}
		v.t.Errorf("axe-core: %s (%s) has %d serious or critical violations:\n%s", page, v.size, len(lines), strings.Join(lines, "\n"))
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (v *viewer) login(name string) {
	v.t.Helper()
	v.user = name
	v.goTo("/login")
	must(v.t, v.page.Locator("input[name=name]").Fill(name))
	must(v.t, v.page.Locator("input[name=password]").Fill(dashPassword))
	must(v.t, v.page.Locator("button[type=submit]").Click())
	must(v.t, v.page.WaitForURL(func(u string) bool { return !strings.Contains(u, "/login") }))
}

func (v *viewer) noErrors() {
	v.t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.errors) > 0 {
		v.t.Errorf("%s browser console errors:\n%s", v.size, strings.Join(v.errors, "\n"))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

const dashPassword = "correct horse battery"

var runID = regexp.MustCompile(`r_[0-9a-z]{26}`)

// A reviewer signs in in Chromium, sees a held effect arrive live over SSE,
// approves it, and the agent's retry goes through; an operator reads the
// policy review; a tenant auditor reads a person's evidence and downloads
// the tenant's export, which verifies, while another tenant's URLs are
// refused. Every page is saved as a screenshot at desktop and phone width.
func TestDashboardInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gatehouse serve and Chromium")
	}
	data := t.TempDir()
	pol := filepath.Join(data, "policy.yaml")
	must(t, os.WriteFile(pol, []byte("approvals:\n  - name: payouts\n    match: {sink: output}\n    roles: [reviewer]\n    assurance: password\n"), 0o600))
	for _, u := range [][]string{{"rita", "--role", "reviewer"}, {"olga", "--role", "operator"}, {"aud-acme", "--role", "auditor", "--tenant", "acme"}} {
		if r := ghIn(t, dashPassword+"\n", append([]string{"users", "add", "--data-dir", data, "--password-stdin"}, u...)...); r.code != 0 {
			t.Fatalf("users add %v: %d %s", u, r.code, r.stderr)
		}
	}
	srv := serve(t, data, "--mode", "strict", "--policy", pol)
	defer srv.stop(t)

	// Work for a person of another tenant, for the isolation checks; its
	// effect waits in the queue too.
	other := gh(t, "work", "open", "--tenant", "globex", "--person", "carl", "--data-dir", data)
	otherRun := runID.FindString(other.stdout)
	if otherRun == "" {
		t.Fatalf("work open: %+v", other)
	}
	gh(t, "effect", "output", "--run", otherRun, "--status", "ok", "--result", `{"n":1}`, "--data-dir", data)

	shots := artifactsDir(t, "screenshots")
	t.Logf("screenshots in %s", shots)

	for i, size := range []string{"desktop", "phone"} {
		t.Run(size, func(t *testing.T) {
			rev := newViewer(t, srv.ep.HTTP, shots, size)
			rev.goTo("/approvals")
			if !strings.Contains(rev.page.URL(), "/login") {
				t.Fatalf("no session, yet %s", rev.page.URL())
			}
			rev.shot("login")
			rev.login("rita")
			must(t, rev.page.Locator("[data-testid=pending-count]").WaitFor())
			rev.shot("approvals-before")

			// The agent's effect is held; the queue shows it without a reload.
			open := gh(t, "work", "open", "--tenant", "acme", "--person", "alice", "--data-dir", data)
			run := runID.FindString(open.stdout)
			amount := fmt.Sprintf(`{"amount":"12%d.00","iban":"DE89370400440532013000","memo":"refund order 8812"}`, i)
			held := gh(t, "effect", "output", "--run", run, "--status", "ok", "--result", amount, "--data-dir", data)
			if !strings.Contains(held.stdout+held.stderr, "held") {
				t.Fatalf("effect not held: %+v", held)
			}
			row := rev.page.Locator("[data-testid=request-row][data-state=pending]", playwright.PageLocatorOptions{HasText: "12" + fmt.Sprint(i) + ".00"})
			if err := row.WaitFor(); err != nil {
				rev.shot("failed")
				t.Fatalf("the held request did not arrive on the open page: %v", err)
			}
			reqID, err := row.GetAttribute("data-id")
			must(t, err)
			must(t, row.Locator("a").Click())
			card := rev.page.Locator("#detail[data-id=" + reqID + "][data-state=pending]")
			must(t, card.WaitFor())
			text, err := card.InnerText()
			must(t, err)
			if !strings.Contains(text, "DE89370400440532013000") || !strings.Contains(text, "approval:payouts") {
				t.Errorf("card does not show the exact action:\n%s", text)
			}
			rev.shot("approvals-pending")
			must(t, card.Locator("textarea[name=reason]").Fill("matches refund ticket 8812"))
			must(t, card.Locator("[data-testid=approve]").Click())
			// The pane turns into the decision; the request leaves the
			// waiting list and is on the decided tab.
			must(t, rev.page.Locator("#detail[data-id="+reqID+"][data-state=approved]").WaitFor())
			rev.goTo("/approvals?state=decided")
			if err := rev.page.Locator("[data-testid=request-row][data-state=approved][data-id=" + reqID + "]").WaitFor(); err != nil {
				rev.shot("failed")
				html, _ := rev.page.Content()
				t.Fatalf("approved request not listed as approved: %v\n%s", err, html)
			}
			rev.shot("approvals-decided")

			// The agent proposes the same action again: it runs now.
			again := gh(t, "effect", "output", "--run", run, "--status", "ok", "--result", amount, "--data-dir", data)
			if again.code != 0 {
				t.Errorf("approved effect: %+v", again)
			}
			rev.goTo("/status")
			rev.shot("status")
			rev.noErrors()

			op := newViewer(t, srv.ep.HTTP, shots, size)
			op.login("olga")
			op.goTo("/review")
			must(t, op.page.Locator("h1").WaitFor())
			op.shot("review")
			op.noErrors()

			aud := newViewer(t, srv.ep.HTTP, shots, size)
			aud.login("aud-acme")
			aud.goTo("/evidence")
			aud.shot("evidence")
			aud.goTo("/evidence/acme/alice")
			must(t, aud.page.Locator("[data-testid=chart]").WaitFor())
			aud.shot("person")
			aud.noErrors()
			for _, p := range []string{"/evidence/globex/carl", "/evidence/globex/export.tar.gz", "/approvals", "/review"} {
				if resp := aud.goTo(p); resp.Status() != http.StatusNotFound && resp.Status() != http.StatusForbidden {
					t.Errorf("acme auditor GET %s: %d", p, resp.Status())
				}
			}
			aud.errors = nil // the refusals just asked for
			if i == 0 {
				aud.goTo("/evidence")
				dl, err := aud.page.ExpectDownload(func() error { return aud.page.Locator("[data-testid=export]").Click() })
				must(t, err)
				archive := filepath.Join(t.TempDir(), "acme.tar.gz")
				must(t, dl.SaveAs(archive))
				dir := untar(t, archive)
				if r := gh(t, "verify", "--export", dir); r.code != 0 {
					t.Errorf("verify --export of the downloaded export: %+v", r)
				}
				if r := gh(t, "verify", dir); r.code == 0 {
					t.Errorf("a plain verify accepted an export")
				}
			}
			aud.noErrors()
		})
	}
}

// untar unpacks a tar.gz and returns the folder it holds.
func untar(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	must(t, err)
	dst := t.TempDir()
	tr := tar.NewReader(zr)
	root := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		name := filepath.Clean(h.Name)
		if strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			t.Fatalf("archive entry %q", h.Name)
		}
		if root == "" {
			root = strings.Split(name, string(filepath.Separator))[0]
		}
		p := filepath.Join(dst, name)
		if h.Typeflag == tar.TypeDir {
			must(t, os.MkdirAll(p, 0o755))
			continue
		}
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		b, err := io.ReadAll(tr)
		must(t, err)
		must(t, os.WriteFile(p, b, 0o644))
	}
	return filepath.Join(dst, root)
}

// The review and evidence pages over a journal with report-mode decisions
// over several days (reviewtest's), served in-process, at both sizes.
func TestDashboardReportModePagesInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	dir := t.TempDir()
	users := web.OpenUsers(filepath.Join(dir, "users.json"))
	must(t, users.Add(web.User{Name: "ada", Roles: []web.Role{web.RoleAdmin}}, dashPassword))
	srv := httptest.NewServer(web.New(web.Config{Status: func() dashboard.Status { return dashboard.Status{Mode: "report"} },
		Users: users, JournalDir: reviewtest.Write(t, filepath.Join(dir, "journal"))}))
	defer srv.Close()
	shots := artifactsDir(t, "screenshots")
	for _, size := range []string{"desktop", "phone"} {
		t.Run(size, func(t *testing.T) {
			v := newViewer(t, srv.URL, shots, size)
			v.login("ada")
			v.goTo("/review")
			if n, err := v.page.Locator("[data-testid=finding]").Count(); err != nil || n != 4 {
				t.Errorf("review lists %d findings (%v), want 4", n, err)
			}
			v.shot("review-report-mode")
			v.goTo("/evidence")
			v.shot("evidence-all-tenants")
			v.goTo("/evidence/acme/alice")
			must(t, v.page.Locator("[data-testid=chart]").WaitFor())
			v.shot("person-report-mode")
			v.noErrors()
		})
	}
}

// gatehouse policy review prints the same groups as the dashboard, with
// --json, and exits 1 when strict mode would refuse something.
func TestPolicyReviewCLI(t *testing.T) {
	dir := reviewtest.Write(t, filepath.Join(t.TempDir(), "journal"))
	r := gh(t, "policy", "review", dir)
	if r.code != 1 || !strings.Contains(r.stdout, "mutation-without-atom  x3") || !strings.Contains(r.stdout, "decision: allow") {
		t.Errorf("policy review: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	j := gh(t, "policy", "review", dir, "--json")
	var rep struct {
		Would    int `json:"would_refuse"`
		Findings []struct {
			Refusal     string `json:"refusal"`
			Suggestions []struct {
				Rules   string `json:"rules"`
				Checked bool   `json:"checked"`
			} `json:"suggestions"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(j.stdout), &rep); err != nil || j.code != 1 || rep.Would != 6 || len(rep.Findings) != 4 {
		t.Fatalf("--json: %d %v %+v", j.code, err, rep)
	}
	// The rule text it prints loads as a policy file.
	rules := filepath.Join(t.TempDir(), "suggested.yaml")
	must(t, os.WriteFile(rules, []byte(rep.Findings[0].Suggestions[0].Rules), 0o600))
	srvDir := t.TempDir()
	s := serve(t, srvDir, "--policy", rules)
	if strings.Contains(s.out.String(), "policy could not be read") {
		t.Errorf("serve refused the suggested rules:\n%s", s.out)
	}
	s.stop(t)
	if r := gh(t, "policy", "review", filepath.Join(t.TempDir(), "none")); r.code != 2 {
		t.Errorf("no journal: %d", r.code)
	}
	if r := gh(t, "policy"); r.code != 2 {
		t.Errorf("no subcommand: %d", r.code)
	}
}

func TestUsersCLI(t *testing.T) {
	data := t.TempDir()
	add := func(stdin string, args ...string) result {
		return ghIn(t, stdin, append([]string{"users", "add", "--data-dir", data}, args...)...)
	}
	if r := add(dashPassword+"\n", "rita", "--role", "reviewer", "--password-stdin"); r.code != 0 {
		t.Fatalf("add: %+v", r)
	}
	if r := add(dashPassword+"\n", "rita", "--role", "operator", "--password-stdin"); r.code != 1 {
		t.Errorf("add twice: %+v", r)
	}
	if r := add(dashPassword+"\n", "aud", "--role", "auditor", "--password-stdin"); r.code != 2 || !strings.Contains(r.stderr, "--tenant") {
		t.Errorf("auditor without tenant: %+v", r)
	}
	if r := add("short\n", "olga", "--role", "operator", "--password-stdin"); r.code != 2 {
		t.Errorf("short password: %+v", r)
	}
	if r := add("", "olga", "--role", "operator"); r.code != 2 || !strings.Contains(r.stderr, "--password-stdin") {
		t.Errorf("no terminal: %+v", r)
	}
	if r := add(dashPassword+"\n", "aud", "--role", "auditor", "--tenant", "acme", "--password-stdin"); r.code != 0 {
		t.Errorf("auditor: %+v", r)
	}
	l := gh(t, "users", "list", "--data-dir", data, "--json")
	if l.code != 0 || !strings.Contains(l.stdout, `"name":"aud"`) || strings.Contains(l.stdout, "argon2") {
		t.Errorf("list: %+v", l)
	}
	b, err := os.ReadFile(filepath.Join(data, "users.json"))
	must(t, err)
	if !strings.Contains(string(b), "$argon2id$") || strings.Contains(string(b), dashPassword) {
		t.Errorf("users.json does not hold only hashes")
	}
	if fi, _ := os.Stat(filepath.Join(data, "users.json")); fi.Mode().Perm() != 0o600 {
		t.Errorf("users.json mode %v", fi.Mode())
	}
	// TOTP: enrolled once with the secret printed, listed without it.
	tj := gh(t, "users", "totp", "aud", "--data-dir", data, "--json")
	var enrolled struct{ URI, Secret string }
	if tj.code != 0 || json.Unmarshal([]byte(tj.stdout), &enrolled) != nil || !strings.HasPrefix(enrolled.URI, "otpauth://totp/") || enrolled.Secret == "" {
		t.Errorf("users totp: %+v", tj)
	}
	if l := gh(t, "users", "list", "--data-dir", data); !strings.Contains(l.stdout, "totp") {
		t.Errorf("list does not show the second factor: %s", l.stdout)
	}
	if l := gh(t, "users", "list", "--data-dir", data, "--json"); strings.Contains(l.stdout, enrolled.Secret) {
		t.Errorf("list --json shows the TOTP secret: %s", l.stdout)
	}
	if r := gh(t, "users", "totp", "nobody", "--data-dir", data); r.code != 1 {
		t.Errorf("totp of an unknown user: %+v", r)
	}
	if r := gh(t, "users", "remove", "rita", "--data-dir", data); r.code != 0 {
		t.Errorf("remove: %+v", r)
	}
	if r := gh(t, "users", "remove", "rita", "--data-dir", data); r.code != 1 {
		t.Errorf("remove twice: %+v", r)
	}
}

// A reviewer who enrolled TOTP signs in in Chromium with password and code
// and approves a request whose rule needs assurance mfa; the agent's retry
// runs.
func TestTOTPReviewerApprovesMFARuleInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gatehouse serve and Chromium")
	}
	data := t.TempDir()
	pol := filepath.Join(data, "policy.yaml")
	must(t, os.WriteFile(pol, []byte("approvals:\n  - name: big-payouts\n    match: {sink: output}\n    roles: [reviewer]\n    assurance: mfa\n"), 0o600))
	if r := ghIn(t, dashPassword+"\n", "users", "add", "tom", "--role", "reviewer", "--data-dir", data, "--password-stdin"); r.code != 0 {
		t.Fatalf("users add: %+v", r)
	}
	tj := gh(t, "users", "totp", "tom", "--data-dir", data, "--json")
	var enrolled struct{ Secret string }
	if tj.code != 0 || json.Unmarshal([]byte(tj.stdout), &enrolled) != nil {
		t.Fatalf("users totp: %+v", tj)
	}
	srv := serve(t, data, "--mode", "strict", "--policy", pol)
	defer srv.stop(t)
	run := runID.FindString(gh(t, "work", "open", "--tenant", "acme", "--person", "alice", "--data-dir", data).stdout)
	result := `{"amount":"9000.00","iban":"DE89370400440532013000"}`
	if held := gh(t, "effect", "output", "--run", run, "--status", "ok", "--result", result, "--data-dir", data); !strings.Contains(held.stdout+held.stderr, "held") {
		t.Fatalf("effect not held: %+v", held)
	}

	v := newViewer(t, srv.ep.HTTP, artifactsDir(t, "screenshots"), "desktop")
	v.user = "tom"
	v.goTo("/login")
	must(t, v.page.Locator("input[name=name]").Fill("tom"))
	must(t, v.page.Locator("input[name=password]").Fill(dashPassword))
	must(t, v.page.Locator("button[type=submit]").Click())
	code := v.page.Locator("input[name=code]")
	must(t, code.WaitFor())
	v.shot("login-totp")
	now, err := web.TOTPCode(enrolled.Secret, time.Now())
	must(t, err)
	must(t, code.Fill(now))
	must(t, v.page.Locator("button[type=submit]").Click())
	must(t, v.page.WaitForURL(func(u string) bool { return !strings.Contains(u, "/login") }))
	v.goTo("/approvals")
	row := v.page.Locator("[data-testid=request-row][data-state=pending]", playwright.PageLocatorOptions{HasText: "9000.00"})
	must(t, row.WaitFor())
	id, err := row.GetAttribute("data-id")
	must(t, err)
	must(t, row.Locator("a").Click())
	must(t, v.page.Locator("#detail[data-id="+id+"] [data-testid=approve]").Click())
	if err := v.page.Locator("#detail[data-id=" + id + "][data-state=approved]").WaitFor(); err != nil {
		v.shot("failed")
		t.Fatalf("the mfa-rule request was not approved: %v", err)
	}
	if again := gh(t, "effect", "output", "--run", run, "--status", "ok", "--result", result, "--data-dir", data); again.code != 0 {
		t.Errorf("approved effect: %+v", again)
	}
	v.noErrors()
}
