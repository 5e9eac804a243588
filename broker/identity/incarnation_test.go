package identity_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/identity"
)

// Every registration of a name is its own incarnation, kept through the
// file, and a registration owns only what was stamped for it: the one
// removed never the next one's, the next one what was made while the
// name was removed, the first one what was made before the name was
// registered at all.
func TestEachRegistrationIsAnIncarnation(t *testing.T) {
	path := identity.Path(t.TempDir())
	edit := func(f func(*identity.Registry) error) *identity.Registry {
		t.Helper()
		reg, err := identity.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := f(reg); err != nil {
			t.Fatal(err)
		}
		if err := reg.Save(path); err != nil {
			t.Fatal(err)
		}
		back, err := identity.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return back
	}
	before := identity.Registry{}
	unknown := before.AgentRegistration("bob")
	if unknown.State != identity.Unregistered || unknown.Stamp != "" {
		t.Fatalf("a name never known: %+v", unknown)
	}
	reg := edit(func(r *identity.Registry) error {
		return r.AddAgent(identity.Agent{Name: "bob", Added: time.Now().UTC()})
	})
	first := reg.AgentRegistration("bob")
	if first.State != identity.Registered || !strings.HasPrefix(first.Incarnation, "i-") || first.Stamp != first.Incarnation || !first.First || first.Follows != "" {
		t.Fatalf("the first registration: %+v", first)
	}
	reg = edit(func(r *identity.Registry) error { return r.Touch("agent", "bob", time.Now()) })
	if g := reg.AgentRegistration("bob"); g.Incarnation != first.Incarnation {
		t.Fatalf("a rotation changed the incarnation: %+v", g)
	}
	reg = edit(func(r *identity.Registry) error { return r.RemoveAgent("bob") })
	gone := reg.AgentRegistration("bob")
	if gone.State != identity.Removed || gone.Stamp != identity.AfterRemoval(first.Incarnation) || gone.Owns(first.Incarnation) || gone.Owns(gone.Stamp) || gone.Owns("") {
		t.Fatalf("the removed name: %+v", gone)
	}
	if reg.Removed[0].Incarnation != first.Incarnation {
		t.Fatalf("the removal does not name the removed incarnation: %+v", reg.Removed)
	}
	reg = edit(func(r *identity.Registry) error {
		return r.AddAgent(identity.Agent{Name: "bob", Added: time.Now().UTC()})
	})
	second := reg.AgentRegistration("bob")
	if second.Incarnation == first.Incarnation || second.First || second.Follows != gone.Stamp {
		t.Fatalf("the second registration: %+v (the first %+v)", second, first)
	}
	for _, c := range []struct {
		g     identity.Registration
		stamp string
		owns  bool
	}{
		{first, "", true}, // made before bob was registered: nobody else's
		{first, first.Incarnation, true},
		{first, second.Incarnation, false},
		{second, first.Incarnation, false}, // the removed bob's
		{second, "", false},                // made before the first bob, or for it before incarnations
		{second, gone.Stamp, true},         // made while bob was removed
		{second, second.Incarnation, true},
		{unknown, "", true},
		{unknown, first.Incarnation, false},
	} {
		if got := c.g.Owns(c.stamp); got != c.owns {
			t.Errorf("%+v owns %q: %v, want %v", c.g, c.stamp, got, c.owns)
		}
	}
}

