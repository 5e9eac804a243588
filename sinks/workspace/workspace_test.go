package workspace_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
	"github.com/gatehouse/gatehouse/sinks/workspace"
)

const secret = "s3cr3t-workspace-content-4b2d"

// rootOf is where a test's workspaces live.
func rootOf(env *sinktest.Env) string { return filepath.Join(env.Dir, "workspaces") }

func factory(cfg workspace.Config) sinktest.SinkFactory {
	return func(t testing.TB, env *sinktest.Env) []broker.Sink {
		cfg.Root = rootOf(env)
		s, err := workspace.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return []broker.Sink{s}
	}
}

// onHost reads a run's file straight from the host folder.
func onHost(t testing.TB, env *sinktest.Env, tenant, run, p string) ([]byte, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rootOf(env), workspace.TenantDir(tenant), run, filepath.FromSlash(p)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

func write(run, p string, content []byte) broker.EffectRequest {
	b, _ := json.Marshal(workspace.WriteParams{Path: p, Content: content})
	return broker.EffectRequest{Run: run, Action: workspace.ActionWrite, Origin: policy.OriginModel, Params: b}
}

func read(run, p string) broker.EffectRequest {
	b, _ := json.Marshal(workspace.ReadParams{Path: p})
	return broker.EffectRequest{Run: run, Action: workspace.ActionRead, Params: b}
}

// export builds an export; a nil content deletes.
func export(run string, files map[string][]byte) broker.EffectRequest {
	m := map[string]any{}
	for p, c := range files {
		if c == nil {
			m[p] = nil
		} else {
			m[p] = c
		}
	}
	b, _ := json.Marshal(map[string]any{"files": m})
	return broker.EffectRequest{Run: run, Action: workspace.ActionExport, Params: b}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func code(err error) broker.Code {
	var eb *broker.ErrorBody
	if errors.As(err, &eb) {
		return eb.Code
	}
	return ""
}

func TestConformance(t *testing.T) {
	t.Run("write", func(t *testing.T) {
		sinktest.Conformance(t, sinktest.Case{
			Sink:    policy.SinkWorkspace,
			Request: func(run string) broker.EffectRequest { return write(run, "notes/plan.md", []byte(secret)) },
			Deny:    `{sink: workspace, target: "notes/*"}`,
			Secret:  secret,
			Sinks:   factory(workspace.Config{}),
			Happened: func(t testing.TB, env *sinktest.Env, run string, _ *broker.EffectReply) bool {
				b, ok := onHost(t, env, "acme", run, "notes/plan.md")
				if ok && string(b) != secret {
					t.Fatalf("file holds %q", b)
				}
				return ok
			},
		})
	})
	t.Run("export", func(t *testing.T) {
		sinktest.Conformance(t, sinktest.Case{
			Sink: policy.SinkWorkspace,
			Request: func(run string) broker.EffectRequest {
				return export(run, map[string][]byte{"src/main.go": []byte("package main // " + secret), "README": []byte("hi")})
			},
			Deny:   `{sink: workspace, action: export}`,
			Secret: secret,
			Sinks:  factory(workspace.Config{}),
			Happened: func(t testing.TB, env *sinktest.Env, run string, _ *broker.EffectReply) bool {
				_, a := onHost(t, env, "acme", run, "src/main.go")
				_, b := onHost(t, env, "acme", run, "README")
				if a != b {
					t.Fatalf("half an export applied: %v %v", a, b)
				}
				return a
			},
		})
	})
}

func outcomes(t testing.TB, env *sinktest.Env, run string) ([]journal.Decision, []journal.Result) {
	t.Helper()
	var ds []journal.Decision
	var rs []journal.Result
	for _, ev := range env.Events(t, run) {
		switch ev.Type {
		case journal.TypeDecision:
			var d journal.Decision
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		case journal.TypeOutcome:
			var r journal.Result
			if err := json.Unmarshal(ev.Data, &r); err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
	}
	return ds, rs
}

func TestWriteThenRead(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", factory(workspace.Config{}))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	content := []byte("draft: " + secret)
	if _, err := env.Agent.Effect(ctx, policy.SinkWorkspace, write(run, "docs/draft.md", content)); err != nil {
		t.Fatal(err)
	}
	r, err := env.Agent.Effect(ctx, policy.SinkWorkspace, read(run, "docs/draft.md"))
	if err != nil {
		t.Fatal(err)
	}
	var fr workspace.FileReply
	if err := json.Unmarshal(r.Result, &fr); err != nil || string(fr.Content) != string(content) || fr.Digest != sha(content) {
		t.Fatalf("read reply %s: %v", r.Result, err)
	}
	fi, err := os.Stat(filepath.Join(rootOf(env), "acme", run, "docs", "draft.md"))
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("file mode %v %v, want 0640", fi.Mode(), err)
	}
	di, err := os.Stat(filepath.Join(rootOf(env), "acme", run, "docs"))
	if err != nil || di.Mode().Perm() != 0o750 {
		t.Fatalf("folder mode %v %v, want 0750", di.Mode(), err)
	}
	ds, rs := outcomes(t, env, run)
	if len(ds) != 2 || len(rs) != 2 {
		t.Fatalf("%d decisions, %d outcomes", len(ds), len(rs))
	}
	if ds[0].Action != "write" || ds[0].Target != "docs/draft.md" || ds[0].Digest != sha(content) || ds[0].Size != int64(len(content)) {
		t.Fatalf("write decision %+v", ds[0])
	}
	if ds[1].Action != "read" || ds[1].Target != "docs/draft.md" || ds[1].Digest != "" {
		t.Fatalf("read decision %+v", ds[1])
	}
	for i, o := range rs {
		if o.Status != "ok" || o.Digest != sha(content) || o.Detail["path"] != "docs/draft.md" {
			t.Fatalf("outcome %d: %+v", i, o)
		}
	}
	if rs[0].Detail["created"] != "true" {
		t.Fatalf("write outcome %+v", rs[0])
	}
	env.Verify(t)
	env.NoContent(t, secret)
}

func TestExportCounts(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", factory(workspace.Config{}))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	first := map[string][]byte{"a.txt": []byte("a"), "b.txt": []byte("b"), "c/c.txt": []byte("c")}
	r, err := env.Agent.Effect(ctx, policy.SinkWorkspace, export(run, first))
	if err != nil {
		t.Fatal(err)
	}
	var er workspace.ExportReply
	if err := json.Unmarshal(r.Result, &er); err != nil || er.Added != 3 || er.Files != 3 {
		t.Fatalf("first export: %s %v", r.Result, err)
	}
	second := map[string][]byte{
		"a.txt":   []byte("a"),  // unchanged
		"b.txt":   []byte("b2"), // changed
		"c/c.txt": nil,          // deleted
		"d.txt":   []byte(""),   // added, empty
		"e.txt":   nil,          // deleting nothing: unchanged
	}
	r, err = env.Agent.Effect(ctx, policy.SinkWorkspace, export(run, second))
	if err != nil {
		t.Fatal(err)
	}
	want := workspace.ExportReply{Files: 5, Added: 1, Changed: 1, Unchanged: 2, Deleted: 1,
		Digest: sha([]byte("a.txt\t" + sha([]byte("a")) + "\nb.txt\t" + sha([]byte("b2")) + "\nc/c.txt\tdeleted\nd.txt\t" + sha(nil) + "\ne.txt\tdeleted\n"))}
	if err := json.Unmarshal(r.Result, &er); err != nil || er != want {
		t.Fatalf("second export = %+v, want %+v (%v)", er, want, err)
	}
	if b, _ := onHost(t, env, "acme", run, "b.txt"); string(b) != "b2" {
		t.Fatalf("b.txt = %q", b)
	}
	if _, ok := onHost(t, env, "acme", run, "c/c.txt"); ok {
		t.Fatal("c/c.txt survived its deletion")
	}
	ds, rs := outcomes(t, env, run)
	if ds[1].Target != workspace.TargetExport || ds[1].Digest != want.Digest || ds[1].Size != 3 {
		t.Fatalf("export decision %+v", ds[1])
	}
	d := rs[1].Detail
	if d["files"] != "5" || d["added"] != "1" || d["changed"] != "1" || d["unchanged"] != "2" || d["deleted"] != "1" || rs[1].Digest != want.Digest {
		t.Fatalf("export outcome %+v", rs[1])
	}
	// No temporary file is left behind.
	_ = filepath.Walk(filepath.Join(rootOf(env), "acme", run), func(p string, _ os.FileInfo, _ error) error {
		if strings.Contains(filepath.Base(p), "~") {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
	env.Verify(t)
}

// TestExportWithDeletionIsDestructive: a mandate handing over writes only
// lets an export through unless it deletes.
func TestExportWithDeletionIsDestructive(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", factory(workspace.Config{}))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada", Mandate: &policy.Mandate{Effects: []policy.EffectClass{policy.EffectWrite}}})
	ctx := sinktest.Ctx(t)
	r, err := env.Agent.Effect(ctx, policy.SinkWorkspace, export(run, map[string][]byte{"a": []byte("1")}))
	if err != nil || r.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("export without deletions: %+v %v", r, err)
	}
	r, err = env.Agent.Effect(ctx, policy.SinkWorkspace, export(run, map[string][]byte{"a": nil}))
	if err != nil || r.Decision.Outcome != journal.OutcomeRefused || r.Decision.Refusal != policy.RefuseOutsideMandate {
		t.Fatalf("export deleting under a write mandate: %+v %v", r, err)
	}
	if _, ok := onHost(t, env, "acme", run, "a"); !ok {
		t.Fatal("a refused deletion happened")
	}
	r, err = env.Agent.Effect(ctx, policy.SinkWorkspace, read(run, "a"))
	if err != nil || r.Decision.Outcome != journal.OutcomeRefused {
		t.Fatalf("read under a write-only mandate: %+v %v", r, err)
	}
}

// TestIsolation: a run reaches only its own folder, whoever else uses the
// same path.
func TestIsolation(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", factory(workspace.Config{}))
	ctx := sinktest.Ctx(t)
	ada := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	if _, err := env.Agent.Effect(ctx, policy.SinkWorkspace, write(ada, "notes.txt", []byte("ada's"))); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]broker.OpenWork{
		"another person":          {Tenant: "acme", Person: "bob"},
		"another tenant":          {Tenant: "globex", Person: "ada"},
		"the same person, later":  {Tenant: "acme", Person: "ada"},
		"a tenant named to climb": {Tenant: "..", Person: "ada"},
	} {
		run := env.Open(t, w)
		r, err := env.Agent.Effect(ctx, policy.SinkWorkspace, read(run, "notes.txt"))
		if code(err) != broker.CodeEffectFailed || r.Outcome.Error != "not-found" {
			t.Errorf("%s read ada's file: %+v %v", name, r, err)
		}
		if _, err := env.Agent.Effect(ctx, policy.SinkWorkspace, write(run, "notes.txt", []byte(name))); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := onHost(t, env, "acme", ada, "notes.txt"); string(b) != "ada's" {
		t.Fatalf("ada's file is now %q", b)
	}
	// Tenant folders: the safe name as is, anything else hashed.
	entries, _ := os.ReadDir(rootOf(env))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"acme", "globex", workspace.TenantDir("..")}; !slices.Equal(names, want) {
		t.Fatalf("tenant folders %v", names)
	}
	if d := workspace.TenantDir(".."); !strings.HasPrefix(d, "~") || len(d) != 33 {
		t.Fatalf("TenantDir(\"..\") = %q", d)
	}
}

func TestAgentCannotChooseFolder(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", factory(workspace.Config{}))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	for _, req := range []broker.EffectRequest{
		{Run: run, Action: "write", Params: json.RawMessage(`{"path":"a","content":"eA==","tenant":"globex"}`)},
		{Run: run, Action: "write", Params: json.RawMessage(`{"path":"a","content":"eA==","run":"r_01jf0000000000000000000000"}`)},
		{Run: run, Action: "read", Params: json.RawMessage(`{"path":"a","root":"/"}`)},
		{Run: run, Action: "export", Params: json.RawMessage(`{"files":{},"person":"bob"}`)},
		{Run: run, Action: "export", Params: json.RawMessage(`{"files":{"a":5}}`)},
		{Run: run, Action: "chmod", Params: json.RawMessage(`{"path":"a"}`)},
	} {
		if _, err := env.Agent.Effect(ctx, policy.SinkWorkspace, req); code(err) != broker.CodeBadRequest {
			t.Errorf("%s %s: %v, want BAD_REQUEST", req.Action, req.Params, err)
		}
	}
}

