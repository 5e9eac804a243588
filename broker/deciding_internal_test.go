package broker

import (
	"context"
	"testing"
	"time"
)

// TestDecidingAfterTheMark: once a run is marked closed, effects taken up
// for it are refused and not counted, so requests naming a closing run
// (any agent can name any run id) cannot hold its close; one taken up
// before the mark is waited for.
func TestDecidingAfterTheMark(t *testing.T) {
	var d deciding
	const run = "r_1"
	before, closed := d.enter(run)
	if closed {
		t.Fatal("a run no one closed reads as closed")
	}
	d.markClosed(run, time.Now())
	for range 100 {
		leave, closed := d.enter(run)
		if !closed {
			t.Fatal("an effect taken up after the mark is not refused")
		}
		defer leave() // never left while the close waits below
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if err := d.wait(ctx, run); err == nil {
		t.Fatal("the wait ended while the effect taken up before the mark is under way")
	}
	cancel()
	before()
	if err := d.wait(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	if _, other := d.enter("r_2"); other {
		t.Fatal("another run reads as closed")
	}
}

// TestDecidingForgetsOldMarks: a mark lives closedMarkLife, so the marks
// of a long-running broker stay bounded by the closes of the last hour.
func TestDecidingForgetsOldMarks(t *testing.T) {
	var d deciding
	t0 := time.Now()
	d.markClosed("r_old", t0)
	d.markClosed("r_recent", t0.Add(closedMarkLife-closedMarkPrune))
	d.markClosed("r_new", t0.Add(closedMarkLife+2*closedMarkPrune))
	if _, closed := d.enter("r_old"); closed {
		t.Fatal("a mark older than its life is kept")
	}
	for _, r := range []string{"r_recent", "r_new"} {
		if _, closed := d.enter(r); !closed {
			t.Fatalf("%s: a mark within its life is dropped", r)
		}
	}
}
