package workspace

import (
	"context"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
)

// FuzzDescribe feeds arbitrary params (and tenants) to Describe: it must
// never panic, and every path it accepts must be local to the run's folder.
func FuzzDescribe(f *testing.F) {
	for _, seed := range []struct {
		action uint8
		tenant string
		params string
	}{
		{0, "acme", `{"path":"notes/plan.md","content":"aGVsbG8="}`},
		{1, "acme", `{"path":"src/main.go"}`},
		{2, "acme", `{"files":{"a.txt":"eA==","b/c.txt":null}}`},
		{2, "acme", `{"files":{"a":"eA==","a/b":"eA=="}}`},
		{0, "..", `{"path":"../../etc/passwd","content":"eA=="}`},
		{1, "acme", `{"path":"/etc/shadow"}`},
		{2, "acme", `{"files":{"../x":null}}`},
		{0, "acme", `{"path":"a","content":"eA==","tenant":"globex"}`},
		{2, "acme", `{"files":{"a":5}}`},
		{2, "acme", `{"files":null}`},
	} {
		f.Add(seed.action, seed.tenant, []byte(seed.params))
	}
	s := &Sink{cfg: Config{MaxFileBytes: 4096, MaxExportBytes: 8192, MaxExportFiles: 64, MaxReadBytes: 4096}}
	actions := []string{ActionWrite, ActionRead, ActionExport, "delete"}
	f.Fuzz(func(t *testing.T, action uint8, tenant string, params []byte) {
		run := &broker.Run{ID: "r_01jf0000000000000000000000", For: policy.Principal{Tenant: tenant, Person: "ada"}}
		req := &broker.EffectRequest{Run: run.ID, Action: actions[int(action)%len(actions)], Params: params}
		p, err := s.Describe(context.Background(), run, req)
		if err != nil {
			return
		}
		dir := RunDir(run)
		if path.Clean(dir) != dir || strings.Count(dir, "/") != 1 || strings.HasPrefix(dir, ".") {
			t.Fatalf("run folder %q", dir)
		}
		st := p.State.(*state)
		var total int64
		for _, c := range st.changes {
			local(t, c.path)
			total += int64(len(c.content))
		}
		if st.path != "" {
			local(t, st.path)
		}
		switch req.Action {
		case ActionExport:
			if p.Effect.Target != TargetExport || p.Size != total || p.Digest != batchDigest(st.changes) || total > 8192 {
				t.Fatalf("export proposal %+v (total %d)", p, total)
			}
		case ActionWrite:
			if p.Effect.Target != st.path || len(st.changes) != 1 || p.Digest != digest(st.changes[0].content) {
				t.Fatalf("write proposal %+v", p)
			}
		case ActionRead:
			if p.Effect.Target != st.path || p.Effect.Class != policy.EffectRead {
				t.Fatalf("read proposal %+v", p)
			}
		default:
			t.Fatalf("action %q accepted", req.Action)
		}
	})
}

func local(t *testing.T, p string) {
	t.Helper()
	if CheckPath(p) != nil || !filepath.IsLocal(p) || path.Clean(p) != p || strings.Contains(p, "~") {
		t.Fatalf("accepted path %q is not local to the run folder", p)
	}
}
