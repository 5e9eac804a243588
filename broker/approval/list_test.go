package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	. "github.com/gatehouse/gatehouse/broker/approval"
)

// plainStore hides a store's Lister, so List takes its fallback path
// (keys, then concurrent Gets).
type plainStore struct{ Store }

// TestListUnderConcurrentChanges: while requests are decided, every List
// (the one-pass path and the key-by-key fallback) shows each request
// exactly once, in a state it really passed through, and once the changes
// are done both show exactly the final states, filters and limit applied.
func TestListUnderConcurrentChanges(t *testing.T) {
	const n = 60
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			if _, ok := store.(Lister); !ok {
				t.Fatalf("%s store is not a Lister", st.name)
			}
			ctx := context.Background()
			s := New(store, &memJournal{}, Config{})
			fallback := New(plainStore{store}, &memJournal{}, Config{})
			ids := make([]string, n)
			for i := range n {
				r, _, err := s.Request(ctx, hold(t, "r1", fmt.Sprintf(`{"n":%d}`, i)))
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = r.ID
			}
			slices.Sort(ids)

			check := func(who string, rs []Request, final bool) {
				t.Helper()
				got := make([]string, len(rs))
				for i, r := range rs {
					got[i] = r.ID
					want := StatePending
					if final && strings.Compare(r.ID, ids[n/2]) < 0 {
						want = StateApproved
					}
					if r.State != want && (final || r.State != StateApproved) {
						t.Errorf("%s: %s is %s", who, r.ID, r.State)
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, ids) {
					t.Fatalf("%s: listed %d requests (%d distinct of %d)", who, len(got), len(slices.Compact(got)), n)
				}
			}

			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				defer close(done)
				for _, id := range ids[:n/2] {
					if _, err := s.Decide(ctx, id, reviewer); err != nil {
						t.Error(err)
					}
				}
			})
			for _, svc := range []*Service{s, fallback} {
				wg.Go(func() {
					for {
						select {
						case <-done:
							return
						default:
						}
						rs, err := svc.List(ctx, Filter{})
						if err != nil {
							t.Error(err)
							return
						}
						who := "one pass"
						if svc == fallback {
							who = "fallback"
						}
						check(who+" during changes", rs, false)
					}
				})
			}
			wg.Wait()

			for name, svc := range map[string]*Service{"one pass": s, "fallback": fallback} {
				all, err := svc.List(ctx, Filter{})
				if err != nil {
					t.Fatal(err)
				}
				check(name, all, true)
				pend, err := svc.List(ctx, Filter{States: []State{StatePending, StateReopened}, Tenant: "acme"})
				if err != nil || len(pend) != n-n/2 {
					t.Fatalf("%s: %d pending (%v), want %d", name, len(pend), err, n-n/2)
				}
				if other, err := svc.List(ctx, Filter{Tenant: "other"}); err != nil || len(other) != 0 {
					t.Fatalf("%s: tenant filter: %d, %v", name, len(other), err)
				}
				top, err := svc.List(ctx, Filter{Limit: 5})
				if err != nil || len(top) != 5 || !slices.EqualFunc(top, all[:5], func(a, b Request) bool { return a.ID == b.ID }) {
					t.Fatalf("%s: limit: %d, %v", name, len(top), err)
				}
			}
		})
	}
}

// listOneByOne is List as it was: the keys, then one Get at a time.
func listOneByOne(ctx context.Context, store Store) ([]Request, error) {
	keys, err := store.Keys(ctx, RequestKeyPrefix)
	if err != nil {
		return nil, err
	}
	var out []Request
	for _, k := range keys {
		raw, _, err := store.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		var r Request
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, err
		}
		if r.State == StatePending {
			out = append(out, r)
		}
	}
	return out, nil
}

// BenchmarkListPending: listing the pending requests among 1,000, on both
// stores: one Get at a time (List before), the keys then 16 concurrent
// Gets (List's fallback), and one pass (Lister: a KV watcher's initial
// values, or Redis SCAN + MGET).
func BenchmarkListPending(b *testing.B) {
	const n = 1000
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			store := st.open(b)
			ctx := context.Background()
			s := New(store, &memJournal{}, Config{})
			for i := range n {
				if _, _, err := s.Request(ctx, hold(b, "r1", fmt.Sprintf(`{"n":%d}`, i))); err != nil {
					b.Fatal(err)
				}
			}
			pending := Filter{States: []State{StatePending}}
			for _, c := range []struct {
				name string
				list func() (int, error)
			}{
				{"get-each", func() (int, error) { rs, err := listOneByOne(ctx, store); return len(rs), err }},
				{"keys+concurrent-gets", func() (int, error) {
					rs, err := New(plainStore{store}, nil, Config{}).List(ctx, pending)
					return len(rs), err
				}},
				{"one-pass", func() (int, error) { rs, err := s.List(ctx, pending); return len(rs), err }},
			} {
				b.Run(c.name, func(b *testing.B) {
					for b.Loop() {
						if got, err := c.list(); err != nil || got != n {
							b.Fatalf("%d, %v", got, err)
						}
					}
				})
			}
		})
	}
}
