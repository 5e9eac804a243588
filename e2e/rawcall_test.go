package e2e

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

const module = "github.com/gatehouse/gatehouse"

// rawEffects are the calls that make an effect happen: run a process, write
// a file, open an outbound connection, publish a message, store a blob or a
// memory, run a sandbox. Names are types.Func.FullName().
var rawEffects = []string{
	// processes
	"os/exec.Command", "os/exec.CommandContext", "os.StartProcess", "syscall.Exec", "syscall.ForkExec", "syscall.StartProcess",
	// the sandbox's own entry points: only sinks may start programs
	"(*" + module + "/sandbox.Sandbox).Run", "(*" + module + "/sandbox.Sandbox).RunHost",
	// files
	"os.WriteFile", "os.Create", "os.OpenFile", "os.Rename", "os.Symlink", "os.Link", "os.Mkdir", "os.MkdirAll",
	"os.Remove", "os.RemoveAll", "os.CreateTemp", "os.MkdirTemp",
	"(*os.Root).Create", "(*os.Root).OpenFile", "(*os.Root).WriteFile", "(*os.Root).Mkdir", "(*os.Root).MkdirAll",
	"(*os.Root).Remove", "(*os.Root).RemoveAll", "(*os.Root).Rename", "(*os.Root).Symlink", "(*os.Root).Link",
	// outbound connections
	"net.Dial", "net.DialTimeout", "net.DialTCP", "net.DialUDP", "net.DialUnix", "net.DialIP",
	"(*net.Dialer).Dial", "(*net.Dialer).DialContext",
	"net/http.Get", "net/http.Post", "net/http.PostForm", "net/http.Head",
	"(*net/http.Client).Do", "(*net/http.Client).Get", "(*net/http.Client).Post", "(*net/http.Client).PostForm", "(*net/http.Client).Head",
	// messages, blobs and shared state on NATS
	"(*github.com/nats-io/nats.go.Conn).Publish", "(*github.com/nats-io/nats.go.Conn).PublishMsg",
	"(github.com/nats-io/nats.go/jetstream.Publisher).Publish", "(github.com/nats-io/nats.go/jetstream.Publisher).PublishMsg",
	"(github.com/nats-io/nats.go/jetstream.Publisher).PublishAsync", "(github.com/nats-io/nats.go/jetstream.Publisher).PublishMsgAsync",
	"(github.com/nats-io/nats.go/jetstream.KeyValue).Put", "(github.com/nats-io/nats.go/jetstream.KeyValue).PutString",
	"(github.com/nats-io/nats.go/jetstream.KeyValue).Create", "(github.com/nats-io/nats.go/jetstream.KeyValue).Update",
	"(github.com/nats-io/nats.go/jetstream.KeyValue).Delete", "(github.com/nats-io/nats.go/jetstream.KeyValue).Purge",
	"(github.com/nats-io/nats.go/jetstream.ObjectStore).Put", "(github.com/nats-io/nats.go/jetstream.ObjectStore).PutBytes",
	"(github.com/nats-io/nats.go/jetstream.ObjectStore).PutString", "(github.com/nats-io/nats.go/jetstream.ObjectStore).PutFile",
	"(github.com/nats-io/nats.go/jetstream.ObjectStore).Delete",
}

// rawPrefixes catch families by prefix: every write-ish Redis command.
var rawPrefixes = []string{
	"(github.com/redis/go-redis/v9.cmdable).Set", "(github.com/redis/go-redis/v9.cmdable).Del",
	"(github.com/redis/go-redis/v9.cmdable).HSet", "(github.com/redis/go-redis/v9.cmdable).Eval",
	"(github.com/redis/go-redis/v9.cmdable).Expire", "(github.com/redis/go-redis/v9.cmdable).Rename",
}

