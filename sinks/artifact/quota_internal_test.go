package artifact

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// failing is a real store whose next Put, or Delete, does its work
// and then fails (as a folder's fsync after the rename does), or fails
// without doing it after ending the caller's context (a broker shutting
// down mid-write).
type failing struct {
	quotaStore
	stored bool               // the failing write reached the store
	cancel context.CancelFunc // ended before failing, when set
}

var errAfter = errors.New("injected failure")

func (f *failing) fail() error {
	if f.cancel != nil {
		f.cancel()
		return context.Canceled
	}
	return errAfter
}

func (f *failing) Put(ctx context.Context, name, ct string, data []byte) error {
	if f.stored {
		if err := f.quotaStore.Put(ctx, name, ct, data); err != nil {
			return err
		}
	}
	return f.fail()
}

func (f *failing) Delete(ctx context.Context, name string) (bool, error) {
	if f.stored {
		if _, err := f.quotaStore.Delete(ctx, name); err != nil {
			return false, err
		}
	}
	return false, f.fail()
}

// TestQuotaFailedWrite: a publish or delete whose store call fails leaves
// the ledger equal to what the store holds, whether the failure came
// before or after the store changed, and the tenant's lease given up,
// even when the caller's context ended.
func TestQuotaFailedWrite(t *testing.T) {
	stores := map[string]func(t *testing.T) quotaStore{
		"dir": func(t *testing.T) quotaStore {
			ds, err := OpenDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ds.Close() })
			return ds
		},
		"redis": func(t *testing.T) quotaStore {
			url, _, _ := sinktest.StartRedis(t)
			rs, err := OpenRedis(context.Background(), RedisConfig{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rs.Close() })
			return rs
		},
	}
	for sname, open := range stores {
		for _, tc := range []struct {
			name           string
			stored, cancel bool
		}{{"before", false, false}, {"after", true, false}, {"context ended", false, true}} {
			t.Run(sname+"/"+tc.name, func(t *testing.T) {
				ds := open(t)
				ctx := context.Background()
				f := &failing{quotaStore: ds, stored: tc.stored}
				q := WithQuota(f, 1<<20).(*Quota)
				plain := WithQuota(ds, 1<<20).(*Quota)
				if err := plain.Put(ctx, "acme/kept", "text/plain", []byte("kept")); err != nil {
					t.Fatal(err)
				}
				check := func(what string) {
					t.Helper()
					want, err := ds.tenantBytes(ctx, "acme")
					if err != nil {
						t.Fatal(err)
					}
					e, _, _, err := ds.register().load(ctx, "acme")
					if err != nil || e.Used != want || e.Holder != "" {
						t.Fatalf("after a failed %s: ledger %+v (%v), %d stored", what, e, err, want)
					}
				}
				for _, op := range []string{"publish", "overwrite", "delete"} {
					cctx, cancel := context.WithCancel(ctx)
					if tc.cancel {
						f.cancel = cancel
					}
					var err error
					switch op {
					case "publish":
						err = q.Put(cctx, "acme/new", "text/plain", []byte("a new artifact"))
					case "overwrite":
						if perr := plain.Put(ctx, "acme/new", "text/plain", []byte("n")); perr != nil {
							t.Fatal(perr)
						}
						err = q.Put(cctx, "acme/new", "text/plain", []byte("a larger artifact than before"))
					case "delete":
						_, err = q.Delete(cctx, "acme/kept")
					}
					cancel()
					if err == nil {
						t.Fatalf("%s: the injected failure was not returned", op)
					}
					check(op)
				}
			})
		}
	}
}

// TestQuotaLeaseWaitIsBounded: a publish whose tenant's lease another
// holder keeps fails store-unavailable, saying to retry, after the wait
// bound, even under a context without a deadline (as effects run), and
// stores nothing.
func TestQuotaLeaseWaitIsBounded(t *testing.T) {
	ds, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ds.Close() })
	ctx := context.Background()
	q := WithQuota(ds, 1<<20).(*Quota)
	q.waitFor = 100 * time.Millisecond
	if _, err := ds.register().swap(ctx, "acme", entry{Holder: "another broker", Until: time.Now().Add(time.Hour).UnixMilli()}, 0); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(ctx) // no deadline, as an effect's
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- q.Put(pctx, "acme/a", "text/plain", []byte("a")) }()
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a watchdog, not a synchronisation: the bound is 100 ms
		cancel()
		<-done
		t.Fatal("the publish still waits for the lease after a minute")
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "retry") {
		t.Fatalf("publish under a lease kept by another: %v", err)
	}
	if _, ok, _ := ds.size(ctx, "acme/a"); ok {
		t.Fatal("stored without the lease")
	}
}