// A register written before incarnations loads: an agent never removed
// owns what was stamped "" (everything made for its name before); one
// registered again after a removal (under an old Gatehouse) gets an
// incarnation derived from the file, the same at every load, and owns
// nothing made before, which cannot be told from the removed agent's.
func TestRegisterWithoutIncarnations(t *testing.T) {
	path := identity.Path(t.TempDir())
	old := `{"agents": [{"name": "bob", "added": "2026-01-02T03:04:05Z"}, {"name": "carol", "added": "2026-03-04T05:06:07Z"}],
"apps": [], "removed": [{"name": "carol", "at": "2026-03-01T00:00:00Z"}]}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := identity.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	bob := reg.AgentRegistration("bob")
	if bob.State != identity.Registered || bob.Stamp != "" || !bob.Owns("") {
		t.Fatalf("bob, never removed: %+v", bob)
	}
	carol := reg.AgentRegistration("carol")
	if !strings.HasPrefix(carol.Incarnation, "legacy-") || carol.Stamp != carol.Incarnation || carol.Owns("") || !carol.Owns(carol.Stamp) {
		t.Fatalf("carol, registered again before incarnations: %+v", carol)
	}
	again, err := identity.Load(path)
	if err != nil || again.AgentRegistration("carol") != carol {
		t.Fatalf("carol's incarnation is not the same at every load: %+v %v", again.AgentRegistration("carol"), err)
	}
	// The CLI's next edit keeps both as they are, and removing bob then
	// records the "" incarnation it had.
	if err := reg.RemoveAgent("bob"); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddAgent(identity.Agent{Name: "bob", Added: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Save(path); err != nil {
		t.Fatal(err)
	}
	if reg, err = identity.Load(path); err != nil {
		t.Fatal(err)
	}
	if g := reg.AgentRegistration("carol"); g != carol {
		t.Fatalf("carol changed with an edit of bob: %+v", g)
	}
	if g := reg.AgentRegistration("bob"); g.Owns("") || !g.Owns(identity.AfterRemoval("")) || g.Incarnation == "" {
		t.Fatalf("bob registered again: %+v", g)
	}
}

// An incarnation in the file is a token the register can hold, or the
// file is refused.
func TestBadIncarnationRefused(t *testing.T) {
	for _, inc := range []string{"UPPER", "a b", strings.Repeat("a", identity.MaxIncarnationLen+1), "i-\u00e9"} {
		path := identity.Path(t.TempDir())
		body := `{"agents": [{"name": "bob", "incarnation": "` + inc + `", "added": "2026-01-02T03:04:05Z"}], "apps": []}`
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := identity.Load(path); !errors.Is(err, identity.ErrBadRegistry) || !errors.Is(err, identity.ErrBadIncarnation) {
			t.Errorf("incarnation %q: %v", inc, err)
		}
	}
}

// A register edited by hand cannot give a registration what another was
// given: the incarnation of the removed registration, a stamp of a
// removed name as an incarnation, a removal it does not follow, a name
// removed twice. Each is refused with what is wrong, and the file is not
// loaded; what the CLI writes for the same steps loads.
func TestHandEditedRegistrationRefused(t *testing.T) {
	const rm = `"removed": [{"name": "bob", "at": "2026-03-01T00:00:00Z", "incarnation": "i-old"}]`
	for name, c := range map[string]struct{ body, says string }{
		"the removed one's incarnation": {`{"agents": [{"name": "bob", "incarnation": "i-old", "added": "2026-03-02T00:00:00Z"}], "apps": [], ` + rm + `}`, "never reused"},
		"a removed name's stamp":        {`{"agents": [{"name": "bob", "incarnation": "after-i-old", "added": "2026-03-02T00:00:00Z"}], "apps": [], ` + rm + `}`, "removed name"},
		"follows another removal":       {`{"agents": [{"name": "bob", "incarnation": "i-new", "follows": "after-i-older", "added": "2026-03-02T00:00:00Z"}], "apps": [], ` + rm + `}`, "last removal"},
		"follows an old incarnation":    {`{"agents": [{"name": "bob", "incarnation": "i-new", "follows": "i-old", "added": "2026-03-02T00:00:00Z"}], "apps": [], ` + rm + `}`, "last removal"},
		"follows no removal":            {`{"agents": [{"name": "bob", "incarnation": "i-new", "follows": "after-i-old", "added": "2026-03-02T00:00:00Z"}], "apps": []}`, "does not record"},
		"removed twice": {`{"agents": [], "apps": [], "removed": [{"name": "bob", "at": "2026-03-01T00:00:00Z", "incarnation": "i-old"},
			{"name": "bob", "at": "2026-03-02T00:00:00Z", "incarnation": "i-new"}]}`, "twice"},
	} {
		path := identity.Path(t.TempDir())
		if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := identity.Load(path)
		if !errors.Is(err, identity.ErrBadRegistry) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v", name, err)
		}
	}
	path := identity.Path(t.TempDir())
	ok := `{"agents": [{"name": "bob", "incarnation": "i-new", "follows": "after-i-old", "added": "2026-03-02T00:00:00Z"}], "apps": [], ` + rm + `}`
	if err := os.WriteFile(path, []byte(ok), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := identity.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if g := reg.AgentRegistration("bob"); g.Owns("i-old") || !g.Owns("after-i-old") || !g.Owns("i-new") {
		t.Fatalf("bob registered again: %+v", g)
	}
	// AddAgent checks the same.
	if err := reg.RemoveAgent("bob"); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddAgent(identity.Agent{Name: "bob", Incarnation: "i-new"}); !errors.Is(err, identity.ErrBadIncarnation) {
		t.Fatalf("re-adding bob with the removed incarnation: %v", err)
	}
	if err := reg.AddAgent(identity.Agent{Name: "bob", Incarnation: "after-i-new"}); !errors.Is(err, identity.ErrBadIncarnation) {
		t.Fatalf("adding bob with a removed name's stamp: %v", err)
	}
}

// Changed is closed by the next Store, and only by it.
func TestHolderChanged(t *testing.T) {
	h := identity.NewHolder(&identity.Registry{})
	c := h.Changed()
	select {
	case <-c:
		t.Fatal("closed before a change")
	default:
	}
	if h.Changed() != c {
		t.Fatal("a second taker got another channel before a change")
	}
	h.Store(&identity.Registry{})
	select {
	case <-c:
	default:
		t.Fatal("not closed by a change")
	}
	if n := h.Changed(); n == c {
		t.Fatal("the channel after a change is the closed one")
	}
}

// BenchmarkAgentRegistration is the lookup every effect of a named agent
// makes (broker admit, peer.next): a register of n agents, half of the
// names removed once before.
func BenchmarkAgentRegistration(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			reg := &identity.Registry{}
			for i := range n {
				name := "agent-" + strconv.Itoa(i)
				if err := reg.AddAgent(identity.Agent{Name: name}); err != nil {
					b.Fatal(err)
				}
				if i%2 == 0 {
					if err := reg.RemoveAgent(name); err != nil {
						b.Fatal(err)
					}
					if err := reg.AddAgent(identity.Agent{Name: name}); err != nil {
						b.Fatal(err)
					}
				}
			}
			h := identity.NewHolder(reg)
			name := "agent-" + strconv.Itoa(n-2) // late in both lists
			stamp := h.AgentRegistration(name).Stamp
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if !h.AgentRegistration(name).Owns(stamp) {
					b.Fatal("not owned")
				}
			}
		})
	}
}
