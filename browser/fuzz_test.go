package browser_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/policy"
)

// FuzzDescribe feeds untrusted params to every action. Describe starts no
// browser, so this runs without Chromium.
func FuzzDescribe(f *testing.F) {
	for _, seed := range []struct{ action, params string }{
		{"goto", `{"url":"https://example.com/a?b=c"}`},
		{"goto", `{"url":"file:///etc/passwd"}`},
		{"click", `{"selector":"#x"}`},
		{"fill", `{"selector":"#x","value":"v"}`},
		{"select", `{"selector":"#x","values":["a","b"]}`},
		{"press", `{"selector":"#x","key":"Enter"}`},
		{"content", `{}`},
		{"screenshot", `{"inline":false}`},
		{"switch", `{"page":1}`},
		{"pages", `{}`},
		{"send", `{"method":"POST","url":"evil.example/x","page_url":"a","body_size":1}`},
	} {
		f.Add(seed.action, []byte(seed.params))
	}
	p := browser.New(browser.Config{})
	f.Cleanup(func() { _ = p.Close() })
	run := &broker.Run{ID: "r_00000000000000000000000000"}
	f.Fuzz(func(t *testing.T, action string, params []byte) {
		prop, err := p.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: action, Params: params})
		if err != nil {
			return
		}
		e := prop.Effect
		if e.Sink != policy.SinkBrowser || e.Action == browser.EffectSend || e.Action == browser.EffectPublish || !strings.HasPrefix(prop.Digest, "sha256:") {
			t.Fatalf("accepted %s %q as %+v", action, params, prop)
		}
		if strings.Contains(e.Target, "?") || strings.Contains(e.Path, "?") {
			t.Fatalf("a query reached the target: %+v", e)
		}
		if e.Action == browser.EffectNavigate && (e.Host == "" || e.Method != "GET") {
			t.Fatalf("a navigation without a host: %+v", e)
		}
	})
}
