package journal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/gatehouse/gatehouse/broker/journal"
)

// Many callers at once: every event each one committed is in its run, in
// the caller's order, and durable (it survives a power cut right after).
func TestCommitterGroupsConcurrentCallers(t *testing.T) {
	_, cfs, w := openOnCrashFS(t)
	c := journal.NewCommitter(w, journal.CommitterOptions{})
	const callers, each = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	for i := range callers {
		wg.Go(func() {
			run := fmt.Sprintf("r_%02d", i)
			for n := 0; n < each; n += 2 {
				// Two events together, as a decision and its attempt.
				if err := c.Commit(context.Background(), walEvent(run, n), walEvent(run, n+1)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	syncs := 0
	for _, op := range cfs.Ops() {
		if op.Kind == "sync" {
			syncs++
		}
	}
	t.Logf("%d commits of 2 events, %d fsyncs", callers*each/2, syncs)
	c.Close()
	cfs.Freeze()
	dst := crashAndRecover(t, cfs, nil)
	for i := range callers {
		if got := readRun(t, dst, fmt.Sprintf("r_%02d", i)); len(got) != each {
			t.Fatalf("run %d: %d events, want %d", i, len(got), each)
		}
	}
}

// An event the writer refuses fails its caller only; the others of the
// same group commit are written.
func TestCommitterErrorsArePerCaller(t *testing.T) {
	_, _, w := openOnCrashFS(t)
	c := journal.NewCommitter(w, journal.CommitterOptions{})
	defer c.Close()
	bad := walEvent("r_a", 0)
	bad.Run = "../escape"
	done := make(chan error, 2)
	if err := c.CommitAsync(context.Background(), func(err error) { done <- err }, bad); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitAsync(context.Background(), func(err error) { done <- err }, walEvent("r_b", 0)); err != nil {
		t.Fatal(err)
	}
	var failed, ok int
	for range 2 {
		if err := <-done; errors.Is(err, journal.ErrInvalidEvent) {
			failed++
		} else if err == nil {
			ok++
		} else {
			t.Fatal(err)
		}
	}
	if failed != 1 || ok != 1 {
		t.Fatalf("failed %d, ok %d", failed, ok)
	}
}

// Close commits what was handed over, then refuses more.
func TestCommitterCloseDrains(t *testing.T) {
	root, _, w := openOnCrashFS(t)
	c := journal.NewCommitter(w, journal.CommitterOptions{})
	var answered sync.WaitGroup
	for n := range 50 {
		answered.Add(1)
		if err := c.CommitAsync(context.Background(), func(err error) {
			if err != nil {
				t.Error(err)
			}
			answered.Done()
		}, walEvent("r_a", n)); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	answered.Wait()
	if got := readRun(t, root, "r_a"); len(got) != 50 {
		t.Fatalf("%d events after Close, want 50", len(got))
	}
	if err := c.Commit(context.Background(), walEvent("r_a", 50)); !errors.Is(err, journal.ErrCommitterClosed) {
		t.Fatalf("commit after close: %v", err)
	}
}
