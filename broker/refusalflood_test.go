package broker

import (
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/broker/journal"
	"github.com/gatehouse/gatehouse/policy"
)

// The budget of a kind of refusal: the first floodBurst are recorded, the
// rest counted and handed to one summary (scheduled once), the next
// recorded one after a refill carries what the summary did not take, and
// another kind keeps its own budget.
func TestRefusalFloodBudget(t *testing.T) {
	var f refusalFlood
	k := floodKey{caller: "agent _shared", run: "r_1", refusal: RefuseRunOfAnotherAgent, sink: "output"}
	now := time.Unix(1_700_000_000, 0)
	for i := 0; i < floodBurst; i++ {
		if rec, n, _ := f.take(k, now); !rec || n != 0 {
			t.Fatalf("refusal %d within the burst: record %v, summarised %d", i+1, rec, n)
		}
	}
	schedules := 0
	for i := 0; i < 7; i++ {
		rec, _, sched := f.take(k, now)
		if rec {
			t.Fatalf("refusal %d past the burst was recorded", floodBurst+i+1)
		}
		if sched {
			schedules++
		}
	}
	if schedules != 1 {
		t.Fatalf("%d summaries scheduled for one burst", schedules)
	}
	other := k
	other.run = "r_2"
	if rec, _, _ := f.take(other, now); !rec {
		t.Fatal("another run's first refusal was not recorded")
	}
	// A token back: the next refusal is recorded and carries the count.
	if rec, n, _ := f.take(k, now.Add(floodRefill)); !rec || n != 7 {
		t.Fatalf("after a refill: record %v, summarised %d, want 7", rec, n)
	}
	if n, _ := f.summary(k); n != 0 {
		t.Fatalf("the summary counted %d already carried", n)
	}
	// Suppressed again; this time the summary takes the count, once it
	// is scheduled (before, the refusal that made it pending is still
	// being answered, and a flush leaves it to the timer).
	f.take(k, now.Add(floodRefill))
	if n, _ := f.summary(k); n != 0 {
		t.Fatalf("an unscheduled summary was taken: %d", n)
	}
	dd := journal.Decision{}
	dd.Reasons = []policy.Reason{{Refusal: RefuseRunOfAnotherAgent}}
	f.schedule(k, dd, time.Hour, func() {})
	if n, got := f.summary(k); n != 1 || len(got.Reasons) != 1 {
		t.Fatalf("summary %d %+v, want 1 with the decision kept", n, got)
	}
	if _, _, sched := f.take(k, now.Add(floodRefill)); !sched {
		t.Fatal("a new burst after a summary schedules a new one")
	}
}

// BenchmarkRefusalFloodTake: the budget check each caller refusal pays.
func BenchmarkRefusalFloodTake(b *testing.B) {
	var f refusalFlood
	k := floodKey{caller: "agent _shared", run: "r_1", refusal: RefuseRunOfAnotherAgent, sink: "output"}
	now := time.Unix(1_700_000_000, 0)
	for i := 0; b.Loop(); i++ {
		f.take(k, now.Add(time.Duration(i)*time.Millisecond))
	}
}
