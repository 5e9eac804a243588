// Package statetest is the contract every web.StateStore passes: create
// once, compare-and-swap on the revision, delete, and the sentinels.
package statetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/web"
)

// Run checks st. It uses keys under "test.".
func Run(t *testing.T, st web.StateStore) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := st.Get(ctx, "test.none"); !errors.Is(err, web.ErrNoState) {
		t.Fatalf("Get of a missing key: %v", err)
	}
	rev, err := st.Create(ctx, "test.a", []byte("one"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(ctx, "test.a", []byte("two"), time.Minute); !errors.Is(err, web.ErrStateExists) {
		t.Fatalf("second Create: %v", err)
	}
	v, r2, err := st.Get(ctx, "test.a")
	if err != nil || string(v) != "one" || r2 != rev {
		t.Fatalf("Get: %q %d %v, want one %d", v, r2, err, rev)
	}
	rev3, err := st.Update(ctx, "test.a", []byte("three"), rev, time.Minute)
	if err != nil || rev3 == rev {
		t.Fatalf("Update: %d %v", rev3, err)
	}
	if _, err := st.Update(ctx, "test.a", []byte("stale"), rev, time.Minute); !errors.Is(err, web.ErrStateChanged) {
		t.Fatalf("Update on a stale revision: %v", err)
	}
	if v, _, _ := st.Get(ctx, "test.a"); string(v) != "three" {
		t.Fatalf("after a refused update: %q", v)
	}
	if err := st.Delete(ctx, "test.a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Get(ctx, "test.a"); !errors.Is(err, web.ErrNoState) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if err := st.Delete(ctx, "test.a"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if _, err := st.Create(ctx, "test.a", []byte("again"), time.Minute); err != nil {
		t.Fatalf("Create after Delete: %v", err)
	}
	// Racing increments: every one counts exactly once.
	if _, err := st.Create(ctx, "test.n", []byte{0}, time.Minute); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				for {
					v, rev, err := st.Get(ctx, "test.n")
					if err != nil {
						t.Error(err)
						return
					}
					if _, err := st.Update(ctx, "test.n", []byte{v[0] + 1}, rev, time.Minute); err == nil {
						break
					} else if !errors.Is(err, web.ErrStateChanged) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if v, _, _ := st.Get(ctx, "test.n"); len(v) != 1 || v[0] != 40 {
		t.Fatalf("40 racing increments gave %v", v)
	}
}