// runtimeOwnFuncs lists, by the function that makes them (as
// types.Func.FullName), raw calls that are the runtime's own and not an
// agent's effect, each with its reason.
var runtimeOwnFuncs = map[string]string{
	module + "/broker/embedded.NewSeed":                        "NATS credentials of Gatehouse's roles and of the identities 'gatehouse agents/apps' register, made on first start or on add and rotate",
	"(*" + module + "/broker/identity.Registry).Save":          "the identity register (identities.json), written by 'gatehouse agents' and 'gatehouse apps'",
	module + "/cmd/gatehouse.editRegistry":                     "the identity register's lock file, taken by 'gatehouse agents' and 'gatehouse apps'",
	module + "/cmd/gatehouse.cmdIdentities":                    "'gatehouse agents/apps remove' deleting the removed identity's credential",
	module + "/broker.ProbeReplies":                            "the broker's start-up probe that its replies connection may not publish outside inbox spaces: an empty message the server refuses",
	"(*" + module + "/broker.Recorder).publish":                "publishing journal events: the record itself",
	"(*" + module + "/broker.Recorder).RecordLater":            "publishing an effect's outcome event after its reply (pipelined): the record itself",
	"(*" + module + "/broker.KVRuns).Create":                   "the run registry: whom work is for, written when an application opens work",
	"(*" + module + "/broker.KVRuns).Close":                    "the run registry: an application closing work",
	module + "/cmd/gatehouse.writeEndpoints":                   "serve's endpoints file, so the CLI finds the server",
	module + "/cmd/gatehouse.newMCPToken":                      "a named agent's MCP bearer token file (DATA_DIR/mcp/tokens), the operator's own credential store",
	module + "/cmd/gatehouse.loadMCPTokens":                    "the MCP token folder serve reads (DATA_DIR/mcp/tokens)",
	"(*" + module + "/web.Users).save":                         "the dashboard's own user store (users.json), written by 'gatehouse users' and first-run setup",
	module + "/cmd/gatehouse.cmdServe":                         "serve creating its data directory and removing its endpoints file",
	module + "/cmd/gatehouse.secureDataDir":                    "serve creating its data directory 0700 and tightening what is in it, before anything is written there",
	"(*" + module + "/browser.proxy).dial":                     "the browser sink's forward proxy: dials only for requests the broker decided (or plain reads, never decided) and tunnels it allowed",
	module + "/broker.PutWriterHealth":                         "the journal writer announcing whether it can write, so strict brokers refuse on a full disk",
	module + "/cmd/gatehouse.cmdBench":                         "the load generator writing its own --acked report file",
	module + "/cmd/gatehouse.writeKeyPair":                     "'gatehouse keygen' removing the private key file it wrote when the public one cannot be written",
	module + "/cmd/gatehouse.writeNew":                         "'gatehouse keygen' writing the key files the operator asked for (never over an existing file)",
	"(*" + module + "/cmd/gatehouse.serveConfig).claimDataDir": "serve making its data dir (0700) and holding its lock file, so a second serve on it fails at once",
	module + "/cmd/gatehouse.signsCheckpoints":                 "'gatehouse checkpoint' asking the local serve's web address (GET /checkpoint/key) whether it signs checkpoints, to say how to get one",
	module + "/cmd/gatehouse.readUserFileInfo":                 "opening, read-only and without blocking, a key or checkpoint file the operator named (O_NONBLOCK makes the call os.OpenFile)",
	module + "/broker/identity.ReadOwnFile":                    "opening, read-only and without blocking, the policy or grounding file serve decides by (O_NONBLOCK makes the call os.OpenFile)",
	"(*" + module + "/broker.RequestIDs).claim":                "the request-id bucket: claiming an agent's request_id so it is decided at most once",
	"(*" + module + "/broker.requestClaim).recording":          "the request-id bucket: marking a claimed request as being recorded",
	"(*" + module + "/broker.requestClaim).settle":             "the request-id bucket: keeping a decided request's reply, or releasing its claim",
	"(*" + module + "/broker.Fence).say":                       "a broker's heartbeat to the other brokers (gatehouse.v1.ctl.brokers), so a run's close knows whom to wait for",
	"(*" + module + "/broker.Fence).answer":                    "a broker answering another's close (gatehouse.v1.ctl.quiesce) that its decisions for the run are recorded",
}

