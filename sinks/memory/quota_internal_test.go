package memory

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gatehouse/gatehouse/broker"
	"github.com/gatehouse/gatehouse/policy"
	"github.com/gatehouse/gatehouse/sinks/sinktest"
)

// faultKV is a real KV bucket whose writes of memories (not counters)
// fail once armed: after the server stored them (stored, as a lost
// acknowledgement is), or without storing after ending the caller's
// context (cancel, a broker shutting down mid-put).
type faultKV struct {
	jetstream.KeyValue
	armed  bool
	stored bool
	cancel context.CancelFunc
}

var errInjected = errors.New("injected failure")

func (f *faultKV) write(key string, do func() (uint64, error)) (uint64, error) {
	if !f.armed || strings.HasPrefix(key, "q.") {
		return do()
	}
	f.armed = false
	if f.stored {
		if _, err := do(); err != nil {
			return 0, err
		}
	}
	if f.cancel != nil {
		f.cancel()
		return 0, context.Canceled
	}
	return 0, errInjected
}

func (f *faultKV) Create(ctx context.Context, key string, v []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	return f.write(key, func() (uint64, error) { return f.KeyValue.Create(ctx, key, v, opts...) })
}

func (f *faultKV) Update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	return f.write(key, func() (uint64, error) { return f.KeyValue.Update(ctx, key, v, rev) })
}

// TestQuotaFailedPut: a KV put whose record write fails leaves the
// tenant's counter equal to what the bucket holds, whether the failure
// came before or after the server stored the record (then its
// reservation is not given back), and when the caller's context ended
// with the write (the reservation is given back all the same).
func TestQuotaFailedPut(t *testing.T) {
	for _, tc := range []struct {
		name           string
		stored, cancel bool
	}{{"before", false, false}, {"after", true, false}, {"context ended", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var js jetstream.JetStream
			sinktest.Start(t, policy.ModeStrict, "", func(t testing.TB, env *sinktest.Env) []broker.Sink {
				js = env.JS
				return nil
			})
			ctx := context.Background()
			st, err := OpenKV(ctx, js, KVConfig{})
			if err != nil {
				t.Fatal(err)
			}
			f := &faultKV{KeyValue: st.kv, stored: tc.stored}
			st.kv = f
			kept := Key{Tenant: "acme", Name: "kept"}
			if err := st.Put(ctx, kept, []byte(`{"v":"kept"}`), 1<<20, Room{}); err != nil {
				t.Fatal(err)
			}
			for _, rec := range []string{`{"v":"new"}`, `{"v":"a larger overwrite than before"}`} {
				cctx, cancel := context.WithCancel(ctx)
				f.armed = true
				if tc.cancel {
					f.cancel = cancel
				}
				err := st.Put(cctx, Key{Tenant: "acme", Name: "new"}, []byte(rec), 1<<20, Room{})
				cancel()
				if err == nil {
					t.Fatalf("put %s: the injected failure was not returned", rec)
				}
				want, err := st.count(ctx, "acme")
				if err != nil {
					t.Fatal(err)
				}
				if c, err := st.Used(ctx, "acme"); err != nil || c != want {
					t.Fatalf("after a failed put of %s: counter %d (%v), %d stored", rec, c, err, want)
				}
				if rec == `{"v":"new"}` && !tc.stored { // the overwrite needs something to overwrite
					if err := st.Put(ctx, Key{Tenant: "acme", Name: "new"}, []byte(`{"v":"n"}`), 1<<20, Room{}); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}
