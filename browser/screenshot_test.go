package browser_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/browser"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/artifact"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// screenshotReply is the screenshot action's reply when it is stored.
type screenshotReply struct {
	Artifact struct {
		Key, Digest string
		ContentType string `json:"content_type"`
		Size        int64
	}
	Publish string `json:"publish_effect"`
}

// TestScreenshotArtifact: a screenshot is stored in the artifact store (a
// folder here) under screenshots/<run>/<hex>.png in the tenant's folder,
// after a publish decision of its own that records the PNG's size and
// digest; the reply names the artifact, never carries the PNG.
func TestScreenshotArtifact(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	run := openRun(t, env)
	do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/form.html")})
	r := do(t, env, run, browser.ActionScreenshot, nil)
	if strings.Contains(string(r.Result), "png_base64") {
		t.Fatalf("a stored screenshot's reply carries the PNG: %.200s", r.Result)
	}
	var rep screenshotReply
	if err := json.Unmarshal(r.Result, &rep); err != nil {
		t.Fatal(err)
	}
	a := rep.Artifact
	if !strings.HasPrefix(a.Key, "screenshots/"+run+"/") || !strings.HasSuffix(a.Key, ".png") || a.ContentType != "image/png" ||
		a.Size == 0 || !strings.HasPrefix(a.Digest, "sha256:") || rep.Publish == "" {
		t.Fatalf("screenshot reply = %s", r.Result)
	}

	// The artifact exists, in the tenant's folder, with the digest.
	data, ct, err := artifacts.Get(context.Background(), "acme/"+a.Key, 64<<20)
	if err != nil {
		t.Fatalf("the screenshot is not in the store: %v", err)
	}
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != a.Digest || int64(len(data)) != a.Size || ct != "image/png" ||
		!strings.HasPrefix(string(data), "\x89PNG") {
		t.Fatalf("stored %d bytes (%s) with digest %s, the reply says %d bytes with %s", len(data), ct, got, a.Size, a.Digest)
	}
	if r.Outcome.Digest != a.Digest || r.Outcome.Detail["artifact"] != a.Key || r.Outcome.Detail["publish_effect"] != rep.Publish {
		t.Fatalf("screenshot outcome = %+v", r.Outcome)
	}

	// Two decisions: the screenshot on the page, then the publish, decided
	// as the artifact sink's, with the PNG's size and digest.
	shots := decisions(t, env, run, browser.ActionScreenshot)
	pubs := decisions(t, env, run, browser.EffectPublish)
	if len(shots) != 1 || shots[0].Sink != policy.SinkBrowser || shots[0].Host != hostOf(siteA) {
		t.Fatalf("screenshot decisions = %+v", shots)
	}
	if len(pubs) != 1 || pubs[0].Effect != rep.Publish || pubs[0].Sink != policy.SinkArtifact || pubs[0].Target != a.Key ||
		pubs[0].Size != a.Size || pubs[0].Digest != a.Digest || pubs[0].Outcome != journal.OutcomeAllowed {
		t.Fatalf("publish decisions = %+v", pubs)
	}
	var types []journal.Type
	for _, ev := range env.Events(t, run) {
		if ev.Effect == rep.Publish {
			types = append(types, ev.Type)
		}
	}
	if len(types) != 3 || types[0] != journal.TypeDecision || types[1] != journal.TypeAttempt || types[2] != journal.TypeOutcome {
		t.Fatalf("the publish's events = %v, want decision, attempt, outcome", types)
	}
	env.Verify(t)
}

// TestScreenshotArtifactRefused: the artifact rules hold for screenshots. A
// rule refusing artifact publishes refuses storing one: nothing is stored,
// the refusal is recorded, and the screenshot action fails saying why.
// Inline, nothing is published and the PNG comes back in the reply.
func TestScreenshotArtifactRefused(t *testing.T) {
	deny := "effects:\n  - name: no-screenshots\n    decision: deny\n    match: {sink: artifact, target: \"screenshots/**\"}\n"
	env := start(t, policy.ModeStrict, deny)
	run := openRun(t, env)
	do(t, env, run, browser.ActionGoto, map[string]any{"url": pageURL("/form.html")})
	r := try(t, env, run, browser.ActionScreenshot, nil)
	if r.Error == nil || r.Error.Code != broker.CodeEffectFailed || r.Outcome == nil || r.Outcome.Error != "screenshot-not-stored" ||
		!strings.Contains(r.Error.Message, "no-screenshots") {
		t.Fatalf("a refused screenshot store: %+v (error %+v)", r, r.Error)
	}
	pubs := decisions(t, env, run, browser.EffectPublish)
	if len(pubs) != 1 || pubs[0].Outcome != journal.OutcomeRefused || pubs[0].Rule != "no-screenshots" || !strings.HasPrefix(pubs[0].Digest, "sha256:") {
		t.Fatalf("publish decisions = %+v", pubs)
	}
	if _, _, err := artifacts.Get(context.Background(), "acme/"+pubs[0].Target, 64<<20); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("a refused screenshot is in the store: %v", err)
	}

	r = do(t, env, run, browser.ActionScreenshot, map[string]any{"inline": true})
	var s struct {
		PNG    []byte `json:"png_base64"`
		Digest string
	}
	if err := json.Unmarshal(r.Result, &s); err != nil || !strings.HasPrefix(string(s.PNG), "\x89PNG") || s.Digest != r.Outcome.Digest {
		t.Fatalf("inline screenshot: %v %.100s", err, r.Result)
	}
	if got := decisions(t, env, run, browser.EffectPublish); len(got) != 1 {
		t.Fatalf("an inline screenshot was published: %+v", got)
	}
	env.Verify(t)
}

// TestScreenshotNoStore: a pool without an artifact store answers a stored
// screenshot UNAVAILABLE before anything is decided; an agent cannot
// propose the browser's publish itself.
func TestScreenshotNoStore(t *testing.T) {
	env := start(t, policy.ModeStrict, "")
	run := openRun(t, env)
	r := try(t, env, run, browser.EffectPublish, map[string]any{"key": "screenshots/x.png", "size": 1, "digest": "sha256:00", "content_type": "image/png"})
	if r.Error == nil || r.Error.Code != broker.CodeBadRequest || r.Decision != nil {
		t.Fatalf("an agent's publish: %+v", r)
	}

	p := browser.New(browser.Config{ExecutablePath: "/nonexistent/chromium"})
	t.Cleanup(func() { _ = p.Close() })
	env2 := sinktest.Start(t, policy.ModeStrict, "", func(testing.TB, *sinktest.Env) []broker.Sink { return []broker.Sink{p} })
	p.Bind(env2.Broker)
	run2 := env2.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	r = try(t, env2, run2, browser.ActionScreenshot, nil)
	if r.Error == nil || r.Error.Code != broker.CodeUnavailable || r.Decision != nil || !strings.Contains(r.Error.Message, `"inline": true`) {
		t.Fatalf("a stored screenshot without a store: %+v (error %+v)", r, r.Error)
	}
	env.Verify(t)
	env2.Verify(t)
}
