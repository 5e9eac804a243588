package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/e2e/cluster"
	"github.com/gatehouse/gatehouse/policy"
)

// The fault tests run the scaled-out shape (three NATS nodes, brokers,
// one writer, each its own process) under a steady load of effects from
// several `gatehouse bench` processes, break one thing with kill -9 (or
// stop Redis, or fill the journal's disk), and then check what must hold
// after every fault (deployment.check): the writer catches up, every
// decision an agent saw acknowledged as recorded is in the journal exactly
// once, `gatehouse verify` passes, and the witness cosigns a checkpoint
// taken through the running writer after the fault as consistent with one
// taken under load before it (no process is paused for either).
//
// Faults are triggered by what the journal holds, not by time; -short only
// lowers how much load must pass after a fault before the load stops.

// afterFault is how many more decisions the load must make after a fault.
func afterFault() int {
	if testing.Short() {
		return 100
	}
	return 400
}

// TestFaultKillBroker kills one of two brokers with SIGKILL under load:
// its in-flight requests fail with the client's stable code TIMEOUT (the
// decision may or may not have been made; see the -RequestIDs variant for
// retrying safely), the other broker takes the rest, and nothing decided
// is lost.
func TestFaultKillBroker(t *testing.T) {
	d := startDeployment(t, deployOpts{brokers: 2})
	load := d.startLoad(t, 2, 3, "output")
	d.waitDecisions(t, 200, "before the kill")
	load.running(t)
	d.witnessCheckpoint(t) // under load; the one after the fault must be consistent with it
	if err := d.brokers[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = d.brokers[0].cmd.Wait()
	at := d.decisions(t)
	d.waitDecisions(t, at+afterFault(), "after broker1 was killed")
	load.running(t)
	res, acked := load.stop(t)
	for _, r := range res {
		t.Logf("load: %d requests, %d recorded, errors %v", r.Gatehouse.Requests, r.Gatehouse.Acked, r.Gatehouse.Errors)
		for code := range r.Gatehouse.Errors {
			// A request the dead broker held gets no reply: TIMEOUT. The
			// load's own SIGINT cancels what is in flight at the end.
			if code != "TIMEOUT" && code != "NATS" {
				t.Errorf("unexpected error code %s: %v", code, r.Gatehouse.Errors)
			}
		}
	}
	d.check(t, acked)
}

// TestFaultKillBrokerRequestIDs kills one of two brokers with SIGKILL
// under a load of agents that give every effect a request_id: a request
// the dead broker held is sent once more by the client and decided by the
// other broker, or, when the dead broker may have recorded its decision,
// fails with a clear code (TIMEOUT, REQUEST_IN_PROGRESS); no request id
// is ever decided twice, and every acknowledged decision is in the journal
// exactly once.
func TestFaultKillBrokerRequestIDs(t *testing.T) {
	d := startDeployment(t, deployOpts{brokers: 2})
	app, err := client.Dial(d.nats.URL(), client.App, d.nats.Creds(embedded.RoleApp))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	const agents = 6
	type result struct {
		acked                  []ackedEffect
		effects                map[string]string // request id -> effect
		sent, failed, replayed int
		codes                  map[broker.Code]int
	}
	results := make([]result, agents)
	runs := make([]string, agents)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range agents {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		runs[i], err = app.OpenWork(ctx, broker.OpenWork{Tenant: "ids", Person: "agent-" + strconv.Itoa(i),
			Mandate: &policy.Mandate{Systems: []string{"output"}, ExpiresAt: time.Now().Add(time.Hour)}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		agent, err := client.Dial(d.nats.URL(), client.Agent, d.nats.Creds(embedded.RoleAgent))
		if err != nil {
			t.Fatal(err)
		}
		defer agent.Close()
		r := &results[i]
		r.effects, r.codes = map[string]string{}, map[broker.Code]int{}
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id := "a" + strconv.Itoa(i) + "-" + strconv.Itoa(n)
				params, _ := json.Marshal(map[string]any{"status": "ok", "result": map[string]int{"n": n}})
				// 10 s: the client gives the first attempt 5 s, the retry 5 s,
				// beyond the 3 s lease after which a dead broker's claim is
				// taken over.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				rep, err := agent.Effect(ctx, policy.SinkOutput, broker.EffectRequest{Run: runs[i], Action: "deliver", Params: params, RequestID: id})
				cancel()
				r.sent++
				var eb *broker.ErrorBody
				switch {
				case err == nil && rep.Decision != nil && rep.Decision.Recorded:
					if rep.Replayed {
						r.replayed++
					}
					r.effects[id] = rep.Effect
					r.acked = append(r.acked, ackedEffect{runs[i], rep.Effect})
				case errors.As(err, &eb):
					r.failed++
					r.codes[eb.Code]++
					if eb.Code != broker.CodeTimeout && eb.Code != broker.CodeRequestInProgress {
						t.Logf("request %s: %s: %s", id, eb.Code, eb.Message)
					}
				default:
					r.failed++
					r.codes["OTHER"]++
					t.Errorf("request %s: %v", id, err)
				}
			}
		})
	}
	d.waitDecisions(t, 200, "before the kill")
	d.witnessCheckpoint(t) // under load; the one after the fault must be consistent with it
	if err := d.brokers[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = d.brokers[0].cmd.Wait()
	at := d.decisions(t)
	d.waitDecisions(t, at+afterFault(), "after broker1 was killed")
	close(stop)
	wg.Wait()

	var acked []ackedEffect
	for i, r := range results {
		t.Logf("agent %d: %d requests, %d recorded (%d of them replayed), %d failed %v", i, r.sent, len(r.acked), r.replayed, r.failed, r.codes)
		for code := range r.codes {
			if code != broker.CodeTimeout && code != broker.CodeRequestInProgress {
				t.Errorf("unexpected error code %s: %v", code, r.codes)
			}
		}
		seen := map[string]string{}
		for id, e := range r.effects {
			if other, dup := seen[e]; dup {
				t.Errorf("requests %s and %s both answered with effect %s", id, other, e)
			}
			seen[e] = id
		}
		acked = append(acked, r.acked...)
	}
	d.check(t, acked) // each acknowledged decision once; verify passes
	for i, r := range results {
		n := journalDecisions(t, d, runs[i])
		// Each request id is decided at most once: the journal holds the
		// recorded ones, and at most one more for each that failed.
		if n < len(r.effects) || n > len(r.effects)+r.failed {
			t.Errorf("run %s: %d decisions in the journal for %d recorded and %d failed request ids", runs[i], n, len(r.effects), r.failed)
		}
	}
}

// journalDecisions counts the policy.decision events of one run's file.
func journalDecisions(t *testing.T, d *deployment, run string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.jdir, "runs", run+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), `"type":"policy.decision"`)
}

