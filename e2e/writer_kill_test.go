package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/client"
	"github.com/gatehouse/gatehouse/broker/embedded"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/output"
)

// TestWriterKilledMidBurst kills the journal writer process with SIGKILL
// in the middle of a burst of effects from several agents, restarts it,
// and checks that every decision the broker acknowledged is in the
// journal exactly once and that verify passes.
func TestWriterKilledMidBurst(t *testing.T) {
	dir := t.TempDir()
	ns, err := embedded.Start(embedded.Config{Dir: filepath.Join(dir, "nats"), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	nc, err := ns.Connect(embedded.RoleBroker)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	js, _ := jetstream.New(nc)
	if _, err := journal.EnsureStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	runs, err := broker.OpenKVRuns(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	out, err := output.New(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Config{Mode: policy.ModeStrict}, runs, broker.NewRecorder(js, 0), policy.Default(), out)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ns.Connect(embedded.RoleReplies)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	svc, err := broker.Serve(rc, b, broker.ServiceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	jdir := filepath.Join(dir, "journal")
	brokerCreds := embedded.CredsPath(filepath.Join(dir, "nats"), embedded.RoleBroker)
	startWriter := func() (*exec.Cmd, *lineCounter) {
		cmd := exec.Command(bin, "writer", "--nats-url", ns.URL, "--nats-creds", brokerCreds, "--journal-dir", jdir, "--log-format", "json")
		lc := &lineCounter{}
		cmd.Stdout, cmd.Stderr = lc, lc
		cmd.Env = cleanEnv()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, lc
	}
	writer, _ := startWriter()

	app, err := client.Dial(ns.URL, client.App, embedded.CredsPath(filepath.Join(dir, "nats"), embedded.RoleApp))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()

	const agents, perAgent = 6, 300
	var (
		mu      sync.Mutex
		acked   = map[string]bool{} // effect ids whose decision the broker recorded
		runIDs  []string
		replies atomic.Int64
		wg      sync.WaitGroup
	)
	for a := 0; a < agents; a++ {
		run, err := app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: "p" + string(rune('a'+a))})
		if err != nil {
			t.Fatal(err)
		}
		runIDs = append(runIDs, run)
	}
	// The burst starts once the writer is writing (every run.open on
	// disk), so that it is still going when the writer is killed.
	for countDecisions(t, jdir, runIDs)["events"] < agents {
		if ctx.Err() != nil {
			t.Fatal("the writer never wrote the runs' run.open")
		}
		time.Sleep(time.Millisecond)
	}
	for a := 0; a < agents; a++ {
		run := runIDs[a]
		ag, err := client.Dial(ns.URL, client.Agent, embedded.CredsPath(filepath.Join(dir, "nats"), embedded.RoleAgent))
		if err != nil {
			t.Fatal(err)
		}
		defer ag.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perAgent; i++ {
				r, err := ag.Output(ctx, run, "ok", i)
				replies.Add(1)
				if err != nil || r.Decision == nil || !r.Decision.Recorded {
					continue
				}
				mu.Lock()
				acked[r.Effect] = true
				mu.Unlock()
			}
		}()
	}
	// Kill the writer once a third of the burst has been answered and it
	// has written some of it: mid-stream, with events on disk and in flight.
	for replies.Load() < agents*perAgent/3 || countDecisions(t, jdir, runIDs)["events"] <= agents {
		time.Sleep(time.Millisecond)
	}
	writtenAtKill := countDecisions(t, jdir, runIDs)["events"]
	if err := writer.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = writer.Wait()
	killedAt := replies.Load()
	wg.Wait()
	if killedAt >= agents*perAgent {
		t.Fatalf("the burst ended before the kill (%d replies); the test proves nothing", killedAt)
	}
	t.Logf("killed the writer after %d replies with %d events on disk", killedAt, writtenAtKill)
	if len(acked) != agents*perAgent {
		t.Fatalf("%d of %d effects were acknowledged; the stream, not the writer, acknowledges", len(acked), agents*perAgent)
	}

	writer2, _ := startWriter()
	defer func() { _ = writer2.Process.Kill(); _ = writer2.Wait() }()

	// Every acked decision appears exactly once, with its attempt and outcome.
	want := agents * (1 + 3*perAgent)
	deadline := time.Now().Add(time.Minute)
	var counts map[string]int
	for {
		counts = countDecisions(t, jdir, runIDs)
		if counts["events"] >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if counts["events"] != want {
		t.Fatalf("journal holds %d events, want %d", counts["events"], want)
	}
	for id := range acked {
		if counts[id] != 1 {
			t.Fatalf("effect %s has %d decisions in the journal, want 1", id, counts[id])
		}
	}
	rep, err := journal.Verify(jdir, journal.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Events != want {
		t.Fatalf("verify: ok=%v events=%d findings=%v", rep.OK, rep.Events, rep.Findings)
	}
}

// countDecisions counts, over the given runs' files, all events (key
// "events") and each effect's policy.decision events (key effect id).
func countDecisions(t *testing.T, jdir string, runs []string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, run := range runs {
		f, err := os.Open(filepath.Join(jdir, "runs", run+".jsonl"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			e, err := journal.ParseLine(sc.Bytes())
			if err != nil {
				continue // a partial line the writer has not repaired yet
			}
			counts["events"]++
			if e.Type == journal.TypeDecision {
				counts[e.Effect]++
			}
		}
		f.Close()
	}
	return counts
}

// lineCounter collects a child's output for failure messages.
type lineCounter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}
