package mcp

import (
	"errors"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/policy"
)

func TestCatalogueRefusesWhatCannotBeRun(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"both transports", `{name: a, url: "http://h/mcp", command: [x]}`, "not both"},
		{"no transport", `{name: a}`, "give command"},
		{"bad name", `{name: "A b", url: "http://h/mcp"}`, "name must be"},
		{"url with credentials", `{name: a, url: "http://u:p@h/mcp"}`, "without credentials"},
		{"bearer on stdio", `{name: a, command: [x], auth: {type: bearer}}`, "for HTTP servers"},
		{"env on http", `{name: a, url: "http://h/mcp", auth: {type: env, env: T}}`, "for stdio servers"},
		{"relative host file", `{name: a, command: [x], files: {x: rel/x}}`, "must be absolute"},
		{"escaping file", `{name: a, command: [x], files: {../x: /bin/true}}`, "inside the workspace"},
		{"bad effect", `{name: a, url: "http://h/mcp", tools: {t: {effect: all}}}`, "is not read"},
		{"unknown key", `{name: a, url: "http://h/mcp", secret: 1}`, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCatalogue("c.yaml", []byte("servers:\n  - "+tc.yaml+"\n"))
			if !errors.Is(err, ErrCatalogue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	c, err := ParseCatalogue("c.yaml", []byte("servers:\n  - {name: a, url: \"http://h/mcp\"}\n  - {name: b, command: [./b], auth: {type: env, env: TOKEN}}\n"))
	if err != nil || len(c.Servers) != 2 || c.Servers[0].Auth.Type != AuthNone || !c.Servers[1].Stdio() {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := ParseCatalogue("c.yaml", []byte("servers:\n  - {name: a, url: \"http://h/mcp\"}\n  - {name: a, url: \"http://h/mcp\"}\n")); err == nil {
		t.Fatal("a name used twice")
	}
}

func tools(desc string) []*sdk.Tool {
	return []*sdk.Tool{
		{Name: "read", Description: desc, InputSchema: map[string]any{"type": "object"}, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "pay", Description: "Pay.", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"iban": map[string]any{"type": "string"}}}},
	}
}