// TestFaultKillWriter kills the journal writer with SIGKILL under load and
// restarts it: brokers keep deciding (JetStream, not the writer,
// acknowledges), and every acknowledged decision appears exactly once.
func TestFaultKillWriter(t *testing.T) {
	d := startDeployment(t, deployOpts{brokers: 2})
	load := d.startLoad(t, 2, 3, "output")
	d.waitDecisions(t, 200, "before the kill")
	load.running(t)
	d.witnessCheckpoint(t) // under load; the one after the fault must be consistent with it
	d.killWriter(t)
	// Brokers keep deciding while the writer is down: the stream grows.
	js := d.js(t)
	lag0 := readLag(t, js).LastSeq
	deadline := time.Now().Add(60 * time.Second)
	for readLag(t, js).LastSeq < lag0+uint64(3*afterFault()) {
		if time.Now().After(deadline) {
			t.Fatal("brokers stopped recording while the writer was down")
		}
		time.Sleep(20 * time.Millisecond)
	}
	load.running(t)
	d.startWriter(t)
	at := d.decisions(t)
	d.waitDecisions(t, at+afterFault(), "after the writer restarted")
	_, acked := load.stop(t)
	d.check(t, acked)
}

// TestFaultKillNATSNode kills the node leading the journal stream with
// SIGKILL under load: clients reconnect to the other two, the stream
// elects a new leader, the load continues and no acknowledged decision is
// lost.
func TestFaultKillNATSNode(t *testing.T) {
	d := startDeployment(t, deployOpts{brokers: 2})
	load := d.startLoad(t, 2, 3, "output")
	d.waitDecisions(t, 200, "before the kill")
	load.running(t)
	d.witnessCheckpoint(t) // under load; the one after the fault must be consistent with it
	js := d.js(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "GATEHOUSE_JOURNAL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("journal stream info: %v", err)
	}
	var victim *cluster.Node
	for _, n := range d.nats.Nodes {
		if n.Name == info.Cluster.Leader {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("journal stream leader %q is not one of the nodes", info.Cluster.Leader)
	}
	victim.Kill()
	t.Logf("killed %s, the journal stream's leader", victim.Name)
	at := d.decisions(t)
	d.waitDecisions(t, at+afterFault(), "after a NATS node was killed")
	load.running(t)
	_, acked := load.stop(t)
	d.check(t, acked)
}

// TestFaultRedisDown stops Redis under a load of memory effects (memories
// on Redis): effects that need it fail closed, with a reason naming the
// store, and are not performed; when Redis returns, work resumes without
// restarting anything.
func TestFaultRedisDown(t *testing.T) {
	d := startDeployment(t, deployOpts{brokers: 2, redis: true})
	load := d.startLoad(t, 2, 3, "memory")
	d.waitDecisions(t, 200, "before Redis stopped")
	load.running(t)
	d.witnessCheckpoint(t) // under load; the one after the fault must be consistent with it
	d.redis.Stop()

	run := strings.TrimSpace(gh(t, append([]string{"work", "open", "--tenant", "acme", "--person", "ada"}, d.as(embedded.RoleApp)...)...).stdout)
	put := func() (broker.EffectReply, int) {
		r := gh(t, append([]string{"effect", "memory", "--run", run, "--action", "put",
			"--params", `{"key":"k","value":1}`, "--json"}, d.as(embedded.RoleAgent)...)...)
		var rep broker.EffectReply
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("effect reply: %v\n%s\n%s", err, r.stdout, r.stderr)
		}
		return rep, r.code
	}
	rep, code := put()
	if code != 1 || rep.Error == nil || rep.Error.Code != broker.CodeEffectFailed ||
		!strings.Contains(rep.Error.Message, "unavailable") || rep.Outcome == nil || rep.Outcome.Status != "failed" {
		t.Fatalf("memory put with Redis down: exit %d %+v %+v", code, rep.Error, rep.Outcome)
	}
	t.Logf("with Redis down: %s", rep.Error.Message)

	d.redis.Restart()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if rep, code = put(); code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("memory put after Redis returned: exit %d %+v", code, rep.Error)
		}
		time.Sleep(100 * time.Millisecond)
	}
	at := d.decisions(t)
	d.waitDecisions(t, at+afterFault(), "after Redis returned")
	load.running(t)
	res, acked := load.stop(t)
	failed := 0
	for _, r := range res {
		failed += r.Gatehouse.Errors[string(broker.CodeEffectFailed)]
	}
	t.Logf("load: %d memory effects failed closed while Redis was down", failed)
	d.check(t, acked)
}

