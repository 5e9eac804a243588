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
