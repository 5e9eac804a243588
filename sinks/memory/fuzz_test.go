package memory

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

// validKV is what NATS accepts as a KV key.
var validKV = regexp.MustCompile(`^[-/_=\.a-zA-Z0-9]+$`)

// FuzzDescribe feeds arbitrary params (and principals) to Describe: it must
// never panic, and whatever it accepts must name a memory of the run's own
// tenant and person, under a valid NATS KV key.
func FuzzDescribe(f *testing.F) {
	for _, seed := range []struct {
		action         uint8
		tenant, person string
		params         string
	}{
		{0, "acme", "ada", `{"key":"prefs/lang","value":{"lang":"nl"},"kind":"preference","visibility":"private"}`},
		{0, "acme", "ada", `{"key":"office","value":"Utrecht","visibility":"shared"}`},
		{1, "acme", "ada", `{"key":"prefs/lang"}`},
		{2, "acme", "ada", `{"key":"prefs/lang","visibility":"shared"}`},
		{0, "acme", "ada", `{"key":"k","value":null}`},
		{1, "acme", "ada", `{"key":"../bob/diet","visibility":"private"}`},
		{1, "acme", "ada", `{"key":"k","person":"bob"}`},
		{0, "a.b", "c.d", `{"key":"a.*.>","value":1}`},
		{0, "acme", "ada", `{"key":"k","value":[1,2,{"a":"\u0000"}],"kind":""}`},
		{1, "acme", "ada", `{"key":"k","visibility":"public"}`},
	} {
		f.Add(seed.action, seed.tenant, seed.person, []byte(seed.params))
	}
	s := New(roomyStore{}, Config{MaxValueBytes: 4096})
	actions := []string{ActionPut, ActionGet, ActionDelete, "list"}
	f.Fuzz(func(t *testing.T, action uint8, tenant, person string, params []byte) {
		run := &broker.Run{ID: "r_01jf0000000000000000000000", For: policy.Principal{Tenant: tenant, Person: person}}
		req := &broker.EffectRequest{Run: run.ID, Action: actions[int(action)%len(actions)], Params: params}
		p, err := s.Describe(context.Background(), run, req)
		if err != nil {
			return
		}
		st := p.State.(*state)
		k := st.key
		if k.Tenant != tenant || (k.Person != "" && k.Person != person) || k.Name != st.name || CheckKey(k.Name) != nil {
			t.Fatalf("key %+v for tenant %q person %q", k, tenant, person)
		}
		if p.Effect.Target != string(k.Visibility())+"/"+k.Name {
			t.Fatalf("target %q for %+v", p.Effect.Target, k)
		}
		if kk := kvKey(k); !validKV.MatchString(kk) || strings.HasPrefix(kk, ".") || strings.HasSuffix(kk, ".") {
			t.Fatalf("KV key %q is not a valid NATS KV key", kk)
		}
		if req.Action == ActionPut {
			if !json.Valid(st.value) || string(st.value) == "null" || len(st.value) > 4096 || p.Digest != digest(st.value) || checkKind(st.kind) != nil || st.kind == "" {
				t.Fatalf("put of %q kind %q", st.value, st.kind)
			}
		}
	})
}

// roomyStore always has room: FuzzDescribe tests the parsing, not a store
// (the quota tests run the real ones).
type roomyStore struct{ Store }

func (roomyStore) Fit(context.Context, Key, []byte, int64) (Room, error) { return Room{}, nil }
