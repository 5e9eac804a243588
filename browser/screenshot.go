package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// Screenshots as artifacts.
//
// A screenshot is two effects. The agent's screenshot action is decided
// first, like every action on a page (target: the page's host and path);
// it captures the page. Storing the PNG publishes content into the
// deployment's artifact store, so it is decided again, as what it is: an
// artifact publish, Effect{Sink: artifact, Action: publish, Target: key},
// with the PNG's size and digest, which did not exist when the screenshot
// action was decided. The deployment's artifact rules, the mandate and the
// scopes therefore hold for screenshots exactly as for an agent's own
// publish ({sink: artifact, target: "screenshots/**"} matches them), and
// the store happens only after that decision and its attempt are recorded.
// The attempt names the browser sink, which carries the publish out.
//
// Like a send, the publish is proposed by the pool in process (Decider),
// carrying the PNG in a context value under an unexported key; an agent
// cannot propose it (a "publish" to the browser sink is a bad request).

// ArtifactStore keeps blobs by name; the artifact sink's stores
// (*artifact.ObjectStore, *artifact.DirStore, *artifact.RedisStore) satisfy
// it. Put returns once the store holds data. Must be safe for concurrent
// use.
type ArtifactStore interface {
	Put(ctx context.Context, name, contentType string, data []byte) error
}

const (
	// EffectPublish is the store of a screenshot in the artifact store;
	// only the pool proposes it, decided as the artifact sink's publish.
	EffectPublish = "publish"
	// ScreenshotContentType is the content type screenshots are stored with.
	ScreenshotContentType = "image/png"
	// MaxScreenshotBytes bounds a stored screenshot (the artifact sink's
	// default limit).
	MaxScreenshotBytes = 16 << 20
)

// ScreenshotKey is the artifact key a screenshot of run with digest dg
// ("sha256:<hex>") is stored under: "screenshots/<run>/<hex>.png". The same
// picture taken twice in a run is stored once.
func ScreenshotKey(run, dg string) string {
	return "screenshots/" + run + "/" + strings.TrimPrefix(dg, "sha256:") + ".png"
}

// ScreenshotArtifact is the artifact a stored screenshot's reply names.
type ScreenshotArtifact struct {
	Key         string `json:"key"`
	Size        int64  `json:"size"`
	Digest      string `json:"digest"`
	ContentType string `json:"content_type"`
}

// screenshotReply is the screenshot action's reply when it is stored.
type screenshotReply struct {
	Artifact ScreenshotArtifact `json:"artifact"`
	// Publish is the id of the publish effect that stored it.
	Publish string `json:"publish_effect"`
}

// publishParams are the params of the pool's publish request; like
// sendParams they are informational, the effect comes from the context.
type publishParams struct {
	Key         string `json:"key"`
	Size        int64  `json:"size"`
	Digest      string `json:"digest"`
	ContentType string `json:"content_type"`
}

// stored is a screenshot being published, handed from the pool through the
// context to Describe and Perform.
type stored struct {
	run    string
	key    string // the artifact key
	name   string // the store name: the tenant's folder and key
	data   []byte
	digest string
}

type storeKey struct{}

// artifactName is the store name of a tenant's key: Config.ArtifactName,
// else a folder named by the tenant's digest.
func (p *Pool) artifactName(tenant, key string) string {
	if p.cfg.ArtifactName != nil {
		return p.cfg.ArtifactName(tenant, key)
	}
	return "~" + strings.TrimPrefix(digest([]byte(tenant)), "sha256:")[:32] + "/" + key
}

