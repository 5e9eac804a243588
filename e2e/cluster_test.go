package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/e2e/cluster"
)

// deployment is the scaled-out shape without containers: a three-node
// NATS cluster with JetStream (streams and buckets R3), optionally Redis,
// brokers (`gatehouse serve --no-writer`, one queue group) and one
// `gatehouse writer`, each a separate process of the built binary.
type deployment struct {
	nats       *cluster.NATS
	redis      *cluster.Redis
	dir, jdir  string
	brokers    []*server
	writer     *cluster.Proc
	writerHTTP string
	// writerArgs are extra flags of the writer (a journal folder elsewhere).
	writerArgs []string
	wit        *witnessProc
}

// witnessProc is a `gatehouse witness` for the deployment's journal, with
// the journal's signing key and the keys verify needs.
type witnessProc struct {
	url                     string
	journalKey, trustedFile string
	logVKey, witnessVKey    string
	checkpoints             int
}

const witnessOrigin = "gatehouse-e2e/journal"

// startWitness makes the journal's signing key and a witness's key, and
// starts the witness trusting the journal's log key.
func (d *deployment) startWitness(t testing.TB) {
	t.Helper()
	keys := filepath.Join(d.dir, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	keygen := func(args ...string) map[string]string {
		out, err := exec.Command(bin, append([]string{"keygen"}, args...)...).Output()
		if err != nil {
			t.Fatalf("keygen %v: %v", args, err)
		}
		m := map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			for _, label := range []string{"key id", "public key", "log key", "witness key"} {
				if v, ok := strings.CutPrefix(l, label+" "); ok {
					m[label] = strings.TrimSpace(v)
				}
			}
		}
		return m
	}
	w := &witnessProc{journalKey: filepath.Join(keys, "journal.key"), trustedFile: filepath.Join(keys, "journal.pub")}
	jk := keygen("--out", w.journalKey, "--log-origin", witnessOrigin)
	wk := keygen("--out", filepath.Join(keys, "witness.key"), "--witness-name", "w1")
	w.logVKey, w.witnessVKey = jk["log key"], wk["witness key"]
	if w.logVKey == "" || w.witnessVKey == "" || jk["public key"] == "" {
		t.Fatalf("keygen printed no verifier keys: %v %v", jk, wk)
	}
	if err := os.WriteFile(w.trustedFile, []byte(jk["public key"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every process listens on a port it picks itself (:0) and says which:
	// no port is chosen ahead and raced for.
	cmd := exec.Command(bin, "witness", "--state-dir", filepath.Join(d.dir, "witness"), "--witness-key-file", filepath.Join(keys, "witness.key"),
		"--name", "w1", "--log", w.logVKey, "--http", "127.0.0.1:0")
	cmd.Env = cleanEnv()
	wp := cluster.Start(t, "gatehouse witness", cmd)
	w.url = wp.WaitOutput(t, regexp.MustCompile(`witness w1 listening on (http://\S+)`), 60*time.Second)
	wp.WaitHTTP(t, w.url+"/healthz", http.StatusOK, 60*time.Second)
	d.wit = w
	// The writer signs events and checkpoints, on a schedule (every second
	// here) and on POST /checkpoint, and has the witness cosign each.
	d.writerArgs = append(d.writerArgs, "--signing-key-file", w.journalKey, "--log-origin", witnessOrigin,
		"--witness", w.url, "--witness-key", w.witnessVKey, "--checkpoint-interval", "1s")
}

// witnessCheckpoint has the running writer sign a checkpoint of the
// journal's head log now (POST /checkpoint on its --http address) and
// requires the witness's cosignature on it: under load, the writer keeps
// writing meanwhile. The witness cosigns a checkpoint only with a
// consistency proof from the last one it cosigned (the writer's schedule
// submits some too), so a checkpoint after a fault proves the journal
// after the fault extends the one before it.
func (d *deployment) witnessCheckpoint(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Post(d.writerHTTP+"/checkpoint", "text/plain", nil)
		var body []byte
		code := 0
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			code = resp.StatusCode
		}
		// 503: the writer is reopening its journal (a fault just ended);
		// 429: it signed on demand less than a second ago.
		if code == http.StatusOK {
			if !strings.Contains(string(body), "\n— w1 ") {
				t.Fatalf("checkpoint %d has no cosignature of the witness:\n%s\nwriter:\n%s", d.wit.checkpoints+1, body, tail(d.writer.Output(), 3000))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %d: POST /checkpoint: %d %v %s\nwriter:\n%s", d.wit.checkpoints+1, code, err, body, tail(d.writer.Output(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.wit.checkpoints++
}

type deployOpts struct {
	brokers int
	redis   bool
	jdir    string // default DIR/journal
}

func startDeployment(t testing.TB, o deployOpts) *deployment {
	t.Helper()
	d := &deployment{nats: cluster.StartNATS(t, 3), dir: t.TempDir()}
	d.jdir = o.jdir
	if d.jdir == "" {
		d.jdir = filepath.Join(d.dir, "journal")
	}
	if o.redis {
		d.redis = cluster.StartRedis(t)
	}
	d.startWitness(t)
	d.startWriter(t)
	for i := range o.brokers {
		d.startBroker(t, "broker"+strconv.Itoa(i+1))
	}
	return d
}

// startBroker starts `gatehouse serve --no-writer` in strict mode on the
// cluster. The sandbox tier is fixed to unconfined only to skip its
// self-test at start: these brokers carry output and memory effects.
func (d *deployment) startBroker(t testing.TB, name string) *server {
	t.Helper()
	args := []string{"--mode", "strict", "--nats-url", d.nats.URL(), "--no-writer", "--replicas", "3",
		"--nats-creds", d.nats.Creds(embedded.RoleBroker), "--nats-replies-creds", d.nats.Creds(embedded.RoleReplies),
		"--sandbox-tiers", "unconfined", "--log-format", "json"}
	if d.redis != nil {
		args = append(args, "--redis-url", d.redis.URL)
	}
	s := serve(t, filepath.Join(d.dir, name), args...)
	d.brokers = append(d.brokers, s)
	return s
}

func (d *deployment) startWriter(t testing.TB) {
	t.Helper()
	args := append([]string{"writer", "--nats-url", d.nats.URL(), "--nats-creds", d.nats.Creds(embedded.RoleBroker), "--journal-dir", d.jdir, "--replicas", "3",
		"--http", "127.0.0.1:0", "--log-format", "json"}, d.writerArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	d.writer = cluster.Start(t, "gatehouse writer", cmd)
	// The writer listens before it connects to NATS, and logs where; it is
	// ready once its stream and consumer exist and the journal is open.
	d.writerHTTP = d.writer.WaitOutput(t, regexp.MustCompile(`"msg":"writer health, metrics and checkpoints","url":"(http://[^"]+)"`), 60*time.Second)
	d.writer.WaitHTTP(t, d.writerHTTP+"/healthz", http.StatusOK, 60*time.Second)
	d.writer.WaitHTTP(t, d.writerHTTP+"/readyz", http.StatusOK, 3*time.Minute)
}

// killWriter ends the writer with SIGKILL.
func (d *deployment) killWriter(t *testing.T) {
	t.Helper()
	d.writer.Kill()
}

// benchCreds are the flags bench needs on the cluster: the shared agent
// credential, the shared app's, and the broker's to observe.
func (d *deployment) benchCreds() []string {
	return []string{"--creds", d.nats.Creds(embedded.RoleAgent), "--app-creds", d.nats.Creds(embedded.RoleApp),
		"--observer-creds", d.nats.Creds(embedded.RoleBroker)}
}

// as is the --nats-url and --creds of role on the cluster, for a client
// command.
func (d *deployment) as(r embedded.Role) []string {
	return []string{"--nats-url", d.nats.URL(), "--creds", d.nats.Creds(r)}
}

// js connects to the cluster for the test's own reads.
func (d *deployment) js(t testing.TB) jetstream.JetStream {
	t.Helper()
	o, err := nats.NkeyOptionFromSeed(d.nats.Creds(embedded.RoleBroker))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(d.nats.URL(), o, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// runs lists the runs the journal holds.
func (d *deployment) runs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(d.jdir, "runs"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if r, ok := strings.CutSuffix(e.Name(), ".jsonl"); ok {
			out = append(out, r)
		}
	}
	return out
}

// decisions counts the policy.decision events in the journal.
func (d *deployment) decisions(t *testing.T) int {
	t.Helper()
	n := 0
	for _, run := range d.runs(t) {
		f, err := os.Open(filepath.Join(d.jdir, "runs", run+".jsonl"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if bytes.Contains(sc.Bytes(), []byte(`"type":"policy.decision"`)) {
				n++
			}
		}
		f.Close()
	}
	return n
}

// waitDecisions waits until the journal holds at least n decisions.
func (d *deployment) waitDecisions(t *testing.T, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for d.decisions(t) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the journal holds %d decisions, waited for %d\nwriter:\n%s", what, d.decisions(t), n, tail(d.writer.Output(), 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check is what must hold after every fault: the writer caught up, every
// decision an agent saw acknowledged as recorded is in the journal exactly
// once, verify passes, and the witness's checkpoint is consistent.
func (d *deployment) check(t *testing.T, acked []ackedEffect) {
	t.Helper()
	js := d.js(t)
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		lag, err := broker.ReadJournalLag(ctx, js)
		cancel()
		if err == nil && lag.Lag == 0 && lag.Pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the journal writer did not catch up: %+v %v\nwriter:\n%s", lag, err, tail(d.writer.Output(), 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	runs := map[string]bool{}
	for _, a := range acked {
		runs[a.run] = true
	}
	var runList []string
	for r := range runs {
		runList = append(runList, r)
	}
	counts := countDecisions(t, d.jdir, runList)
	inJournal := 0
	for _, a := range acked {
		if counts[a.effect] != 1 {
			t.Fatalf("effect %s (run %s) was acknowledged as recorded and has %d decisions in the journal, want 1", a.effect, a.run, counts[a.effect])
		}
		inJournal += counts[a.effect]
	}
	if inJournal != len(acked) {
		t.Fatalf("%d acknowledged decisions, %d in the journal", len(acked), inJournal)
	}
	witnessCheckpointConsistent(t, d)
	t.Logf("%d acknowledged decisions, each once in the journal; verify passes, signatures and the witnessed checkpoint included", len(acked))
}

// witnessCheckpointConsistent takes a checkpoint now (the witness cosigns
// it only if it is consistent with the one it cosigned before the fault),
// then runs verify with every key: each event signed by the journal's key,
// and the head log against the latest checkpoint the witness cosigned.
func witnessCheckpointConsistent(t *testing.T, d *deployment) {
	t.Helper()
	d.witnessCheckpoint(t)
	if d.wit.checkpoints < 2 {
		t.Fatalf("only %d witnessed checkpoint(s): take one before the fault too", d.wit.checkpoints)
	}
	v := gh(t, "verify", "--json", d.jdir, "--trusted-key", d.wit.trustedFile, "--require-signatures",
		"--log-key", d.wit.logVKey, "--witness-key", d.wit.witnessVKey, "--witness", d.wit.url)
	if v.code != 0 {
		t.Fatalf("verify with keys and the witness: exit %d:\n%s\n%s%s", v.code, tail(v.stdout, 4000), v.stderr, d.explainFindings(v.stdout))
	}
}

// ackedEffect is one line of bench --acked.
type ackedEffect struct{ run, effect string }

// loadGen is several `gatehouse bench` processes, each with its own agents
// and connections, driving effects until stopped.
type loadGen struct {
	cmds  []*exec.Cmd
	outs  []*lineCounter
	files []string
}

// startLoad starts procs bench processes of agents agents each, proposing
// sink effects until stop.
func (d *deployment) startLoad(t *testing.T, procs, agents int, sink string) *loadGen {
	t.Helper()
	l := &loadGen{}
	for i := range procs {
		f := filepath.Join(d.dir, "acked-"+strconv.Itoa(i))
		cmd := exec.Command(bin, append([]string{"bench", "--nats-url", d.nats.URL(), "--agents", strconv.Itoa(agents), "--duration", "1h",
			"--sink", sink, "--acked", f, "--json", "--timeout", "5s", "--tenant", "load" + strconv.Itoa(i)}, d.benchCreds()...)...)
		out := &lineCounter{}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.Env = cleanEnv()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		l.cmds, l.outs, l.files = append(l.cmds, cmd), append(l.outs, out), append(l.files, f)
	}
	return l
}

// running fails the test when a load process has ended on its own.
func (l *loadGen) running(t *testing.T) {
	t.Helper()
	for i, c := range l.cmds {
		if c.ProcessState != nil {
			t.Fatalf("load %d ended early:\n%s", i, l.outs[i].String())
		}
	}
}

// benchResult is the part of bench --json the tests read.
type benchResult struct {
	Gatehouse struct {
		Requests int            `json:"requests"`
		Acked    int            `json:"acked"`
		Errors   map[string]int `json:"errors"`
	} `json:"gatehouse"`
}

// stop interrupts every load process, waits, and returns their reports
// and every acknowledged decision.
func (l *loadGen) stop(t *testing.T) ([]benchResult, []ackedEffect) {
	t.Helper()
	var res []benchResult
	var acked []ackedEffect
	for i, c := range l.cmds {
		_ = c.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = c.Process.Kill()
			t.Fatalf("load %d did not stop on SIGINT:\n%s", i, l.outs[i].String())
		}
		var r benchResult
		out := l.outs[i].String()
		line := out[strings.LastIndex(strings.TrimRight(out, "\n"), "\n")+1:]
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("load %d report: %v\n%s", i, err, out)
		}
		res = append(res, r)
		b, err := os.ReadFile(l.files[i])
		if err != nil {
			t.Fatal(err)
		}
		for _, ln := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if run, eff, ok := strings.Cut(ln, " "); ok {
				acked = append(acked, ackedEffect{run, eff})
			}
		}
	}
	return res, acked
}

// waitHTTP waits until url answers with code.
func waitHTTP(t testing.TB, url string, code int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		body, last, ok := cluster.Get(url, code)
		if ok {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: want %d, last %s", url, code, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// TestScaledOutShape runs the scaled-out shape and looks at it as an
// operator: two brokers share the load, the journal is written once,
// every process answers health, readiness and metrics, and `gatehouse
// status` shows three servers, the meta leader, R3 streams, both brokers
// and the writer caught up.
func TestScaledOutShape(t *testing.T) {
	d := startDeployment(t, deployOpts{brokers: 2, redis: true})
	load := d.startLoad(t, 2, 3, "output")
	d.waitDecisions(t, 300, "load on two brokers")
	load.running(t)
	// The writer's schedule has the witness cosign without being asked.
	waitHTTP(t, d.wit.url+"/checkpoint?origin="+witnessOrigin, http.StatusOK)
	d.witnessCheckpoint(t) // under load; the one after the fault must be consistent with it
	_, acked := load.stop(t)
	d.check(t, acked)

	// The writer publishes its checkpoints and keys on its --http address.
	if cp := waitHTTP(t, d.writerHTTP+"/checkpoint", http.StatusOK); !strings.HasPrefix(cp, witnessOrigin+"\n") || !strings.Contains(cp, "\n— w1 ") {
		t.Errorf("writer GET /checkpoint:\n%s", cp)
	}
	if k := waitHTTP(t, d.writerHTTP+"/checkpoint/key", http.StatusOK); strings.TrimSpace(k) != d.wit.logVKey {
		t.Errorf("writer /checkpoint/key %q, want %q", k, d.wit.logVKey)
	}
	if did := waitHTTP(t, d.writerHTTP+"/.well-known/did.json", http.StatusOK); !strings.Contains(did, "#audit-key") {
		t.Errorf("writer did.json: %s", did)
	}
	// The witness: alive, ready, and its metrics count what it cosigned.
	waitHTTP(t, d.wit.url+"/healthz", http.StatusOK)
	waitHTTP(t, d.wit.url+"/readyz", http.StatusOK)
	wm := waitHTTP(t, d.wit.url+"/metrics", http.StatusOK)
	cosigned := regexp.MustCompile(`gatehouse_witness_cosigned_total\{origin="` + regexp.QuoteMeta(witnessOrigin) + `"\} (\d+)`).FindStringSubmatch(wm)
	size := regexp.MustCompile(`gatehouse_witness_checkpoint_size\{origin="` + regexp.QuoteMeta(witnessOrigin) + `"\} (\d+)`).FindStringSubmatch(wm)
	if cosigned == nil || size == nil || !strings.Contains(wm, `gatehouse_witness_refused_total{reason="fork"} 0`) {
		t.Errorf("witness /metrics:\n%s", wm)
	} else if n, _ := strconv.Atoi(cosigned[1]); n < d.wit.checkpoints+1 {
		t.Errorf("witness cosigned %d checkpoints; the schedule's one and %d asked for at least", n, d.wit.checkpoints)
	}

	for _, b := range d.brokers {
		waitHTTP(t, b.ep.HTTP+"/healthz", http.StatusOK)
		waitHTTP(t, b.ep.HTTP+"/readyz", http.StatusOK)
		m := waitHTTP(t, b.ep.HTTP+"/metrics", http.StatusOK)
		for _, want := range []string{`gatehouse_decisions_total{enforced="false",outcome="allowed",rule=""`, "gatehouse_journal_lag ",
			"gatehouse_journal_ack_seconds_bucket", "gatehouse_approvals_pending "} {
			if !strings.Contains(m, want) {
				t.Errorf("broker /metrics has no %s", want)
			}
		}
	}
	waitHTTP(t, d.writerHTTP+"/readyz", http.StatusOK)
	m := waitHTTP(t, d.writerHTTP+"/metrics", http.StatusOK)
	for _, want := range []string{"gatehouse_journal_events_written_total ", "gatehouse_journal_lag 0", "gatehouse_journal_pending 0"} {
		if !strings.Contains(m, want) {
			t.Errorf("writer /metrics has no %q", want)
		}
	}

	cmd := exec.Command(bin, "status", "--nats-url", d.nats.URL(), "--creds", d.nats.Creds(embedded.RoleBroker), "--system-user", cluster.SysUser, "--json")
	cmd.Env = append(cleanEnv(), "GATEHOUSE_SYSTEM_PASSWORD="+cluster.SysPassword)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("status: %v\n%s\n%s", err, out.String(), errb.String())
	}
	var st struct {
		Servers []struct{ Name string }
		Meta    *struct{ Leader string }
		Streams []struct {
			Name, Kind, Leader string
			Replicas           int
		}
		Brokers []struct{ ID string }
		Writer  *struct {
			Lag uint64 `json:"lag"`
		}
		Findings []string
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out.String())
	}
	text := exec.Command(bin, "status", "--nats-url", d.nats.URL(), "--creds", d.nats.Creds(embedded.RoleBroker), "--system-user", cluster.SysUser)
	text.Env = cmd.Env
	tout, _ := text.CombinedOutput()
	t.Logf("gatehouse status:\n%s", tout)
	if len(st.Servers) != 3 || st.Meta == nil || st.Meta.Leader == "" || len(st.Brokers) != 2 || st.Writer == nil || len(st.Findings) != 0 {
		t.Fatalf("status: %s", out.String())
	}
	want := map[string]bool{"GATEHOUSE_JOURNAL": false, "gatehouse_runs": false, "gatehouse_writer": false}
	for _, s := range st.Streams {
		if _, ok := want[s.Name]; ok {
			if s.Replicas != 3 || s.Leader == "" {
				t.Errorf("%s %s: R%d leader %q, want R3 with a leader", s.Kind, s.Name, s.Replicas, s.Leader)
			}
			want[s.Name] = true
		}
	}
	for n, seen := range want {
		if !seen {
			t.Errorf("status does not show %s", n)
		}
	}
}

// String is what the child wrote so far.
func (l *lineCounter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