// A changed description, a new tool and a removed one are all changes; an
// accept of one tool pins only it, and the rest waits.
func TestPinsCatchChangesUntilAccepted(t *testing.T) {
	pins, err := NewPins(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	first, err := PinTools(tools("Read a note."))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := pins.Save("notes", "first listing", first, now); err != nil {
		t.Fatal(err)
	}
	changed := append(tools("Read a note and mail it out."), &sdk.Tool{Name: "wipe", InputSchema: map[string]any{"type": "object"}})
	listed, err := PinTools(changed[1:]) // pay, wipe: read removed
	if err != nil {
		t.Fatal(err)
	}
	pin, _ := pins.Load("notes")
	if d := Diff(pin, listed); len(d) != 2 || d[0].Kind != "new" || d[0].Tool != "wipe" || d[1].Kind != "removed" || d[1].Tool != "read" {
		t.Fatalf("diff %+v", d)
	}
	listed, _ = PinTools(changed)
	d := Diff(pin, listed)
	if len(d) != 2 || d[0].Tool != "read" || d[0].Kind != "changed" || strings.Join(d[0].Fields, ",") != "description" || d[1].Kind != "new" {
		t.Fatalf("diff %+v", d)
	}
	if why := unpinned(pin, listed, "read"); !strings.Contains(why, "description changed") {
		t.Fatalf("unpinned read: %q", why)
	}
	if why := unpinned(pin, listed, "wipe"); !strings.Contains(why, "never pinned") {
		t.Fatalf("unpinned wipe: %q", why)
	}
	if why := unpinned(pin, listed, "pay"); why != "" {
		t.Fatalf("unchanged pay: %q", why)
	}
	if err := pins.SaveListed("notes", listed, now); err != nil {
		t.Fatal(err)
	}
	pin, acc, err := pins.Accept("notes", "olga", []string{"read"}, now)
	if err != nil || len(acc) != 1 || acc[0].Tool != "read" {
		t.Fatalf("accept read: %+v %v", acc, err)
	}
	if why := unpinned(pin, listed, "read"); why != "" {
		t.Fatalf("accepted read: %q", why)
	}
	if why := unpinned(pin, listed, "wipe"); why == "" {
		t.Fatal("wipe was accepted with read")
	}
	if l, _ := pins.LoadListed("notes"); l == nil {
		t.Fatal("the rest of the listing was dropped")
	}
	if pin, _, err = pins.Accept("notes", "olga", nil, now); err != nil || len(pin.Tools) != 3 {
		t.Fatalf("accept all: %+v %v", pin, err)
	}
	if l, _ := pins.LoadListed("notes"); l != nil {
		t.Fatal("an accepted listing is still waiting")
	}
}

func TestClassOfTools(t *testing.T) {
	f := false
	srv := &Server{Tools: map[string]ToolPolicy{"pay": {Effect: policy.EffectWrite}}}
	pt, _ := PinTools([]*sdk.Tool{
		{Name: "read", InputSchema: map[string]any{"type": "object"}, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "post", InputSchema: map[string]any{"type": "object"}, Annotations: &sdk.ToolAnnotations{DestructiveHint: &f}},
		{Name: "wipe", InputSchema: map[string]any{"type": "object"}},
		{Name: "pay", InputSchema: map[string]any{"type": "object"}},
	})
	want := map[string]policy.EffectClass{"read": policy.EffectRead, "post": policy.EffectWrite, "wipe": policy.EffectDestructive, "pay": policy.EffectWrite}
	for i := range pt {
		if got := classOf(srv, &pt[i]); got != want[pt[i].Name] {
			t.Errorf("%s: class %s, want %s", pt[i].Name, got, want[pt[i].Name])
		}
	}
}

// Actions offers only the pinned tools the server's latest listing still
// shows as pinned: a changed or removed tool is refused at every call, so
// it is not offered until an operator accepts the change.
func TestActionsLeaveOutChangedTools(t *testing.T) {
	pins, err := NewPins(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	first, _ := PinTools(tools("Read a note."))
	if _, err := pins.Save("notes", "first listing", first, time.Now()); err != nil {
		t.Fatal(err)
	}
	k := &Sink{cat: &Catalogue{Servers: []Server{{Name: "notes", URL: "http://h/mcp"}}}, pins: pins}
	offered := func() []string {
		var out []string
		for _, a := range k.Actions() {
			if a.Tool != "" {
				out = append(out, a.Tool)
			}
		}
		return out
	}
	if got := strings.Join(offered(), ","); got != "notes/pay,notes/read" {
		t.Fatalf("never listed since the pin: %s", got)
	}
	changed, _ := PinTools(tools("Read a note and mail it out."))
	k.latest.Store("notes", changed)
	if got := strings.Join(offered(), ","); got != "notes/pay" {
		t.Fatalf("read changed: %s", got)
	}
	k.latest.Store("notes", changed[:0])
	if got := offered(); len(got) != 0 {
		t.Fatalf("nothing listed: %v", got)
	}
}

// A listing whose names rules could read two ways is refused whole: an
// invisible character, white space, a name not NFC, two names equal but
// for case.
func TestPinToolsRefusesConfusableNames(t *testing.T) {
	obj := map[string]any{"type": "object"}
	for _, names := range [][]string{
		{"delete_note\u200b"}, {"delete note"}, {"delete_note\n"}, {"cafe\u0301"},
		{"delete_note", "Delete_Note"}, {"kill", "\u212aill"},
	} {
		var ts []*sdk.Tool
		for _, n := range names {
			ts = append(ts, &sdk.Tool{Name: n, InputSchema: obj})
		}
		if _, err := PinTools(ts); !errors.Is(err, ErrToolList) {
			t.Errorf("%q: %v, want ErrToolList", names, err)
		}
	}
	if _, err := PinTools([]*sdk.Tool{{Name: "read-note.v2", InputSchema: obj}, {Name: "café", InputSchema: obj}}); err != nil {
		t.Errorf("plain names: %v", err)
	}
}
