package broker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/broker/journal/crashfs"
	"github.com/gatehouse/gatehouse/sinks/output"
)

// crashCheckingSink is the output sink, except that the moment before it
// delivers, it takes the disk as a power cut would leave it right then,
// opens the journal from that copy (its writer re-applies its log), and
// records whether the decision and attempt of the effect it is about to
// carry out are there. A real sink, a real broker and a real writer: only
// the disk is simulated.
type crashCheckingSink struct {
	*output.Sink
	t       *testing.T
	cfs     *crashfs.FS
	checked atomic.Int64
	mu      sync.Mutex // one copy of the disk at a time
	missing []string
}

func (s *crashCheckingSink) Perform(ctx context.Context, run *broker.Run, req *broker.EffectRequest, p *broker.Proposal) (*broker.Performed, error) {
	s.mu.Lock()
	dst := filepath.Join(s.t.TempDir(), "after-crash")
	err := s.cfs.Crash(dst, nil)
	var evs []journal.Event
	if err == nil {
		evs, err = recovered(dst, run.ID)
	}
	found := 0
	for _, e := range evs {
		if e.Effect == p.ID && (e.Type == journal.TypeDecision || e.Type == journal.TypeAttempt) {
			found++
		}
	}
	if err != nil || found != 2 {
		s.missing = append(s.missing, fmt.Sprintf("effect %s of %s: %d of decision and attempt durable (%v)", p.ID, run.ID, found, err))
	}
	s.mu.Unlock()
	s.checked.Add(1)
	return s.Sink.Perform(ctx, run, req, p)
}

// recovered opens the journal copied into dir with a writer (which
// re-applies its log, as after a reboot) and returns run's events.
func recovered(dir, run string) ([]journal.Event, error) {
	w, err := journal.Open(dir, journal.WriterOptions{})
	if err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "runs", run+".jsonl"))
	if err != nil {
		return nil, err
	}
	var evs []journal.Event
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		e, err := journal.ParseLine([]byte(line))
		if err != nil {
			return nil, err
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// TestDecisionIsOnDiskBeforeTheEffect is the durability ordering of the
// single-node shape: strict mode, the broker recording through the
// writer in its own process (broker.Committed, group commits), agents in
// parallel. At the moment each effect happens its decision and attempt
// survive a power cut; and after a power cut at the end, every decision an
// agent was told was recorded is in the journal, which verifies.
func TestDecisionIsOnDiskBeforeTheEffect(t *testing.T) {
	dir := t.TempDir()
	jdir := filepath.Join(dir, "journal")
	if err := os.MkdirAll(jdir, 0o750); err != nil {
		t.Fatal(err)
	}
	cfs, err := crashfs.New(jdir)
	if err != nil {
		t.Fatal(err)
	}
	var sink *crashCheckingSink
	bed := newBrokerBed(t, dir, func(jetstream.JetStream) broker.Journal {
		w, err := journal.Open(jdir, journal.WriterOptions{FS: cfs, SyncInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		cm := journal.NewCommitter(w, journal.CommitterOptions{})
		t.Cleanup(cm.Close)
		return broker.NewCommitted(func() *journal.Committer { return cm })
	}, func(out *output.Sink) broker.Sink {
		sink = &crashCheckingSink{Sink: out, t: t, cfs: cfs}
		return sink
	})
	app, agent, ctx := bed.app, bed.agent, context.Background()

	const agents, each = 4, 8
	var (
		mu    sync.Mutex
		acked = map[string][]string{} // run -> effects told recorded
		wg    sync.WaitGroup
	)
	for i := range agents {
		run, err := app.OpenWork(ctx, broker.OpenWork{Tenant: "acme", Person: fmt.Sprintf("p%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for n := range each {
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				r, err := agent.Output(rctx, run, "ok", n)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				if r.Decision == nil || !r.Decision.Recorded || r.Decision.Outcome != journal.OutcomeAllowed {
					t.Errorf("reply %+v", r)
					return
				}
				mu.Lock()
				acked[run] = append(acked[run], r.Effect)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if n := sink.checked.Load(); n != agents*each {
		t.Fatalf("%d effects performed, want %d", n, agents*each)
	}
	for _, m := range sink.missing {
		t.Error("performed before its record was durable: " + m)
	}

	// The power goes now: every decision acknowledged is there.
	cfs.Freeze()
	after := filepath.Join(t.TempDir(), "final")
	if err := cfs.Crash(after, nil); err != nil {
		t.Fatal(err)
	}
	for run, effects := range acked {
		evs, err := recovered(after, run)
		if err != nil {
			t.Fatal(err)
		}
		decided := map[string]bool{}
		for _, e := range evs {
			if e.Type == journal.TypeDecision {
				decided[e.Effect] = true
			}
		}
		for _, e := range effects {
			if !decided[e] {
				t.Errorf("run %s: acknowledged decision of %s lost in the power cut", run, e)
			}
		}
	}
	rep, err := journal.Verify(after, journal.VerifyOptions{})
	if err != nil || !rep.OK {
		t.Fatalf("journal after the power cut: %v %+v", err, rep)
	}
	// The writer's own order on the disk: no run file or head log write
	// before the log record holding it was fsynced (TestOneFsyncPerBatch
	// checks it batch by batch in the journal package).
	syncs := 0
	for _, op := range cfs.Ops() {
		if op.Kind == crashfs.OpSync && strings.HasPrefix(op.Path, "wal/") {
			syncs++
		}
	}
	t.Logf("%d effects, %d log fsyncs", agents*each, syncs)
}