var badPaths = []string{
	"", ".", "..", "../x", "../../etc/passwd", "a/../../b", "a/..", "/etc/passwd", "/tmp/x", "a//b", "a/", "./a",
	"a/./b", "a\\..\\b", "a b", "a\x00b", "ü", "a:b", "~tmp-0", "a/*", strings.Repeat("s", 256),
	strings.Repeat("a/", 512) + "b",
}

func TestPathTraversalRefused(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", factory(workspace.Config{}))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	for _, p := range badPaths {
		for _, req := range []broker.EffectRequest{
			write(run, p, []byte("x")), read(run, p),
			export(run, map[string][]byte{p: []byte("x")}), export(run, map[string][]byte{"ok.txt": []byte("x"), p: nil}),
		} {
			r, err := env.Agent.Effect(ctx, policy.SinkWorkspace, req)
			if code(err) != broker.CodeBadRequest || r.Decision != nil {
				t.Errorf("%s %q: %v, want BAD_REQUEST before any decision", req.Action, p, err)
			}
		}
	}
	// A file and a folder of one name in one export.
	if _, err := env.Agent.Effect(ctx, policy.SinkWorkspace, export(run, map[string][]byte{"a": []byte("1"), "a-b": nil, "a/b": []byte("2")})); code(err) != broker.CodeBadRequest {
		t.Errorf("file and folder of one name: %v", err)
	}
	// Nothing was written: not even the run's folder.
	var files []string
	_ = filepath.Walk(env.Dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !strings.HasPrefix(p, filepath.Join(env.Dir, "nats")) && !strings.HasPrefix(p, env.JournalDir) && p != env.Dir && p != rootOf(env) &&
			filepath.Base(p) != "rules.yaml" {
			files = append(files, p)
		}
		return nil
	})
	if len(files) > 0 {
		t.Fatalf("files appeared: %v", files)
	}
	if got := sinktest.Types(env.Events(t, run)); !slices.Equal(got, []journal.Type{journal.TypeRunOpen}) {
		t.Fatalf("journal = %v", got)
	}
}

