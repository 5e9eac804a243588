package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/sandbox"
)

// attackScript is what an agent whose host command (or unconfined code) a
// rule let through tries against the broker: read every file of DATA_DIR
// and a signing key outside it, plant files in DATA_DIR and change or
// remove its keys, signal and ptrace serve, read serve's environment and
// command line, and list the host's processes. It reads its targets as
// JSON on stdin and prints what it got as JSON.
const attackScript = `
import ctypes, hashlib, json, os, signal, sys
cfg = json.load(sys.stdin)
out = {"read": {}, "changed": [], "planted": [], "signalled": [], "uid": os.getuid(), "groups": os.getgroups()}
for p in cfg["files"]:
    try:
        out["read"][p] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    except OSError as e:
        pass
for p in cfg["keys"]:
    for what, act in (("append", lambda: open(p, "ab").write(b"x")), ("chmod", lambda: os.chmod(p, 0o644)),
                      ("rename", lambda: os.rename(p, p + ".moved")), ("remove", lambda: os.remove(p))):
        try:
            act()
            out["changed"].append(what + " " + p)
        except OSError:
            pass
for d in cfg["dirs"]:
    try:
        open(os.path.join(d, "planted-by-agent"), "w").write("x")
        out["planted"].append(d)
    except OSError:
        pass
    try:
        os.mkdir(os.path.join(d, "planted-dir-by-agent"))
        out["planted"].append(d + "/")
    except OSError:
        pass
pid = cfg["serve"]
for sig in (0, signal.SIGCONT):
    try:
        os.kill(pid, sig)
        out["signalled"].append(int(sig))
    except OSError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
out["ptrace"] = libc.ptrace(ctypes.c_long(0x4206), ctypes.c_long(pid), None, None)  # PTRACE_SEIZE
for f in ("environ", "cmdline", "status"):
    try:
        out[f] = open("/proc/%d/%s" % (pid, f), "rb").read().decode(errors="replace")
    except OSError:
        out[f] = None
try:
    procs = [p for p in os.listdir("/proc") if p.isdigit()]
except OSError:
    procs = []
out["procs"] = len(procs)
out["cmdlines"] = []
for p in procs:
    try:
        out["cmdlines"].append(open("/proc/%s/cmdline" % p, "rb").read().decode(errors="replace"))
    except OSError:
        pass
print(json.dumps(out))
`

// attackResult is what attackScript printed.
type attackResult struct {
	Read      map[string]string `json:"read"`
	Changed   []string          `json:"changed"`
	Planted   []string          `json:"planted"`
	Signalled []int             `json:"signalled"`
	UID       int               `json:"uid"`
	Groups    []int             `json:"groups"`
	Ptrace    int               `json:"ptrace"`
	Environ   *string           `json:"environ"`
	Cmdline   *string           `json:"cmdline"`
	Status    *string           `json:"status"`
	Procs     int               `json:"procs"`
	Cmdlines  []string          `json:"cmdlines"`
}

// secrets is every file an attack tries, with its digest and mode as
// root sees them before the attack.
type secrets struct {
	dataDir string
	files   map[string]string      // path: sha256
	modes   map[string]fs.FileMode // path: mode
	dirs    []string
	keys    []string // files the attack also tries to change
}

