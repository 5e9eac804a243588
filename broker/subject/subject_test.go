package subject

import (
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/policy"
)

func TestRequester(t *testing.T) {
	for _, tc := range []struct {
		subj     string
		class    Class
		id, rest string
		ok       bool
	}{
		{Effect("bob", policy.SinkOutput), ClassAgent, "bob", "effect.output", true},
		{Effect(Shared, policy.SinkCode), ClassAgent, Shared, "effect.code", true},
		{WorkOpen("crm"), ClassApp, "crm", WorkOpenOp, true},
		{App(Shared, ApprovalListOp), ClassApp, Shared, ApprovalListOp, true},
		{AgentPrefix + ".bob", "", "", "", false},                 // nothing asked
		{AgentPrefix + "._gatehouse.effect.x", "", "", "", false}, // Gatehouse's own, never a requester
		{AgentPrefix + ".*.effect.x", "", "", "", false},
		{AgentPrefix + ".-bob.effect.x", "", "", "", false},
		{Prefix + ".effect.output", "", "", "", false}, // the old subject names no one
		{"gatehouse.v1.agentx.bob.effect.output", "", "", "", false},
	} {
		c, id, rest, ok := Requester(tc.subj)
		if c != tc.class || id != tc.id || rest != tc.rest || ok != tc.ok {
			t.Errorf("Requester(%q) = %q %q %q %v", tc.subj, c, id, rest, ok)
		}
	}
}

func TestInboxesDoNotOverlap(t *testing.T) {
	spaces := []string{AgentInboxOf(Shared), AgentInboxOf("bob"), AgentInboxOf("bobby"), AppInboxOf(Shared), AppInboxOf("bob")}
	for _, a := range spaces {
		for _, b := range spaces {
			if a != b && InInbox(b+".x", a) {
				t.Errorf("a reply in %s lies in %s", b, a)
			}
		}
	}
	for reply, want := range map[string]bool{
		AgentInboxOf("bob") + ".abc": true,
		AgentInboxOf("bob") + ".a.b": true,
		AgentInboxOf("bob"):          false,
		AgentInboxOf("bob") + ".":    false,
		AgentInboxOf("bob") + ".*":   false,
		AgentInboxOf("bob") + ".>":   false,
		AgentInboxOf("bob") + "..x":  false,
		AgentInboxOf("bob") + ".a b": false,
		AgentInboxOf("bobx") + ".a":  false,
		"$KV.gatehouse_memory.x":     false,
		"":                           false,
	} {
		if got := InInbox(reply, AgentInboxOf("bob")); got != want {
			t.Errorf("InInbox(%q) = %v, want %v", reply, got, want)
		}
	}
}

// FuzzRequester: whatever the subject, Requester names a valid identity
// whose own subjects it came from, and InInbox admits only replies inside
// the named inbox space.
func FuzzRequester(f *testing.F) {
	f.Add(Effect("bob", policy.SinkOutput), AgentInboxOf("bob")+".x")
	f.Add(WorkOpen(Shared), AppInboxOf(Shared)+".1.2")
	f.Add("gatehouse.v1.agent..effect.x", "_INBOX_agent.bob")
	f.Fuzz(func(t *testing.T, subj, reply string) {
		c, id, rest, ok := Requester(subj)
		if ok {
			if !ValidIdentity(id) || rest == "" {
				t.Fatalf("Requester(%q) = %q %q %q", subj, c, id, rest)
			}
			prefix := AgentPrefix
			if c == ClassApp {
				prefix = AppPrefix
			}
			if prefix+"."+id+"."+rest != subj {
				t.Fatalf("Requester(%q) does not rebuild the subject", subj)
			}
		}
		for _, space := range []string{AgentInboxOf("bob"), AppInboxOf(Shared)} {
			if InInbox(reply, space) && (!strings.HasPrefix(reply, space+".") || strings.ContainsAny(reply, "*> \t\r\n") || strings.Contains(reply, "..") || strings.HasSuffix(reply, ".")) {
				t.Fatalf("InInbox(%q, %q) admitted it", reply, space)
			}
		}
	})
}

// BenchmarkRequesterAndInbox is what the Service adds to every request:
// reading the identity from the subject and checking the reply subject.
func BenchmarkRequesterAndInbox(b *testing.B) {
	subj, reply := Effect("invoice-bot", policy.SinkOutput), AgentInboxOf("invoice-bot")+".Ts2Xq1VhYpQdbOq3NV2c0C"
	for b.Loop() {
		c, id, _, ok := Requester(subj)
		if !ok || !InInbox(reply, InboxOf(c, id)) {
			b.Fatal("refused")
		}
	}
}
