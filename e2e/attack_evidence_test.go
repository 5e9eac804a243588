package e2e

import (
	"bufio"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAttackEvidenceAcrossTenants is the red-team pass over tenant
// isolation of the dashboard's evidence, runs and approvals, against a
// real `gatehouse serve` with held work for acme and globex: as a reviewer
// and an auditor bound to acme, and as no one, it asks for globex's run,
// export, person page, approval (list, pane, page, decision, live stream)
// under every spelling of its tenant and run id, and for acme's as the
// auditor (who may only read). None of it answers globex's data or
// changes a request; acme's export holds acme's runs only and verifies.
func TestAttackEvidenceAcrossTenants(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gatehouse serve")
	}
	data := t.TempDir()
	pol := filepath.Join(data, "policy.yaml")
	must(t, os.WriteFile(pol, []byte("approvals:\n  - name: payouts\n    match: {sink: output}\n    roles: [reviewer]\n    assurance: password\n"), 0o600))
	for _, u := range [][]string{{"rev-acme", "--role", "reviewer", "--tenant", "acme"}, {"aud-acme", "--role", "auditor", "--tenant", "acme"}} {
		if r := ghIn(t, dashPassword+"\n", append([]string{"users", "add", "--data-dir", data, "--password-stdin"}, u...)...); r.code != 0 {
			t.Fatalf("users add %v: %d %s", u, r.code, r.stderr)
		}
	}
	srv := serve(t, data, "--mode", "strict", "--policy", pol)
	defer srv.stop(t)

	open := func(tenant, person string) string {
		t.Helper()
		r := gh(t, "work", "open", "--tenant", tenant, "--person", person, "--data-dir", data)
		run := runID.FindString(r.stdout)
		if run == "" {
			t.Fatalf("work open: %+v", r)
		}
		if r := gh(t, "effect", "output", "--run", run, "--status", "ok", "--result", `{"n":1}`, "--data-dir", data); !strings.Contains(r.stdout+r.stderr, "held") {
			t.Fatalf("effect not held: %+v", r)
		}
		return run
	}
	acmeRun, globexRun := open("acme", "alice"), open("globex", "carl")
	ids := map[string]string{}
	for _, r := range approvalList(t, data) {
		ids[r.Tenant] = r.ID
	}
	if ids["acme"] == "" || ids["globex"] == "" {
		t.Fatalf("held requests: %v", ids)
	}
	leaks := func(body string) bool {
		return strings.Contains(body, globexRun) || strings.Contains(body, ids["globex"]) || strings.Contains(body, "carl")
	}

	rev, aud := signIn(t, srv.ep.HTTP, "rev-acme"), signIn(t, srv.ep.HTTP, "aud-acme")
	raw := func(s *session, method, path string, form url.Values, hdr map[string]string) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, s.base+path, body)
		must(t, err)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := s.hc.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// Every spelling of globex's tenant and run, in every path parameter.
	tenants := []string{"globex", "GLOBEX", "Globex", "globex%20", "%20globex", "%67lobex", "globex%00", "acme%2F..%2Fglobex",
		"..%2Fglobex", "acme/../globex", "acme%2f%2e%2e%2fglobex", "globex%2F"}
	runs := []string{globexRun, strings.ToUpper(globexRun), "%20" + globexRun, globexRun + "%20", url.PathEscape(globexRun),
		"%72" + globexRun[1:], "..%2F" + globexRun, acmeRun + "%2F..%2F" + globexRun, acmeRun + "/../" + globexRun}
	var paths []string
	for _, tn := range tenants {
		paths = append(paths, "/evidence/"+tn+"/export.tar.gz", "/evidence/"+tn+"/carl")
	}
	// A search or filter shows what was typed back in its field: there
	// only globex's request (its id) counts as a leak.
	var searches []string
	for _, rn := range runs {
		paths = append(paths, "/runs/"+rn)
		searches = append(searches, "/approvals?state=all&q="+url.QueryEscape(rn))
	}
	searches = append(searches, "/approvals?state=all&person=carl", "/approvals?state=all&q=carl", "/approvals?state=all&q=globex")
	paths = append(paths, "/approvals/"+ids["globex"], "/approvals/"+ids["globex"]+"/pane", "/approvals?sel="+ids["globex"],
		"/approvals?state=all&tenant=globex", "/approvals?state=all&sort=tenant",
		"/evidence", "/evidence/globex/export.tar.gz", "/api/review", "/review", "/api/status")
	for _, s := range []struct {
		name string
		s    *session
	}{{"rev-acme", rev}, {"aud-acme", aud}} {
		for _, p := range paths {
			if code, body := raw(s.s, http.MethodGet, p, nil, nil); leaks(body) {
				t.Errorf("%s: GET %s: %d shows globex's data:\n%.600s", s.name, p, code, body)
			}
		}
		for _, p := range searches {
			if code, body := raw(s.s, http.MethodGet, p, nil, nil); strings.Contains(body, ids["globex"]) {
				t.Errorf("%s: GET %s: %d lists globex's request:\n%.600s", s.name, p, code, body)
			}
		}
	}

	// acme's reviewer cannot decide globex's request, however it is named;
	// acme's auditor cannot decide acme's. Each stays pending.
	tok := csrfField.FindStringSubmatch(rev.get(t, "/approvals"))
	atok := csrfField.FindStringSubmatch(aud.get(t, "/evidence"))
	if tok == nil || atok == nil {
		t.Fatal("no CSRF token on the pages")
	}
	for _, id := range []string{ids["globex"], strings.ToUpper(ids["globex"]), ids["globex"] + "%20", url.PathEscape(ids["globex"])} {
		for _, d := range []string{"approve", "refuse"} {
			code, body := raw(rev, http.MethodPost, "/approvals/"+id+"/decide", url.Values{"_csrf": {tok[1]}, "decision": {d}, "reason": {"x"}}, nil)
			if code != http.StatusNotFound || leaks(body) {
				t.Errorf("rev-acme %s %s: %d\n%.600s", d, id, code, body)
			}
			code, _ = raw(rev, http.MethodPost, "/approvals/"+id+"/reconcile", url.Values{"_csrf": {tok[1]}, "happened": {"yes"}, "reason": {"x"}}, nil)
			if code != http.StatusNotFound {
				t.Errorf("rev-acme reconcile %s: %d", id, code)
			}
		}
	}
	for _, p := range []string{"/approvals/" + ids["acme"] + "/decide", "/approvals/" + ids["acme"] + "/reconcile", "/status/reload-policy", "/checkpoint"} {
		if code, _ := raw(aud, http.MethodPost, p, url.Values{"_csrf": {atok[1]}, "decision": {"approve"}, "reason": {"x"}}, nil); code < 400 {
			t.Errorf("aud-acme POST %s: %d", p, code)
		}
	}
	// A forged cross-site POST (the reviewer's cookies, no token, or another Origin).
	if code, _ := raw(rev, http.MethodPost, "/approvals/"+ids["acme"]+"/decide", url.Values{"decision": {"approve"}}, nil); code != http.StatusForbidden {
		t.Errorf("decision without CSRF token: %d", code)
	}
	if code, _ := raw(rev, http.MethodPost, "/approvals/"+ids["acme"]+"/decide", url.Values{"_csrf": {tok[1]}, "decision": {"approve"}},
		map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Errorf("decision from another Origin: %d", code)
	}
	for tenant, id := range ids {
		if r := approvalShow(t, data, id); r.State != "pending" {
			t.Errorf("%s's request is %s after the attacks, want pending", tenant, r.State)
		}
	}

	// The live stream of acme's reviewer carries no change of globex's.
	req, err := http.NewRequest(http.MethodGet, srv.ep.HTTP+"/approvals/events?state=all", nil)
	must(t, err)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := rev.hc.Do(req)
	must(t, err)
	defer resp.Body.Close()
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	waitLine := func(want string) string {
		t.Helper()
		var seen strings.Builder
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("stream ended before %q:\n%s", want, seen.String())
				}
				seen.WriteString(l + "\n")
				if strings.Contains(l, want) {
					return seen.String()
				}
			case <-deadline:
				t.Fatalf("no %q on the stream:\n%s", want, seen.String())
			}
		}
	}
	waitLine(": connected")
	globexNewRun := open("globex", "dora") // held first: its change reaches the stream before acme's
	open("acme", "bea")
	var acmeNew, globexNew string
	for _, q := range approvalList(t, data) {
		switch {
		case q.Tenant == "acme" && q.ID != ids["acme"]:
			acmeNew = q.ID
		case q.Tenant == "globex" && q.ID != ids["globex"]:
			globexNew = q.ID
		}
	}
	if acmeNew == "" || globexNew == "" {
		t.Fatalf("new requests: acme %q globex %q", acmeNew, globexNew)
	}
	if got := waitLine("data: " + acmeNew); leaks(got) || strings.Contains(got, globexNew) || strings.Contains(got, globexNewRun) || strings.Contains(got, "dora") {
		t.Errorf("acme's reviewer's stream carries globex's change:\n%s", got)
	}

	// acme's export, downloaded as its auditor, holds acme's runs only and
	// verifies; the CLI refuses a selector that tries to climb out.
	resp2, err := aud.hc.Get(srv.ep.HTTP + "/evidence/acme/export.tar.gz")
	must(t, err)
	tgz := filepath.Join(t.TempDir(), "acme.tar.gz")
	f, err := os.Create(tgz)
	must(t, err)
	_, err = io.Copy(f, resp2.Body)
	must(t, err)
	resp2.Body.Close()
	must(t, f.Close())
	dir := untar(t, tgz)
	if _, err := os.Stat(filepath.Join(dir, "runs", globexRun+".jsonl")); err == nil {
		t.Error("globex's run is in acme's export")
	}
	if m, _ := os.ReadFile(filepath.Join(dir, "export.json")); strings.Contains(string(m), globexRun) || strings.Contains(string(m), "globex") {
		t.Errorf("acme's manifest names globex:\n%s", m)
	}
	if r := gh(t, "verify", "--export", dir); r.code != 0 {
		t.Errorf("verify --export of acme's download: %+v", r)
	}
	for _, sel := range []string{"acme/../globex", "acme/../../journal", "/globex", "acme/bob/.."} {
		if r := gh(t, "evidence", sel, "--data-dir", data); r.code != 2 || leaks(r.stdout+r.stderr) {
			t.Errorf("gatehouse evidence %q: %+v", sel, r)
		}
	}

	// No one signed in gets nothing.
	jar, _ := cookiejar.New(nil)
	anon := &session{base: srv.ep.HTTP, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, p := range []string{"/evidence/acme/export.tar.gz", "/evidence/acme/alice", "/runs/" + acmeRun, "/approvals/" + ids["acme"] + "/pane", "/approvals/events"} {
		if code, body := raw(anon, http.MethodGet, p, nil, nil); code == http.StatusOK || strings.Contains(body, acmeRun) {
			t.Errorf("anonymous GET %s: %d\n%.300s", p, code, body)
		}
	}
}
