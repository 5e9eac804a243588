package peer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/subject"
	"github.com/gatehouse/gatehouse/policy"
)

// FuzzDescribe feeds agents' peer requests to Describe. A request is
// either refused as the agent's fault (BAD_REQUEST or FORBIDDEN_FIELD) or
// described as exactly one well-formed effect: a known action, a
// subject-safe recipient, valid JSON content within the limit and its true
// digest.
func FuzzDescribe(f *testing.F) {
	for _, s := range []struct{ action, params string }{
		{"send", `{"to":"bob","body":{"x":1}}`},
		{"delegate", `{"to":"worker","task":"audit INV-7"}`},
		{"broadcast", `{"body":[1,2,3]}`},
		{"delegate", `{"to":"worker","task":1,"tenant":"other"}`},
		{"send", `{"to":"a.b","body":1}`},
	} {
		f.Add(s.action, []byte(s.params))
	}
	s := &Sink{}
	s.opener.Store(&boundOpener{}) // Describe only asks whether a broker is bound
	run := &broker.Run{ID: broker.NewRunID(time.Unix(0, 0)), Agent: "planner"}
	f.Fuzz(func(t *testing.T, action string, params []byte) {
		req := &broker.EffectRequest{Run: run.ID, Action: action}
		if json.Valid(params) {
			req.Params = params
		}
		p, err := s.Describe(context.Background(), run, req)
		if err != nil {
			if !errors.Is(err, broker.ErrBadRequest) && !errors.Is(err, broker.ErrForbiddenField) {
				t.Fatalf("%q %q: error %v is neither BAD_REQUEST nor FORBIDDEN_FIELD", action, params, err)
			}
			return
		}
		st := p.State.(*state)
		e := p.Effect
		if e.Sink != policy.SinkPeer || e.Action != action || e.Class != policy.EffectNotify || e.Recipient != e.Target {
			t.Fatalf("effect %+v for %q", e, action)
		}
		switch action {
		case broker.PeerSend, broker.PeerDelegate:
			if !subject.ValidAgent(e.Recipient) || e.Recipient != st.to {
				t.Fatalf("recipient %q", e.Recipient)
			}
		case broker.PeerBroadcast:
			if e.Recipient != "*" || st.to != "" {
				t.Fatalf("broadcast recipient %q", e.Recipient)
			}
		default:
			t.Fatalf("action %q accepted", action)
		}
		if !json.Valid(st.content) || len(st.content) > MaxContentBytes || p.Size != int64(len(st.content)) {
			t.Fatalf("content %q", st.content)
		}
		sum := sha256.Sum256(st.content)
		if p.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Fatalf("digest %s", p.Digest)
		}
	})
}