// TestFaultFullDisk puts the journal on a small tmpfs and fills it under
// load: the writer cannot write and says so, strict-mode brokers refuse
// effects (JOURNAL_UNAVAILABLE) instead of piling up records with nowhere
// to go; when space returns the writer repairs any partial line, catches
// up, and effects are decided again. verify must pass: no partial line is
// left that it cannot explain. Needs mount (root); a read-only folder
// cannot stand in for it here, since root writes through file modes.
func TestFaultFullDisk(t *testing.T) {
	// Big enough that the space the filler frees holds what piled up in
	// the stream while the disk was full: at 4 MiB the backlog once filled
	// it again, and the writer never caught up.
	mnt := smallTmpfs(t, "64m")
	jdir := filepath.Join(mnt, "journal")
	d := startDeployment(t, deployOpts{brokers: 2, jdir: jdir})
	load := d.startLoad(t, 2, 3, "output")
	d.waitDecisions(t, 200, "before the disk filled")
	load.running(t)
	d.witnessCheckpoint(t) // under load; the one after the fault must be consistent with it

	// Work opened now; while the disk is full strict mode would refuse to
	// open it too (its run.open cannot be recorded).
	run := strings.TrimSpace(gh(t, append([]string{"work", "open", "--tenant", "acme", "--person", "ada"}, d.as(embedded.RoleApp)...)...).stdout)

	// Fill the disk: write until ENOSPC.
	filler := fillDisk(t, mnt)

	// The writer reports it cannot write; strict brokers refuse.
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := waitHTTPAny(t, d.writerHTTP+"/readyz")
		if strings.Contains(r, "not ready") {
			t.Logf("writer: %s", strings.TrimSpace(r))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer never reported the full disk:\n%s", tail(d.writer.Output(), 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	refused := false
	deadline = time.Now().Add(30 * time.Second)
	for !refused {
		r := gh(t, append([]string{"effect", "output", "--run", run, "--result", "1", "--json"}, d.as(embedded.RoleAgent)...)...)
		var rep broker.EffectReply
		_ = json.Unmarshal([]byte(r.stdout), &rep)
		if rep.Error != nil && rep.Error.Code == broker.CodeJournal && rep.Decision != nil && rep.Decision.Outcome == "refused" {
			refused = true
			t.Logf("strict mode with the journal's disk full: exit %d, %s", r.code, rep.Error.Message)
			break
		}
		if run == "" || time.Now().After(deadline) {
			t.Fatalf("strict mode did not refuse with the disk full (run %q): exit %d %s %s", run, r.code, r.stdout, r.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The operator sees it in gatehouse status (exit 1, a finding). The
	// writer's retries can write a little now and then (a reopen truncates
	// the partial line a failed write left, which frees a block), and it
	// reports ok for as long as that lasts; so status is asked until it
	// shows the failure, which is the writer's state nearly all the time.
	deadline = time.Now().Add(30 * time.Second)
	for {
		st := gh(t, append([]string{"status"}, d.as(embedded.RoleBroker)...)...)
		if st.code == 1 && strings.Contains(st.stdout, "FINDING: the journal writer cannot write") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status with the disk full: exit %d\n%s%s", st.code, st.stdout, st.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitHTTP(t, d.writerHTTP+"/readyz", 200)
	at := d.decisions(t)
	d.waitDecisions(t, at+afterFault(), "after space returned")
	load.running(t)
	res, acked := load.stop(t)
	journalRefusals := 0
	for _, r := range res {
		journalRefusals += r.Gatehouse.Errors[string(broker.CodeJournal)]
	}
	t.Logf("load: %d effects refused with %s while the disk was full", journalRefusals, broker.CodeJournal)
	d.check(t, acked)
}

// waitHTTPAny returns the body of one GET, whatever its status.
func waitHTTPAny(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func readLag(t *testing.T, js jetstream.JetStream) broker.JournalLag {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := broker.ReadJournalLag(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// smallTmpfs mounts a tmpfs of size (mount's -o size=) on a temporary folder for the full-disk
// faults, skipping the test where mount is not allowed (not root).
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v: %s): the full-disk fault needs root and mount", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	return mnt
}

// fillDisk writes a file in dir until the disk is full (ENOSPC) and
// returns its path; removing it frees the space again.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	return fillDiskAs(t, dir, "filler")
}

// fillDiskAs writes the file name in dir until the disk is full and
// returns its path. Called again with another name it takes whatever room
// was freed since (a writer dropping the spare segments it had made).
func fillDiskAs(t *testing.T, dir, name string) string {
	t.Helper()
	filler := filepath.Join(dir, name)
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	return filler
}