func collectSecrets(t *testing.T, dataDir string, outside ...string) *secrets {
	t.Helper()
	s := &secrets{dataDir: dataDir, files: map[string]string{}, modes: map[string]fs.FileMode{}}
	add := func(p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		s.files[p] = hex.EncodeToString(sum[:])
		fi, _ := os.Stat(p)
		s.modes[p] = fi.Mode()
	}
	err := filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			s.dirs = append(s.dirs, p)
		case d.Type().IsRegular():
			add(p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range outside {
		add(p)
	}
	for p := range s.files {
		if strings.HasSuffix(p, ".nk") || strings.HasSuffix(p, ".key") || strings.HasSuffix(p, "users.json") {
			s.keys = append(s.keys, p)
		}
	}
	return s
}

// input is attackScript's stdin.
func (s *secrets) input(servePID int) string {
	files := make([]string, 0, len(s.files))
	for p := range s.files {
		files = append(files, p)
	}
	b, _ := json.Marshal(map[string]any{"files": files, "keys": s.keys, "dirs": s.dirs, "serve": servePID})
	return string(b)
}

// check asserts that the attack got nothing and changed nothing: from what
// it printed and from the files themselves.
func (s *secrets) check(t *testing.T, got attackResult, servePID int, serveMarker string) {
	t.Helper()
	for p, sum := range got.Read {
		t.Errorf("the agent read %s (sha256 %s, the file's %s)", p, sum, s.files[p])
	}
	if len(got.Changed) > 0 || len(got.Planted) > 0 || len(got.Signalled) > 0 || got.Ptrace == 0 {
		t.Errorf("the agent changed %v, planted in %v, signalled serve with %v, ptrace %d", got.Changed, got.Planted, got.Signalled, got.Ptrace)
	}
	if got.Environ != nil || got.Cmdline != nil {
		t.Errorf("the agent read serve's /proc entries: environ %v cmdline %v", got.Environ != nil, got.Cmdline != nil)
	}
	for _, c := range got.Cmdlines {
		if strings.Contains(c, "import ctypes, hashlib") {
			continue // the attack itself (bwrap's pid 1 repeats its command line)
		}
		if strings.Contains(c, "serve") || strings.Contains(c, serveMarker) {
			t.Errorf("the agent saw a host process: %q", c)
		}
	}
	if got.Procs > 3 {
		t.Errorf("the agent listed %d processes", got.Procs)
	}
	for p, sum := range s.files {
		b, err := os.ReadFile(p)
		fi, serr := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) && strings.Contains(p, string(filepath.Separator)+filepath.Join("journal", "wal")+string(filepath.Separator)) {
			continue // the writer drops its log's applied segments itself
		}
		if err != nil || serr != nil {
			t.Errorf("%s: %v %v", p, err, serr)
			continue
		}
		now := sha256.Sum256(b)
		if slicesContain(s.keys, p) && hex.EncodeToString(now[:]) != sum || fi.Mode() != s.modes[p] {
			t.Errorf("%s changed (mode %v, was %v)", p, fi.Mode(), s.modes[p])
		}
	}
	filepath.WalkDir(s.dataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (strings.Contains(d.Name(), "by-agent") || strings.HasSuffix(d.Name(), ".moved")) {
			t.Errorf("the agent left %s", p)
		}
		return nil
	})
	if err := syscall.Kill(servePID, 0); err != nil {
		t.Errorf("serve is gone: %v", err)
	}
}

func slicesContain(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hostRules let host commands and code through in strict mode, as a
// deployment that accepts unconfined execution writes.
const hostRules = `
effects:
  - name: host-python
    decision: allow
    match: {sink: process}
  - name: code-anywhere
    decision: allow
    match: {sink: code}
`

func writeRules(t *testing.T, rules string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// attack runs attackScript through sink (process, or code) as the shared
// agent, and returns what it printed and the reply.
func attack(t *testing.T, data, run, sink, stdin string) (attackResult, broker.EffectReply) {
	t.Helper()
	var params []byte
	if sink == "process" {
		params, _ = json.Marshal(map[string]any{"argv": []string{"python3", "-c", attackScript}, "stdin": stdin})
	} else {
		params, _ = json.Marshal(map[string]any{"program": "python3", "source": attackScript, "stdin": stdin})
	}
	action := map[string]string{"process": "exec", "code": "run"}[sink]
	r := gh(t, "effect", sink, "--data-dir", data, "--run", run, "--action", action, "--params", string(params), "--json")
	var reply broker.EffectReply
	if err := json.Unmarshal([]byte(r.stdout), &reply); err != nil {
		t.Fatalf("%s: %v\n%s%s", sink, err, r.stdout, r.stderr)
	}
	var out struct{ Stdout, Stderr string }
	json.Unmarshal(reply.Result, &out)
	var got attackResult
	if err := json.Unmarshal([]byte(out.Stdout), &got); err != nil || reply.Decision == nil || reply.Decision.Outcome != journal.OutcomeAllowed {
		t.Fatalf("%s: exit %d %v %+v\n%s\n%s", sink, r.code, err, reply.Decision, r.stdout, out.Stderr)
	}
	return got, reply
}

// waitJournal waits until the run's journal file holds n events.
func waitJournal(t *testing.T, data, run string, n int) []journal.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(data, "journal", "runs", run+".jsonl"))
		var evs []journal.Event
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var ev journal.Event
			if json.Unmarshal(line, &ev) == nil {
				evs = append(evs, ev)
			}
		}
		if len(evs) >= n {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s has %d events, want %d", run, len(evs), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outcomeDetail is the detail of the last effect.outcome of the run.
func outcomeDetail(t *testing.T, evs []journal.Event) map[string]string {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == journal.TypeOutcome {
			var r journal.Result
			json.Unmarshal(evs[i].Data, &r)
			return r.Detail
		}
	}
	t.Fatal("no outcome in the run")
	return nil
}

