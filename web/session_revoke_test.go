package web

import (
	"net/http"
	"net/url"
	"testing"
)

// A user removed from the store (gatehouse users remove) loses the
// dashboard at once: their open session no longer opens pages or
// decides, and a name added again with other roles does not inherit the
// old session's roles.
func TestRemovedUserSessionEnds(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	c.login("rita")
	if resp, _ := c.get("/approvals"); resp.StatusCode != http.StatusOK {
		t.Fatalf("before removal: %d", resp.StatusCode)
	}
	r := hold(t, ev.svc, "acme", "alice", "10.00")
	tok := c.csrf("/approvals")
	if err := ev.users.Remove("rita"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := c.get("/approvals"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /approvals after removal: %d, want a redirect to sign in", resp.StatusCode)
	}
	resp, _ := c.post("/approvals/"+r.ID+"/decide", url.Values{"_csrf": {tok}, "decision": {"approve"}}, false)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("decide after removal: %d, want 401", resp.StatusCode)
	}

	// Same name again, now an auditor of one tenant: the old session's
	// reviewer role is gone.
	c2 := ev.client(t)
	c2.login("olga")
	if err := ev.users.Remove("olga"); err != nil {
		t.Fatal(err)
	}
	if err := ev.users.Add(User{Name: "olga", Roles: []Role{RoleAuditor}, Tenant: "globex"}, pw); err != nil {
		t.Fatal(err)
	}
	if resp, _ := c2.get("/review"); resp.StatusCode == http.StatusOK {
		t.Errorf("GET /review with the session of a user whose roles changed: %d", resp.StatusCode)
	}
}

// A new password (gatehouse users passwd) ends the sessions signed in with
// the old one.
func TestPasswordChangeEndsSessions(t *testing.T) {
	ev := newEnv(t, true)
	c := ev.client(t)
	c.login("rita")
	if resp, _ := c.get("/approvals"); resp.StatusCode != http.StatusOK {
		t.Fatalf("before the change: %d", resp.StatusCode)
	}
	if err := ev.users.SetPassword("rita", pw+"-changed"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := c.get("/approvals"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /approvals after a password change: %d, want a redirect to sign in", resp.StatusCode)
	}
}
