package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/broker/approval"
)

// pendingStates are the states in which a request waits for a person.
var pendingStates = []approval.State{approval.StatePending, approval.StateReopened}

// isPending reports whether s waits for a person.
func isPending(s approval.State) bool {
	return s == approval.StatePending || s == approval.StateReopened
}

// approvalsPending keeps gatehouse_approvals_pending equal to the number
// of approval requests waiting for a person (pending or reopened) in the
// shared store, until ctx ends. It watches the store and counts from each
// change it delivers (the watch starts before the first full count, so no
// change between the two is missed), and counts in full every resync as a
// backstop (a watch the store dropped) or, while the store cannot be
// watched, instead.
//
// The count is the deployment's, not this broker's: every broker reports
// the same number, so aggregate it with max, not sum. The caller owns the
// goroutine this runs in.
func approvalsPending(ctx context.Context, apv *approval.Service, m *broker.Metrics, resync time.Duration, log *slog.Logger) {
	pending := map[string]bool{}
	full := func() {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		rs, err := apv.List(lctx, approval.Filter{States: pendingStates})
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("approvals pending: could not count", "err", err)
			}
			return
		}
		clear(pending)
		for _, r := range rs {
			pending[r.ID] = true
		}
		m.SetApprovalsPending(len(pending))
	}
	t := time.NewTicker(resync)
	defer t.Stop()
	for ctx.Err() == nil {
		wctx, stop := context.WithCancel(ctx)
		changes, err := apv.Watch(wctx)
		if err != nil {
			log.Warn("approvals pending: cannot watch the approval store; counting every resync", "err", err)
			changes = nil
		}
		full()
	watch:
		for {
			select {
			case <-ctx.Done():
				stop()
				return
			case <-t.C:
				full()
				if changes == nil {
					break watch // try the watch again
				}
			case r, ok := <-changes:
				if !ok {
					break watch
				}
				if isPending(r.State) {
					pending[r.ID] = true
				} else {
					delete(pending, r.ID)
				}
				m.SetApprovalsPending(len(pending))
			}
		}
		stop()
		select { // not in a tight loop while the store is down
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
