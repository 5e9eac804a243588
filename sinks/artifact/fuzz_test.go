package artifact

import (
	"context"
	"path"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

// FuzzDescribe feeds arbitrary params (and tenants) to Describe: it must
// never panic, and whatever it accepts must name a valid key, confined to
// the tenant's own folder of the store.
func FuzzDescribe(f *testing.F) {
	for _, seed := range []struct {
		publish bool
		tenant  string
		params  string
	}{
		{true, "acme", `{"key":"run1/exports/q1.csv","content":"aGVsbG8=","content_type":"text/csv"}`},
		{false, "acme", `{"key":"a/b/c.txt"}`},
		{true, "..", `{"key":"../../etc/passwd","content":"eA=="}`},
		{true, "acme", `{"key":"a","content":"eA==","tenant":"globex"}`},
		{false, "a b/c", `{"key":"/abs"}`},
		{true, "acme", `{"key":"a","content":"not base64!"}`},
		{true, "acme", `{"key":"a","content":null,"content_type":"text/plain; charset=utf-8"}`},
		{false, "acme", `null`},
		{false, "acme", `{"key":"a"} {"key":"b"}`},
	} {
		f.Add(seed.publish, seed.tenant, []byte(seed.params))
	}
	s := New(nil, Config{MaxBytes: 4096})
	f.Fuzz(func(t *testing.T, publish bool, tenant string, params []byte) {
		action := ActionGet
		if publish {
			action = ActionPublish
		}
		run := &broker.Run{ID: "r_01jf0000000000000000000000", For: policy.Principal{Tenant: tenant, Person: "ada"}}
		p, err := s.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: action, Params: params})
		if err != nil {
			return
		}
		st := p.State.(*state)
		if err := CheckKey(p.Effect.Target); err != nil || p.Effect.Target != st.key {
			t.Fatalf("accepted key %q: %v", p.Effect.Target, err)
		}
		dir := TenantDir(tenant)
		if strings.ContainsAny(dir, "/\\") || dir == "." || dir == ".." || dir == "" {
			t.Fatalf("tenant %q has folder %q", tenant, dir)
		}
		if st.name != dir+"/"+st.key || path.Clean(st.name) != st.name || !strings.HasPrefix(path.Clean("/"+st.name), "/"+dir+"/") {
			t.Fatalf("store name %q escapes the tenant folder %q", st.name, dir)
		}
		if publish && (p.Size != int64(len(st.content)) || p.Size > 4096 || p.Digest != digest(st.content)) {
			t.Fatalf("size %d digest %s for %d bytes", p.Size, p.Digest, len(st.content))
		}
		if !publish && p.Effect.Class != policy.EffectRead {
			t.Fatalf("get has class %q", p.Effect.Class)
		}
		if !publish { // a delete names what a get of the same params names
			d, err := s.Describe(context.Background(), run, &broker.EffectRequest{Run: run.ID, Action: ActionDelete, Params: params})
			if err != nil || d.State.(*state).name != st.name || d.Effect.Class != policy.EffectDestructive {
				t.Fatalf("delete of %q: %v", params, err)
			}
		}
	})
}