// runtimeOwnPackages lists whole packages whose raw calls are the
// runtime's own, each with its reason.
var runtimeOwnPackages = map[string]string{
	module + "/broker/journal":                "the journal writer: run files, head log and lock, the record itself",
	module + "/broker/content":                "the journal's content store: what decisions depended on, beside the record, and its erasure",
	module + "/broker/evidence":               "writing an evidence export (copies of journal files) where the operator asked",
	module + "/broker/witness":                "the checkpoint witness's own state files, and the HTTP client submitting checkpoints to witnesses",
	module + "/broker/approval":               "the approval store itself (JetStream KV): requests, decisions and claims are the broker's own state",
	module + "/broker/approval/approvalredis": "the approval store on Redis: the same state as broker/approval, for deployments on Redis",
	module + "/web/sessionkv":                 "the dashboard's own sign-in state (sessions, failure counts, TOTP replay guard) in JetStream KV",
	module + "/web/sessionredis":              "the dashboard's own sign-in state on Redis, for deployments on Redis",
	module + "/sandbox":                       "the sandbox's own mechanism (helper re-exec, cgroups, workspaces, self-test); its Run and RunHost are raw effects only sinks may call",
	module + "/e2e/deptest":                   "a test helper that runs go list for the dependency tests; imported by tests only",
	module + "/sinks/sinktest":                "the test harness (starts redis-server, writes rules files); imported by tests only",
	module + "/e2e/cluster":                   "the test harness for the scaled-out shape (builds and starts nats-server nodes); imported by tests only",
	module + "/broker/content/contenttest":    "the content store's test harness (edits blobs to test tamper detection); imported by tests only",
	module + "/broker/journal/crashfs":        "a recording filesystem for the journal's power-cut tests; imported by tests only",
}

// TestNoRawEffectOutsideASink walks the module's Go code, type-checked, and
// fails on any raw effect call that is neither inside a sink package (where
// Perform runs only after a recorded decision) nor the runtime's own.
// Adding a raw call anywhere else fails this test until it is classified.
// The sinktest harness is a package, not a _test file, so it is listed too.
func TestNoRawEffectOutsideASink(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module")
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo, Dir: ".."}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	var bad []string
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("load %s: %v", p.PkgPath, e)
		}
		if !strings.HasPrefix(p.PkgPath, module) {
			continue
		}
		for i, f := range p.Syntax {
			file := p.CompiledGoFiles[i]
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			for _, call := range rawCalls(p.TypesInfo, f) {
				if inSink(p.PkgPath) {
					continue
				}
				where := call.fn
				if _, ok := runtimeOwnPackages[p.PkgPath]; ok {
					used[p.PkgPath] = true
					continue
				}
				if _, ok := runtimeOwnFuncs[where]; ok {
					used[where] = true
					continue
				}
				pos := p.Fset.Position(call.pos)
				bad = append(bad, fmt.Sprintf("%s:%d: %s calls %s", filepath.Base(pos.Filename), pos.Line, where, call.callee))
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("raw effects outside a sink's decided path; move them into a sink, or add the function to runtimeOwnFuncs with the reason it is the runtime's own:\n  %s", strings.Join(bad, "\n  "))
	}
	for _, m := range []map[string]string{runtimeOwnFuncs, runtimeOwnPackages} {
		for key := range m {
			if !used[key] {
				t.Errorf("the runtime's own list names %q, which makes no raw call any more: remove it", key)
			}
		}
	}
}

// inSink reports whether pkg is one of the sinks, whose effects happen in
// Perform after the broker recorded the decision. The test harness is not.
func inSink(pkg string) bool {
	rest, ok := strings.CutPrefix(pkg, module+"/sinks/")
	return ok && rest != "sinktest" && !strings.HasPrefix(rest, "sinktest/")
}

type rawCall struct {
	fn, callee string
	pos        token.Pos
}

// rawCalls returns the raw effect calls in f, each with the function that
// makes it (a closure counts as its enclosing function).
func rawCalls(info *types.Info, f *ast.File) []rawCall {
	var out []rawCall
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		obj, _ := info.Defs[fd.Name].(*types.Func)
		if obj == nil {
			continue
		}
		fn := obj.FullName()
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var id *ast.Ident
			switch fun := ast.Unparen(call.Fun).(type) {
			case *ast.Ident:
				id = fun
			case *ast.SelectorExpr:
				id = fun.Sel
			default:
				return true
			}
			callee, ok := info.Uses[id].(*types.Func)
			if !ok {
				return true
			}
			name := callee.Origin().FullName()
			if isRaw(name) {
				out = append(out, rawCall{fn: fn, callee: name, pos: call.Pos()})
			}
			return true
		})
	}
	return out
}

func isRaw(name string) bool {
	if slices.Contains(rawEffects, name) {
		return true
	}
	for _, p := range rawPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