// TestAllowedHostCommandsCannotReachGatehouse runs serve in strict mode with
// rules that let host commands and code through, as root, the way an
// operator who accepts unconfined execution would, and lets an agent's
// command and code try every secret of DATA_DIR (each NATS credential seed,
// a signing key made by gatehouse keygen, the users file, the journal, the
// content blobs, the NATS store), a signing key kept outside DATA_DIR,
// writes into DATA_DIR, signals and ptrace of serve, and serve's /proc
// entries: through the process sink, through code in the default (confined)
// tier, and through code under --sandbox-tiers landlock and unconfined.
func TestAllowedHostCommandsCannotReachGatehouse(t *testing.T) {
	outsideDir, err := os.MkdirTemp("", "gatehouse-keys-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outsideDir) })
	os.Chmod(outsideDir, 0o755) // only the key file's own mode keeps it private
	outsideKey := filepath.Join(outsideDir, "witness.key")
	if r := gh(t, "keygen", "--out", outsideKey); r.code != 0 {
		t.Fatalf("keygen: %s", r.stderr)
	}
	marker := "confine-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("CONFINE_TEST_SECRET", marker) // in serve's environment

	for _, tc := range []struct {
		name  string
		args  []string
		sinks []string
	}{
		{"default", nil, []string{"process", "code"}},
		{"landlock", []string{"--sandbox-tiers", "landlock"}, []string{"code"}},
		{"unconfined", []string{"--sandbox-tiers", "unconfined"}, []string{"code"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			// A DATA_DIR left open by hand: serve tightens it before writing anything.
			os.MkdirAll(filepath.Join(data, "old"), 0o755)
			os.Chmod(data, 0o755)
			os.WriteFile(filepath.Join(data, "old", "notes.txt"), []byte("left open"), 0o644)
			key := filepath.Join(data, "signing.key")
			if r := gh(t, "keygen", "--out", key); r.code != 0 {
				t.Fatalf("keygen: %s", r.stderr)
			}
			os.Chmod(key, 0o644)
			if r := ghIn(t, "correct horse battery\n", "users", "add", "admin", "--role", "admin", "--password-stdin", "--data-dir", data); r.code != 0 {
				t.Fatalf("users add: %s", r.stderr)
			}
			if r := gh(t, "users", "totp", "admin", "--data-dir", data, "--json"); r.code != 0 { // a TOTP secret in the users file
				t.Fatalf("users totp: %s", r.stderr)
			}
			args := append([]string{"--mode", "strict", "--policy", writeRules(t, hostRules), "--signing-key-file", key, "--agents", "bob"}, tc.args...)
			s := serve(t, data, args...)
			if !strings.Contains(s.out.String(), "DATA_DIR WAS READABLE BY OTHER USERS") {
				t.Errorf("serve did not say it tightened DATA_DIR:\n%s", s.out)
			}
			for p, want := range map[string]fs.FileMode{data: 0o700 | fs.ModeDir, filepath.Join(data, "old"): 0o700 | fs.ModeDir,
				filepath.Join(data, "old", "notes.txt"): 0o600, key: 0o600} {
				if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
					t.Errorf("%s: %v %v, want %v", p, fi.Mode(), err, want)
				}
			}
			run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
			// Journal and content on disk before the attack.
			if r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--result", `{"rows":3}`); r.code != 0 {
				t.Fatalf("output: %s%s", r.stdout, r.stderr)
			}
			waitJournal(t, data, run, 4)
			sec := collectSecrets(t, data, outsideKey)
			need := map[string]bool{"nats/creds/": false, "nats/creds/agent-bob.nk": false, "signing.key": false, "users.json": false, "journal/runs/": false, "journal/head": false, "content/": false}
			for p := range sec.files {
				for k := range need {
					need[k] = need[k] || strings.Contains(p, "/"+k) || strings.HasSuffix(p, "/"+k)
				}
			}
			for k, ok := range need {
				if !ok {
					t.Fatalf("no %s in DATA_DIR to try: %v", k, sec.files)
				}
			}
			pid := s.cmd.Process.Pid
			n := 4
			for _, sink := range tc.sinks {
				got, reply := attack(t, data, run, sink, sec.input(pid))
				t.Logf("%s: uid %d, %d processes, %d files tried", sink, got.UID, got.Procs, len(sec.files))
				sec.check(t, got, pid, marker)
				n += 3
				detail := outcomeDetail(t, waitJournal(t, data, run, n))
				if sink == "process" || tc.name == "unconfined" {
					uid, _ := strconv.Atoi(detail["uid"])
					if got.UID != uid || uid < sandbox.DefaultFirstUID || uid >= sandbox.DefaultFirstUID+sandbox.DefaultUIDCount ||
						len(got.Groups) != 0 || detail["separate_uid"] != "true" {
						t.Errorf("%s ran as uid %d groups %v; outcome detail %v", sink, got.UID, got.Groups, detail)
					}
				}
				if (sink == "process" || tc.name == "unconfined") && reply.Decision.AllowedBy == "" {
					t.Errorf("%s was not let through by the rule: %+v", sink, reply.Decision)
				}
			}
			s.stop(t)
			if v := gh(t, "verify", filepath.Join(data, "journal")); v.code != 0 {
				t.Fatalf("verify: %s", v.stdout)
			}
		})
	}
}

