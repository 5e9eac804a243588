package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// benchEnv is a server with a signed-in reviewer and n pending requests.
func benchEnv(b *testing.B, n int) (*env, *client) {
	b.Helper()
	ev := &env{svc: approvals(b), users: OpenUsers(b.TempDir() + "/users.json")}
	if err := ev.users.Add(User{Name: "rita", Roles: []Role{RoleReviewer}}, pw); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		hold(b, ev.svc, "acme", fmt.Sprintf("p%04d", i), "10.00")
	}
	ev.srv = newTestServer(Config{Users: ev.users, Approvals: ev.svc, JournalDir: b.TempDir()})
	b.Cleanup(ev.srv.Close)
	c := benchClient(b, ev.srv.URL)
	return ev, c
}

// BenchmarkQueuePage: GET /approvals with 1,000 pending requests, server
// side (the handler lists them from JetStream KV and renders the oldest
// 200), against an empty queue.
func BenchmarkQueuePage(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			_, c := benchEnv(b, n)
			for b.Loop() {
				resp, err := c.hc.Get(c.base + "/approvals")
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatal(resp.StatusCode)
				}
			}
		})
	}
}

// BenchmarkSSEDelivery: from a new request (approval.Service.Request) to
// the re-rendered queue's bytes on the reviewer's open SSE stream, with an empty queue
// and with 1,000 already pending (every change re-renders the queue).
func BenchmarkSSEDelivery(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			ev, c := benchEnv(b, n)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/approvals/events", nil)
			resp, err := c.hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 1<<20)
			if _, err := br.ReadString('\n'); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i++
				hold(b, ev.svc, "acme", "q", fmt.Sprintf("%d.00", i))
				// The list shows a page of PerPage; the count shows the new one.
				want := fmt.Sprintf(`data-testid="pending-count">%d<`, n+i)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						b.Fatal(err)
					}
					if strings.Contains(line, want) {
						break
					}
				}
			}
		})
	}
}

func benchClient(b *testing.B, base string) *client {
	b.Helper()
	c := &client{base: base, hc: newJarClient()}
	resp, err := c.hc.Get(base + "/login")
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfMeta.FindStringSubmatch(string(body))
	if m == nil {
		b.Fatal("no csrf")
	}
	resp, err = c.hc.PostForm(base+"/login", url.Values{"_csrf": {m[1]}, "name": {"rita"}, "password": {pw}})
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		b.Fatal("login", resp.StatusCode)
	}
	return c
}