// TestSymlinkEscape plants symbolic links in a run's folder, as code with
// host access could: writing, reading or exporting through them fails, and
// nothing outside changes.
func TestSymlinkEscape(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", factory(workspace.Config{}))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	if _, err := env.Agent.Effect(ctx, policy.SinkWorkspace, write(run, "keep.txt", []byte("k"))); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	target := filepath.Join(outside, "passwd")
	if err := os.WriteFile(target, []byte("root:x:0:0"), 0o600); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(rootOf(env), "acme", run)
	for link, to := range map[string]string{"evil": outside, "passwd": target, "rel": "../../../", "inner": "keep.txt"} {
		if err := os.Symlink(to, filepath.Join(runDir, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, req := range []broker.EffectRequest{
		write(run, "evil/new.txt", []byte("x")),
		write(run, "evil/sub/new.txt", []byte("x")),
		write(run, "passwd", []byte("pwned")),
		write(run, "rel/x", []byte("x")),
		read(run, "passwd"),
		read(run, "evil/passwd"),
		// A link inside the folder is not followed either.
		write(run, "inner", []byte("x")),
		read(run, "inner"),
		export(run, map[string][]byte{"fine.txt": []byte("x"), "evil/new.txt": []byte("x")}),
		export(run, map[string][]byte{"fine.txt": []byte("x"), "passwd": nil}),
		export(run, map[string][]byte{"evil/passwd": nil}),
	} {
		r, err := env.Agent.Effect(ctx, policy.SinkWorkspace, req)
		if code(err) != broker.CodeEffectFailed || r.Outcome == nil || r.Outcome.Error != "unsafe-path" {
			t.Errorf("%s %s: %+v %v, want an unsafe-path failure", req.Action, req.Params, r, err)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "root:x:0:0" {
		t.Fatalf("outside file: %q %v", b, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Fatalf("outside folder holds %v", entries)
	}
	if b, _ := onHost(t, env, "acme", run, "keep.txt"); string(b) != "k" {
		t.Fatalf("keep.txt written through a link: %q", b)
	}
	if _, ok := onHost(t, env, "acme", run, "fine.txt"); ok {
		t.Fatal("a failed export applied part of its batch")
	}
	if fi, err := os.Lstat(filepath.Join(runDir, "passwd")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the planted link was replaced: %v %v", fi, err)
	}
	env.Verify(t)
}

func TestSizeLimits(t *testing.T) {
	env := sinktest.Start(t, policy.ModeStrict, "", factory(workspace.Config{MaxFileBytes: 100, MaxExportBytes: 150, MaxExportFiles: 3, MaxReadBytes: 50}))
	run := env.Open(t, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(t)
	for name, req := range map[string]broker.EffectRequest{
		"file over MaxFileBytes":        write(run, "a", make([]byte, 101)),
		"export file over MaxFileBytes": export(run, map[string][]byte{"a": make([]byte, 101)}),
		"export over MaxExportBytes":    export(run, map[string][]byte{"a": make([]byte, 100), "b": make([]byte, 51)}),
		"export over MaxExportFiles":    export(run, map[string][]byte{"a": nil, "b": nil, "c": nil, "d": nil}),
	} {
		if _, err := env.Agent.Effect(ctx, policy.SinkWorkspace, req); code(err) != broker.CodeBadRequest {
			t.Errorf("%s: %v, want BAD_REQUEST", name, err)
		}
	}
	if _, err := env.Agent.Effect(ctx, policy.SinkWorkspace, write(run, "a", make([]byte, 100))); err != nil {
		t.Fatal(err)
	}
	if r, err := env.Agent.Effect(ctx, policy.SinkWorkspace, read(run, "a")); code(err) != broker.CodeEffectFailed || r.Outcome.Error != "too-large" {
		t.Fatalf("read over MaxReadBytes: %+v %v", r, err)
	}
}

// BenchmarkRoundTrip measures an agent's 1 KiB workspace write from request
// to reply over loopback NATS: decided, decision and attempt acknowledged
// by JetStream, written and synced on the host, outcome recorded, answered.
func BenchmarkRoundTrip(b *testing.B) {
	env := sinktest.Start(b, policy.ModeStrict, "", factory(workspace.Config{}))
	run := env.Open(b, broker.OpenWork{Tenant: "acme", Person: "ada"})
	ctx := sinktest.Ctx(b)
	req := write(run, "bench/1k.bin", make([]byte, 1024))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, err := env.Agent.Effect(ctx, policy.SinkWorkspace, req)
		lat = append(lat, time.Since(t0))
		if err != nil || r.Decision.Outcome != journal.OutcomeAllowed || !r.Decision.Recorded {
			b.Fatalf("%v %+v", err, r)
		}
	}
	b.StopTimer()
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
	}
}