// TestHostCommandsWhenServeIsNotRoot runs serve as an unprivileged uid,
// which cannot switch uids: in strict mode host commands and unconfined
// code are answered UNAVAILABLE and nothing is decided, recorded or run,
// while code in a confined tier still runs (as serve's uid, with DATA_DIR
// out of its view); in report mode host commands run as serve's uid and
// their outcomes say so.
func TestHostCommandsWhenServeIsNotRoot(t *testing.T) {
	const uid = 64902 // no other test runs as it
	dir, err := os.MkdirTemp("", "gatehouse-notroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir); os.RemoveAll("/tmp/gatehouse-sandbox-" + strconv.Itoa(uid)) })
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "gatehouse")
	b, err := os.ReadFile(bin)
	if err != nil || os.WriteFile(exe, b, 0o755) != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte(hostRules), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	os.Mkdir(data, 0o700)
	os.Chown(data, uid, uid)
	asUser := func(cmd *exec.Cmd) {
		cmd.Path = exe
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	}

	s := serveWith(t, data, asUser, "--mode", "strict", "--policy", rules)
	if !strings.Contains(s.out.String(), "host commands and unconfined code are refused (UNAVAILABLE)") {
		t.Errorf("serve did not warn:\n%s", s.out)
	}
	run := strings.TrimSpace(gh(t, "work", "open", "--data-dir", data, "--tenant", "acme", "--person", "ada").stdout)
	ran := filepath.Join(dir, "ran")
	os.Chmod(dir, 0o777)
	r := gh(t, "effect", "process", "--data-dir", data, "--run", run, "--action", "exec", "--json",
		"--params", `{"argv":["touch","`+ran+`"]}`)
	var reply broker.EffectReply
	json.Unmarshal([]byte(r.stdout), &reply)
	if r.code != 1 || reply.Decision != nil || reply.Error == nil || reply.Error.Code != broker.CodeUnavailable || !strings.Contains(reply.Error.Message, "serve as root") {
		t.Fatalf("a host command under a serve that is not root: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the host command ran")
	}
	// Code in a confined tier runs as serve's own uid and still reaches none of DATA_DIR.
	if r := gh(t, "effect", "output", "--data-dir", data, "--run", run, "--result", "1"); r.code != 0 {
		t.Fatalf("output: %s", r.stdout)
	}
	evs := waitJournal(t, data, run, 4)
	for _, ev := range evs {
		if ev.Type == journal.TypeDecision && strings.Contains(string(ev.Data), `"process"`) {
			t.Fatalf("the refused host command was decided: %s", ev.Data)
		}
	}
	sec := collectSecrets(t, data)
	got, _ := attack(t, data, run, "code", sec.input(s.cmd.Process.Pid))
	sec.check(t, got, s.cmd.Process.Pid, "serve")
	if d := outcomeDetail(t, waitJournal(t, data, run, 7)); d["confined"] != "true" || d["uid"] != strconv.Itoa(uid) || d["separate_uid"] != "false" {
		t.Fatalf("confined code under a serve that is not root: %v", d)
	}
	s.stop(t)

	// Unconfined code is refused the same way.
	s = serveWith(t, data, asUser, "--mode", "strict", "--policy", rules, "--sandbox-tiers", "unconfined")
	r = gh(t, "effect", "code", "--data-dir", data, "--run", run, "--action", "run", "--json",
		"--params", `{"program":"sh","source":"touch `+ran+`"}`)
	reply = broker.EffectReply{}
	json.Unmarshal([]byte(r.stdout), &reply)
	if reply.Error == nil || reply.Error.Code != broker.CodeUnavailable || reply.Decision != nil {
		t.Fatalf("unconfined code under a serve that is not root: %s", r.stdout)
	}
	s.stop(t)

	// Report mode runs it as serve's user, and says so.
	s = serveWith(t, data, asUser, "--mode", "report", "--sandbox-tiers", "unconfined")
	if !strings.Contains(s.out.String(), "HOST COMMANDS RUN AS GATEHOUSE'S OWN USER") {
		t.Errorf("serve did not warn:\n%s", s.out)
	}
	r = gh(t, "effect", "process", "--data-dir", data, "--run", run, "--action", "exec", "--json",
		"--params", `{"argv":["touch","`+ran+`"]}`)
	if r.code != 0 {
		t.Fatalf("report mode: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if fi, err := os.Stat(ran); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uid {
		t.Fatalf("the command did not run as uid %d: %v", uid, err)
	}
	if d := outcomeDetail(t, waitJournal(t, data, run, 10)); d["uid"] != strconv.Itoa(uid) || d["separate_uid"] != "false" {
		t.Fatalf("report-mode outcome: %v", d)
	}
	s.stop(t)
}