// storeScreenshot has the broker decide publishing png for run, and stores
// it when allowed. It fails with ErrNotStored, wrapped with the decision's
// refusal or the store's failure, when the PNG is not stored.
func (p *Pool) storeScreenshot(ctx context.Context, run *broker.Run, req *broker.EffectRequest, png []byte) (*broker.Performed, error) {
	d := p.boundDecider()
	if d == nil {
		return nil, ErrNotBound
	}
	if len(png) > MaxScreenshotBytes {
		return nil, fmt.Errorf("%w: the screenshot is %d bytes, the limit is %d", ErrTooLarge, len(png), MaxScreenshotBytes)
	}
	dg := digest(png)
	st := &stored{run: run.ID, key: ScreenshotKey(run.ID, dg), data: png, digest: dg}
	st.name = p.artifactName(run.For.Tenant, st.key)
	art := ScreenshotArtifact{Key: st.key, Size: int64(len(png)), Digest: dg, ContentType: ScreenshotContentType}
	params, _ := json.Marshal(publishParams{Key: art.Key, Size: art.Size, Digest: art.Digest, ContentType: art.ContentType})
	data, err := json.Marshal(broker.EffectRequest{Run: run.ID, Action: EffectPublish, Params: params})
	if err != nil {
		return nil, err
	}
	// The publish carries the origin the broker established for the
	// screenshot request (req.Origin is set by the broker, never the agent).
	r := d.Propose(context.WithValue(ctx, storeKey{}, st), broker.Internal(req.Origin), policy.SinkBrowser, data)
	switch {
	case r.Decision == nil && r.Error != nil:
		return nil, fmt.Errorf("%w: the publish was not decided: %s", ErrNotStored, r.Error.Code)
	case r.Decision == nil || r.Decision.Outcome != journal.OutcomeAllowed:
		why := "refused"
		if r.Decision != nil {
			why = fmt.Sprintf("%s (%s, rule %s)", r.Decision.Outcome, r.Decision.Refusal, r.Decision.Rule)
		}
		return nil, fmt.Errorf("%w: publishing %s was %s; a rule such as {sink: artifact, target: \"screenshots/**\"} allows it, or ask with {\"inline\": true}",
			ErrNotStored, art.Key, why)
	case r.Error != nil:
		return nil, fmt.Errorf("%w: the store failed: %s: %s", ErrNotStored, r.Error.Code, r.Error.Message)
	}
	b, err := json.Marshal(screenshotReply{Artifact: art, Publish: r.Effect})
	if err != nil {
		return nil, err
	}
	return &broker.Performed{
		Result: journal.Result{Status: "ok", Size: art.Size, Digest: dg,
			Detail: map[string]string{"artifact": art.Key, "publish_effect": r.Effect}},
		Reply: b,
	}, nil
}

// describeStore builds the publish effect of a screenshot the pool is
// storing.
func (p *Pool) describeStore(run *broker.Run, req *broker.EffectRequest, st *stored) (*broker.Proposal, error) {
	if st.run != run.ID || req.Action != EffectPublish {
		return nil, fmt.Errorf("%w: %q is the browser's own publish of a screenshot; an agent cannot propose it",
			broker.ErrBadRequest, clip(req.Action))
	}
	if err := broker.DecodeParams(req.Params, &publishParams{}); err != nil {
		return nil, err
	}
	e := policy.Effect{Sink: policy.SinkArtifact, Action: EffectPublish, Origin: req.Origin, Tool: req.Tool, Target: st.key}
	return &broker.Proposal{Effect: e, Size: int64(len(st.data)), Digest: st.digest, State: st}, nil
}

// perform stores the screenshot; the decision and attempt are recorded.
func (st *stored) perform(ctx context.Context, store ArtifactStore) (*broker.Performed, error) {
	if store == nil {
		return nil, ErrNoArtifactStore
	}
	if err := store.Put(ctx, st.name, ScreenshotContentType, st.data); err != nil {
		return nil, err
	}
	b, err := json.Marshal(ScreenshotArtifact{Key: st.key, Size: int64(len(st.data)), Digest: st.digest, ContentType: ScreenshotContentType})
	if err != nil {
		return nil, err
	}
	return &broker.Performed{
		Result: journal.Result{Status: "ok", Size: int64(len(st.data)), Digest: st.digest,
			Detail: map[string]string{"key": st.key, "content_type": ScreenshotContentType}},
		Reply: b,
	}, nil
}
